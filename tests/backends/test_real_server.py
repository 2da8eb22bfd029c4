"""OpenAIBackend against a real OpenAI-compatible server: llama.cpp's, serving smollm2-135m.

Needs the built engine and the cached model (`masorch models pull smollm2-135m`), so it is marked
`model` and skips otherwise.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from masorch.backends.base import GenerateConfig, Message
from masorch.backends.engine import EngineStore
from masorch.backends.local import LocalBackend, ServerSettings
from masorch.backends.models import ModelStore
from masorch.backends.registry import make_backend
from masorch.errors import UsageError

pytestmark = [pytest.mark.model, pytest.mark.timeout(180)]


@pytest.fixture()
async def server_url() -> AsyncIterator[str]:
    if EngineStore().find() is None:
        pytest.skip("the llama.cpp server is not built: masorch models engine")
    try:
        model = ModelStore().path("smollm2-135m")
    except UsageError:
        pytest.skip("smollm2-135m is not cached: masorch models pull smollm2-135m")
    local = LocalBackend(model, settings=ServerSettings(slots=2, n_ctx=1024))
    await local.start()
    assert local._server is not None
    try:
        yield local._server.base_url
    finally:
        await local.aclose()


async def test_real_server_answers_with_usage_and_schema(server_url: str) -> None:
    backend = make_backend(f"vllm:{server_url}#smollm2", env={})
    plain = await backend.complete([Message("user", "Say hello.")], GenerateConfig(max_tokens=4))
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    shaped = await backend.complete(
        [Message("user", "What is 2 + 3? Reply in JSON.")], GenerateConfig(max_tokens=40, json_schema=schema)
    )
    await backend.aclose()
    assert plain.text and plain.finish in ("stop", "length") and plain.attempts == 1
    assert 0 < plain.usage.completion_tokens <= 4 and not plain.usage.estimated
    assert isinstance(json.loads(shaped.text)["answer"], int)
