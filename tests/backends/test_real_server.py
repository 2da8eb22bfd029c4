"""OpenAIBackend against a real OpenAI-compatible server: llama-cpp-python's, serving smollm2-135m.

Needs `llama-cpp-python[server]` and the cached model, so it is marked `model` and skips otherwise.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from masorch.backends.base import GenerateConfig, Message
from masorch.backends.models import ModelStore
from masorch.backends.registry import BackendSettings, make_backend
from masorch.errors import UsageError

pytestmark = [pytest.mark.model, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    pytest.importorskip("llama_cpp.server.app")
    try:
        model = ModelStore().path("smollm2-135m")
    except UsageError:
        pytest.skip("smollm2-135m is not cached: masorch models pull smollm2-135m")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(Path(model))]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/models", timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not start")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_real_server_answers_with_usage_and_schema(server_url: str) -> None:
    backend = make_backend(
        f"vllm:{server_url}#smollm2", settings=BackendSettings(schema_format="json_object"), env={}
    )
    plain = await backend.complete([Message("user", "Say hello.")], GenerateConfig(max_tokens=4))
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    shaped = await backend.complete(
        [Message("user", "What is 2 + 3? Reply in JSON.")], GenerateConfig(max_tokens=40, json_schema=schema)
    )
    await backend.aclose()
    assert plain.text and plain.finish in ("stop", "length") and plain.attempts == 1
    assert 0 < plain.usage.completion_tokens <= 4 and not plain.usage.estimated
    assert isinstance(json.loads(shaped.text)["answer"], int)
