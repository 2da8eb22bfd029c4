"""The executed example of docs/train.md's collect section runs and prints what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "train.md"


def test_the_collect_example_prints_what_the_page_shows():
    text = DOC.read_text(encoding="utf-8")
    example = re.search(r"### An executed example.*?```python\n(.*?)```.*?```text\n(.*?)```", text, re.DOTALL)
    assert example is not None
    code, shown = example.groups()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{DOC.name}[collect example]", "exec"), {"__name__": "docs_collect_example"})
    assert out.getvalue().strip() == shown.strip()
