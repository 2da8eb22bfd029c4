"""The independent text evaluator agrees with the stored answers and measured axes."""

from __future__ import annotations

import collections

import pytest

from masorch.masbench.axes import generate_instance
from masorch.masbench.evaluator import EvaluationError, solve_text
from masorch.masbench.instance import AXES

WORLDS = [
    {"levels": [{"category": "Towns", "items": ["Ash"]}, {"category": "Shops", "items": ["Bay", "Cove"]}]}
]


def _agree(n_per_value: int, seed: int) -> int:
    count = 0
    for axis in AXES:
        for value in range(2, 13):
            for index in range(n_per_value):
                split = "train" if index % 3 else "test"
                rec = generate_instance(axis, value, split=split, seed=seed, index=index)
                got = solve_text(rec["question"], rec["worlds"])
                assert got.answers == rec["answers"], rec["id"]
                assert got.measured == rec["measured"], rec["id"]
                count += 1
    return count


def test_evaluator_agrees_on_hundreds_of_instances():
    assert _agree(4, seed=101) == 5 * 11 * 4


@pytest.mark.slow
def test_evaluator_agrees_on_thousands_of_instances():
    assert _agree(100, seed=202) == 5 * 11 * 100


def test_parallel_problems_solve_the_same_alone_and_together():
    for index in range(5):
        rec = generate_instance("parallel", 6, split="train", seed=9, index=index)
        alone = solve_text(rec["question"], rec["worlds"])
        together = solve_text(rec["question"], rec["worlds"], joint=True)
        assert alone.answers == together.answers == rec["answers"]


def test_evaluator_rejects_unstated_and_circular_definitions():
    worlds = [
        {"levels": [{"category": "Towns", "items": ["Ash"]}, {"category": "Shops", "items": ["Bay", "Cove"]}]}
    ]
    text = "The number of each Ash's Bay equals each Ash's Cove.\nQuestion: How many Bay does Ash have?"
    with pytest.raises(EvaluationError):
        solve_text(text, worlds)
    text = (
        "The number of each Ash's Bay equals each Ash's Cove. The number of each Ash's Cove equals 2 more "
        "than each Ash's Bay.\nQuestion: How many Bay does Ash have?"
    )
    with pytest.raises(EvaluationError):
        solve_text(text, worlds)


def test_evaluator_computes_category_totals_from_the_stated_structure():
    worlds = [
        {"levels": [{"category": "Towns", "items": ["Ash"]}, {"category": "Shops", "items": ["Bay", "Cove"]}]}
    ]
    text = (
        "The number of each Ash's Bay equals 20. The number of each Ash's Cove equals 5 times as much as "
        "the difference of each Ash's Bay and 3 more than each Ash's Bay."
        "\nQuestion: How many Shops does Ash have?"
    )
    with pytest.raises(EvaluationError):
        solve_text(text, worlds)  # "3 more than" nested inside a difference is not in the grammar
    text = (
        "The number of each Ash's Bay equals 20. The number of each Ash's Cove equals 5 times as much as "
        "the sum of each Ash's Bay and each Ash's Bay.\nQuestion: How many Shops does Ash have?"
    )
    # Cove = 5 * 40 = 200 = 16 (mod 23); Shops = 20 + 16 = 36 = 13 (mod 23)
    assert solve_text(text, worlds).answers == [13]


def test_answers_are_close_to_uniform_over_0_to_22():
    counts: collections.Counter[int] = collections.Counter()
    for axis in AXES:
        for value in (2, 4, 6, 8):
            for index in range(12):
                rec = generate_instance(axis, value, split="train", seed=77, index=index)
                counts.update(rec["answers"])
    n = sum(counts.values())
    expected = n / 23
    chi2 = sum((counts[k] - expected) ** 2 / expected for k in range(23))
    # 22 degrees of freedom: the 0.1% critical value is 48.3.
    assert set(counts) <= set(range(23))
    assert chi2 < 48.3, (chi2, sorted(counts.items()))


def test_no_answer_is_independent_of_the_stated_constants():
    from masorch.masbench.build import Spec, build_problem
    from masorch.masbench.problem import Expr, Problem, Q
    from masorch.masbench.splits import derive_rng
    from masorch.masbench.vocab import load_chains
    from masorch.masbench.world import build_world

    world = build_world(derive_rng(1), load_chains(), min_edges=8)
    a, b, c = (Q("inst", p, ch) for p, ch in world.edges[:3])
    copy_diff = Problem(
        world,
        [(a, Expr("const", (), "", 4)), (b, Expr("one", (a,))), (c, Expr("diff", (a, b), "plus", 5))],
        c,
    )
    assert copy_diff.degenerate()  # c = a - a + 5 = 5 whatever a is
    ok = build_problem(derive_rng(2), world, [Q("inst", p, ch) for p, ch in world.edges], Spec(depth=2))
    assert not ok.degenerate()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        # Each took minutes with a regex search that rescans the rest of the text from every start.
        ("Question: How many " + "x does " * 100_000, "no question"),
        ("The number of each a " * 50_000 + "\nQuestion: How many Bay does Ash have?", "never stated"),
        ("The number of each Ash's Bay" + " equals 1" * 100_000, "no question"),
    ],
)
def test_a_long_hostile_text_is_read_in_linear_time(text, problem):
    with pytest.raises(EvaluationError, match=problem):
        solve_text(text, WORLDS)


def test_a_long_question_is_read_as_the_greedy_pattern_read_it():
    text = "The number of each Ash's Bay equals 4.\nQuestion: How many Bay does Ash have?"
    assert solve_text(text, WORLDS).answers == [4]
    # The quantity is everything up to the last " does ": here not a category Ash holds.
    long = "Question: How many " + "x does " * 50_000 + "Ash have?"
    with pytest.raises(EvaluationError, match=r"'Ash' cannot hold 'x does x does .*\.\.\.'$"):
        solve_text(long, WORLDS)


def test_a_chain_of_thousands_of_definitions_is_solved_without_recursion():
    n = 5_000  # past Python's recursion limit
    names = [f"Q{i}" for i in range(n + 1)]
    worlds = [{"levels": [{"category": "Cats", "items": ["Aa"]}, {"category": "Dogs", "items": names}]}]
    chain = [f"The number of each Aa's {names[i]} equals each Aa's {names[i + 1]}." for i in range(n)]
    text = (
        " ".join(chain)
        + f" The number of each Aa's {names[n]} equals 3.\nQuestion: How many Q0 does Aa have?"
    )
    got = solve_text(text, worlds)
    assert got.answers == [3] and got.measured["depth"] == n + 1
