"""Repair message (snapshot), compliance signal and Mermaid export."""

from __future__ import annotations

from masorch.plan import DoM, Plan, check, code_counts, compliance, parse, repair_message, to_mermaid
from masorch.plan.diagnostics import CODES, Diagnostic, Severity, diag

BROKEN = """create_agent(id="a", kind="cotx", task="Find it.")
create_agent(id="b", kind="sc", task="Use ${a}", n=40)
create_flow("a", "b")
create_flow("b", "a")
"""

EXPECTED_REPAIR = """Your plan cannot be run. Fix these 3 problems and write the whole plan again:
1. [unknown_kind] (agent:a) kind 'cotx' is not a known sub-agent. Fix: did you mean 'cot'? use one of: cot, \
sc, debate, reflexion, search, python.
2. [bad_param] (agent:b) n must be at most 16, got 40. Fix: n is int in [1, 16] (default 5).
3. [cycle] (cycle:a->b->a) the flows form a cycle: a -> b -> a. Fix: remove one flow of the cycle; a plan \
must be a DAG."""


def test_repair_message_snapshot(catalogue):
    result = check(BROKEN, DoM.HIGH, catalogue)
    assert repair_message(result.diagnostics) == EXPECTED_REPAIR


def test_repair_message_lists_warnings_after_errors_and_alone():
    warning = diag(
        "duplicate_flow", "the flow a -> b is declared twice", "declare each flow once", "flow:a->b"
    )
    error = diag("self_loop", "the flow c -> c connects an agent to itself.", "remove it.", "flow:c->c")
    both = repair_message([warning, error])
    assert both.index("[self_loop]") < both.index("Also worth fixing") < both.index("[duplicate_flow]")
    assert "itself.." not in both  # trailing full stops are not doubled
    alone = repair_message([warning])
    assert alone.startswith("Your plan can run, but it has a weakness:")
    assert repair_message([]) == ""


def test_compliance_falls_with_each_problem():
    err = diag("cycle", "x")
    warn = diag("duplicate_flow", "y")
    scores = [compliance([]), compliance([warn]), compliance([err]), compliance([err, err, warn])]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    assert compliance([diag("no_plan", "nothing")]) == 0.0
    assert code_counts([err, err, warn]) == {"cycle": 2, "duplicate_flow": 1}


def test_every_code_has_a_severity_and_diagnostics_serialise():
    assert all(isinstance(sev, Severity) and meaning for sev, meaning in CODES.values())
    d = Diagnostic("cycle", Severity.ERROR, "m", "h", "cycle:a->a")
    assert d.to_dict() == {
        "code": "cycle",
        "severity": "error",
        "message": "m",
        "hint": "h",
        "where": "cycle:a->a",
    }


def test_mermaid_export():
    plan = parse(
        'create_agent(id="a", kind="search", task="Find \\"X\\" <fast>")\n'
        'create_agent(id="b", kind="cot", task="")\ncreate_flow("a", "b")\ncreate_flow("b", "zz")'
    ).plan
    assert plan is not None
    assert to_mermaid(plan).splitlines() == [
        "flowchart TD",
        '  n0["<b>a</b> · search<br/>Find #quot;X#quot; #lt;fast#gt;"]',
        '  n1["<b>b</b> · cot<br/>(the original question)"]',
        "  n0 --> n1",
        '  missing1b["zz (missing)"]',
        "  n1 --> missing1b",
    ]
    assert to_mermaid(Plan(final_answer="42")).splitlines()[-1] == '  answer(["final answer: 42"])'
