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

# Built-in sub-agents and their helpers. The BM25 corpus is imported
# from masorch.agents.corpus directly, so that importing masorch.agents does not load numpy.
from masorch.agents.answer import extract_answer, majority_vote, normalize_answer
from masorch.agents.cot import CotAgent
from masorch.agents.debate import DebateAgent
from masorch.agents.python import PythonAgent
from masorch.agents.reflexion import ReflexionAgent
from masorch.agents.registry import default_registry, offered_registry
from masorch.agents.sandbox import SandboxLimits, SandboxResult, run_sandboxed
from masorch.agents.sc import SelfConsistencyAgent
from masorch.agents.search import SearchAgent

__all__ += [
    "CotAgent",
    "DebateAgent",
    "PythonAgent",
    "ReflexionAgent",
    "SandboxLimits",
    "SandboxResult",
    "SearchAgent",
    "SelfConsistencyAgent",
    "default_registry",
    "extract_answer",
    "majority_vote",
    "normalize_answer",
    "offered_registry",
    "run_sandboxed",
]
