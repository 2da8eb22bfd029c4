"""LocalBackend: argument errors without a model; real generation with smollm2-135m (marked `model`)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest

from masorch.backends.base import Backend, GenerateConfig, Message
from masorch.backends.models import ModelStore
from masorch.errors import BackendError, MissingExtraError, UsageError

pytestmark = pytest.mark.timeout(120)
ASK = [Message("user", "What is 2 + 3? Answer with one number.")]


def test_missing_extra_names_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from masorch.backends.local import LocalBackend

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a)
    )
    with pytest.raises(MissingExtraError) as info:
        LocalBackend(tmp_path / "x.gguf")
    assert info.value.hint == "pip install 'masorch[local]'"


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from masorch.backends.local import LocalBackend

    with pytest.raises(UsageError, match="no GGUF model file"):
        LocalBackend(tmp_path / "x.gguf")
    (tmp_path / "y.gguf").write_bytes(b"GGUF")
    with pytest.raises(UsageError, match="minimum of 256"):
        LocalBackend(tmp_path / "y.gguf", n_ctx=64)


@pytest.fixture(scope="module")
def smollm() -> Path:
    pytest.importorskip("llama_cpp")
    try:
        return ModelStore().path("smollm2-135m")
    except UsageError:
        pytest.skip("smollm2-135m is not cached: masorch models pull smollm2-135m")


@pytest.mark.model
async def test_bounded_generation_with_real_usage(smollm: Path) -> None:
    from masorch.backends.local import LocalBackend

    b = LocalBackend(smollm, name="smollm2-135m", n_ctx=1024)
    assert isinstance(b, Backend) and b.model_id == "local:smollm2-135m"
    first = await b.complete(ASK, GenerateConfig(max_tokens=8))
    again = await b.complete(ASK, GenerateConfig(max_tokens=8))
    await b.aclose()
    assert first.text.strip() and first.finish in ("stop", "length")
    assert 0 < first.usage.completion_tokens <= 8 and first.usage.prompt_tokens > 5
    assert not first.usage.estimated and first.usage.calls == 1
    assert again.text == first.text  # greedy is deterministic
    with pytest.raises(BackendError, match="closed"):
        await b.complete(ASK, GenerateConfig())


@pytest.mark.model
async def test_json_schema_output_parses(smollm: Path) -> None:
    from masorch.backends.local import LocalBackend

    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "integer"},
            "steps": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        },
        "required": ["answer", "steps"],
    }
    b = LocalBackend(smollm, n_ctx=1024)
    c = await b.complete(
        [Message("user", "What is 2 + 3? Reply as JSON with answer and steps.")],
        GenerateConfig(max_tokens=96, json_schema=schema),
    )
    await b.aclose()
    value = json.loads(c.text)
    assert isinstance(value["answer"], int) and isinstance(value["steps"], list)


@pytest.mark.model
async def test_calls_are_serialised_and_the_loop_stays_free(smollm: Path) -> None:
    from masorch.backends.local import LocalBackend

    b = LocalBackend(smollm, n_ctx=1024)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    prompts = [[Message("user", f"Name a colour number {i}.")] for i in range(3)]
    results = await asyncio.gather(*[b.complete(p, GenerateConfig(max_tokens=6)) for p in prompts])
    task.cancel()
    await b.aclose()
    assert all(r.usage.completion_tokens > 0 for r in results)
    assert ticks > 5  # the event loop ran while the model generated


@pytest.mark.model
async def test_prompt_beyond_context_is_a_clear_error(smollm: Path) -> None:
    from masorch.backends.local import LocalBackend

    b = LocalBackend(smollm, n_ctx=256)
    with pytest.raises(BackendError) as info:
        await b.complete([Message("user", "word " * 400)], GenerateConfig(max_tokens=8))
    await b.aclose()
    assert info.value.code == "backend_context" and "n_ctx" in info.value.hint


@pytest.mark.model
async def test_tool_calls_follow_the_tool_schema(smollm: Path) -> None:
    from masorch.backends.base import ToolSpec
    from masorch.backends.local import LocalBackend

    parameters = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    b = LocalBackend(smollm, n_ctx=1024)
    c = await b.complete(
        [Message("system", "You can call tools."), Message("user", "Use the add tool to add 17 and 25.")],
        GenerateConfig(max_tokens=48, tools=(ToolSpec("add", "Add two integers", parameters),)),
    )
    await b.aclose()
    # The grammar forces either a plain message or a call whose arguments match the schema.
    if c.tool_calls:
        assert c.finish == "tool_calls" and c.tool_calls[0].name == "add"
        assert set(json.loads(c.tool_calls[0].arguments)) == {"a", "b"}
    else:
        assert c.text
