"""Deterministic backends for tests: replies from a script or a function, usage counted honestly."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from masorch.backends.base import Completion, FinishReason, GenerateConfig, Message, Usage
from masorch.errors import BackendError

Responder = Callable[[Sequence[Message], GenerateConfig], "str | Completion | Awaitable[str | Completion]"]


def _count_tokens(text: str) -> int:
    # A stand-in tokenizer: whitespace words, so that budgets and ledgers get real, checkable numbers.
    return len(text.split())


def _message_text(message: Message) -> str:
    # What a message puts in the prompt: its content and the tool calls it made.
    return " ".join([message.content, *(f"{c.name} {c.arguments}" for c in message.tool_calls)])


class ScriptedBackend:
    """Answers with a fixed list of replies in order, or with a function of the messages.

    A reply may be a string, a :class:`Completion` or an exception instance (raised). ``delay_s``
    simulates latency; ``calls`` records every request for assertions.
    """

    def __init__(
        self,
        replies: Sequence[str | Completion | BaseException] | Responder,
        *,
        name: str = "scripted",
        delay_s: float = 0.0,
        cycle: bool = False,
    ) -> None:
        self._replies = replies
        self._name = name
        self._delay_s = delay_s
        self._cycle = cycle
        self._index = 0
        self.calls: list[tuple[tuple[Message, ...], GenerateConfig]] = []

    @property
    def model_id(self) -> str:
        return f"scripted:{self._name}"

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        self.calls.append((tuple(messages), config))
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        if callable(self._replies):
            reply: object = self._replies(messages, config)
            if asyncio.iscoroutine(reply) or isinstance(reply, Awaitable):
                reply = await reply
        else:
            if self._index >= len(self._replies):
                if not self._cycle or not self._replies:
                    raise BackendError(
                        f"scripted backend '{self._name}' ran out of replies after {self._index} calls",
                        hint="give the script more replies or set cycle=True",
                    )
                self._index = 0
            reply = self._replies[self._index]
            self._index += 1
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Completion):
            return reply
        text = str(reply)
        usage = Usage(
            prompt_tokens=sum(_count_tokens(_message_text(m)) for m in messages),
            completion_tokens=_count_tokens(text),
            calls=1,
        )
        finish: FinishReason = "length" if usage.completion_tokens > config.max_tokens else "stop"
        return Completion(text=text, usage=usage, finish=finish, model=self.model_id)

    async def aclose(self) -> None:
        return None
