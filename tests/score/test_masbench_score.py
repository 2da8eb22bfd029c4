"""MASBench scoring: mod-23 integers, every box in order, first failure and attack following."""

from __future__ import annotations

import pytest

from masorch.masbench.axes import generate_instance
from masorch.score.masbench import (
    compute_score,
    masbench_reward,
    parse_ground_truth,
    parse_int,
    score_masbench,
    score_record,
)


def test_single_answer_is_compared_mod_23_using_the_last_box():
    assert score_masbench(r"\boxed{9} no, \boxed{40}", [17]).correct
    assert not score_masbench(r"\boxed{40} no, \boxed{9}", [17]).correct
    assert score_masbench(r"$\boxed{\text{17}}$", [17]).correct
    assert not score_masbench("17", [17]).correct  # no box, no answer


def test_multi_answer_needs_every_box_in_order():
    s = score_masbench(r"\boxed{1} \boxed{2} \boxed{3}", [1, 2, 3])
    assert s.correct and s.first_failure is None and s.position_accuracy == 1.0
    s = score_masbench(r"\boxed{1} \boxed{5} \boxed{3}", [1, 2, 3])
    assert not s.correct and s.per_position == (True, False, True) and s.first_failure == 1
    s = score_masbench(r"\boxed{2} \boxed{1}", [1, 2])
    assert s.first_failure == 0
    s = score_masbench(r"\boxed{1}", [1, 2])
    assert not s.correct and s.predicted == (1, None) and s.first_failure == 1
    assert score_masbench(r"\boxed{1<<horizon>>2}", [1, 2]).correct
    assert score_masbench(r"scratch \boxed{9} final: \boxed{1} \boxed{2}", [1, 2]).correct


def test_attack_followed_means_answering_the_decoy():
    rec = generate_instance("robustness", 3, split="train", seed=0, index=0)
    truth = " ".join(f"\\boxed{{{a}}}" for a in rec["answers"])
    assert score_record(truth, rec).attack_followed is False
    fooled = list(rec["answers"])
    fooled[0] = rec["decoys"][0]
    s = score_record(" ".join(f"\\boxed{{{a}}}" for a in fooled), rec)
    assert s.attack_followed is True and s.first_failure == 0
    assert score_masbench(r"\boxed{1}", [1]).attack_followed is None


def test_parsers_and_reward_functions():
    assert parse_int("12.") == 12 and parse_int("-3") == -3 and parse_int(r"5 \pmod{23}") == 5
    assert parse_int("x") is None and parse_int(None) is None
    assert parse_ground_truth("4<<horizon>>0<<horizon>>22") == [4, 0, 22]
    assert compute_score("masbench/horizon", r"\boxed{4}\boxed{0}", "4<<horizon>>0") == 1.0
    assert compute_score("masbench/depth", r"\boxed{5}", "4") == 0.0
    chat = [[{"role": "assistant", "content": r"\boxed{27}"}], r"\boxed{3}"]
    assert masbench_reward(chat, ["4", "5"]) == [1.0, 0.0]


def test_final_only_grades_the_last_answer_like_the_paper():
    rec = generate_instance("parallel", 3, split="train", seed=0, index=0)
    wrong_first = [(rec["answers"][0] + 1) % 23, *rec["answers"][1:]]
    text = " ".join(f"\\boxed{{{a}}}" for a in wrong_first)
    assert not score_record(text, rec).correct
    s = score_record(text, rec, final_only=True)
    assert s.correct and s.per_position == (True,) and s.attack_followed is None
    assert score_masbench(rf"\boxed{{{rec['answers'][-1]}}}", rec["answers"], final_only=True).correct
    assert score_masbench(r"\boxed{1<<horizon>>2}", [5, 2], final_only=True).correct
    assert not score_masbench("no box", [5, 2], final_only=True).correct


def test_eval_offers_the_final_only_grading_as_masbench_final():
    from types import SimpleNamespace

    from masorch.score.registry import get_scorer, reads_reply, scorer_names

    assert {"masbench", "masbench_final"} <= set(scorer_names())
    assert reads_reply("masbench_final")
    sample = SimpleNamespace(answer="3<<horizon>>5", question="", meta={"answers": [3, 5]})
    full, final = get_scorer("masbench"), get_scorer("masbench_final")
    assert (full.name, final.name) == ("masbench", "masbench_final")
    assert not full.score(r"\boxed{4} \boxed{5}", sample).correct
    assert final.score(r"\boxed{4} \boxed{5}", sample).correct


@pytest.mark.parametrize("final_only", [False, True])
@pytest.mark.parametrize(
    ("box", "answer"),
    [
        (r"17 \mod 23", 17),
        (r"17 \bmod 23", 17),
        (r"17 \pmod{23}", 17),
        ("1,000", 1000 % 23),
        ("-1,000", -1000),
    ],
)
def test_a_box_written_with_mod_or_thousands_separators_is_read(box: str, answer: int, final_only: bool):
    assert score_masbench(rf"so \boxed{{{box}}}", [answer], final_only=final_only).correct
