"""The self-consistency agent: concurrent samples and the vote."""

from __future__ import annotations

import time

import pytest

from masorch.agents.base import NodeInput, NodeStatus
from masorch.agents.sc import SelfConsistencyAgent
from masorch.errors import BackendError, BudgetExceeded

NODE = NodeInput("v", "What is 8 + 9?", "", params={"n": 5, "temperature": 0.9})


def by_sample(replies):
    """A responder that answers by the sample index, so the reply does not depend on call order."""

    def respond(messages, config):
        reply = replies[config.sample_index]
        if isinstance(reply, BaseException):
            raise reply
        return reply

    return respond


async def test_majority_over_normalised_answers(make_ctx):
    replies = [r"\boxed{18}", r"so \boxed{17.0}", "Answer: 17", r"\boxed{18}", r"\boxed{ 17 }"]
    ctx = make_ctx(by_sample(replies))
    out = await SelfConsistencyAgent().run(NODE, ctx)
    assert out.status is NodeStatus.OK
    assert out.answer == "17.0"  # the first winning sample's answer, as written
    assert out.rationale == r"so \boxed{17.0}"
    assert out.details["votes"] == 3 and out.details["voters"] == 5
    assert ctx.calls == 5 and out.usage.calls == 5


async def test_tie_goes_to_the_first_answer(make_ctx):
    replies = [r"\boxed{b}", r"\boxed{a}", r"\boxed{a}", r"\boxed{b}"]
    node = NodeInput("v", "q", "", params={"n": 4, "temperature": 0.7})
    out = await SelfConsistencyAgent().run(node, make_ctx(by_sample(replies)))
    assert out.answer == "b"


async def test_samples_are_distinct_and_use_the_temperature(make_ctx):
    ctx = make_ctx([r"\boxed{1}"], cycle=True)
    await SelfConsistencyAgent().run(NODE, ctx)
    configs = [config for _, config in ctx.backend.calls]
    assert sorted(c.sample_index for c in configs) == [0, 1, 2, 3, 4]
    assert {c.temperature for c in configs} == {0.9}


async def test_samples_run_concurrently(make_ctx):
    ctx = make_ctx([r"\boxed{1}"], cycle=True, delay_s=0.2)
    node = NodeInput("v", "q", "", params={"n": 8, "temperature": 0.7})
    start = time.perf_counter()
    out = await SelfConsistencyAgent().run(node, ctx)
    elapsed = time.perf_counter() - start
    assert out.status is NodeStatus.OK and ctx.calls == 8
    assert elapsed < 0.6  # serial would take 1.6 s


async def test_failed_samples_are_counted_and_do_not_vote(make_ctx):
    replies = [BackendError("boom"), r"\boxed{5}", "", r"\boxed{6}", r"\boxed{5}"]
    out = await SelfConsistencyAgent().run(NODE, make_ctx(by_sample(replies)))
    assert out.status is NodeStatus.OK and out.answer == "5"
    assert out.details["failed_samples"] == 2 and out.details["voters"] == 3


async def test_all_samples_failing_is_an_error_with_every_reason(make_ctx):
    replies = [BackendError("boom 0"), BackendError("boom 1"), "", BackendError("boom 3"), ""]
    out = await SelfConsistencyAgent().run(NODE, make_ctx(by_sample(replies)))
    assert out.status is NodeStatus.ERROR
    assert "boom 0" in out.error and "boom 3" in out.error and "sample 4" in out.error
    assert "all 5 samples failed" in out.error


async def test_budget_exhaustion_propagates(make_ctx):
    replies = [r"\boxed{1}", BudgetExceeded("no calls left"), r"\boxed{1}", r"\boxed{1}", r"\boxed{1}"]
    with pytest.raises(BudgetExceeded):
        await SelfConsistencyAgent().run(NODE, make_ctx(by_sample(replies)))
