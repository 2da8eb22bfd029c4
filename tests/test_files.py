"""The bounded readers every CLI input goes through: size caps, text checks, bounded YAML."""

from __future__ import annotations

import os
import stat
import time
import tracemalloc

import pytest

from masorch.errors import UsageError
from masorch.eval.systems import load_systems_file, systems_from_yaml
from masorch.files import (
    MAX_YAML_NODES,
    atomic_writer,
    iter_jsonl,
    iter_line_spans,
    iter_lines,
    load_yaml,
    load_yaml_file,
    read_bytes,
    read_text,
)
from masorch.train.config import TrainConfig, load_config


def bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\nsystems: [sas:cot]\n"


def test_an_alias_bomb_is_rejected_fast_and_small(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb())
    loaders = (load_yaml_file, load_config, load_systems_file)
    for load in loaders:  # once first, so that lazy imports are not counted
        with pytest.raises(UsageError, match="expands to more than"):
            load(path)
    tracemalloc.start()
    start = time.process_time()  # CPU time: another job on the machine does not count
    for load in loaders:
        with pytest.raises(UsageError, match="expands to more than"):
            load(path)
    elapsed = time.process_time() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 2
    assert peak < 20 * 1024 * 1024


def test_aliases_within_the_bound_still_load():
    assert load_yaml("a: &x {k: [1, 2]}\nb: *x\nc: *x") == {
        "a": {"k": [1, 2]},
        "b": {"k": [1, 2]},
        "c": {"k": [1, 2]},
    }
    wide = "[" + ", ".join(["1"] * 999) + "]"  # 1,000 nodes: the list and its items
    assert len(load_yaml(wide, max_nodes=1000)) == 999
    with pytest.raises(UsageError, match="more than 999 values"):
        load_yaml(wide, max_nodes=999)
    assert MAX_YAML_NODES >= 100_000  # a real config is far below this


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &a [*a]", "refers to itself"),
        ("a: &a {b: *a}", "refers to itself"),
        ("[" * 5000 + "]" * 5000, "nested too deeply|not valid YAML"),
        ("a: [1, 2", "not valid YAML"),
        ("a: !!python/object:os.system ls", "not valid YAML"),
        ("d: 2024-13-45", "cannot read"),
        ("x: *undefined", "not valid YAML"),
        ("a: \x07", "not valid YAML"),
        ("max_steps: 3\nlr: 1\nmax_steps: 5\n", r"'max_steps' is given twice \(line 3\)"),
        ("a: {k: 1, k: 2}", "'k' is given twice"),
    ],
)
def test_bad_yaml_is_a_usage_error(text, message):
    with pytest.raises(UsageError, match=message):
        load_yaml(text)


def test_keys_that_differ_in_type_are_two_keys():
    assert load_yaml('1: a\n"1": b\n') == {1: "a", "1": "b"}


def test_a_yaml_error_says_where_in_the_named_text(tmp_path):
    with pytest.raises(
        UsageError, match=r"the systems file is not valid YAML: .*\(line 2, column 1\)"
    ) as err:
        load_yaml("a: [1,\n", what="systems file")
    assert "<unicode string>" not in str(err.value)
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        TrainConfig.load(tmp_path / "dir.yaml")


def test_a_config_over_the_size_cap_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("systems: [sas:cot]\n# " + "x" * (2 * 1024 * 1024) + "\n")
    with pytest.raises(UsageError, match="larger than 1 MiB"):
        load_systems_file(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("systems: [sas:cot]\ndefaults: 5", "defaults"),
        ("systems: [{system: sas:cot, model: 5}]", "model must be str"),
        ("systems: [{system: sas:cot, model: m:x, budget: [1]}]", "budget must be a mapping"),
        ("systems: [{system: sas:cot, model: m:x, agent_models: {sc: 3}}]", "agent_models"),
        ("systems: [{system: sas:cot, model: m:x, repair: yes}]", "repair must be int"),
        ("systems: [[1]]", "bad system entry"),
    ],
)
def test_systems_file_values_of_the_wrong_type_are_usage_errors(text, message):
    with pytest.raises(UsageError, match=message):
        systems_from_yaml(text)


def test_read_text_is_bounded_and_checks_text(tmp_path):
    with pytest.raises(UsageError, match="larger than"):
        read_text("/dev/zero", max_bytes=1024)
    with pytest.raises(UsageError, match="larger than"):
        read_bytes("/dev/zero", max_bytes=1024)
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(UsageError, match="not UTF-8 text"):
        read_text(tmp_path / "latin1.txt")
    (tmp_path / "nul.txt").write_bytes(b"abc\x00def")
    with pytest.raises(UsageError, match="binary"):
        read_text(tmp_path / "nul.txt")
    with pytest.raises(UsageError, match="no such file"):
        read_text(tmp_path / "missing.txt")
    with pytest.raises(UsageError, match="is a directory"):
        read_text(tmp_path)
    (tmp_path / "ok.txt").write_text("héllo\n")
    assert read_text(tmp_path / "ok.txt") == "héllo\n"


def test_iter_lines_streams_with_a_cap_per_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"a\r\nb\n" + b"c" * 100 + b"\n")
    assert list(iter_lines(path, max_line_bytes=100)) == [(1, "a"), (2, "b"), (3, "c" * 100)]
    path.write_bytes(b"a\n" + b"c" * 101 + b"\n")
    with pytest.raises(UsageError, match=r"x.jsonl:2: a line longer than"):
        list(iter_lines(path, max_line_bytes=100))
    with pytest.raises(UsageError, match="line longer than"):
        next(iter_lines("/dev/zero", max_line_bytes=1000))
    path.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(UsageError, match=r"line 2\) is not UTF-8"):
        list(iter_lines(path))


def test_line_spans_give_byte_ranges_and_skip_a_torn_tail_on_request(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c"')
    spans = list(iter_line_spans(path, complete_only=True))
    assert [(s.number, s.start, s.end, s.text) for s in spans] == [
        (1, 0, 9, '{"a": 1}'),
        (2, 9, 18, '{"b": 2}'),
    ]
    resumed = list(iter_line_spans(path, start=9, first_number=2))
    assert [(s.number, s.text) for s in resumed] == [(2, '{"b": 2}'), (3, '{"c"')]
    assert [n for n, _ in iter_jsonl(path, hint="h", complete_only=True)] == [1, 2]
    with pytest.raises(UsageError, match=r"x.jsonl:3: not JSON"):
        list(iter_jsonl(path, hint="h"))


def test_a_replaced_file_gets_the_mode_a_plain_write_would_give(tmp_path):
    # mkstemp's 0600 must not leak: a report or a page written for others to read stays readable.
    old = os.umask(0o022)
    try:
        new = tmp_path / "new.md"
        with atomic_writer(new, "w") as fh:
            fh.write("x")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        shared = tmp_path / "shared.md"
        shared.write_text("old")
        shared.chmod(0o664)
        with atomic_writer(shared, "w") as fh:
            fh.write("new")
        assert stat.S_IMODE(shared.stat().st_mode) == 0o664 and shared.read_text() == "new"
    finally:
        os.umask(old)


def test_an_exponent_without_a_dot_is_a_number(tmp_path):
    # YAML 1.1 read `learning_rate: 1e-4` as text, which the config refused as "must be float".
    assert load_yaml("a: 1e-4\nb: -3E+2\nc: '1e-4'\nd: 12\ne: 1e4x") == {
        "a": 1e-4,
        "b": -300.0,
        "c": "1e-4",
        "d": 12,
        "e": "1e4x",
    }
    path = tmp_path / "c.yaml"
    path.write_text("train: [{kind: masbench_gen}]\nlearning_rate: 1e-4\n")
    assert load_config(path).learning_rate == 1e-4


def test_a_write_refused_names_the_file_asked_for(tmp_path):
    target = tmp_path / "missing_dir" / "report.md"  # mkstemp fails in a directory that is not there
    with pytest.raises(OSError) as err, atomic_writer(target, "w") as fh:
        fh.write("x")
    assert err.value.filename == str(target)
