"""How often do the embedded models write a valid plan, and what do the runs score next to one CoT call?

Phase ``plans`` (the validity measurement): for each orchestrator model, DoM (high, low) and decoding
(grammar-constrained, free), one greedy orchestrator call per question, calls dialect, the catalogue a
run without a corpus offers; the plan is checked as `masorch run` checks it, not executed. Results go
to ``OUT/plans.jsonl`` one line per call (resumable; the calls go through ``OUT/cache.sqlite``).

Phase ``runs`` (accuracy and wall time):
For each orchestrator model (qwen2.5-coder-1.5b, qwen2.5-coder-0.5b; the same model runs the
sub-agents) one `masorch eval run` over the same 80 questions: 40 held-out MASBench tasks (test split,
the five axes at values 2 and 3, 4 each) and the first 40 math500-subset questions, with the systems

    sas:cot                         one plain chain-of-thought call (the baseline)
    mas:low  / mas:low-free         DoM LOW, grammar-constrained / free decoding
    mas:high / mas:high-free        DoM HIGH, grammar-constrained / free decoding

all greedy, calls dialect, one shot (no repair). The table gives, per model and system: valid-plan
rate (runs not ended `invalid_plan`), accuracy, mean wall time per question, and the diagnostic codes
of the invalid plans (from the traces). Runs resume (`--resume`) and every call goes through a
record/replay cache, so an interrupted study continues where it stopped and a re-run is free.

    python bench/plan_validity.py --out runs/plan_validity --phase plans  # validity (resumable) + table
    python bench/plan_validity.py --out runs/plan_validity --phase runs   # executed runs (resumable)
    python bench/plan_validity.py --out runs/plan_validity --phase report # tables of what has run

The runs table puts beside each system its paired difference to `sas:cot` on the same questions.
``--log MODEL=PATH`` reads a model's rows from another eval log, e.g. the 1.5B's from study 1's
records (docs/run.md, phase ``runs``):

    python bench/plan_validity.py --out runs/plan_validity5 --phase report \
        --log qwen2.5-coder-1.5b=bench/study/records/study1.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
AXES = ("depth", "horizon", "breadth", "parallel", "robustness")
SYSTEMS = ("sas:cot", "mas:low", "mas:low-free", "mas:high", "mas:high-free")


def _masorch(*args: str) -> None:
    command = [sys.executable, "-m", "masorch", *args]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def make_data(out: Path, dev: bool = False) -> list[str]:
    """The MASBench tasks (one file per axis: the test split, or with ``dev`` the train split) and
    the math500 subset; returns --data arguments."""
    masbench = out / ("masbench-dev" if dev else "masbench")
    split, seed = ("train", "11") if dev else ("test", "7")
    masbench.mkdir(parents=True, exist_ok=True)
    for axis in AXES:
        target = masbench / f"{axis}.jsonl"
        if not target.exists():
            _masorch("bench", "make", "-o", str(target), "--axis", axis, "--values", "2,3", "--n", "4",
                     "--split", split, "--seed", seed, "-q")  # fmt: skip
    _masorch("data", "pull", "math500-subset")
    return [str(masbench), "math500-subset"]


def systems_file(out: Path, model: str, plan_tokens: int) -> Path:
    """The YAML systems file of one model."""
    spec = {
        "defaults": {"model": f"local:{model}", "budget": {"calls": 24}},
        "systems": [
            "sas:cot",
            {"system": "mas:low", "plan_tokens": plan_tokens},
            {"system": "mas:low", "name": "mas:low-free", "constrain": False, "plan_tokens": plan_tokens},
            {"system": "mas:high", "plan_tokens": plan_tokens},
            {"system": "mas:high", "name": "mas:high-free", "constrain": False, "plan_tokens": plan_tokens},
        ],
    }
    path = out / f"systems-{model}.yaml"
    path.write_text(json.dumps(spec, indent=2))  # JSON is YAML
    return path


def run(out: Path, model: str, data: list[str], args: argparse.Namespace) -> None:
    """One eval run of the five systems with ``model`` (resumed if its directory exists)."""
    run_dir = out / model
    command = ["eval", "run", "--config", str(systems_file(out, model, args.plan_tokens))]
    for item in data:
        command += ["--data", item]
    command += ["--limit", str(args.limit), "--out", str(run_dir), "--concurrency", str(args.concurrency)]
    command += ["--cache", str(out / "cache.sqlite"), "--max-tokens", str(args.max_tokens)]
    if (run_dir / "log.jsonl").exists():
        command.append("--resume")
    _masorch(*command)


def _records(run_dir: Path, log: Path | None = None) -> list[dict[str, Any]]:
    lines = (log or run_dir / "log.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("key")]


def _rejections(run_dir: Path) -> dict[str, list[str]]:
    """trace id -> the error codes of its last rejected plan."""
    codes: dict[str, list[str]] = {}
    traces = run_dir / "traces.jsonl"
    if not traces.exists():
        return codes
    for line in traces.read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "plan_rejected":
            errors = [d["code"] for d in event.get("diagnostics", []) if d.get("severity") == "error"]
            codes[event.get("run_id", "")] = errors
    return codes


def questions(out: Path, limit: int, dev: bool = False) -> list[Any]:
    """The 80 questions: the MASBench test tasks, then the first ``limit`` math500-subset problems.

    With ``dev``, questions for developing prompts and grammars, none of them among the 80: the
    MASBench train split (another seed) and math500-subset problems from number 200 on.
    """
    from masorch.eval.datasets.load import load
    from masorch.eval.sources import masbench_sample, read_masbench

    masbench = [
        masbench_sample(r, "masbench") for r in read_masbench(out / ("masbench-dev" if dev else "masbench"))
    ]
    if dev:  # every axis early in the list: round robin over the axes
        by_axis: dict[Any, list[Any]] = collections.defaultdict(list)
        for sample in masbench:
            by_axis[sample.meta.get("axis")].append(sample)
        masbench = [s for group in itertools.zip_longest(*by_axis.values()) for s in group if s is not None]
    math = load("math500-subset", limit=200 + limit)[200:] if dev else load("math500-subset", limit=limit)
    return masbench[: 2 * limit] + math


async def plan_phase(
    out: Path, models: tuple[str, ...], limit: int, plan_tokens: int, concurrency: int, dev: bool = False,
    cells: tuple[tuple[bool, str], ...] = ((True, "high"), (True, "low"), (False, "high"), (False, "low")),
) -> None:  # fmt: skip
    """One orchestrator call per (model, DoM, decoding, question); appends to ``OUT/plans.jsonl``
    (``OUT/plans-dev.jsonl`` for the development questions); ``cells`` are (constrain, DoM) pairs."""
    from masorch.agents import default_registry
    from masorch.agents.registry import offered_registry
    from masorch.backends.registry import BackendSettings, make_backend
    from masorch.plan import DoM
    from masorch.run.orchestrate import OrchestrateOptions, plan_generate_config

    results = out / ("plans-dev.jsonl" if dev else "plans.jsonl")
    done = set()
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done.add((r["model"], r["dom"], r["constrain"], r["id"]))
    items = questions(out, limit, dev)
    catalogue = offered_registry(default_registry(), retriever=False).catalogue()
    settings = BackendSettings(cache_path=out / "cache.sqlite", slots=concurrency)
    for model in models:
        backend = make_backend(f"local:{model}", settings=settings)
        gate = asyncio.Semaphore(concurrency)
        for constrain, dom_name in cells:
            dom = DoM(dom_name)
            options = OrchestrateOptions(
                dom=dom, dialect="calls", constrain=constrain, max_plan_tokens=plan_tokens
            )
            config = plan_generate_config(catalogue, options)
            todo = [q for q in items if (model, dom.value, constrain, q.id) not in done]
            print(f"{model} dom={dom.value} constrain={constrain}: {len(todo)} calls", flush=True)
            job = PlanJob(backend, gate, catalogue, options, config, model, results)
            await asyncio.gather(*[job.one(q) for q in todo])
        await backend.aclose()


class PlanJob:
    """One (model, DoM, decoding) cell: its backend, options and where its records go."""

    def __init__(self, backend: Any, gate: asyncio.Semaphore, catalogue: Any, options: Any, config: Any,
                 model: str, results: Path) -> None:  # fmt: skip
        self.backend, self.gate, self.catalogue = backend, gate, catalogue
        self.options, self.config, self.model, self.results = options, config, model, results

    async def one(self, q: Any) -> None:
        """Plan ``q`` once and append the checked result."""
        from masorch.errors import BackendError
        from masorch.plan import check
        from masorch.run.orchestrate import orchestrator_messages

        opts = self.options
        async with self.gate:
            messages = orchestrator_messages(q.question, self.catalogue, opts)
            try:
                completion = await self.backend.complete(messages, self.config)
            except BackendError as exc:  # a timed-out or failed call is a result too: no plan
                self._write({"model": self.model, "dom": opts.dom.value, "constrain": opts.constrain,
                             "id": q.id, "dataset": q.dataset, "valid": False, "codes": [exc.code],
                             "kinds": [], "direct": False, "finish": "error", "tokens": 0,
                             "latency_s": 0.0, "text": ""})  # fmt: skip
                return
        checked = check(completion.text, opts.dom, self.catalogue, "calls", opts.limits)
        plan = checked.plan
        record = {
            "model": self.model, "dom": opts.dom.value, "constrain": opts.constrain, "id": q.id,
            "dataset": q.dataset, "valid": checked.validated is not None,
            "codes": sorted({d.code for d in checked.diagnostics if d.is_error}),
            "kinds": [a.kind for a in plan.agents] if plan is not None else [],
            "direct": bool(plan is not None and plan.final_answer is not None),
            "finish": completion.finish, "tokens": completion.usage.completion_tokens,
            "latency_s": round(completion.latency_s, 2), "text": completion.text,
        }  # fmt: skip
        self._write(record)

    def _write(self, record: dict[str, Any]) -> None:
        with self.results.open("a") as sink:
            sink.write(json.dumps(record) + "\n")


def plan_report(out: Path, dev: bool = False) -> None:
    """Valid-plan rate per model, DoM and decoding, with the error codes of the invalid plans."""
    results = out / ("plans-dev.jsonl" if dev else "plans.jsonl")
    if not results.exists():
        return
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    from masorch.agents import default_registry
    from masorch.agents.registry import offered_registry
    from masorch.plan import DoM, Limits, check

    # "runs": valid once the agents that feed nothing into the final one are left out (what an
    # orchestrated run does by default, System.prune), checked again from the stored plan text.
    catalogue = offered_registry(default_registry(), retriever=False).catalogue()
    for r in rows:
        pruned = check(r["text"], DoM(r["dom"]), catalogue, "calls", Limits(prune_unused=True))
        r["runs"] = bool(r["text"]) and pruned.validated is not None
    groups: dict[tuple[str, str, bool], list[dict[str, Any]]] = collections.defaultdict(list)
    for r in rows:
        groups[(r["model"], r["dom"], r["constrain"])].append(r)
    head = f"{'model':<20} {'dom':<5} {'decoding':<12} {'n':>4} {'valid':>6} {'runs':>6}"
    head += f" {'masbench':>9} {'math':>6}"
    head += f" {'tokens':>7} {'s/call':>7}  invalid-plan codes"
    print(head)
    print("-" * len(head))
    for (model, dom, constrain), rs in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], not kv[0][2])
    ):

        def rate(sub: list[dict[str, Any]]) -> str:
            return f"{sum(r['valid'] for r in sub) / len(sub):.0%}" if sub else "-"

        codes = collections.Counter(c for r in rs if not r["valid"] for c in r["codes"])
        runs = f"{sum(r['runs'] for r in rs) / len(rs):.0%}"
        tokens = sum(r["tokens"] for r in rs) / len(rs)
        latency = sum(r["latency_s"] for r in rs) / len(rs)
        shown = ", ".join(f"{c} {k}" for k, c in codes.most_common()) or "-"
        decoding = "constrained" if constrain else "free"
        masbench = [r for r in rs if r["dataset"] == "masbench"]
        math = [r for r in rs if r["dataset"] != "masbench"]
        print(
            f"{model:<20} {dom:<5} {decoding:<12} {len(rs):>4} {rate(rs):>6} {runs:>6} {rate(masbench):>9} "
            f"{rate(math):>6} {tokens:>7.0f} {latency:>7.1f}  {shown}"
        )


def _paired_to_cot(rows: list[dict[str, Any]], cot: list[dict[str, Any]]) -> str:
    """This system minus `sas:cot` on the questions both ran: points and 95% paired-bootstrap interval."""
    from masorch.eval.metrics import paired_difference

    base = {r["sample_id"]: r for r in cot}
    # In sample order, as `masorch eval report` pairs them, so both print the same interval.
    shared = sorted((r for r in rows if r["sample_id"] in base), key=lambda r: str(r["sample_id"]))
    if not shared:
        return "-"
    diff = paired_difference(
        [float(bool(r["correct"])) for r in shared],
        [float(bool(base[r["sample_id"]]["correct"])) for r in shared],
    )
    return f"{diff.format(digits=1)} on {len(shared)}"


def report(out: Path, models: tuple[str, ...], logs: dict[str, Path] | None = None) -> None:
    """Print the table: valid-plan rate, accuracy, mean wall time, the paired difference to `sas:cot`
    on the same questions, and the invalid-plan codes; one row per model, dataset and system.

    ``logs`` maps a model to another eval log to read its rows from (study 1's records for the 1.5B,
    docs/run.md); the rest come from ``OUT/MODEL/log.jsonl``.
    """
    head = f"{'model':<20} {'dataset':<15} {'system':<14} {'n':>4} {'valid':>7} {'acc':>7} {'wall s':>7}"
    head += f"  {'minus sas:cot, points [95% CI]':<32} invalid-plan codes"
    print(head)
    print("-" * len(head))
    for model in models:
        log = (logs or {}).get(model, out / model / "log.jsonl")
        if not log.exists():
            continue
        records, rejected = _records(log.parent, log), _rejections(log.parent)
        for dataset in sorted({r["dataset"] for r in records}):
            here = [r for r in records if r["dataset"] == dataset]
            cot = [r for r in here if r["system"] == "sas:cot"]
            for system in sorted({r["system"] for r in here}, key=_system_order):
                rows = [r for r in here if r["system"] == system]
                n = len(rows)
                invalid = [r for r in rows if r["status"] == "invalid_plan"]
                codes = collections.Counter(c for r in invalid for c in set(rejected.get(r["trace_id"], [])))
                valid = "-" if system.startswith("sas") else f"{1 - len(invalid) / n:.0%}"
                accuracy = sum(bool(r["correct"]) for r in rows) / n
                wall = sum(r["wall_s"] for r in rows) / n
                paired = "-" if system == "sas:cot" else _paired_to_cot(rows, cot)
                shown = ", ".join(f"{c} {k}" for c, k in codes.most_common()) or "-"
                print(
                    f"{model:<20} {dataset:<15} {system:<14} {n:>4} {valid:>7} {accuracy:>7.0%} {wall:>7.1f}"
                    f"  {paired:<32} {shown}"
                )


def _system_order(system: str) -> tuple[int, str]:
    return (SYSTEMS.index(system) if system in SYSTEMS else len(SYSTEMS), system)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("runs/plan_validity"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--limit", type=int, default=40, help="Questions per dataset.")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--plan-tokens", type=int, default=768)
    parser.add_argument("--max-tokens", type=int, default=768, help="Completion cap of each sub-agent call.")
    parser.add_argument("--phase", choices=("plans", "runs", "report"), default="plans")
    parser.add_argument(
        "--dev",
        action="store_true",
        help="Development questions (MASBench train split, math500 from 200), never the 80.",
    )
    parser.add_argument("--math-only", action="store_true",
                        help="Phase runs: the math500 questions only (docs/run.md).")  # fmt: skip
    parser.add_argument("--log", action="append", default=[], metavar="MODEL=PATH",
                        help="Report: read MODEL's rows from this eval log.")  # fmt: skip
    parser.add_argument("--cells", default="constrained-high,constrained-low,free-high,free-low",
                        help="Plan-phase cells in order, DECODING-DOM, comma-separated.")  # fmt: skip
    args = parser.parse_args()
    models = tuple(m for m in args.models.split(",") if m)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.phase != "report":
        data = make_data(args.out, args.dev)
    if args.phase == "plans":
        cells = tuple((c.split("-")[0] == "constrained", c.split("-")[1]) for c in args.cells.split(","))
        asyncio.run(
            plan_phase(args.out, models, args.limit, args.plan_tokens, args.concurrency, args.dev, cells)
        )
    if args.phase == "runs":
        for model in models:
            run(args.out, model, [d for d in data if d == "math500-subset"] if args.math_only else data, args)
    plan_report(args.out, args.dev)
    logs = {k: Path(v) for k, _, v in (item.partition("=") for item in args.log)}
    report(args.out, models, logs)


if __name__ == "__main__":
    main()
