"""The plan grammars: golden text, their language inside what the readers accept, and their bounds.

Set ``MASORCH_UPDATE_GOLDEN=1`` to rewrite the golden grammars after a deliberate change.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import gbnf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from masorch.agents.signatures import builtin_catalogue
from masorch.plan import DoM, Limits, check
from masorch.plan.catalogue import KindSignature, ParamSpec
from masorch.plan.grammar import GrammarLimits, plan_grammar

GOLDEN = Path(__file__).parent / "golden" / "grammar"
CASES = [("calls", DoM.HIGH), ("calls", DoM.LOW), ("xml", DoM.HIGH), ("xml", DoM.LOW)]
# What a context-free grammar cannot rule out: these are the validator's (and the repair loop's).
GRAPH_ERRORS = {
    "duplicate_id",
    "dangling_flow",
    "self_loop",
    "cycle",
    "multiple_sinks",
    "unreachable",
    "unknown_ref",
    "self_ref",
}
ALLOWED_WARNINGS = {"duplicate_flow", "empty_task", "answer_ignored", "implied_flow"}


def _grammar(dialect: str, dom: DoM, **kw: object) -> str:
    return plan_grammar(dialect, builtin_catalogue(), dom, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("dialect", "dom"), CASES)
def test_grammar_matches_golden(dialect: str, dom: DoM) -> None:
    text = _grammar(dialect, dom)
    path = GOLDEN / f"{dialect}_{dom.value}.gbnf"
    if os.environ.get("MASORCH_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize(("dialect", "dom"), CASES)
def test_repetitions_stay_below_the_llama_cpp_limit(dialect: str, dom: DoM) -> None:
    text = _grammar(dialect, dom)
    bounds = [int(n) for m in re.finditer(r"\{(\d+)(?:,(\d+))?\}", text) for n in m.groups() if n]
    assert bounds and max(bounds) < 2000
    assert re.search(r"^[a-z0-9-]+ ::= ", text, re.M)
    assert all(re.match(r"^[A-Za-z0-9-]+ ::= ", line) for line in text.splitlines())


def _verdict(text: str, dialect: str, dom: DoM) -> tuple[set[str], set[str], set[str]]:
    """Parse-stage error codes, validation error codes and warning codes of ``text``."""
    checked = check(text, dom, builtin_catalogue(), dialect)  # type: ignore[arg-type]
    assert checked.plan is not None, text
    parse_errors = {d.code for d in checked.parse.diagnostics if d.is_error}
    errors = {d.code for d in checked.diagnostics if d.is_error} - parse_errors
    warnings = {d.code for d in checked.diagnostics if not d.is_error}
    return parse_errors, errors, warnings


@pytest.mark.parametrize(("dialect", "dom"), CASES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_every_grammar_string_reads_without_a_parse_error(dialect: str, dom: DoM, rng: random.Random) -> None:
    rules = gbnf.read(_grammar(dialect, dom))
    text = gbnf.sample(rules, rng)
    parse_errors, errors, warnings = _verdict(text, dialect, dom)
    assert not parse_errors, text
    assert errors <= GRAPH_ERRORS, (errors, text)
    assert warnings <= ALLOWED_WARNINGS, (warnings, text)
    # The sampler and the recognizer agree (the regex is what the handwritten cases use).
    assert re.fullmatch(gbnf.to_regex(rules), text, re.S), text


def _matches(text: str, dialect: str, dom: DoM) -> bool:
    return re.fullmatch(gbnf.to_regex(gbnf.read(_grammar(dialect, dom))), text, re.S) is not None


VALID_CALLS_HIGH = [
    'create_agent(id="leap", kind="cot", task="Which of the years 1900 to 1903 are leap years?")\n'
    'create_agent(id="count", kind="sc", task="The leap years are: ${leap}. Add up the days.", n=5)\n',
    "Thought: two independent look-ups, then a debate; y > 2 is fine here.\n"
    'create_agent(id="a", kind="search", task="Find X where x < 5.", top_k=3, max_hops=2)\n'
    'create_agent(id="b", kind="python", task="Compute ${a} squared.", timeout_s=12.5, max_attempts=2)\n'
    'create_agent(id="c", kind="debate", task="Use ${a} and ${b}.", roles=["Judge", "Critic"], rounds=2)\n'
    'create_agent(id="d", kind="reflexion", task="Check ${c}.", max_rounds=3)\n',
    'create_agent(id="solve", kind="cot", task="", temperature=2.0)\n',
    'create_agent(id="tex", kind="cot", task="Simplify \\\\frac{1}{2}, quoting \\"x\\".\\n")',
]
VALID_CALLS_LOW = [
    'create_agent(id="solve", kind="sc", task="", n=5)\n',
    'final_answer("Paris")\n',
    'Thought: simple recall.\nfinal_answer("π/2 ≈ 1.5708")\n',
    'final_answer("\\\\frac{1}{2}")',
]
INVALID_CALLS = [
    ("high", 'create_agent(id="a", kind="magic", task="x")\n'),  # a kind not offered
    ("high", 'create_agent(id="a", kind="sc", task="x", n=40)\n'),  # out of range
    ("high", 'create_agent(id="a", kind="sc", task="x", k=4)\n'),  # not a parameter
    ("high", 'create_agent(id="1a", kind="cot", task="x")\n'),  # not an id
    ("high", 'final_answer("4")\n'),  # no direct answer at DoM high
    ("high", 'Thought: use create_agent(...)\ncreate_agent(id="a", kind="cot", task="x")\n'),
    ("high", 'create_agent(id="a", kind="cot", task="the <think> tag")\n'),
    # several agents and the last one uses no upstream answer: no join
    ("high", 'create_agent(id="a", kind="cot", task="x")\ncreate_agent(id="b", kind="cot", task="y")\n'),
    # flows are written as ${id} references: a small model loops on create_flow lines
    (
        "high",
        'create_agent(id="a", kind="cot", task="x")\ncreate_agent(id="b", kind="cot", task="y")\n'
        'create_flow("a", "b")\n',
    ),
    ("low", 'create_agent(id="a", kind="cot", task="x")\ncreate_agent(id="b", kind="cot", task="y")\n'),
    ("low", 'create_agent(id="a", kind="cot", task="x")\ncreate_flow("a", "a")\n'),
    ("low", 'final_answer(" ")\n'),
]


@pytest.mark.parametrize("text", VALID_CALLS_HIGH)
def test_handwritten_high_plans_are_in_the_calls_grammar_and_valid(text: str) -> None:
    assert _matches(text, "calls", DoM.HIGH)
    assert check(text, DoM.HIGH, builtin_catalogue(), "calls").valid


@pytest.mark.parametrize("text", VALID_CALLS_LOW)
def test_handwritten_low_plans_are_in_the_calls_grammar_and_valid(text: str) -> None:
    assert _matches(text, "calls", DoM.LOW)
    assert check(text, DoM.LOW, builtin_catalogue(), "calls").valid


@pytest.mark.parametrize(("dom", "text"), INVALID_CALLS)
def test_the_calls_grammar_excludes(dom: str, text: str) -> None:
    assert not _matches(text, "calls", DoM(dom))


VALID_XML_HIGH = (
    "<thinking>\nFirst the leap years, then a vote over the sum.\n</thinking>\n"
    "<agent>\n<agent_id>LEAP</agent_id>\n<agent_name>CoTAgent</agent_name>\n"
    "<agent_description>Find the leap years.</agent_description>\n"
    "<required_arguments>\n<agent_input>Which of 1900-1903 are leap years?</agent_input>\n"
    "</required_arguments>\n</agent>\n"
    "<agent>\n<agent_id>COUNT</agent_id>\n<agent_name>SCAgent</agent_name>\n"
    "<agent_description>Add up.</agent_description>\n"
    "<required_arguments>\n<agent_input>Leap years: ${LEAP}. Add up the days.</agent_input>\n"
    "<n_samples>5</n_samples>\n</required_arguments>\n</agent>\n"
    "<edge>\n<from>LEAP</from><to>COUNT</to>\n</edge>\n"
)
VALID_XML_LOW = [
    "<thinking>Easy.</thinking>\n<answer>Paris</answer>\n",
    "<agent>\n<agent_name>DebateAgent</agent_name>\n<agent_description>d</agent_description>\n"
    '<required_arguments>\n<agent_input></agent_input>\n<debate_roles>["A", "B"]</debate_roles>\n'
    "</required_arguments>\n<agent_output_id>out</agent_output_id>\n</agent>\n<answer>out</answer>\n",
]


def test_handwritten_xml_plans_are_in_the_grammar_and_valid() -> None:
    assert _matches(VALID_XML_HIGH, "xml", DoM.HIGH)
    assert check(VALID_XML_HIGH, DoM.HIGH, builtin_catalogue(), "xml").valid
    for text in VALID_XML_LOW:
        assert _matches(text, "xml", DoM.LOW)
        assert check(text, DoM.LOW, builtin_catalogue(), "xml").valid
    assert not _matches(VALID_XML_LOW[0], "xml", DoM.HIGH)  # no direct answer at high
    assert not _matches(VALID_XML_HIGH.replace("CoTAgent", "MagicAgent"), "xml", DoM.HIGH)
    assert not _matches(VALID_XML_HIGH.replace("<n_samples>5", "<n_samples>50"), "xml", DoM.HIGH)


def test_the_grammar_offers_only_the_catalogue_and_its_limits() -> None:
    catalogue = {k: v for k, v in builtin_catalogue().items() if k not in ("search", "python")}
    text = plan_grammar("calls", catalogue, DoM.HIGH, Limits(max_agents=3, max_flows=4))
    assert '"search"' not in text and '"python"' not in text and '"debate"' not in text.replace("debate-", "")
    # references only, and a plan of several agents ends with a final agent that uses an answer
    assert "(agent | agent (eol agent)? eol final) eol?" in text and "create_flow" not in text
    flows = plan_grammar(
        "calls", catalogue, DoM.HIGH, Limits(max_agents=3), GrammarLimits(max_declared_flows=9)
    )
    assert "agent (eol agent){0,2} (eol flow){0,3}" in flows  # 3 agents: at most 3 distinct flows
    assert "final_answer" not in text
    allowed = plan_grammar("calls", catalogue, DoM.HIGH, Limits(direct_answer_in_high=True))
    assert "| answer)" in allowed
    bare = plan_grammar("xml", catalogue, DoM.HIGH, bounds=GrammarLimits(max_thought_chars=0))
    assert "thinking" not in bare


def test_parameters_the_grammar_cannot_bound() -> None:
    wide = ParamSpec(name="k", type="int", minimum=0, maximum=10_000)
    kinds = {
        "free": KindSignature(kind="free", summary="s", params=(wide,)),
        "needs": KindSignature(
            kind="needs", summary="s", params=(wide.model_copy(update={"required": True}),)
        ),
    }
    text = plan_grammar("calls", kinds, DoM.HIGH)
    assert 'kind-free ::= "\\"free\\", task=" task\n' in text  # the optional parameter is left to its default
    assert '"needs"' not in text  # a kind whose required parameter cannot be written is left out
    with pytest.raises(ValueError, match="no kind"):
        plan_grammar("calls", {"needs": kinds["needs"]}, DoM.HIGH)
    with pytest.raises(ValueError, match="json"):
        plan_grammar("json", kinds, DoM.HIGH)  # type: ignore[arg-type]


def test_which_valid_xml_goldens_the_grammar_accepts() -> None:
    # The checkpoints' own layout (indentation, blank lines) is in the language; what it leaves out
    # is what a constrained model need not write: edges outside the <edge> block, <vote_method>,
    # tags quoted inside <thinking>, an answer that is not the agent's id, white space inside an id.
    golden = Path(__file__).parent / "golden"
    accepted = set()
    for expected in sorted(golden.glob("xml_*.expected.json")):
        name = expected.name.removesuffix(".expected.json")
        if '"valid": true' not in expected.read_text(encoding="utf-8"):
            continue
        dom = DoM.LOW if name.startswith("xml_low") else DoM.HIGH
        if _matches((golden / f"{name}.txt").read_text(encoding="utf-8"), "xml", dom):
            accepted.add(name)
    assert accepted == {
        "xml_high_diamond",
        "xml_high_edge_without_ref",
        "xml_high_ref_without_edge",
        "xml_low_debate_roles",
        "xml_low_decomposed",
        "xml_low_direct",
    }
