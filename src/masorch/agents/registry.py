"""The default registry: the six built-in sub-agents, built fresh for each caller."""

from __future__ import annotations

from masorch.agents.base import AgentRegistry
from masorch.agents.cot import CotAgent
from masorch.agents.debate import DebateAgent
from masorch.agents.python import PythonAgent
from masorch.agents.reflexion import ReflexionAgent
from masorch.agents.sandbox import SandboxLimits
from masorch.agents.sc import SelfConsistencyAgent
from masorch.agents.search import SearchAgent


def default_registry(*, max_tokens: int = 2048, sandbox_limits: SandboxLimits | None = None) -> AgentRegistry:
    """A registry with cot, sc, debate, reflexion, search and python, in catalogue order.

    ``max_tokens`` caps each call's completion; ``sandbox_limits`` sets the python agent's sandbox
    (its ``wall_s`` is replaced per node by the plan's ``timeout_s``).
    """
    return AgentRegistry(
        [
            CotAgent(max_tokens=max_tokens),
            SelfConsistencyAgent(max_tokens=max_tokens),
            DebateAgent(max_tokens=max_tokens),
            ReflexionAgent(max_tokens=max_tokens),
            SearchAgent(max_tokens=max_tokens),
            PythonAgent(max_tokens=max_tokens, limits=sandbox_limits),
        ]
    )
