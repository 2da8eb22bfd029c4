"""The debate agent: concurrent speakers over rounds, then a judge."""

from __future__ import annotations

import time

from masorch.agents.base import NodeInput, NodeStatus
from masorch.agents.debate import DebateAgent
from masorch.errors import BackendError

ROLES = ["Mathematician", "Skeptic", "Engineer"]
NODE = NodeInput("d", "What is 6 * 7?", "", params={"roles": ROLES, "rounds": 2})


def debater(messages, config):
    system, prompt = messages[0].content, messages[-1].content
    if "judge" in system:
        return r"The Mathematician is right. \boxed{42}"
    role = next(r for r in ROLES if f"You are the {r} " in prompt)
    round_number = 2 if "round 2 of 2" in prompt else 1
    return f"{role} says in round {round_number}: \\boxed{{42}}"


async def test_rounds_then_judge(make_ctx):
    ctx = make_ctx(debater)
    out = await DebateAgent().run(NODE, ctx)
    assert out.status is NodeStatus.OK and out.answer == "42"
    assert "Mathematician is right" in out.rationale
    assert ctx.calls == 3 * 2 + 1 and out.usage.calls == 7
    prompts = [m[-1].content for m, _ in ctx.backend.calls]
    second_round = [p for p in prompts if "round 2 of 2" in p]
    assert len(second_round) == 3
    for prompt in second_round:  # every speaker sees every argument of round 1
        for role in ROLES:
            assert f"{role} says in round 1" in prompt
    judge = prompts[-1]
    assert all(f"{role} says in round 2" in judge for role in ROLES)
    assert "round 1" not in judge.replace("round 2", "")


async def test_speakers_run_concurrently(make_ctx):
    ctx = make_ctx(debater, delay_s=0.3)
    start = time.perf_counter()
    out = await DebateAgent().run(NODE, ctx)
    elapsed = time.perf_counter() - start
    assert out.status is NodeStatus.OK
    assert elapsed < 1.5  # 2 rounds + judge = 3 waves of 0.3 s; serial would be 2.1 s


async def test_a_failed_speaker_drops_out_but_a_silent_round_fails(make_ctx):
    def one_fails(messages, config):
        if "You are the Skeptic " in messages[-1].content:
            raise BackendError("skeptic offline")
        return debater(messages, config)

    out = await DebateAgent().run(NODE, make_ctx(one_fails))
    assert out.status is NodeStatus.OK

    def all_fail(messages, config):
        raise BackendError("all offline")

    out = await DebateAgent().run(NODE, make_ctx(all_fail))
    assert out.status is NodeStatus.ERROR and "round 1" in out.error and "all offline" in out.error


async def test_judge_failure_is_an_error(make_ctx):
    def judge_fails(messages, config):
        if "judge" in messages[0].content:
            raise BackendError("judge offline")
        return debater(messages, config)

    out = await DebateAgent().run(NODE, make_ctx(judge_fails))
    assert out.status is NodeStatus.ERROR and "judge offline" in out.error
    assert out.usage.calls == 6


async def test_defaults_from_the_signature(make_ctx):
    ctx = make_ctx([r"a \boxed{1}", r"b \boxed{1}", r"c \boxed{1}", r"d \boxed{1}", r"\boxed{1}"])
    out = await DebateAgent().run(NodeInput("d", "q", ""), ctx)
    assert out.status is NodeStatus.OK and ctx.calls == 5  # 2 default roles x 2 default rounds + judge
