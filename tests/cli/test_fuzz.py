"""Fuzzing the CLI entry points (issue 13 item 4): random argv and random files never raise out of
``main`` and never end with an exit code other than the documented 0 (ok), 1 (invalid or failed) and
2 (usage error).

The fast tier runs in the default test run; the long one is ``-m slow``. No example reaches a model:
every model string is one that fails before a backend is built, and the model and data caches point
at an empty directory.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from masorch.cli.main import main

DOCUMENTED_EXIT_CODES = (0, 1, 2)
# Each fails before any request: unknown or malformed providers, scripted (built in code only), a
# local model that is not in the (empty) model cache, a vllm string without a model or an http URL.
MODELS = ("nope:x", "x", "", ":", "scripted:s", "local:no-such-model", "vllm:http://h/v1", "vllm:ftp://h#m")
PLAN = 'create_agent(id="a", kind="cot", task="Add 2 and 3.")'
RECORD = {"id": "s1", "question": "What is 1 plus 2?", "answers": [3], "ground_truth": "3"}
SUFFIXES = (".jsonl", ".parquet", ".yaml", ".txt", "")


@pytest.fixture(scope="module", autouse=True)
def offline_caches(tmp_path_factory) -> Iterator[None]:
    """Empty model and data caches, and no OpenAI settings, for every example."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MASORCH_CACHE", str(tmp_path_factory.mktemp("cache")))
        for name in (
            "OPENAI_API_KEY",
            "MASORCH_OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "MASORCH_OPENAI_BASE_URL",
        ):
            mp.delenv(name, raising=False)
        yield


def _json_values() -> st.SearchStrategy[object]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )


def _records() -> st.SearchStrategy[bytes]:
    """JSONL of near-MASBench records: the known fields with random values, and random extra keys."""
    record = st.fixed_dictionaries(
        {},
        optional={
            "id": _json_values(),
            "question": _json_values(),
            "answers": _json_values(),
            "ground_truth": _json_values(),
            "text": _json_values(),
            "type": st.sampled_from(["header", "sample", "x"]),
            "key": _json_values(),
            "system": _json_values(),
            "dataset": _json_values(),
            "sample_id": _json_values(),
            "systems": _json_values(),
        },
    )
    lines = st.lists(st.one_of(record, _json_values()), max_size=4)
    return lines.map(lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode())


def _yaml() -> st.SearchStrategy[bytes]:
    entry = st.one_of(
        st.sampled_from(["sas:cot", "sas:sc", "mas:high", "mas:low", "sas:nope", "x"]),
        st.fixed_dictionaries(
            {"system": st.sampled_from(["sas:cot", "mas:high", "bad"])},
            optional={
                "model": st.sampled_from(MODELS) | _json_values(),
                "params": _json_values(),
                "budget": _json_values(),
                "repair": _json_values(),
                "name": _json_values(),
            },
        ),
    )
    doc = st.fixed_dictionaries(
        {},
        optional={
            "systems": st.lists(entry, max_size=3) | _json_values(),
            "defaults": st.fixed_dictionaries({}, optional={"model": st.sampled_from(MODELS)})
            | _json_values(),
            "output_dir": _json_values(),
        },
    )
    return doc.map(lambda d: json.dumps(d).encode()) | st.text(max_size=200).map(str.encode)


CONTENT = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
    _records(),
    _yaml(),
    st.just(PLAN.encode()),
    st.just((json.dumps(RECORD) + "\n").encode()),
)


class Workspace:
    """One example's scratch directory: the generated file, and paths named by role."""

    def __init__(self, root: Path, content: bytes, suffix: str) -> None:
        self.root = root
        self.generated = root / f"input{suffix}"
        self.generated.write_bytes(content)
        (root / "existing_file").write_text("x")
        (root / "dir").mkdir()

    def resolve(self, token: str) -> str:
        return {
            "@FILE": str(self.generated),
            "@OUT": str(self.root / "out"),
            "@EXISTING": str(self.root / "existing_file"),
            "@DIR": str(self.root / "dir"),
            "@ROOT": str(self.root),
            "@MISSING": str(self.root / "missing.jsonl"),
        }.get(token, token)


FILES = st.sampled_from(
    ["@FILE", "@FILE", "@FILE", "@DIR", "@MISSING", "@EXISTING", "/dev/null", "/dev/zero"]
)
OUTS = st.sampled_from(["@OUT", "@OUT", "@EXISTING", "@DIR", "/dev/null", "@FILE"])
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)
MODEL = st.sampled_from(MODELS) | TEXT


def _mostly(*valid: str) -> st.SearchStrategy[str]:
    """A valid value most of the time (so examples get past flag checks), else random text."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(valid), TEXT)


def _opt(flag: str, value: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.one_of(st.just([]), value.map(lambda v: [flag, v]))


def _argv(*parts: st.SearchStrategy[list[str]] | list[str]) -> st.SearchStrategy[list[str]]:
    strategies = [p if isinstance(p, st.SearchStrategy) else st.just(p) for p in parts]
    return st.tuples(*strategies).map(lambda chunks: [token for chunk in chunks for token in chunk])


def _flag(flag: str) -> st.SearchStrategy[list[str]]:
    return st.sampled_from([[], [flag]])


def _one(value: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return value.map(lambda v: [v])


ARGV = st.one_of(
    _argv(
        ["validate"],
        _one(FILES),
        _opt("--dialect", _mostly("auto", "calls", "json", "xml")),
        _opt("--dom", _mostly("low", "high")),
        _flag("--json"),
    ),
    _argv(
        ["run"],
        _one(TEXT),
        ["--orchestrator"],
        _one(MODEL),
        ["--subagent"],
        _one(MODEL),
        _opt("--corpus", FILES),
        _opt("--trace", OUTS),
        _opt("--dialect", _mostly("calls", "json", "xml")),
        _opt("--mode", _mostly("plan", "rounds")),
        _opt("--agent-model", _mostly("sc=nope:x", "cot=scripted:s", "nokind=x:y")),
        _opt("--dom", _mostly("low", "high")),
        _flag("--json"),
    ),
    _argv(
        ["eval", "run", "--data"],
        _one(FILES),
        ["--out"],
        _one(OUTS),
        st.one_of(
            _argv(
                ["--systems"],
                _one(_mostly("sas:cot", "mas:high,sas:sc", "sas:cot,sas:cot")),
                ["--model"],
                _one(MODEL),
            ),
            _argv(["--config"], _one(FILES)),
        ),
        _opt("--scorer", _mostly("masbench", "exact", "llm_judge")),
        _opt("--judge-model", MODEL),
        _opt("--limit", st.integers(-1, 3).map(str)),
        _opt("--sample", st.integers(-1, 3).map(str)),
        _opt("--cache", FILES),
        _flag("--resume"),
        ["--no-plots"],
    ),
    _argv(
        ["eval", "report"],
        _one(st.sampled_from(["@ROOT", "@DIR", "@FILE", "@MISSING", "/dev/null"])),
        ["--no-plots"],
    ),
    _argv(["bench"], _one(st.sampled_from(["check", "stats"])), _one(FILES)),
    _argv(["train", "grpo", "--config"], _one(FILES), _opt("--set", TEXT)),
    _argv(["train", "data", "--config"], _one(FILES), ["--out"], _one(OUTS)),
    _argv(
        ["data"],
        _one(_mostly("list", "show")),
        _one(_mostly("aime24", "hotpotqa", "nope")),
        _opt("--cache-dir", OUTS),
    ),
    # Anything at all: random tokens among real commands and flags.
    st.lists(
        st.sampled_from(
            ["run", "validate", "eval", "bench", "train", "models", "data", "--json", "--help", "-v"]
        )
        | TEXT,
        max_size=6,
    ),
)


def _check(argv: list[str], content: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        space = Workspace(Path(tmp), content, suffix)
        code = main([space.resolve(token) for token in argv])
        assert code in DOCUMENTED_EXIT_CODES, (argv, code)


_FAST = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@_FAST
@given(argv=ARGV, content=CONTENT, suffix=st.sampled_from(SUFFIXES))
def test_cli_never_raises_and_exits_with_a_documented_code(argv, content, suffix):
    _check(argv, content, suffix)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=ARGV, content=CONTENT, suffix=st.sampled_from(SUFFIXES))
def test_cli_never_raises_long(argv, content, suffix):
    _check(argv, content, suffix)
