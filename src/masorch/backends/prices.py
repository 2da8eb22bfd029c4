"""What calls cost: per-model prices (a built-in table, files, ``--price`` flags) and a backend that bills.

Prices are US dollars per one million tokens: prompt (input), completion (output) and, where the
provider bills prompt-cache hits lower, cached prompt tokens. A :class:`PriceTable` finds a model's
price by its model string (``openai:gpt-4o-mini``) or its bare name (``gpt-4o-mini``); the built-in
table applies to ``openai:`` models only, so a local or self-hosted model costs 0 unless a price is
set for it. :class:`PricedBackend` fills :attr:`Usage.cost` of every completion, which is what the
run ledger, the cost budget and the eval report and plots add up.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from masorch.backends.base import Backend, Completion, GenerateConfig, Message, Usage
from masorch.errors import UsageError
from masorch.files import MAX_YAML_BYTES, load_yaml, read_text

#: When the built-in prices were OpenAI's published list prices (standard tier, per 1M tokens).
BUILTIN_PRICES_DATE = "2025-08"
_KEYS = ("input", "output", "cached_input")


@dataclass(frozen=True)
class Pricing:
    """Prices in US dollars per one million prompt, completion and cached prompt tokens.

    ``cached_prompt_per_m`` None bills cached prompt tokens at the full prompt price.
    """

    prompt_per_m: float
    completion_per_m: float
    cached_prompt_per_m: float | None = None

    def __post_init__(self) -> None:
        for name in ("prompt_per_m", "completion_per_m", "cached_prompt_per_m"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise UsageError(f"price {name} must be a number >= 0, got {value}", hint="e.g. 0.15")

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> float:
        """The price of one call's tokens (``cached_prompt_tokens`` are part of ``prompt_tokens``).

        >>> Pricing(1.0, 2.0).cost(1_000_000, 500_000)
        2.0
        >>> Pricing(1.0, 2.0, cached_prompt_per_m=0.1).cost(1_000_000, 0, cached_prompt_tokens=500_000)
        0.55
        """
        cached = min(cached_prompt_tokens, prompt_tokens)
        cached_rate = self.prompt_per_m if self.cached_prompt_per_m is None else self.cached_prompt_per_m
        return (
            (prompt_tokens - cached) * self.prompt_per_m
            + cached * cached_rate
            + completion_tokens * self.completion_per_m
        ) / 1e6

    def cost_of(self, usage: Usage) -> float:
        """The price of the tokens of ``usage``."""
        return self.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens)


def _p(prompt: float, completion: float, cached: float) -> Pricing:
    return Pricing(prompt, completion, cached)


#: OpenAI list prices (USD per 1M tokens: input, output, cached input) as of BUILTIN_PRICES_DATE.
BUILTIN_PRICES: Mapping[str, Pricing] = MappingProxyType(
    {
        "gpt-4o": _p(2.50, 10.00, 1.25),
        "gpt-4o-mini": _p(0.15, 0.60, 0.075),
        "gpt-4.1": _p(2.00, 8.00, 0.50),
        "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
        "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
        "gpt-5": _p(1.25, 10.00, 0.125),
        "gpt-5-mini": _p(0.25, 2.00, 0.025),
        "gpt-5-nano": _p(0.05, 0.40, 0.005),
        "o3": _p(2.00, 8.00, 0.50),
        "o4-mini": _p(1.10, 4.40, 0.275),
    }
)
#: The providers whose model names the built-in table prices (hosted APIs, not self-hosted servers).
BUILTIN_PROVIDERS = frozenset({"openai"})


def bare_name(model: str) -> str:
    """The model name without its provider (and, for ``vllm:URL#name``, without the URL).

    >>> bare_name("openai:gpt-4o-mini"), bare_name("vllm:http://h:8000/v1#Qwen/Qwen2.5-7B"), bare_name("x")
    ('gpt-4o-mini', 'Qwen/Qwen2.5-7B', 'x')
    """
    provider, sep, rest = model.partition(":")
    if not sep:
        return model
    return rest.rpartition("#")[2] if provider == "vllm" else rest


@dataclass(frozen=True)
class PriceTable:
    """Per-model prices set by the user, over the built-in table (``builtin=False`` turns it off).

    :meth:`lookup` tries the exact model string, then its bare name, then (``openai:`` models only)
    the built-in table.
    """

    prices: Mapping[str, Pricing] = field(default_factory=dict)
    builtin: bool = True

    def lookup(self, model: str) -> Pricing | None:
        """The price of ``model``, or None (it costs 0).

        >>> t = PriceTable({"local:smollm2-135m": Pricing(0.1, 0.2)})
        >>> t.lookup("openai:gpt-4o-mini").prompt_per_m, t.lookup("local:smollm2-135m").completion_per_m
        (0.15, 0.2)
        >>> t.lookup("local:qwen2.5-coder-1.5b") is None, t.lookup("vllm:http://h/v1#gpt-4o") is None
        (True, True)
        """
        name = bare_name(model)
        for key in (model, name):
            if key in self.prices:
                return self.prices[key]
        if self.builtin and model.partition(":")[0] in BUILTIN_PROVIDERS:
            return BUILTIN_PRICES.get(name)
        return None

    def with_prices(self, prices: Mapping[str, Pricing]) -> PriceTable:
        """This table with ``prices`` added (they win over the ones it has)."""
        return dataclasses.replace(self, prices={**self.prices, **prices})


def parse_price(text: str) -> tuple[str, Pricing]:
    """A ``--price MODEL=IN,OUT[,CACHED]`` flag: the model and its prices per 1M tokens.

    >>> parse_price("openai:gpt-4o-mini=0.15,0.6,0.075")
    ('openai:gpt-4o-mini', Pricing(prompt_per_m=0.15, completion_per_m=0.6, cached_prompt_per_m=0.075))
    """
    model, sep, numbers = text.rpartition("=")
    parts = [p.strip() for p in numbers.split(",")]
    example = "e.g. --price openai:gpt-4o-mini=0.15,0.60 (input, output[, cached input] $ per 1M tokens)"
    if not sep or not model.strip() or len(parts) not in (2, 3):
        raise UsageError(f"--price {text[:80]!r} is not MODEL=IN,OUT[,CACHED]", hint=example)
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UsageError(f"--price {text[:80]!r}: the prices are not numbers", hint=example) from None
    return model.strip(), Pricing(*values)


def _entry(model: object, value: object, where: str) -> tuple[str, Pricing]:
    hint = "write MODEL: {input: 0.15, output: 0.60, cached_input: 0.075} ($ per 1M tokens)"
    if not isinstance(model, str) or not isinstance(value, Mapping):
        raise UsageError(f"{where}: the price of {str(model)[:60]!r} is not a mapping", hint=hint)
    unknown = sorted(str(k) for k in value if k not in _KEYS)
    missing = [k for k in _KEYS[:2] if k not in value]
    if unknown or missing:
        problem = f"unknown keys {', '.join(unknown)}" if unknown else f"no {' or '.join(missing)}"
        raise UsageError(f"{where}: the price of {model[:60]!r} has {problem}", hint=hint)
    numbers = [value.get(k) for k in _KEYS]
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers if n is not None):
        raise UsageError(f"{where}: the prices of {model[:60]!r} must be numbers", hint=hint)
    return model, Pricing(*(None if n is None else float(n) for n in numbers))  # type: ignore[arg-type]


def prices_from_mapping(data: object, where: str) -> dict[str, Pricing]:
    """The ``prices:`` section of a prices file or eval config: ``{MODEL: {input, output, cached_input}}``."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise UsageError(f"{where}: `prices:` is not a mapping", hint="write MODEL: {input: .., output: ..}")
    return dict(_entry(model, value, where) for model, value in data.items())


def read_prices_file(path: str | Path, *, section_required: bool = True) -> dict[str, Pricing]:
    """The ``prices:`` section of a YAML or TOML (``.toml``) file (its absence is an error if required)."""
    text = read_text(path, what="prices file", max_bytes=MAX_YAML_BYTES)
    data: Any
    if str(path).endswith(".toml"):
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise UsageError("TOML prices files need Python 3.11 or later", hint="write it as YAML") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"the prices file {path} is not valid TOML: {exc}", hint="fix it") from None
    else:
        data = load_yaml(text, what=f"prices file {path}")
    if not isinstance(data, Mapping) or (section_required and "prices" not in data):
        if not section_required:
            return {}
        raise UsageError(f"{path} has no `prices:` section", hint="see docs/backends.md, Prices")
    return prices_from_mapping(data.get("prices"), str(path))


def price_table(
    *, files: Sequence[str | Path] = (), flags: Iterable[str] = (), config: str | Path | None = None
) -> PriceTable:
    """The table of a run: an eval config's ``prices:``, then ``--prices`` files, then ``--price`` flags.

    Each later source wins over the earlier ones; all win over the built-in table.
    """
    table = PriceTable()
    if config is not None:
        table = table.with_prices(read_prices_file(config, section_required=False))
    for path in files:
        table = table.with_prices(read_prices_file(path))
    return table.with_prices(dict(parse_price(flag) for flag in flags))


class PricedBackend:
    """A backend whose completions carry their cost under ``pricing``.

    A completion answered from a record/replay cache (``cached``) sent no request and costs 0.
    """

    def __init__(self, inner: Backend, pricing: Pricing) -> None:
        self.inner = inner
        self.pricing = pricing

    @property
    def model_id(self) -> str:
        """The wrapped backend's model id."""
        return self.inner.model_id

    def __repr__(self) -> str:
        return f"PricedBackend({self.inner!r}, {self.pricing!r})"

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """The wrapped backend's completion with its cost filled in."""
        completion = await self.inner.complete(messages, config)
        cost = 0.0 if completion.cached else self.pricing.cost_of(completion.usage)
        return dataclasses.replace(completion, usage=dataclasses.replace(completion.usage, cost=cost))

    async def aclose(self) -> None:
        """Close the wrapped backend."""
        await self.inner.aclose()


@dataclass(frozen=True)
class PricedFactory:
    """A backend factory whose backends are priced by ``table`` (picklable when ``factory`` is).

    A model the table has no price for is returned unwrapped: it costs what its backend reports.
    """

    factory: Callable[[str], Backend]
    table: PriceTable

    def __call__(self, spec: str) -> Backend:
        backend = self.factory(spec)
        pricing = self.table.lookup(spec)
        return backend if pricing is None else PricedBackend(backend, pricing)
