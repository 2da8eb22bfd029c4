"""A rounds turn under its grammar: rendered by the server's chat template, completed under the
grammar, its ``<tool_call>`` blocks read back as tool calls; free native tool calls where a server
or a model's template cannot."""

from __future__ import annotations

import logging

import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.backends.base import GenerateConfig, Message, ToolSpec
from masorch.backends.loopback import FaultPlan, LoopbackServer
from masorch.backends.openai_compat import OpenAIBackend, RetryPolicy
from masorch.plan.grammar import tool_turn_grammar

pytestmark = pytest.mark.timeout(60)

ASK = [Message("system", "You call tools."), Message("user", "What is 2+3?")]
TOOLS = (
    ToolSpec("cot", "one reasoning call", {"type": "object", "properties": {"task": {"type": "string"}}}),
)
GRAMMAR = tool_turn_grammar(builtin_catalogue())
CONFIG = GenerateConfig(tools=TOOLS, grammar=GRAMMAR, max_tokens=64, top_k=40)
TURN = 'Split it.\n<tool_call>\n{"name": "cot", "arguments": {"task": "Add 2 and 3."}}\n</tool_call>'


def _backend(server: LoopbackServer, fmt: str | None = "llama.cpp") -> OpenAIBackend:
    return OpenAIBackend(
        "m",
        base_url=server.base_url,
        grammar_format=fmt,
        retry=RetryPolicy(base_delay_s=0.01),  # type: ignore[arg-type]
    )


async def test_the_turn_is_rendered_by_the_template_completed_under_the_grammar_and_read_as_calls() -> None:
    with LoopbackServer(lambda m: TURN) as server:
        backend = _backend(server)
        got = await backend.complete(ASK, CONFIG)
        await backend.aclose()
    rendered, completed = server.bodies
    assert rendered["messages"] == [
        {"role": "system", "content": "You call tools."},
        {"role": "user", "content": "What is 2+3?"},
    ]
    assert [t["function"]["name"] for t in rendered["tools"]] == ["cot"] and set(rendered) == {
        "messages",
        "tools",
    }
    assert completed["grammar"] == GRAMMAR and completed["top_k"] == 40 and completed["max_tokens"] == 64
    assert "messages" not in completed and "tools" not in completed
    assert completed["prompt"].startswith("<|tools|>") and "<tool_call>" in completed["prompt"]
    assert got.text == "Split it." and got.finish == "tool_calls"
    assert [(c.name, c.arguments) for c in got.tool_calls] == [("cot", '{"task": "Add 2 and 3."}')]
    assert got.usage.completion_tokens == len(TURN.split()) and not got.usage.estimated


async def test_a_turn_that_is_no_tool_call_keeps_its_text_for_the_round_to_explain() -> None:
    cut = '<tool_call>\n{"name": "cot", "arguments": {"task": "Add'
    with LoopbackServer(lambda m: cut) as server:
        backend = _backend(server)
        got = await backend.complete(ASK, CONFIG)
        await backend.aclose()
    assert (got.text, got.tool_calls) == (cut, ())


async def test_a_template_without_tool_call_blocks_decodes_natively_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        LoopbackServer(lambda m: "4", hermes_template=False) as server,
        caplog.at_level(logging.INFO, "masorch.backends.openai_compat"),
    ):
        backend = _backend(server)
        for _ in range(2):
            assert (await backend.complete(ASK, CONFIG)).text == "4"
        await backend.aclose()
    rendered, first, second = server.bodies  # the template is asked once, then the chat endpoint
    assert "prompt" not in first and first["tools"] and "grammar" not in first and second == first
    assert "messages" in rendered and "temperature" not in rendered
    notices = [r.getMessage() for r in caplog.records if "decode freely" in r.getMessage()]
    assert notices == [
        "openai:m: the model's chat template asks for no <tool_call> blocks; tool calls decode freely"
    ]


@pytest.mark.parametrize("fmt", ["vllm", None])
async def test_other_servers_get_native_tools_without_the_grammar(fmt: str | None) -> None:
    with LoopbackServer() as server:
        backend = _backend(server, fmt)
        await backend.complete(ASK, CONFIG)
        await backend.complete(ASK, GenerateConfig(grammar='root ::= "x"'))  # a plan grammar still goes
        await backend.aclose()
    turn, plan = server.bodies
    assert turn["tools"] and not {"grammar", "structured_outputs"} & set(turn)
    assert {"grammar", "structured_outputs"} & set(plan) if fmt else True


async def test_a_failed_completion_is_retried_and_samples_are_one_request_each() -> None:
    with LoopbackServer(lambda m: TURN, faults=FaultPlan(schedule=("500",))) as server:
        backend = _backend(server)
        got = await backend.complete(ASK, CONFIG)
        three = await backend.complete_n(ASK, GenerateConfig(tools=TOOLS, grammar=GRAMMAR, seed=5), 3)
        await backend.aclose()
    assert got.attempts == 2 and got.tool_calls
    assert [c.tool_calls[0].name for c in three] == ["cot"] * 3
    seeds = [b.get("seed") for b in server.bodies if "prompt" in b][-3:]
    assert sorted(seeds) == [5, 6, 7]


async def test_a_server_without_apply_template_decodes_natively() -> None:
    with LoopbackServer(lambda m: "4") as server:  # under a path prefix, /apply-template is not found
        backend = OpenAIBackend(
            "m", base_url=server.base_url.replace("/v1", "/x/v1"), grammar_format="llama.cpp"
        )
        assert (await backend.complete(ASK, CONFIG)).text == "4"
        await backend.aclose()
    (chat,) = server.bodies
    assert chat["tools"] and "grammar" not in chat
