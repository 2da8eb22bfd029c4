"""A backend that proves calls overlap without timing them: each call waits until ``n`` are in
flight together, so code that makes them one after another times out instead of passing late."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from masorch.backends.base import Backend, Completion, GenerateConfig, Message


class GatedBackend:
    """Wraps ``inner``; its calls are held until ``n`` of them have arrived (later calls pass)."""

    def __init__(self, inner: Backend, n: int, timeout_s: float = 20.0) -> None:
        self.inner, self.n, self.timeout_s = inner, n, timeout_s
        self.arrived = 0
        self._open = asyncio.Event()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        self.arrived += 1
        if self.arrived >= self.n:
            self._open.set()
        await asyncio.wait_for(self._open.wait(), timeout=self.timeout_s)
        return await self.inner.complete(messages, config)

    async def aclose(self) -> None:
        await self.inner.aclose()
