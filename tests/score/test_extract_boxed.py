"""Box extraction: nested braces, last box, all boxes, malformed input."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from masorch.score.extract import all_boxed, last_boxed


def test_nested_braces_stay_inside_the_box():
    assert all_boxed(r"\boxed{\frac{1}{2}} and \boxed{{3}}") == [r"\frac{1}{2}", "{3}"]


def test_last_box_and_none():
    assert last_boxed(r"try \boxed{4}, no wait \boxed{5}.") == "5"
    assert last_boxed("no box here") is None


def test_unbalanced_box_is_skipped_and_fbox_and_bare_forms_count():
    assert all_boxed(r"\boxed{7 and then \boxed{8}") == ["8"]
    assert all_boxed(r"\fbox{9} \boxed 10.") == ["9", "10"]


@given(
    st.lists(st.integers(min_value=-50, max_value=10_000), min_size=0, max_size=8), st.text(alphabet="ab .\n")
)
def test_every_written_box_is_found_in_order(values, filler):
    text = filler.join(f"\\boxed{{{v}}}" for v in values)
    assert all_boxed(text) == [str(v) for v in values]
