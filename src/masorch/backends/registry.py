"""``provider:model`` strings -> Backend objects.

=========================  =====================================================================
``openai:<model>``         an OpenAI-compatible API; base URL and key from settings or the env
                           (``MASORCH_OPENAI_BASE_URL``/``OPENAI_BASE_URL``,
                           ``MASORCH_OPENAI_API_KEY``/``OPENAI_API_KEY``)
``vllm:<url>#<model>``     an OpenAI-compatible server at ``url`` (vLLM, SGLang, llama.cpp server,
                           Ollama); its key, if any, from settings or ``MASORCH_VLLM_API_KEY``
``local:<name or path>``   an embedded GGUF model (``masorch models list``) or a ``.gguf`` file
``hf:<checkpoint dir>``    a Hugging Face checkpoint in-process via transformers (``masorch[train]``)
``scripted:<name>``        tests only: scripted backends are built in code
=========================  =====================================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from masorch.backends.base import Backend
from masorch.backends.cache import CACHE_MODES, CachedBackend, CacheMode, ResponseCache
from masorch.backends.models import ModelStore
from masorch.backends.openai_compat import (
    GrammarFormat,
    OpenAIBackend,
    RetryPolicy,
    SchemaFormat,
    check_base_url,
    redact_url,
)
from masorch.backends.prices import Pricing
from masorch.errors import UsageError
from masorch.redact import redact

PROVIDERS: tuple[str, ...] = ("openai", "vllm", "local", "hf", "scripted")
VLLM_KEY_ENV = "MASORCH_VLLM_API_KEY"


@dataclass(frozen=True)
class BackendSettings:
    """How backends made from model strings are configured (keys stay out of ``repr``).

    ``schema_format`` is how OpenAI-compatible backends send a JSON schema (see
    :class:`~masorch.backends.openai_compat.OpenAIBackend`), ``grammar_format`` whether and how they
    send a GBNF grammar (None: not at all, as for hosted APIs). ``cache_path`` with a ``cache_mode`` other
    than ``off`` wraps every backend in a
    :class:`~masorch.backends.cache.CachedBackend` over that SQLite file. ``n_ctx`` (context tokens
    per request), ``n_threads`` and ``slots`` (requests decoded at once) size the llama.cpp server of
    ``local:`` models; ``startup_timeout_s`` bounds its loading of the model.
    """

    openai_base_url: str | None = None
    openai_api_key: str | None = field(default=None, repr=False)
    vllm_api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    pricing: Pricing | None = None
    schema_format: SchemaFormat = "json_schema"
    grammar_format: GrammarFormat | None = None
    n_ctx: int = 4096
    n_threads: int | None = None
    slots: int = 8
    startup_timeout_s: float = 180.0
    models_dir: Path | None = None
    cache_path: Path | None = None
    cache_mode: CacheMode = "read_write"

    def __post_init__(self) -> None:
        if self.cache_mode not in CACHE_MODES:
            raise UsageError(
                f"unknown cache mode {self.cache_mode!r}", hint=f"use one of {list(CACHE_MODES)}"
            )


def make_backend(
    spec: str, *, settings: BackendSettings | None = None, env: Mapping[str, str] | None = None
) -> Backend:
    """The backend a ``provider:model`` string names (see the module docs); a UsageError if malformed."""
    settings = settings or BackendSettings()
    env = os.environ if env is None else env
    check_model_string(spec)
    provider, _, rest = spec.partition(":")
    backend: Backend
    if provider == "openai":
        backend = OpenAIBackend(
            rest,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            timeout_s=settings.timeout_s,
            retry=settings.retry,
            pricing=settings.pricing,
            schema_format=settings.schema_format,
            grammar_format=settings.grammar_format,
            env=env,
        )
    elif provider == "vllm":
        backend = _vllm(rest, settings, env)
    elif provider == "local":
        backend = _local(rest, settings)
    elif provider == "hf":
        # A Hugging Face checkpoint (e.g. a GRPO output) in-process; torch loads only when it is built.
        from masorch.backends.hf import make_hf_backend

        backend = make_hf_backend(spec)
    else:  # "scripted": check_model_string has rejected every other provider
        raise _scripted_error()
    if settings.cache_path is not None and settings.cache_mode != "off":
        cache = ResponseCache(settings.cache_path, read_only=settings.cache_mode == "replay")
        backend = CachedBackend(backend, cache, settings.cache_mode)
    return backend


def check_model_string(spec: str, *, buildable: bool = False) -> None:
    """A UsageError unless ``spec`` is ``provider:model`` with a known provider (nothing is built).

    With ``buildable`` the string alone must build a backend (as a model given on the command line
    must), so ``scripted:``, which only names a backend built in code, is refused too. Messages never
    echo more than the provider and redacted URLs: a string in the wrong place may be a key.

    >>> check_model_string("openai:gpt-4o-mini")
    >>> check_model_string("scripted:m", buildable=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    masorch.errors.UsageError: scripted backends are built in code, not from a model string (hint: ...)
    """
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise UsageError(
            "a model string is not provider:model",
            hint=f"providers: {', '.join(PROVIDERS)}; e.g. openai:gpt-4o-mini or local:qwen2.5-coder-1.5b",
        )
    if provider not in PROVIDERS:
        raise UsageError(
            f"unknown model provider {redact(provider)[:40]!r}", hint=f"use one of {', '.join(PROVIDERS)}"
        )
    if buildable and provider == "scripted":
        raise _scripted_error()


def _scripted_error() -> UsageError:
    return UsageError(
        "scripted backends are built in code, not from a model string",
        hint="use masorch.backends.ScriptedBackend([...]) in tests; on the command line a real model string",
    )


def _vllm(rest: str, settings: BackendSettings, env: Mapping[str, str]) -> Backend:
    url, sep, model = rest.rpartition("#")
    example = "vllm:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct"
    if not sep or not url or not model:
        raise UsageError(
            f"vllm model string {redact('vllm:' + rest)!r} lacks '#<model>'", hint=f"e.g. {example}"
        )
    parts = urlsplit(check_base_url(url, example))
    if parts.path in ("", "/"):
        url = url.rstrip("/") + "/v1"
    # A self-hosted server gets its own key, never the OpenAI one from the env.
    key = settings.vllm_api_key or env.get(VLLM_KEY_ENV) or None
    return OpenAIBackend(
        model,
        base_url=url,
        api_key=key,
        provider="vllm",
        model_id=f"vllm:{redact_url(url)}#{model}",
        timeout_s=settings.timeout_s,
        retry=settings.retry,
        pricing=settings.pricing,
        schema_format=settings.schema_format,
        grammar_format=settings.grammar_format,
        env={},
    )


def _local(rest: str, settings: BackendSettings) -> Backend:
    from masorch.backends.local import LocalBackend, ServerSettings

    server = ServerSettings(
        slots=settings.slots,
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads,
        startup_timeout_s=settings.startup_timeout_s,
    )
    store = ModelStore(settings.models_dir)
    if rest in store.catalogue:
        return LocalBackend(store.path(rest), name=rest, settings=server)
    if rest.endswith(".gguf"):
        file = Path(rest).expanduser()
        # The full path names the model: two files with one stem must not share cache entries.
        return LocalBackend(file, name=str(file), settings=server)
    raise UsageError(
        f"unknown local model {redact(rest)!r}",
        hint=f"use an embedded model ({', '.join(store.catalogue)}) or the path of a .gguf file",
    )
