"""The Python example of docs/data.md runs as written (pulls the real wheels: slow, needs the registry)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "data.md"


def python_blocks(text: str) -> list[str]:
    """The fenced ``python`` blocks of a Markdown text."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_the_doc_has_one_python_example():
    assert len(python_blocks(DOC.read_text(encoding="utf-8"))) == 1


@pytest.mark.slow
def test_docs_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("MASORCH_CACHE", str(tmp_path))
    (block,) = python_blocks(DOC.read_text(encoding="utf-8"))
    exec(compile(block, str(DOC), "exec"), {})
    assert (tmp_path / "data" / "hotpotqa" / "corpus.jsonl").is_file()
