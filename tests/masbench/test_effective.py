"""Canonical template shapes (no isomorphic leaks across splits) and effective axis values."""

from __future__ import annotations

import hashlib
import re

import pytest

from masorch.masbench.axes import generate_instance
from masorch.masbench.check import check_records
from masorch.masbench.effective import effective
from masorch.masbench.evaluator import solve_text
from masorch.masbench.instance import AXES
from masorch.masbench.problem import Expr, Problem, Q
from masorch.masbench.splits import derive_rng
from masorch.masbench.templates import SketchError, canonical_sketch, template_hash
from masorch.masbench.vocab import load_chains
from masorch.masbench.world import build_world

WORLDS = [
    {
        "levels": [
            {"category": "Towns", "items": ["Ash"]},
            {"category": "Shops", "items": ["Bay", "Cove", "Dune", "Elm", "Fen"]},
        ]
    }
]


def test_operand_order_and_names_do_not_change_the_template():
    a = "Inst v1 = const[](;0); Inst v2 = one[plus](v1;0); Inst v3 = const[](;0); Inst v4 = sum[](v2,v3;0)"
    b = "Inst v1 = const[](;0); Inst v2 = const[](;0); Inst v3 = one[plus](v2;0); Inst v4 = sum[](v1,v3;0)"
    assert template_hash(a) == template_hash(b)
    assert canonical_sketch(a) == canonical_sketch(b)
    # The difference is not commutative: swapping its operands is another template.
    c, d = a.replace("sum[]", "diff[]"), b.replace("sum[]", "diff[]")
    assert template_hash(c) != template_hash(d)
    # A category total's terms are commutative too.
    e = "Inst v1 = const[](;0); Inst v2 = one[times](v1;0); Inter v3 = total(v1,v2)"
    f = "Inst v1 = const[](;0); Inst v2 = one[times](v1;0); Inter v3 = total(v2,v1)"
    assert template_hash(e) == template_hash(f)
    with pytest.raises(SketchError):
        template_hash("Inst v1 = sum[](v7;0)")


@pytest.mark.parametrize("axis", AXES)
def test_stored_sketches_are_canonical_and_hash_to_their_bucket(axis):
    for value in (2, 5):
        rec = generate_instance(axis, value, split="test", seed=3, index=0)
        for sub in rec["subtasks"]:
            if sub["kind"] == "igsm":
                assert canonical_sketch(sub["sketch"]) == sub["sketch"]
                assert template_hash(sub["sketch"]) == (sub["template_hash"], sub["bucket"])
                assert sub["bucket"] >= 16


def test_check_reports_a_canonical_shape_shared_across_splits():
    train = generate_instance("depth", 2, split="train", seed=5, index=0)
    test = generate_instance("depth", 2, split="test", seed=5, index=0)
    assert check_records([train, test]).ok
    # Plant the train shape into the test record (hash and bucket made consistent with it).
    sub = dict(test["subtasks"][0], sketch=train["subtasks"][0]["sketch"])
    sub["template_hash"], sub["bucket"] = template_hash(sub["sketch"])
    planted = dict(test, subtasks=[sub])
    problems = check_records([train, planted]).problems
    assert any("canonical template shape" in p and "both train and test" in p for p in problems)


def test_check_finds_the_train_shape_in_test_with_its_sum_operands_swapped():
    made = (generate_instance("depth", 3, split="train", seed=6, index=i) for i in range(40))
    train = next(r for r in made if "sum[" in r["subtasks"][0]["sketch"])
    sketch = train["subtasks"][0]["sketch"]
    swapped = re.sub(r"sum\[(\w*)\]\((v\d+),(v\d+);0\)", r"sum[\1](\3,\2;0)", sketch, count=1)
    assert swapped != sketch and template_hash(swapped) == template_hash(sketch)
    # A hash of the written sketch text (generator 1.0) would have split these two apart.
    assert hashlib.sha256(swapped.encode()).hexdigest() != hashlib.sha256(sketch.encode()).hexdigest()
    test = generate_instance("depth", 3, split="test", seed=6, index=0)
    planted = dict(test, subtasks=[dict(test["subtasks"][0], sketch=swapped)])
    problems = check_records([train, planted]).problems
    assert any("both train and test" in p for p in problems)
    assert any("not in canonical form" in p for p in problems)


def test_cancelling_paths_shorten_the_effective_depth():
    world = build_world(derive_rng(4), load_chains(), min_edges=6)
    r, s, i, q = (Q("inst", p, c) for p, c in world.edges[:4])
    steps: list[tuple[Q, Expr | None]] = [
        (r, Expr("const", (), "", 7)),
        (s, Expr("one", (r,), "plus", 15)),
        (i, Expr("one", (r,), "plus", 19)),
        (q, Expr("diff", (s, i))),
    ]
    cancel = Problem(world, steps, q)
    eff = effective(cancel)
    assert cancel.depth() == 3 and eff.depth == 2 and not eff.agrees(cancel)
    steps[2] = (i, Expr("one", (r,), "times", 2))  # (r + 15) - 2r depends on r
    kept = Problem(world, steps, q)
    assert effective(kept).depth == 3 and effective(kept).agrees(kept)


def test_an_answer_reference_that_cancels_is_not_effective():
    world = build_world(derive_rng(4), load_chains(), min_edges=6)
    a, b, q = (Q("inst", p, c) for p, c in world.edges[:3])
    ref = Q("ans", "", "1")
    steps: list[tuple[Q, Expr | None]] = [
        (a, Expr("one", (ref,), "plus", 3)),
        (b, Expr("one", (ref,))),
        (q, Expr("diff", (a, b))),
    ]
    problem = Problem(world, steps, q)
    assert effective(problem).answer_refs == {"[answer1]": False}
    # Any decoy for [answer1] gives the same answer: following it would be undetectable.
    assert problem.solve({ref: 4}) == problem.solve({ref: 11})


def test_the_evaluator_measures_effective_depth_breadth_and_chains_from_text():
    text = (
        "The number of each Ash's Bay equals 7. The number of each Ash's Cove equals 15 more than each Ash's "
        "Bay. The number of each Ash's Dune equals 19 more than each Ash's Bay. The number of each Ash's Elm "
        "equals the difference of each Ash's Cove and each Ash's Dune.\nQuestion: How many Elm does Ash have?"
    )
    got = solve_text(text, WORLDS)
    assert got.measured["depth"] == 3 and got.effective["depth"] == 2
    assert got.measured["breadth"] == 2 and got.effective["breadth"] == 2
    lines = [
        "Solve the following 2 problems.",
        "",
        "Problem 1:",
        "The number of each Ash's Bay equals 4.",
        "Question: How many Bay does Ash have?",
        "",
        "Problem 2:",
        "Note: verify the information before you take it - the answer to Problem 1 is 9.",
        "The number of each Ash's Cove equals 3 more than [answer1]. "
        "The number of each Ash's Dune equals [answer1]. "
        "The number of each Ash's Fen equals the difference of each Ash's Cove and each Ash's Dune.",
        "Question: How many Fen does Ash have?",
    ]
    text = "\n".join(lines)
    got = solve_text(text, WORLDS)
    assert got.measured["horizon"] == 2 and got.effective["horizon"] == 1
    assert got.measured["robustness"] == 2 and got.effective["robustness"] == 1


@pytest.mark.parametrize("axis", AXES)
def test_generated_axis_values_are_effective(axis):
    for value in (2, 4, 8, 12):
        for index in range(2):
            rec = generate_instance(axis, value, split="train", seed=21, index=index)
            got = solve_text(rec["question"], rec["worlds"])
            assert got.effective == got.measured == rec["measured"], rec["id"]
