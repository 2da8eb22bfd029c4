"""The reflexion agent: critic/refine rounds and both early stops."""

from __future__ import annotations

import pytest

from masorch.agents.base import NodeInput, NodeStatus
from masorch.agents.reflexion import ReflexionAgent, Verdict, parse_verdict

NODE = NodeInput("r", "How many legs do 3 spiders have?", "", params={"max_rounds": 5})


async def test_critic_accepts_first_answer(make_ctx):
    ctx = make_ctx([r"8 * 3 = 24. \boxed{24}", '{"correct": true, "feedback": ""}'])
    out = await ReflexionAgent().run(NODE, ctx)
    assert out.status is NodeStatus.OK and out.answer == "24"
    assert ctx.calls == 2 and out.details["stop"] == "accepted"


async def test_refines_until_accepted_with_a_verdict_line(make_ctx):
    ctx = make_ctx(
        [
            r"6 * 3 = 18. \boxed{18}",
            '```json\n{"correct": false, "feedback": "Spiders have 8 legs, not 6."}\n```',
            r"8 * 3 = 24. \boxed{24}",
            "Looks right.\nVERDICT: correct",
        ]
    )
    out = await ReflexionAgent().run(NODE, ctx)
    assert out.answer == "24" and out.details["stop"] == "accepted" and ctx.calls == 4
    refine_prompt = ctx.backend.calls[2][0][-1].content
    assert "Spiders have 8 legs, not 6." in refine_prompt and r"\boxed{18}" in refine_prompt
    assert out.details["answers"] == ["18", "24"]


async def test_stops_when_the_refined_answer_no_longer_changes(make_ctx):
    ctx = make_ctx([r"\boxed{24}", "VERDICT: incorrect", r"still \boxed{24.0}"])
    out = await ReflexionAgent().run(NODE, ctx)
    assert out.status is NodeStatus.OK and out.answer == "24.0"
    assert ctx.calls == 3 and out.details["stop"] == "unchanged"


async def test_runs_out_of_rounds(make_ctx):
    replies = [r"\boxed{1}"] + [
        reply for i in range(2, 4) for reply in ('{"correct": false, "feedback": "no"}', rf"\boxed{{{i}}}")
    ]
    ctx = make_ctx(replies)
    out = await ReflexionAgent().run(NodeInput("r", "q", "", params={"max_rounds": 2}), ctx)
    assert out.answer == "3" and ctx.calls == 5
    assert out.details == {"rounds": 2, "stop": "max_rounds", "answers": ["1", "2", "3"]}


async def test_unreadable_critic_counts_as_not_accepted(make_ctx):
    ctx = make_ctx([r"\boxed{1}", "Hmm, check the units.", r"\boxed{2}", '{"correct": "yes"}'])
    out = await ReflexionAgent().run(NODE, ctx)
    assert out.answer == "2" and ctx.calls == 4
    assert "check the units" in ctx.backend.calls[2][0][-1].content


async def test_critic_asks_for_structured_output(make_ctx):
    ctx = make_ctx([r"\boxed{1}", '{"correct": true, "feedback": ""}'])
    await ReflexionAgent().run(NODE, ctx)
    assert ctx.backend.calls[1][1].json_schema is not None


@pytest.mark.parametrize(
    ("text", "correct"),
    [
        ('{"correct": true, "feedback": ""}', True),
        ('Sure! {"correct": false, "feedback": "x"} hope that helps', False),
        ('{"is_correct": "no", "feedback": "x"}', False),
        ("VERDICT: incorrect\nThe sum is wrong.", False),
        ("verdict = CORRECT", True),
        ("**Verdict**: wrong", False),
        ("The answer is incorrect.", None),
        ("{not json}", None),
        ('{"correct": ' + "[" * 5000 + "]" * 5000 + "}", None),  # nested too deeply to read
        ('{"correct": 1' + "0" * 5000 + "}", None),  # a number too long to convert
        # prose with braces before the JSON, and the last of several verdict objects
        ('The roots are {2, 3}.\n{"correct": true, "feedback": "ok"}', True),
        ('Draft: {"correct": false, "feedback": "x"}\nThen: {"correct": true, "feedback": ""}', True),
        ('{"feedback": "see {a}", "details": {"correct": false}, "correct": true}', True),  # nested: outer
        ('{"result": {"correct": true}}', None),  # a verdict nested in another object is not the verdict
        ("\\frac{1}{2} " * 300 + '{"correct": false, "feedback": "x"}', False),  # many braces before it
        # verdict words are whole words; "not" negates; "no errors" closing its sentence accepts
        ("Verdict: correctness of step 2 fails", None),
        ("VERDICT: incorrectly rounded", None),
        ("Verdict: Nothing adds up", None),
        ("Verdict: accepted", True),
        ("Verdict: rejected.", False),
        ("Verdict: not correct", False),
        ("Verdict: NOT wrong.", True),
        ("Verdict: no errors.", True),
        ("**Verdict:** No mistakes found\nGood work.", True),
        ("Verdict: no errors in step 1, but step 2 is wrong", None),
        ("Verdict: No, the sum is 7.", False),
    ],
)
def test_parse_verdict(text, correct):
    assert parse_verdict(text).correct is correct


def test_parse_verdict_keeps_feedback():
    assert parse_verdict('{"correct": false, "feedback": " use 8 "}') == Verdict(False, "use 8")


async def test_critic_braces_before_its_json_do_not_hide_the_verdict(make_ctx):
    critic = 'The roots are {2, 3}, as claimed.\n{"correct": true, "feedback": "ok"}'
    ctx = make_ctx([r"\boxed{2, 3}", critic])
    out = await ReflexionAgent().run(NODE, ctx)
    assert out.answer == "2, 3" and ctx.calls == 2 and out.details["stop"] == "accepted"


async def test_a_word_containing_correct_does_not_accept(make_ctx):
    critic = "Verdict: correctness of step 2 fails."
    ctx = make_ctx([r"\boxed{18}", critic, r"\boxed{24}", "VERDICT: correct"])
    out = await ReflexionAgent().run(NODE, ctx)
    assert out.answer == "24" and ctx.calls == 4 and out.details["answers"] == ["18", "24"]
    assert "correctness of step 2 fails" in ctx.backend.calls[2][0][-1].content
