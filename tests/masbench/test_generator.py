"""The generator: every axis at every value measures exactly as requested, within its controls."""

from __future__ import annotations

import json

import pytest

from masorch.errors import UsageError
from masorch.masbench.axes import CONTROLS, generate_instance, within_controls
from masorch.masbench.instance import AXES, GENERATOR_VERSION
from masorch.masbench.vocab import load_chains, parse_chain

VALUES = range(2, 13)


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("split", ["train", "test"])
def test_measured_axis_equals_requested_for_every_value(axis, split):
    for value in VALUES:
        for index in range(3):
            rec = generate_instance(axis, value, split=split, seed=11, index=index)
            assert rec["measured"][axis] == value, (axis, value, index)
            assert within_controls(rec)
            assert list(rec["controls"]) == list(AXES) and rec["controls"][axis] == [value, value]
            assert set(CONTROLS[axis]) == set(AXES) - {axis}
            assert rec["generator_version"] == GENERATOR_VERSION
            assert len(rec["answers"]) == len(rec["subtasks"])
            assert all(0 <= a <= 22 for a in rec["answers"])
            assert rec["ground_truth"] == "<<horizon>>".join(map(str, rec["answers"]))


def test_same_arguments_give_identical_records_and_different_seeds_differ():
    a = generate_instance("robustness", 3, split="train", seed=7, index=4)
    b = generate_instance("robustness", 3, split="train", seed=7, index=4)
    c = generate_instance("robustness", 3, split="train", seed=8, index=4)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a["question"] != c["question"]


def test_task_text_states_the_rules_and_chains_answers():
    rec = generate_instance("horizon", 3, split="train", seed=1, index=0)
    text = rec["question"]
    assert "modulo 23" in text and "nothing unmentioned is assumed" in text
    assert "Problem 3:" in text and "[answer2]" in text
    assert rec["task_graph"]["edges"] == [["s1", "s2"], ["s2", "s3"]]


def test_robustness_has_a_needle_and_adversarial_notes_with_stored_decoys():
    rec = generate_instance("robustness", 4, split="test", seed=2, index=0)
    subs = rec["subtasks"]
    assert subs[0]["kind"] == "needle" and "The grass is green." in subs[0]["body"]
    assert str(subs[0]["needle"]["number"]) in rec["question"]
    for k in range(1, 4):
        decoy = rec["decoys"][k - 1]
        assert decoy is not None and decoy != rec["answers"][k - 1]
        assert f"the answer to Problem {k} is {decoy}." in subs[k]["note"]
        assert rec["attacked_answers"][k] is not None
    assert rec["decoys"][-1] is None


def test_parallel_sub_problems_use_disjoint_worlds():
    rec = generate_instance("parallel", 12, split="train", seed=3, index=0)
    names = [item for w in rec["worlds"] for lv in w["levels"] for item in lv["items"]]
    assert len(names) == len(set(names))
    assert rec["task_graph"]["edges"] == []


def test_breadth_above_four_is_built_with_an_exact_hub():
    rec = generate_instance("breadth", 8, split="train", seed=4, index=1)
    widths = [len(set(e["inputs"])) for e in rec["subtasks"][0]["equations"]]
    assert max(widths) == 8


def test_bad_axis_and_value_are_usage_errors():
    with pytest.raises(UsageError):
        generate_instance("width", 3, split="train", seed=0, index=0)
    with pytest.raises(UsageError):
        generate_instance("depth", 13, split="train", seed=0, index=0)
    with pytest.raises(UsageError):
        generate_instance("depth", 3, split="dev", seed=0, index=0)


def test_vocabulary_is_four_chains_of_four_levels_with_unique_names():
    chains = load_chains()
    assert len(chains) == 4
    for chain in chains:
        assert len(chain.levels) == 4
        assert all(len(lv.subcategories) >= 5 for lv in chain.levels)
        assert all(len(s.items) >= 12 for lv in chain.levels for s in lv.subcategories)


def test_vocabulary_rejects_apostrophes_and_repeats():
    def names(prefix: str, i: int) -> str:
        return ", ".join(f"{prefix}{'abcd'[i]}{'abcdefgh'[j]}" for j in range(8))

    good = "chain c\n" + "".join(
        f"level L{i}\nsub a: {names('N', i)}\nsub b: {names('M', i)}\n" for i in range(4)
    )
    assert len(parse_chain(good).levels) == 4
    with pytest.raises(UsageError):
        parse_chain(good.replace("Nab", "Salt And Pepper"))
    with pytest.raises(UsageError):
        parse_chain(good.replace("Nab", "Bob's"))
    with pytest.raises(UsageError):
        parse_chain(good.replace("Nab", "Mdc"))


def test_breadth_is_also_built_as_a_category_total_over_exactly_b_children():
    found = 0
    for index in range(30):
        rec = generate_instance("breadth", 7, split="train", seed=6, index=index)
        query = rec["subtasks"][0]["equations"][-1]
        if query["rhs"] == "total":
            found += 1
            assert len(query["inputs"]) == 7 and rec["measured"]["breadth"] == 7
            assert rec["question"].rstrip().endswith("have?")
    assert found >= 3
