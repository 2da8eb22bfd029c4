"""Math scoring: answer extraction, math-verify equivalence, and the time bound in both isolations."""

from __future__ import annotations

import time

import pytest

import masorch.score.math as math_scorer
from masorch.errors import UsageError
from masorch.eval.datasets import Sample
from masorch.score.math import MathScorer, extract_answer, last_boxed, last_number


def gold(answer: str) -> Sample:
    return Sample("t/0", "a question", answer, "test")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{5}", "5"),
        (r"\boxed{1} then \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\frac{\sqrt{6}}{4}} done", r"\frac{\sqrt{6}}{4}"),
        (r"\boxed{\left\{ 1, 2 \right\}}", r"\left\{ 1, 2 \right\}"),
        (r"\fbox{7}", "7"),
        (r"thus \boxed 42.", "42"),
        (r"thus \boxed 4.5, done", "4.5"),
        (r"\boxed {3} and \boxed 4", "4"),
        (r"\boxed 4 and \boxed {3}", "3"),
        (r"\boxed{unclosed", None),
        ("none", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 3, y = -4", "-4"),
        ("1,234,567 ways", "1234567"),
        ("ratio 3/8", "3/8"),
        ("p = .5", ".5"),
        ("no", None),
    ],
)
def test_last_number(text, expected):
    assert last_number(text) == expected


def test_extract_prefers_the_box_over_later_numbers():
    assert extract_answer(r"\boxed{12} (checked with 3 methods)") == "12"
    assert extract_answer("it is 12, not 13") == "13"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\frac{13}{3}", r"\frac{13}{3}"),
        ("$x = 3$.", "x = 3"),
        (r"12 \text{ inches}", r"12 \text{ inches}"),
        ("x=5 or x=-1", "-1"),  # prose ("or") without LaTeX: its last number, as before
        ("the answer is 42", "42"),
        ("2 + 2\n= 4", "4"),  # several lines: not one formula
        (r"\boxed[9}", "9"),  # a misspelt box: its last number, as before
        (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}"),
        ("2xy", "2xy"),  # letters inside a formula are variables, not prose
        (r"\sqrt{xy}", r"\sqrt{xy}"),
        (r"The answer is \frac{13}{3}", r"\frac{13}{3}"),  # the formula after the prose
        (r"So $x = \frac{13}{3}$.", r"x = \frac{13}{3}"),
        (r"5\sqrt{2} units", r"5\sqrt{2}"),
        ("The answer is:\n-7", "-7"),
        # prose around a plain number: its last number, as before
        ("The answer is **12**.", "12"),
        ("**12**", "12"),
        ("The answer is 12 (twelve).", "12"),
        ("So there are 6 two-digit numbers.", "6"),
        ("The answer is 12!", "12"),
        ("so\n\\[\n12\n\\]", "12"),  # a display-math line ends the reply
        ("x=1\n\\begin{align*}x&=12\n\\end{align*}", "12"),
        (r"Final answer: $\frac{1}{2}$", r"\frac{1}{2}"),
        ("1+" * 150 + "1", "1"),  # too long for one formula
    ],
)
def test_extract_reads_a_bare_formula_whole(text, expected):
    assert extract_answer(text) == expected


CASES = [
    (r"The answer is \boxed{204}.", "204", True),
    (r"\boxed{0.75}", r"\frac{3}{4}", True),
    ("so it is 0.5", "1/2", True),
    (r"\boxed{\dfrac{1}{2}}", r"\frac{1}{2}", True),
    (r"\boxed{\frac{\sqrt{6}}{4}}", r"\frac{\sqrt{6}}{4}", True),
    (r"\boxed{\frac{\sqrt{6}}{2}}", r"\frac{\sqrt{6}}{4}", False),
    (r"\boxed{[-1/4,0)\cup(0,2)}", r"[-\frac{1}{4}, 0) \cup (0, 2)", True),
    (r"\boxed{(-1/4,0)\cup(0,2)}", r"[-\frac{1}{4}, 0) \cup (0, 2)", False),
    (r"\boxed{10^{2^{n}-n-1}}", "10^{2^n-n-1}", True),
    (r"\boxed{2\sqrt{2}}", r"\sqrt{8}", True),
    ("The total is 1,000 dollars", "1000", True),
    (r"Final: \boxed{205}", "204", False),
    (r"\boxed{-50}", "-50", True),
    (r"\boxed{50}", "-50", False),
    # a bare answer is read as one formula, not by its last number (which is 3, 2, 3)
    (r"\frac{13}{3}", "3", False),
    (r"5\sqrt{2}", "2", False),
    ("(-2, 3)", "3", False),
    (r"\$18.90.", "18.90", True),
    ("240 outfits", "240", True),
    (r"The answer is \frac{13}{3}.", "3", False),
    (r"\frac{ab}{2}", r"\frac{ab}{2}", True),
]


@pytest.fixture(scope="module")
def scorer():
    with MathScorer(timeout_s=20, workers=2) as s:
        yield s


@pytest.mark.parametrize(("prediction", "answer", "correct"), CASES)
def test_math_scorer_in_a_worker_process(scorer, prediction, answer, correct):
    result = scorer.score(prediction, gold(answer))
    assert result.correct is correct
    assert result.value == float(correct)
    assert result.details["method"] == "math_verify"


def test_no_answer_scores_zero_with_a_reason(scorer):
    result = scorer.score("I do not know.", gold("3"))
    assert (result.correct, result.value, result.details["error"]) == (False, 0.0, "no answer found")


def test_process_isolation_kills_a_runaway_comparison():
    with MathScorer(timeout_s=1.5, workers=1) as s:
        assert s.score(r"\boxed{1}", gold("1")).correct  # start the worker outside the timed part
        start = time.perf_counter()
        slow = s.score(r"\boxed{2^{10^{10^{10}}}}", gold("3"))
        elapsed = time.perf_counter() - start
        assert slow.details["error"] == "timed out after 1.5s" and not slow.correct
        assert elapsed < 5
        # the killed worker is replaced: the scorer keeps working
        assert s.score(r"\boxed{3}", gold("3")).correct


def test_worker_threads_share_one_process_scorer(scorer):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda c: scorer.score(c[0], gold(c[1])).correct, CASES))
    assert results == [c[2] for c in CASES]


def test_thread_isolation_scores_and_times_out(monkeypatch):
    assert MathScorer(isolation="thread", timeout_s=30).score(r"\boxed{\frac{2}{4}}", gold("0.5")).correct
    with MathScorer(isolation="thread", timeout_s=0.3) as s:
        monkeypatch.setattr(math_scorer, "math_equal", lambda p, g: time.sleep(3))
        start = time.perf_counter()
        result = s.score(r"\boxed{1}", gold("1"))
        assert result.details["error"] == "timed out after 0.3s"
        assert time.perf_counter() - start < 2


def test_thread_isolation_reports_math_verify_errors(monkeypatch):
    def boom(prediction, gold):
        raise ValueError("bad latex")

    monkeypatch.setattr(math_scorer, "math_equal", boom)
    result = MathScorer(isolation="thread").score(r"\boxed{1}", gold("1"))
    assert result.details["error"] == "ValueError: bad latex" and not result.correct


def test_closed_scorer_and_bad_options_are_usage_errors():
    s = MathScorer(isolation="thread")
    s.close()
    with pytest.raises(UsageError, match="closed"):
        s.score("1", gold("1"))
    with pytest.raises(UsageError):
        MathScorer(isolation="fork")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        MathScorer(timeout_s=0)
