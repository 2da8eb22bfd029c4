"""Property tests: box extraction over arbitrary balanced content, and the algebra of EM and F1."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from masorch.score.math import last_boxed
from masorch.score.qa import exact_match, f1_parts, normalize_answer

_ATOM = st.text(alphabet=st.characters(blacklist_characters="{}\\", blacklist_categories=("Cs",)), max_size=6)


@st.composite
def balanced(draw, depth: int = 3) -> str:
    """A string whose braces are balanced, with nesting up to ``depth``."""
    parts = draw(st.lists(_ATOM, min_size=1, max_size=3))
    if depth > 0 and draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), "{" + draw(balanced(depth - 1)) + "}")
    return "".join(parts)


@given(balanced(), _ATOM, _ATOM)
def test_last_boxed_returns_the_whole_balanced_content(content, before, after):
    assert last_boxed(f"{before}\\boxed{{{content}}}{after}") == content.strip()


@given(balanced(), balanced())
def test_the_later_box_wins(first, second):
    assert last_boxed(f"\\boxed{{{first}}} then \\boxed{{{second}}}") == second.strip()


@given(st.text(max_size=40))
def test_normalize_is_idempotent(text):
    assert normalize_answer(normalize_answer(text)) == normalize_answer(text)


@given(st.text(max_size=40), st.text(max_size=40))
def test_f1_is_bounded_symmetric_and_one_on_exact_match(prediction, gold):
    f1, precision, recall = f1_parts(prediction, gold)
    assert 0.0 <= f1 <= 1.0 and 0.0 <= precision <= 1.0 and 0.0 <= recall <= 1.0
    assert f1_parts(gold, prediction)[0] == f1
    if exact_match(prediction, gold) and normalize_answer(gold):
        assert f1 == 1.0
