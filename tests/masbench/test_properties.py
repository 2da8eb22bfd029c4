"""Property tests: any axis, value, split, seed and index gives a consistent, self-checking instance."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from masorch.masbench.axes import generate_instance
from masorch.masbench.check import check_record
from masorch.masbench.instance import AXES


@settings(max_examples=25, deadline=None)
@given(
    axis=st.sampled_from(AXES),
    value=st.integers(min_value=2, max_value=12),
    split=st.sampled_from(["train", "test"]),
    seed=st.integers(min_value=0, max_value=2**31),
    index=st.integers(min_value=0, max_value=10**6),
)
def test_any_instance_passes_its_own_check(axis, value, split, seed, index):
    rec = generate_instance(axis, value, split=split, seed=seed, index=index)
    assert check_record(rec) == []
    assert rec["measured"][axis] == value
    assert "'" not in "".join(i for w in rec["worlds"] for lv in w["levels"] for i in lv["items"])
