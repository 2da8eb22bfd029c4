"""The Critical Reviewer: reads the reasoning history, returns issues and fixes."""

from __future__ import annotations

from masorch.agents.base import NodeInput, NodeStatus, SubAgent, UpstreamResult
from masorch.agents.review import ReviewAgent, parse_review
from masorch.errors import BackendError

REPLY = "ISSUES:\n1. 17 + 25 is 42, not 43 -- FIX: redo the sum\nVERDICT: flawed"


async def test_reviews_the_history_and_returns_issues_with_fixes(make_ctx):
    ctx = make_ctx([REPLY])
    history = (UpstreamResult("r1c1 cot", "43", "17 + 25 = 43"), UpstreamResult("r1c2 sc", "42"))
    node = NodeInput("r2c1", "17 sheep plus 25?", "Check the sum.", params={"max_issues": 2}, context=history)
    agent = ReviewAgent()
    assert isinstance(agent, SubAgent) and agent.signature.kind == "review"
    out = await agent.run(node, ctx)
    assert out.status is NodeStatus.OK
    assert out.answer == REPLY and dict(out.details) == {"issues": 1, "sound": False}
    messages, config = ctx.backend.calls[0]
    prompt = messages[-1].content
    assert "[r1c1 cot] answer: 43\n17 + 25 = 43" in prompt and "[r1c2 sc] answer: 42" in prompt
    assert "Check the sum." in prompt and "at most 2 issues" in prompt
    assert "critical reviewer" in messages[0].content and config.temperature == 0.0


async def test_long_reasoning_is_cut_to_its_tail(make_ctx):
    ctx = make_ctx([REPLY])
    step = UpstreamResult("r1c1", "7", "x" * 5000 + " the end")
    await ReviewAgent().run(NodeInput("r", "q", "", context=(step,)), ctx)
    prompt = ctx.backend.calls[0][0][-1].content
    assert "the end" in prompt and "x" * 2100 not in prompt


async def test_empty_reply_and_backend_failure_are_error_statuses(make_ctx):
    out = await ReviewAgent().run(NodeInput("r", "q", ""), make_ctx(["  "]))
    assert out.status is NodeStatus.ERROR and "empty" in out.error
    out = await ReviewAgent().run(NodeInput("r", "q", ""), make_ctx([BackendError("down", hint="h")]))
    assert out.status is NodeStatus.ERROR and "model call failed" in out.error


def test_parse_review_reads_counts_and_verdicts():
    assert parse_review("ISSUES: none\nVERDICT: sound").sound is True
    assert parse_review("- a -- FIX: b\n- c -- FIX: d").issues == 2
    assert parse_review("no verdict here").sound is None
