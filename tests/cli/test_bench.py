"""``masorch bench``: make, check and stats through the CLI entry point."""

from __future__ import annotations

import json

import pytest

from masorch.cli.main import main


def test_make_check_stats_round_trip(tmp_path, capsys):
    out = tmp_path / "d.parquet"
    argv = ["bench", "make", "--axis", "depth", "--values", "2-3,8", "--n", "2", "--split", "test"]
    assert main([*argv, "--seed", "4", "-o", str(out), "-q"]) == 0
    again = tmp_path / "again.parquet"
    assert main([*argv, "--seed", "4", "-o", str(again), "-q"]) == 0
    assert out.read_bytes() == again.read_bytes()
    capsys.readouterr()
    assert main(["bench", "check", str(out)]) == 0
    assert "checked 6 instances" in capsys.readouterr().out
    assert main(["bench", "stats", str(out), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert [(c["value"], c["n"]) for c in st["counts"]] == [(2, 2), (3, 2), (8, 2)]


def test_check_exits_1_on_a_disagreement(tmp_path, capsys):
    out = tmp_path / "h.jsonl"
    assert (
        main(["bench", "make", "--axis", "horizon", "--values", "2", "--n", "2", "-o", str(out), "-q"]) == 0
    )
    lines = out.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["answers"][1] = (rec["answers"][1] + 1) % 23
    lines[0] = json.dumps(rec)
    out.write_text("\n".join(lines) + "\n")
    assert main(["bench", "check", str(out)]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("field", "k", "shift"),
    [("decoys", 0, 1), ("attacked_answers", 1, 1), ("attacked_answers", 0, None), ("verification", 0, 1)],
)
def test_check_fails_a_record_whose_decoys_attacks_or_verification_disagree_with_its_text(
    tmp_path, capsys, field, k, shift
):
    out = tmp_path / "r.jsonl"
    argv = ["bench", "make", "--axis", "robustness", "--values", "3", "--n", "1", "-o", str(out), "-q"]
    assert main(argv) == 0
    assert main(["bench", "check", str(out)]) == 0
    rec = json.loads(out.read_text())
    values = rec["verification"]["answers"] if field == "verification" else rec[field]
    # shift None: a value where the text has no note (the needle is never attacked).
    values[k] = 5 if shift is None else (values[k] + shift) % 23
    out.write_text(json.dumps(rec) + "\n")
    capsys.readouterr()
    assert main(["bench", "check", str(out)]) == 1
    assert f"{field if field != 'verification' else 'verification answers'}" in capsys.readouterr().out


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["bench", "make", "--axis", "width", "-o", str(tmp_path / "x.jsonl"), "-q"]) == 2
    assert main(["bench", "make", "--values", "1-3", "-o", str(tmp_path / "x.jsonl"), "-q"]) == 2
    assert main(["bench", "make", "-o", str(tmp_path / "x.csv"), "-q"]) == 2
    assert main(["bench", "check", str(tmp_path / "missing.jsonl")]) == 2
    assert "hint" in capsys.readouterr().err


def test_check_fails_a_parquet_row_whose_training_columns_differ_from_its_record(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "d.parquet"
    assert main(["bench", "make", "--axis", "depth", "--values", "2", "--n", "2", "-o", str(out), "-q"]) == 0
    rows = pq.read_table(out).to_pylist()
    rows[1]["prompt"][0]["content"] += " (edited)"
    rows[1]["reward_model"]["ground_truth"] = "0"
    rows[1]["value"] = 9
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(out)), out)
    capsys.readouterr()
    assert main(["bench", "check", str(out)]) == 1
    text = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "row 1: prompt, reward_model.ground_truth, value differ from the row's record" in text
    assert "row 0" not in text


def _one_instance(tmp_path, capsys, **changes):
    out = tmp_path / "one.jsonl"
    assert main(["bench", "make", "--values", "2", "--n", "1", "-o", str(out), "-q"]) == 0
    rec = json.loads(out.read_text())
    assert (rec["axis"], rec["split"]) == ("depth", "train")  # the documented defaults
    rec.update(changes)
    capsys.readouterr()
    return rec


def test_record_text_and_paths_are_printed_as_text_not_markup(tmp_path, capsys):
    rec = _one_instance(tmp_path, capsys, id="x[/bold]")
    twice = tmp_path / "twice.jsonl"
    twice.write_text((json.dumps(rec) + "\n") * 2)
    assert main(["bench", "check", str(twice)]) == 1
    out = capsys.readouterr().out
    assert "x[/bold]: the id occurs twice" in out
    axis = tmp_path / "axis.jsonl"
    axis.write_text(json.dumps({**rec, "axis": "depth[/x]", "split": "[red]dev"}) + "\n")
    assert main(["bench", "stats", str(axis)]) == 0
    out = capsys.readouterr().out
    assert "depth[/x]" in out and "[red]dev" in out
    odd = tmp_path / "data[v2]" / "x.jsonl"
    assert main(["bench", "make", "--values", "2", "--n", "1", "-o", str(odd)]) == 0
    err = capsys.readouterr().err
    assert f"wrote 1 instances to {odd}" in " ".join(err.split()) and "generating x.jsonl" in err


@pytest.mark.parametrize(
    "option", [["--axis", "depth"], ["--values", "2-12"], ["--n", "10"], ["--split", "test"]]
)
def test_paper_refuses_the_single_file_options_even_at_their_defaults(tmp_path, capsys, option):
    suite = tmp_path / "suite"
    assert main(["bench", "make", "--paper", "-o", str(suite), *option, "-q"]) == 2
    err = capsys.readouterr().err
    assert f"{option[0]} applies to a single file, not to the --paper suite" in err and "hint" in err
    assert not suite.exists()


def test_the_progress_bar_ends_at_its_total(tmp_path, capsys):
    out = tmp_path / "p.jsonl"
    assert main(["bench", "make", "--values", "2-3", "--n", "2", "-o", str(out)]) == 0
    assert "4/4" in capsys.readouterr().err
