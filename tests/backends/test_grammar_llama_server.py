"""The plan grammars on a real llama.cpp ``llama-server``: each loads, constrains, and reads back.

Needs the built engine (``masorch models engine``, or ``MASORCH_LLAMA_SERVER``) and
the cached smollm2-135m, so it is marked ``model`` and skips otherwise. An invalid GBNF makes the
server refuse the request, so a grammar that llama.cpp cannot read fails here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.engine import EngineStore
from masorch.backends.local import LocalServer, ServerSettings
from masorch.backends.models import ModelStore
from masorch.backends.openai_compat import OpenAIBackend, RetryPolicy
from masorch.errors import BackendError, UsageError
from masorch.plan import DoM, check
from masorch.plan.grammar import plan_grammar
from masorch.run.orchestrate import OrchestrateOptions, orchestrator_messages

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    engine = EngineStore()
    if engine.find() is None:
        pytest.skip("the llama.cpp server is not built: masorch models engine")
    try:
        model = ModelStore().path("smollm2-135m")
    except UsageError:
        pytest.skip("smollm2-135m is not cached: masorch models pull smollm2-135m")
    settings = ServerSettings(slots=1, n_ctx=4096, n_threads=1)
    server = LocalServer(engine.binary(), model, settings, name="smollm2")
    server.spawn()
    try:
        deadline = time.monotonic() + 60
        while not server.healthy():
            if server.exit_code() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama-server did not start: {server.log_tail()}")
            time.sleep(0.3)
        yield server.base_url
    finally:
        server.stop()


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


async def test_a_rounds_turn_decodes_under_the_tool_call_grammar(server_url: str) -> None:
    """The tool-call grammar loads in llama.cpp and what it lets through reads back as calls; a
    turn with tools and the grammar completes, whichever way the model's chat template sends it."""
    import json
    import urllib.request

    from masorch.backends.chat import hermes_calls
    from masorch.plan.grammar import GrammarLimits, tool_turn_grammar
    from masorch.run.round_calls import tool_specs

    catalogue = builtin_catalogue()
    # No reasoning and short strings, so that the turn ends well within the token cap.
    grammar = tool_turn_grammar(catalogue, bounds=GrammarLimits(max_thought_chars=0, max_text_chars=40))
    body = {"prompt": "Question: What is 17 * 23?\nCall a tool.\n", "grammar": grammar, "max_tokens": 256}
    root = server_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{root}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=240) as reply:
        choice = json.loads(reply.read())["choices"][0]
    assert choice["finish_reason"] != "length", choice["text"]
    assert hermes_calls(choice["text"]) is not None, choice["text"]
    backend = _backend(server_url)
    try:  # through the backend: it completes (on this template, which has no <tool_call>, freely)
        ask = [Message("system", "Call tools."), Message("user", "What is 17 * 23?")]
        await backend.complete(
            ask, GenerateConfig(max_tokens=16, tools=tool_specs(catalogue), grammar=grammar)
        )
    finally:
        await backend.aclose()
