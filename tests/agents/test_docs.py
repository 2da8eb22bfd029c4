"""The examples in docs/agents.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "agents.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index):
    code = compile(BLOCKS[index], f"{DOC.name}[example {index + 1}]", "exec")
    exec(code, {"__name__": f"docs_example_{index}"})
