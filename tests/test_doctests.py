"""Every docstring example in the library runs and holds (doctests are documentation that is checked)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import masorch

# Modules whose import needs an optional extra (torch, trl, llama-cpp) or starts a server.
_NEEDS_EXTRA = ("masorch.train.grpo", "masorch.train.gguf", "masorch.__main__")


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(masorch.__path__, prefix="masorch.")]
    return sorted(n for n in names if not n.startswith(_NEEDS_EXTRA))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:  # an optional extra (serve, train) that is not installed
        if exc.name is None or exc.name.split(".")[0] == "masorch":
            raise
        pytest.skip(f"{name} needs {exc.name}, an optional extra")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
