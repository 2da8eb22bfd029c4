"""masorch: holistic orchestration of LLM multi-agent systems."""

__version__ = "0.1.0"
