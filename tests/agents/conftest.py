"""Test support for sub-agents: an AgentContext over a ScriptedBackend that counts calls."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from masorch.agents.base import Retriever
from masorch.backends import Completion, GenerateConfig, Message, ScriptedBackend


class ScriptedContext:
    """AgentContext for tests: every call goes straight to a scripted backend and is counted."""

    def __init__(
        self, backend: ScriptedBackend, *, retriever: Retriever | None = None, node_id: str = "n1"
    ) -> None:
        self.backend = backend
        self._retriever = retriever
        self._node_id = node_id
        self.calls = 0

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def retriever(self) -> Retriever | None:
        return self._retriever

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        self.calls += 1
        return await self.backend.complete(messages, config)


@pytest.fixture
def make_ctx():
    """Build a ScriptedContext from replies (list or function) with optional delay and retriever."""

    def make(replies, *, delay_s: float = 0.0, retriever: Retriever | None = None, cycle: bool = False):
        return ScriptedContext(ScriptedBackend(replies, delay_s=delay_s, cycle=cycle), retriever=retriever)

    return make
