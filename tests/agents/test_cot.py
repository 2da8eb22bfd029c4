"""The chain-of-thought agent."""

from __future__ import annotations

from masorch.agents.base import NodeInput, NodeStatus, UpstreamResult
from masorch.agents.cot import CotAgent
from masorch.errors import BackendError


async def test_answers_from_the_boxed_reply(make_ctx):
    ctx = make_ctx([r"3 apples plus 4 apples is 7. \boxed{7}"])
    out = await CotAgent().run(NodeInput("a", "How many apples?", "Add 3 and 4."), ctx)
    assert out.status is NodeStatus.OK
    assert out.answer == "7"
    assert "3 apples plus 4" in out.rationale
    assert ctx.calls == 1
    assert out.usage.calls == 1 and out.usage.completion_tokens > 0


async def test_prompt_has_question_task_context_and_answer_format(make_ctx):
    ctx = make_ctx([r"\boxed{1990}"])
    node = NodeInput(
        "calc",
        "When was X founded?",
        "Compute the year.",
        params={"temperature": 0.3},
        context=(UpstreamResult("facts", "X was founded in 1990"),),
    )
    await CotAgent().run(node, ctx)
    messages, config = ctx.backend.calls[0]
    prompt = messages[-1].content
    assert "When was X founded?" in prompt
    assert "Compute the year." in prompt
    assert "[facts] X was founded in 1990" in prompt
    assert r"\boxed{" in prompt
    assert config.temperature == 0.3


async def test_empty_task_means_the_question_and_empty_question_shows_task_alone(make_ctx):
    ctx = make_ctx([r"\boxed{a}", r"\boxed{b}"])
    await CotAgent().run(NodeInput("a", "What is 2+2?", ""), ctx)
    await CotAgent().run(NodeInput("b", "", "Only this task."), ctx)
    first = ctx.backend.calls[0][0][-1].content
    second = ctx.backend.calls[1][0][-1].content
    assert first.count("What is 2+2?") == 1 and "Your task" not in first
    assert "Only this task." in second and "Original question" not in second


async def test_backend_failure_and_empty_reply_are_error_statuses(make_ctx):
    ctx = make_ctx([BackendError("server down"), "   "])
    failed = await CotAgent().run(NodeInput("a", "q", "t"), ctx)
    empty = await CotAgent().run(NodeInput("a", "q", "t"), ctx)
    assert failed.status is NodeStatus.ERROR and "server down" in failed.error
    assert empty.status is NodeStatus.ERROR and "empty" in empty.error


async def test_nothing_to_solve_makes_no_call(make_ctx):
    ctx = make_ctx([])
    out = await CotAgent().run(NodeInput("a", "", "  "), ctx)
    assert out.status is NodeStatus.ERROR and ctx.calls == 0
