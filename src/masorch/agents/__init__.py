"""Sub-agents behind one protocol, and the registry that exposes their typed signatures."""

from masorch.agents.base import (
    AgentContext,
    AgentRegistry,
    NodeInput,
    NodeOutput,
    NodeStatus,
    Retriever,
    SubAgent,
    UpstreamResult,
)
from masorch.agents.signatures import builtin_catalogue

__all__ = [
    "AgentContext",
    "AgentRegistry",
    "NodeInput",
    "NodeOutput",
    "NodeStatus",
    "Retriever",
    "SubAgent",
    "UpstreamResult",
    "builtin_catalogue",
]
