"""The Ray path on a local Ray (about 20 s on 2 cores): the same log and report as a local run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from eval_helpers import SumBackendFactory, scorer_factory, write_sums

from masorch.eval.harness import EnvSpec, EvalOptions, evaluate
from masorch.eval.log import RunLog
from masorch.eval.report import summarize
from masorch.eval.sources import resolve
from masorch.eval.systems import parse_systems

ray = pytest.importorskip("ray")
HERE = Path(__file__).parent

VOLATILE = {"wall_s", "finished_at", "trace_id", "worker"}


@pytest.fixture
def local_ray(monkeypatch: pytest.MonkeyPatch):
    # Workers import the test helpers (the picklable scripted backends) by module name.
    src = str(HERE.parent.parent / "src")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([src, str(HERE), os.environ.get("PYTHONPATH", "")]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def test_ray_run_equals_local_run(tmp_path: Path, local_ray: None) -> None:
    data = resolve(str(write_sums(tmp_path / "s.jsonl", 5, values=(2, 3))))
    systems = parse_systems("sas:cot,mas:high", model="scripted:m")
    env = EnvSpec(
        backend_factory=SumBackendFactory(wrong_every=2, fail_items=(4,)), scorer_factory=scorer_factory
    )
    local = evaluate(systems, [data], tmp_path / "local", env_spec=env)
    remote = evaluate(
        systems, [data], tmp_path / "ray", options=EvalOptions(use_ray=True, concurrency=6), env_spec=env
    )
    assert (
        (remote.done, remote.correct, remote.not_ok)
        == (local.done, local.correct, local.not_ok)
        == (20, 8, 4)
    )
    h1, r1 = RunLog.read(tmp_path / "local")
    h2, r2 = RunLog.read(tmp_path / "ray")

    def strip(recs):
        return sorted(
            ({k: v for k, v in r.items() if k not in VOLATILE} for r in recs), key=lambda r: r["key"]
        )

    assert strip(r1) == strip(r2)
    s1, s2 = summarize(h1, r1, n_boot=300), summarize(h2, r2, n_boot=300)
    assert [(c.system, c.value, c.accuracy) for c in s1.cells] == [
        (c.system, c.value, c.accuracy) for c in s2.cells
    ]
    assert (tmp_path / "ray" / "traces.jsonl").stat().st_size > 0


def test_cli_ray_flag_runs_on_the_ray_cluster(tmp_path: Path, local_ray: None) -> None:
    import typer
    from typer.testing import CliRunner

    from masorch.cli import eval as eval_cli

    data = write_sums(tmp_path / "s.jsonl", 3)
    env = EnvSpec(backend_factory=SumBackendFactory(wrong_every=3), scorer_factory=scorer_factory)
    app = typer.Typer()
    eval_cli.register(app, env_factory=lambda args: env)
    out = tmp_path / "o"
    args = ["eval", "run", "--systems", "sas:cot", "--model", "scripted:m", "--data", str(data)]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--ray", "local", "--no-plots"])
    assert result.exit_code == 0, result.output
    _, records = RunLog.read(out)
    assert sorted(r["correct"] for r in records) == [False, True, True]
    assert all(not r["worker"].endswith(f":{os.getpid()}") for r in records), "ran in Ray workers"
