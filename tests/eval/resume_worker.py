"""Runs a slow scripted evaluation in a subprocess, so a test can SIGKILL it mid-run."""

from __future__ import annotations

import sys
from pathlib import Path

from eval_helpers import SumBackendFactory, scorer_factory

from masorch.eval.harness import EnvSpec, EvalOptions, evaluate
from masorch.eval.sources import resolve
from masorch.eval.systems import parse_systems


def main(out: str, data: str, delay_s: float, resume: bool) -> None:
    """Evaluate two systems on ``data`` into ``out`` with slow scripted backends."""
    systems = parse_systems("sas:cot,mas:high", model="scripted:m")
    env = EnvSpec(
        backend_factory=SumBackendFactory(delay_s=delay_s, wrong_every=4), scorer_factory=scorer_factory
    )
    evaluate(
        systems, [resolve(data)], Path(out), options=EvalOptions(concurrency=3, resume=resume), env_spec=env
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "resume")
