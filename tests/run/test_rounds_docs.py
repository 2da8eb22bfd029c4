"""The executed example of docs/rounds.md runs and prints what the page shows; its YAML parses."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from masorch.eval.systems import systems_from_yaml

DOC = Path(__file__).parents[2] / "docs" / "rounds.md"
TEXT = DOC.read_text(encoding="utf-8")
#: The sandbox's temporary directory differs from run to run.
_SANDBOX_DIR = re.compile(r"masorch-sandbox-[\w-]+")


def _normal(text: str) -> str:
    return _SANDBOX_DIR.sub("masorch-sandbox-DIR", text).strip()


def test_the_example_prints_what_the_page_shows():
    example = re.search(r"## An executed example.*?```python\n(.*?)```.*?```text\n(.*?)```", TEXT, re.DOTALL)
    assert example is not None
    code, shown = example.groups()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{DOC.name}[example]", "exec"), {"__name__": "docs_rounds_example"})
    assert _normal(out.getvalue()) == _normal(shown)


def test_the_yaml_systems_parse():
    blocks = re.findall(r"```yaml\n(.*?)```", TEXT, re.DOTALL)
    assert blocks
    for block in blocks:
        (system,) = systems_from_yaml(block, model="local:m")
        assert system.name == "mas:rounds" and set(system.pool) == {"big", "coder"}
        assert system.pool["coder"].model.startswith("vllm:http://127.0.0.1:8000/v1#")
