"""The plan grammars: golden text, their language inside what the readers accept, and their bounds.

Set ``MASORCH_UPDATE_GOLDEN=1`` to rewrite the golden grammars after a deliberate change.
"""

from __future__ import annotations

import functools
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
from masorch.plan.grammar import GrammarLimits, max_plan_agents, plan_grammar

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
    "bad_ref_field",
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
    rules = _rules(dialect, dom)
    text = gbnf.sample(rules, rng)
    parse_errors, errors, warnings = _verdict(text, dialect, dom)
    assert not parse_errors, text
    # A calls plan by reference is a connected DAG with one sink by construction.
    assert errors <= (set() if (dialect, dom) == ("calls", DoM.HIGH) else GRAPH_ERRORS), (errors, text)
    assert warnings <= ALLOWED_WARNINGS, (warnings, text)
    # The sampler and the recognizer agree (the recognizer is what the handwritten cases use).
    assert _recognize(rules, (dialect, dom), text), text


def _recognize(rules: dict[str, gbnf.Node], case: tuple[str, DoM], text: str) -> bool:
    # A plan by reference shares its states between rules, so one regular expression of it would
    # grow exponentially: it gets the memoised matcher; the others the (faster) regular expression.
    if case == ("calls", DoM.HIGH):
        return gbnf.matches(rules, text)
    return re.fullmatch(gbnf.to_regex(rules), text, re.S) is not None


@functools.cache
def _rules(dialect: str, dom: DoM) -> dict[str, gbnf.Node]:
    return gbnf.read(_grammar(dialect, dom))


def _matches(text: str, dialect: str, dom: DoM) -> bool:
    return _recognize(_rules(dialect, dom), (dialect, dom), text)


def test_the_two_recognizers_agree() -> None:
    rules = _rules("calls", DoM.LOW)
    for text in [*VALID_CALLS_LOW, *(t for d, t in INVALID_CALLS if d == "low")]:
        assert gbnf.matches(rules, text) == (re.fullmatch(gbnf.to_regex(rules), text, re.S) is not None)


VALID_CALLS_HIGH = [
    'create_agent(id="a1", kind="cot", task="Which of the years 1900 to 1903 are leap years?")\n'
    'create_agent(id="a2", kind="sc", n=5, task="The leap years are: ${a1}. Add up the days.")\n',
    "Thought: two independent look-ups, then a debate; y > 2 is fine here.\n"
    'create_agent(id="a1", kind="search", top_k=3, max_hops=2, task="Find X where x < 5, in $.")\n'
    'create_agent(id="a2", kind="python", timeout_s=12.5, max_attempts=2, task="Compute ${a1} squared.")\n'
    'create_agent(id="a3", kind="debate", roles=["Judge", "Critic"], rounds=2, task="Use ${a1} and ${a2}.")\n'
    'create_agent(id="a4", kind="reflexion", max_rounds=3, task="Check ${a3.rationale}.")\n',
    'create_agent(id="a1", kind="cot", temperature=2.0, task="")\n',
    'create_agent(id="a1", kind="cot", task="Simplify \\\\frac{1}{2}, quoting \\"x\\".\\n")',
    'create_agent(id="a1", kind="cot", task="Is $\\\\frac{1}{2}$ or $$x^2$$ more, at 5$ each?")\n'
    'create_agent(id="a2", kind="cot", task="Use ${a1}.")',
    # a1 and a2 in parallel, a3 uses a1, the final a4 uses what no one else does
    'create_agent(id="a1", kind="cot", task="x")\ncreate_agent(id="a2", kind="cot", task="y")\n'
    'create_agent(id="a3", kind="cot", task="${a1}!")\n\n'
    'create_agent(id="a4", kind="sc", task="${a3} ${a2}")',
]
VALID_CALLS_LOW = [
    'create_agent(id="solve", kind="sc", task="", n=5)\n',
    'final_answer("Paris")\n',
    'Thought: simple recall.\nfinal_answer("π/2 ≈ 1.5708")\n',
    'final_answer("\\\\frac{1}{2}")',
]
INVALID_CALLS = [
    ("high", 'create_agent(id="a1", kind="magic", task="x")\n'),  # a kind not offered
    ("high", 'create_agent(id="a1", kind="sc", n=40, task="x")\n'),  # out of range
    ("high", 'create_agent(id="a1", kind="sc", k=4, task="x")\n'),  # not a parameter
    ("low", 'create_agent(id="1a", kind="cot", task="x")\n'),  # not an id
    ("high", 'final_answer("4")\n'),  # no direct answer at DoM high
    ("high", 'Thought: use create_agent(...)\ncreate_agent(id="a1", kind="cot", task="x")\n'),
    ("high", 'create_agent(id="a1", kind="cot", task="the <think> tag")\n'),
    # several agents and the last one uses no upstream answer: no join
    ("high", 'create_agent(id="a1", kind="cot", task="x")\ncreate_agent(id="a2", kind="cot", task="y")\n'),
    # an agent no later one uses (a1), though the last one uses an answer
    (
        "high",
        'create_agent(id="a1", kind="cot", task="x")\ncreate_agent(id="a2", kind="cot", task="y")\n'
        'create_agent(id="a3", kind="cot", task="${a2}")\n',
    ),
    ("high", 'create_agent(id="a", kind="cot", task="x")\n'),  # ids are a1, a2, ... in order
    ("high", 'create_agent(id="a2", kind="cot", task="x")\n'),
    ("high", 'create_agent(id="a1", kind="cot", task="${a1}")\n'),  # no self-reference
    *(
        ("high", f'create_agent(id="a1", kind="cot", task="x")\ncreate_agent(id="a2", kind="sc", task="{t}")')
        # a later or unknown agent, a reference smuggled past the grammar, a "$" that ends a task
        for t in ("${a3}", "${b}", "$${a1}", "<${a1}", "$$${a1}", "${a1} at 5$")
    ),
    # the task comes last, after the parameters
    ("high", 'create_agent(id="a1", kind="sc", task="x", n=3)\n'),
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
    # references only: agents a1..a3 and no flow lines
    assert 'id=\\"a3\\"' in text and 'id=\\"a4\\"' not in text and "create_flow" not in text
    four = plan_grammar("calls", catalogue, DoM.HIGH)  # the by-reference bound, below Limits' 10
    assert 'id=\\"a4\\"' in four and 'id=\\"a5\\"' not in four
    assert max_plan_agents("calls", DoM.HIGH, Limits()) == 4
    assert max_plan_agents("json", DoM.HIGH, Limits()) == 10
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
    assert 'head-free ::= "\\"free\\""\n' in text  # the optional parameter is left to its default
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
        "xml_high_official_fan_in",
        "xml_high_official_indented_edges",
        "xml_high_ref_without_edge",
        "xml_low_debate_roles",
        "xml_low_decomposed",
        "xml_low_direct",
    }
