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


def _reference_all_boxed(text: str) -> list[str]:
    """The earlier quadratic extractor, kept as the reference: rescans for each box's matching brace."""
    out: list[str] = []
    i = 0
    while True:
        hits = [(pos, m) for m in ("\\boxed", "\\fbox") if (pos := text.find(m, i)) >= 0]
        if not hits:
            return out
        pos, marker = min(hits)
        start = k = pos + len(marker)
        found: tuple[str, int] | None = None
        while k < len(text) and text[k] == " ":
            k += 1
        if k < len(text) and text[k] == "{":
            depth = 0
            for j in range(k, len(text)):
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    found = (text[k + 1 : j], j + 1)
                    break
        elif k > start:
            j = k
            while j < len(text) and not text[j].isspace() and text[j] not in "${}":
                j += 1
            token = text[k:j].rstrip(".,;:")
            found = (token, j) if token else None
        if found is None:
            i = start
            continue
        content, i = found
        out.append(content.strip())


_PIECES = st.sampled_from(["\\boxed", "\\fbox", "{", "}", " ", "a", "b", ".", "$", "\n", "\\"])


@given(st.text(alphabet="\\boxed{}fbox ab", max_size=60) | st.lists(_PIECES, max_size=30).map("".join))
def test_matches_the_reference_extractor(text):
    assert all_boxed(text) == _reference_all_boxed(text)


# Sized so that the earlier extractor, which rescanned the rest of the reply for every unclosed box,
# takes many minutes on them (28,000 characters took about 3 s there, growing with the square): on
# that code these tests hit pytest's timeout; now each is one linear pass.
_MANY = 70_000


def test_a_long_run_of_unclosed_boxes_is_read_in_one_pass():
    text = "\\boxed{" * _MANY  # 490,000 characters
    assert all_boxed(text) == []
    assert all_boxed(text + "7}") == ["7"]  # only the innermost box closes
    assert last_boxed("\\fbox {" * _MANY + " \\boxed 8.") == "8"


def test_deeply_nested_boxes_half_unclosed_are_read_in_one_pass():
    half = _MANY // 2
    text = "\\boxed{" * _MANY + "}" * half  # the outer half never closes; the inner half nests
    assert all_boxed(text) == ["\\boxed{" * (half - 1) + "}" * (half - 1)]
