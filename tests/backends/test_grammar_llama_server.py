"""The plan grammars on a real llama.cpp ``llama-server``: each loads, constrains, and reads back.

Needs a ``llama-server`` binary (``MASORCH_LLAMA_SERVER``, else ``llama-server`` on the PATH) and
the cached smollm2-135m, so it is marked ``model`` and skips otherwise. An invalid GBNF makes the
server refuse the request, so a grammar that llama.cpp cannot read fails here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.models import ModelStore
from masorch.backends.openai_compat import OpenAIBackend, RetryPolicy
from masorch.errors import BackendError, UsageError
from masorch.plan import DoM, check
from masorch.plan.grammar import plan_grammar
from masorch.run.orchestrate import OrchestrateOptions, orchestrator_messages

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    binary = os.environ.get("MASORCH_LLAMA_SERVER") or shutil.which("llama-server")
    if not binary:
        pytest.skip("no llama-server: set MASORCH_LLAMA_SERVER to the binary")
    try:
        model = ModelStore().path("smollm2-135m")
    except UsageError:
        pytest.skip("smollm2-135m is not cached: masorch models pull smollm2-135m")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [binary, "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    command += ["-c", "4096", "-np", "1", "-t", "1"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1),
            ):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("llama-server did not start")
            time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _backend(url: str) -> OpenAIBackend:
    return OpenAIBackend(
        "smollm2", base_url=url, grammar_format="llama.cpp", timeout_s=240, retry=RetryPolicy(max_attempts=1)
    )


@pytest.mark.parametrize(
    ("dialect", "dom"), [("calls", DoM.HIGH), ("calls", DoM.LOW), ("xml", DoM.HIGH), ("xml", DoM.LOW)]
)
async def test_the_grammar_loads_and_the_output_reads(server_url: str, dialect: str, dom: DoM) -> None:
    catalogue = builtin_catalogue()
    options = OrchestrateOptions(dom=dom, dialect=dialect)  # type: ignore[arg-type]
    messages = orchestrator_messages("What is 17 * 23?", catalogue, options)
    grammar = plan_grammar(dialect, catalogue, dom)  # type: ignore[arg-type]
    backend = _backend(server_url)
    try:
        completion = await backend.complete(messages, GenerateConfig(max_tokens=400, grammar=grammar))
    finally:
        await backend.aclose()
    if completion.finish == "length":  # cut off by max_tokens: only the start is in the language
        return
    checked = check(completion.text, dom, catalogue, dialect)  # type: ignore[arg-type]
    assert not [d for d in checked.parse.diagnostics if d.is_error], completion.text
    assert checked.plan is not None, completion.text


async def test_an_unreadable_grammar_is_refused(server_url: str) -> None:
    backend = _backend(server_url)
    try:
        with pytest.raises(BackendError):
            await backend.complete(
                [Message("user", "hi")], GenerateConfig(max_tokens=4, grammar="root ::= (")
            )
    finally:
        await backend.aclose()
