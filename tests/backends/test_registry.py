"""Model strings -> backends: every provider, and a clear UsageError for every malformed string."""

from __future__ import annotations

from pathlib import Path

import pytest

from masorch.backends.base import GenerateConfig, Message
from masorch.backends.cache import CachedBackend
from masorch.backends.loopback import FaultPlan, LoopbackServer
from masorch.backends.openai_compat import OpenAIBackend
from masorch.backends.registry import BackendSettings, make_backend
from masorch.errors import BackendError, UsageError

pytestmark = pytest.mark.timeout(30)
SECRET = "sk-registry-SECRET-42"


def test_openai_takes_key_from_settings_or_env() -> None:
    b = make_backend("openai:gpt-4o-mini", env={"OPENAI_API_KEY": SECRET})
    assert isinstance(b, OpenAIBackend) and b.model_id == "openai:gpt-4o-mini"
    settings = BackendSettings(openai_api_key=SECRET, openai_base_url="http://127.0.0.1:9/v1")
    b = make_backend("openai:my-model", settings=settings, env={})
    assert isinstance(b, OpenAIBackend) and b.base_url == "http://127.0.0.1:9/v1"
    assert SECRET not in repr(settings) and SECRET not in repr(b)
    with pytest.raises(UsageError, match="no API key"):
        make_backend("openai:gpt-4o-mini", env={})


async def test_vllm_url_and_model_end_to_end() -> None:
    with LoopbackServer() as server:
        b = make_backend(f"vllm:{server.base_url}#Qwen/Qwen2.5-7B-Instruct", env={})
        assert b.model_id == f"vllm:{server.base_url}#Qwen/Qwen2.5-7B-Instruct"
        c = await b.complete([Message("user", "hi")], GenerateConfig())
        await b.aclose()
        assert c.text == "echo: hi" and server.bodies[0]["model"] == "Qwen/Qwen2.5-7B-Instruct"


async def test_vllm_never_sends_the_openai_key() -> None:
    env = {"OPENAI_API_KEY": SECRET, "MASORCH_OPENAI_API_KEY": SECRET}
    with LoopbackServer(faults=FaultPlan(schedule=("401",))) as server:
        b = make_backend(f"vllm:{server.base_url}#m", env=env)
        with pytest.raises(BackendError) as info:
            await b.complete([Message("user", "hi")], GenerateConfig())
        await b.aclose()
    assert "Incorrect API key provided: EMPTY" in info.value.message


def test_vllm_url_forms() -> None:
    b = make_backend("vllm:http://127.0.0.1:8000#m", env={})
    assert isinstance(b, OpenAIBackend) and b.base_url == "http://127.0.0.1:8000/v1"
    b = make_backend(f"vllm:http://user:{SECRET}@127.0.0.1:8000/v1#m", env={})
    assert b.model_id == "vllm:http://127.0.0.1:8000/v1#m"
    for bad in ("vllm:http://127.0.0.1:8000/v1", "vllm:127.0.0.1:8000#m", "vllm:http://host/v1#"):
        with pytest.raises(UsageError) as info:
            make_backend(bad, env={})
        assert "e.g. vllm:" in info.value.hint


def test_local_names_and_paths(tmp_path: Path) -> None:
    settings = BackendSettings(models_dir=tmp_path)
    with pytest.raises(UsageError) as info:
        make_backend("local:smollm2-135m", settings=settings)
    assert info.value.hint == "masorch models pull smollm2-135m"
    with pytest.raises(UsageError, match="unknown local model"):
        make_backend("local:llama-70b", settings=settings)
    with pytest.raises(UsageError, match="no GGUF model file"):
        make_backend(f"local:{tmp_path / 'missing.gguf'}", settings=settings)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4o", "is not provider:model"),
        ("openai:", "is not provider:model"),
        ("anthropic:claude", "unknown model provider"),
        ("scripted:echo", "built in code"),
    ],
)
def test_malformed_strings_are_usage_errors(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        make_backend(spec, env={})
    assert info.value.hint


async def test_settings_can_wrap_backends_in_the_cache(tmp_path: Path) -> None:
    settings = BackendSettings(cache_path=tmp_path / "cache.sqlite", cache_mode="read_write")
    with LoopbackServer() as server:
        b = make_backend(f"vllm:{server.base_url}#m", settings=settings, env={})
        assert isinstance(b, CachedBackend)
        first = await b.complete([Message("user", "hi")], GenerateConfig())
        second = await b.complete([Message("user", "hi")], GenerateConfig())
        await b.aclose()
        assert not first.cached and second.cached and server.request_count == 1
    with pytest.raises(UsageError):
        BackendSettings(cache_mode="maybe")  # type: ignore[arg-type]


def test_hf_provider_needs_the_train_extra_or_a_checkpoint(tmp_path):
    # Without torch/transformers it names the extra; with them, a missing checkpoint is a clean error.
    with pytest.raises(UsageError) as info:
        make_backend(f"hf:{tmp_path / 'no-such-checkpoint'}")
    assert info.value.hint
