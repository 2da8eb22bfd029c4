"""LLM access behind one protocol."""

from masorch.backends.base import (
    Backend,
    Completion,
    GenerateConfig,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
)
from masorch.backends.scripted import ScriptedBackend

__all__ = [
    "Backend",
    "Completion",
    "GenerateConfig",
    "Message",
    "ScriptedBackend",
    "ToolCall",
    "ToolSpec",
    "Usage",
]
