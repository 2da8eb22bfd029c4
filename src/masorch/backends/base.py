"""The one protocol every LLM backend implements, and the data that crosses it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls", "error"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so that it encodes as UTF-8.

    A JSON ``"\\ud800"`` escape (from a server, or a model's plan) or a command-line argument with
    invalid bytes decodes to a lone surrogate, which no UTF-8 request body, tokenizer or file takes.

    >>> encodable("ok " + chr(0xD800) + " ok")
    'ok \ufffd ok'
    """
    if text.isascii():  # the common case, and 100x cheaper than the search
        return text
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _make_encodable(obj: object, *names: str) -> None:
    """Replace the lone surrogates of a frozen dataclass's text fields (see :func:`encodable`)."""
    for name in names:
        value = getattr(obj, name)
        if not value.isascii() and _SURROGATE.search(value):
            object.__setattr__(obj, name, encodable(value))


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made: the function name and its JSON arguments as text."""

    name: str
    arguments: str
    id: str = ""

    def __post_init__(self) -> None:
        _make_encodable(self, "name", "arguments", "id")


@dataclass(frozen=True)
class Message:
    """One chat message.

    An assistant message may carry the ``tool_calls`` it made; a ``tool`` message answers one of
    them and names it by ``tool_call_id`` (the OpenAI tool-calling format).
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""

    def __post_init__(self) -> None:
        # Every message a backend is sent passes here: its text is made sendable (see encodable).
        _make_encodable(self, "content", "tool_call_id")


@dataclass(frozen=True)
class ToolSpec:
    """A function tool offered to the model (OpenAI ``tools`` format)."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class GenerateConfig:
    """Sampling settings of one call.

    ``sample_index`` distinguishes the n samples of one prompt (self-consistency) so that a cache
    keeps them apart; ``json_schema`` asks for schema-constrained output where the backend can;
    ``grammar`` (GBNF text, :func:`masorch.plan.grammar.plan_grammar`) asks for grammar-constrained
    output where the backend can (a backend that cannot decodes freely and says so in its log).
    ``top_k`` and ``min_p`` cut the sampled distribution (0 and 0.0: no cut); None leaves the
    backend's own default, which differs between engines (llama.cpp: top-k 40 and min-p 0.05;
    transformers: top-k 50 unless the model's generation config says otherwise).
    """

    temperature: float = 0.0
    max_tokens: int = 1024
    top_p: float = 1.0
    top_k: int | None = None
    min_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    sample_index: int = 0
    json_schema: Mapping[str, Any] | None = None
    tools: tuple[ToolSpec, ...] = ()
    grammar: str | None = None

    def cache_key_fields(self) -> dict[str, Any]:
        """The fields that change a completion: part of the cache key.

        ``grammar``, ``top_k`` and ``min_p`` are in the key only when set, so entries recorded before
        they existed still match.
        """
        fields = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "stop": list(self.stop),
            "seed": self.seed,
            "sample_index": self.sample_index,
            "json_schema": self.json_schema,
            "tools": [
                {"name": t.name, "description": t.description, "parameters": t.parameters} for t in self.tools
            ],
        }
        for name in ("grammar", "top_k", "min_p"):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        return fields


@dataclass(frozen=True)
class Sampling:
    """How an orchestrator-side call samples (the fields of :class:`GenerateConfig` of that name);
    the run options of the one-step and the multi-round modes both carry it."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None

    def generate_config(self, **fields: Any) -> GenerateConfig:
        """A GenerateConfig with this sampling and the other ``fields`` (max_tokens, tools, ...)."""
        return GenerateConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            seed=self.seed,
            **fields,
        )


@dataclass(frozen=True)
class Usage:
    """Token counts of one call (or a sum of calls), with cost in US dollars where known.

    ``estimated`` is true when some of the counts were estimated from text length because the
    server did not report usage. ``cached_prompt_tokens`` is the part of ``prompt_tokens`` the
    server served from its prompt cache (OpenAI's ``prompt_tokens_details.cached_tokens``), which
    hosted APIs bill at a lower price.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost: float = 0.0
    estimated: bool = False
    cached_prompt_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
            self.cost + other.cost,
            self.estimated or other.estimated,
            self.cached_prompt_tokens + other.cached_prompt_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Completion:
    """What a backend returns: text, usage, why it stopped, and any tool calls.

    ``attempts`` is how many requests the backend sent for this completion (retries included);
    ``cached`` says it came from a record/replay cache instead of the model. A lone surrogate in
    ``text`` (a server's ``"\\ud800"``) becomes U+FFFD (see :func:`encodable`).
    """

    text: str
    usage: Usage = field(default_factory=Usage)
    finish: FinishReason = "stop"
    tool_calls: tuple[ToolCall, ...] = ()
    model: str = ""
    latency_s: float = 0.0
    cached: bool = False
    attempts: int = 1

    def __post_init__(self) -> None:
        _make_encodable(self, "text")


@runtime_checkable
class Backend(Protocol):
    """An LLM behind one async call. Implementations raise :class:`masorch.errors.BackendError`."""

    @property
    def model_id(self) -> str:
        """The ``provider:model`` string this backend serves (never contains a secret)."""
        ...

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """One completion for ``messages`` under ``config``."""
        ...

    async def aclose(self) -> None:
        """Release connections or model memory."""
        ...
