"""The compatibility corpus: plans in the official MAS-Orchestra output format, and variants of them,
parsed and then run end to end on the loopback server with the official prompt and the paper agents.

The corpus files are the ``xml_*_official_*`` cases of ``tests/plan/golden`` (written here, covering
the constructs of the official prompts' examples: indented and multi-line tags, ``""`` inputs,
debate roles in either quoting, a low-DoM agent without ``<agent_output_id>``, fan-in graphs, edge
pairs outside an ``<edge>`` block, ``${X}`` without an edge); their expected verdicts sit beside them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from masorch.backends.loopback import LoopbackServer
from masorch.plan import parse
from masorch.run import Environment, EnvSpec, System, run

GOLDEN = Path(__file__).parent.parent / "plan" / "golden"
CASES = sorted(GOLDEN.glob("xml_*_official_*.txt"))
VALID = [p for p in CASES if json.loads(p.with_suffix(".expected.json").read_text())["valid"]]

pytestmark = pytest.mark.timeout(120)


def test_the_corpus_covers_the_official_constructs():
    names = {p.stem for p in CASES}
    assert {n.split("_")[1] for n in names} == {"low", "high"}
    text = "\n".join(p.read_text() for p in VALID)
    for construct in (
        "<debate_roles>['",  # single-quoted Python list
        '<debate_roles>["',  # JSON list
        '<agent_input>""</agent_input>',  # the quoted empty input
        "<agent_output_id>\n",  # an output id on its own lines
        "WebSearchAgent",
        "ReflexionAgent",
        "SCAgent",
        "<edge>",
    ):
        assert construct in text, construct
    assert any("<edge>" not in p.read_text() and "<from>" in p.read_text() for p in VALID)  # bare pairs
    assert any("<agent" in p.read_text() and "<agent_output_id>" not in p.read_text() for p in VALID)
    invalid = {p.stem for p in CASES} - {p.stem for p in VALID}
    assert len(invalid) >= 4  # what the official reader fails on stays rejected


def variants(text: str) -> Iterator[tuple[str, str]]:
    """Rewritings of a plan that the official reader reads alike, so masorch must too."""
    yield "compact", re.sub(r">\s+<", "><", text)
    yield "no-thinking", re.sub(r"<thinking>.*?</thinking>", "", text, flags=re.S)
    yield "crlf", text.replace("\n", "\r\n")
    flipped = re.sub(
        r"<debate_roles>(.*?)</debate_roles>",
        lambda m: "<debate_roles>" + m.group(1).translate(str.maketrans("'\"", "\"'")) + "</debate_roles>",
        text,
    )
    if flipped != text:
        yield "roles-requoted", flipped
    if "<agent_input></agent_input>" in text:
        yield (
            "quoted-empty-input",
            text.replace("<agent_input></agent_input>", '<agent_input>""</agent_input>'),
        )
    if "<edge>" in text:
        yield "bare-pairs", re.sub(r"</?edge>", "", text)
    elif "<from>" in text:
        start, end = text.index("<from>"), text.rindex("</to>") + len("</to>")
        yield "edge-block", text[:start] + "<edge>\n" + text[start:end] + "\n</edge>" + text[end:]


def _lf(plan) -> str:
    """A plan as JSON with line ends normalised (a CRLF variant keeps its CRs inside tasks)."""
    return json.dumps(plan.model_dump(mode="json")).replace("\\r\\n", "\\n")


def responder(plan: list[str]):
    """The loopback model: the current plan for the orchestrator, an accepting critic, else 42."""

    def reply(messages: list[dict]) -> str:
        text = "\n".join(str(m.get("content")) for m in messages)
        if "Multi-agent level:" in text:
            return plan[0]
        if "Check this solution carefully" in text:
            return '{"correct": true, "feedback": "The solution holds."}'
        return "Step by step, the result follows. \\boxed{42}"

    return reply


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
async def test_official_plans_and_their_variants_parse_alike_and_run_on_the_loopback_server(path, tmp_path):
    original = path.read_text()
    dom = path.stem.split("_")[1]
    expected = parse(original, "xml").plan
    assert expected is not None
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"title": "Facts", "text": "The answer to everything is 42."}\n')
    plan = [original]
    env = Environment(EnvSpec.default(agent_profile="paper"))
    try:
        with LoopbackServer(responder(plan)) as server:
            system = System.parse(
                f"mas:{dom}",
                model=f"vllm:{server.base_url}#gpt-oss-120b",
                orchestrator=f"vllm:{server.base_url}#orchestra-7b",
                prompt="official",
                timeout_s=60,
            )
            for name, text in [("original", original), *variants(original)]:
                assert _lf(parse(text, "xml").plan) == _lf(expected), name
                plan[0] = text
                result = await run(system, "Which number answers it?", env, corpus=corpus)
                assert result.status == "ok", (name, result.error, [d.code for d in result.diagnostics])
                assert result.answer == (expected.final_answer or "42"), name
                assert not [d for d in result.diagnostics if d.is_error], name
            assert server.request_count > len(list(variants(original)))
            orchestrator_calls = [b for b in server.bodies if b.get("model") == "orchestra-7b"]
            assert orchestrator_calls and all(len(b["messages"]) == 3 for b in orchestrator_calls)
            assert all(b.get("max_tokens") == 8192 for b in orchestrator_calls)
    finally:
        await env.aclose()
