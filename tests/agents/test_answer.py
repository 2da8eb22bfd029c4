"""Answer extraction, normalisation, voting and usage sums."""

from __future__ import annotations

import pytest

from masorch.agents.answer import (
    boxed_answer,
    extract_answer,
    majority_vote,
    normalize_answer,
    sum_usage,
)
from masorch.backends import Usage


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so the result is \boxed{42}.", "42"),
        (r"\boxed{1} first, then \boxed{\frac{3}{4}}", r"\frac{3}{4}"),
        (r"\boxed{\text{Paris {France}}}", r"\text{Paris {France}}"),
        ("Reasoning...\nAnswer: 17\nThanks", "17"),
        ("**Final Answer:** Blue", "Blue"),
        ("The answer is: 12", "12"),
        ("line one\n\n  last line  \n\n", "last line"),
        (r"broken \boxed{12 never closed", r"broken \boxed{12 never closed"),
        ("", ""),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_unclosed_box_falls_back_to_an_earlier_complete_one():
    assert boxed_answer(r"\boxed{7} and \boxed{8") == "7"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("17.0", "17"),
        (" 17 ", "17."),
        (r"\text{Paris}", "paris"),
        ("$42$", "42"),
        ("1,000", "1000"),
        ("0.50", ".5"),
        (r"\boxed{9}", "9"),
        ("Blue!", "blue"),
        ("New   York", "new york"),
    ],
)
def test_equal_after_normalisation(a, b):
    assert normalize_answer(a) == normalize_answer(b)


@pytest.mark.parametrize(("a", "b"), [("17", "71"), ("1,2", "12"), ("0.5", "5"), ("paris", "rome")])
def test_different_after_normalisation(a, b):
    assert normalize_answer(a) != normalize_answer(b)


def test_majority_vote_counts_normalised_answers():
    vote = majority_vote(["12", "17", "17.0", "twelve", "17 "])
    assert vote is not None
    assert (vote.key, vote.first_index, vote.count, vote.total) == ("17", 1, 3, 5)


def test_majority_vote_tie_goes_to_first_occurrence():
    vote = majority_vote(["b", "a", "a", "b"])
    assert vote is not None and vote.key == "b" and vote.first_index == 0


def test_majority_vote_ignores_empty_answers():
    vote = majority_vote(["", "x", ""])
    assert vote is not None and vote.key == "x" and vote.total == 1
    assert majority_vote(["", "  "]) is None


def test_sum_usage():
    assert sum_usage([]) == Usage()
    assert sum_usage([Usage(1, 2, 1, 0.5), Usage(3, 4, 1, 0.25)]) == Usage(4, 6, 2, 0.75)


def test_docstring_examples():
    import doctest

    import masorch.agents.answer as module

    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
