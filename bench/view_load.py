"""How fast ``masorch view`` opens a large eval run: a synthetic 10,000-sample run directory, timed.

It writes a run directory as the harness does (``log.jsonl``: a header and one record per sample;
``traces.jsonl``: each sample's events, with the messages and reply of every call), then times, in
a fresh process state: detecting the path and building the first page's data (``/api/run``: the
whole sample table; ``/api/report``: the report's statistics, which the page shows when they come),
serving the page, its scripts and ``/api/run`` over loopback HTTP (what a browser waits for before
the first page shows) and then ``/api/report``, opening the first sample (which indexes
``traces.jsonl``) and a second one (index built), and the one-file export. The target of issue 17:
the first page in under 2 s.

    PYTHONPATH=src python bench/view_load.py [--samples 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import tempfile
import threading
import time
from pathlib import Path

from masorch.eval.harness import TRACE_FILE
from masorch.eval.log import LOG_FILE, sample_key
from masorch.trace.events import LlmCall, NodeFinished, NodeStarted, PlanParsed, RunFinished, RunStarted
from masorch.view.app import ViewApp
from masorch.view.export import export_html
from masorch.view.payload import to_json
from masorch.view.server import ViewServer
from masorch.view.source import detect

SYSTEMS = ("sas:cot", "sas:sc", "mas:low", "mas:high")
PLAN = (
    'create_agent(id="a", kind="cot", task="Solve it.")\ncreate_agent(id="b", kind="cot", task="Check ${a}.")'
)


def _events(run_id: str, question: str, t: float, rng: random.Random) -> list[str]:
    """The events of one two-node MAS run: start, plan, two nodes with a call each, finish."""
    msgs = [
        {"role": "system", "content": "You are a careful solver. " * 8},
        {"role": "user", "content": question},
    ]
    plan = {"agents": [{"id": "a", "kind": "cot", "task": "Solve it.", "params": {}}], "flows": []}
    out = [
        RunStarted(run_id=run_id, ts=t, question=question, mode="orchestrate", dom="high"),
        LlmCall(
            run_id=run_id,
            ts=t + 0.5,
            role="orchestrator",
            model="vllm:m",
            latency_s=0.5,
            messages=msgs,
            response=PLAN,
        ),
        PlanParsed(run_id=run_id, ts=t + 0.5, dialect="calls", text=PLAN, plan=plan),
    ]
    clock = t + 0.5
    for node in ("a", "b"):
        latency = rng.uniform(0.2, 1.5)
        out += [
            NodeStarted(run_id=run_id, ts=clock, node=node, kind="cot", task="Solve it."),
            LlmCall(
                run_id=run_id,
                ts=clock + latency,
                role="subagent",
                node=node,
                model="vllm:m",
                prompt_tokens=120,
                completion_tokens=60,
                latency_s=latency,
                messages=msgs,
                response="Working it out step by step. " * 6 + "\\boxed{7}",
            ),
            NodeFinished(run_id=run_id, ts=clock + latency, node=node, status="ok", answer="7"),
        ]
        clock += latency
    out.append(RunFinished(run_id=run_id, ts=clock, status="ok", answer="7", wall_s=clock - t))
    return [e.model_dump_json() for e in out]


def write_run(directory: Path, samples: int, seed: int = 0) -> None:
    """A run directory of ``samples`` records over :data:`SYSTEMS` and 5 axis values, with traces."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    per_system = samples // len(SYSTEMS)
    header = {
        "type": "header",
        "version": 1,
        "systems": [
            {"name": s, "mode": s.split(":")[0], "variant": s.split(":")[1], "model": "vllm:m"}
            for s in SYSTEMS
        ],
        "datasets": [{"name": "masbench:depth", "n": per_system}],
    }
    t = 1.8e9
    with (directory / LOG_FILE).open("w") as log, (directory / TRACE_FILE).open("w") as traces:
        log.write(json.dumps(header) + "\n")
        for system in SYSTEMS:
            for i in range(per_system):
                run_id = f"{system}-{i}"
                question = f"Item {i}. What is {i} plus {2 * i}? All calculations are done modulo 23."
                traces.write("\n".join(_events(run_id, question, t, rng)) + "\n")
                correct = rng.random() < 0.6
                record = {
                    "type": "sample",
                    "key": sample_key(system, "masbench:depth", f"s{i}"),
                    "system": system,
                    "dataset": "masbench:depth",
                    "sample_id": f"s{i}",
                    "axis": "depth",
                    "value": 1 + i % 5,
                    "status": "ok" if rng.random() < 0.95 else "timeout",
                    "answer": "7",
                    "gold": "7" if correct else "8",
                    "correct": correct,
                    "score": float(correct),
                    "details": {},
                    "error": "",
                    "calls": 3,
                    "prompt_tokens": 360,
                    "completion_tokens": 150,
                    "cost": 0.0004,
                    "wall_s": rng.uniform(1, 4),
                    "trace_id": run_id,
                    "plan_kinds": ["cot", "cot"],
                    "worker": "local",
                    "finished_at": t,
                    "version": 1,
                }
                log.write(json.dumps(record) + "\n")
                t += 1.0


def _http_get(server: ViewServer, path: str) -> bytes:
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=60)
    conn.request("GET", path)
    body = conn.getresponse().read()
    conn.close()
    return body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, default=None, help="write the run here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp) / "run"
        t0 = time.perf_counter()
        write_run(directory, args.samples)
        sizes = {name: (directory / name).stat().st_size / 1e6 for name in (LOG_FILE, TRACE_FILE)}
        print(
            f"wrote {args.samples} samples in {time.perf_counter() - t0:.1f} s: "
            + ", ".join(f"{k} {v:.1f} MB" for k, v in sizes.items())
        )

        t0 = time.perf_counter()
        app = ViewApp(detect(directory))
        run = app.get("/api/run")
        body = to_json(run)
        table_s = time.perf_counter() - t0
        report = to_json(app.get("/api/report"))
        report_s = time.perf_counter() - t0
        print(
            f"in process: sample table built and encoded in {table_s:.2f} s ({len(body) / 1e6:.1f} MB of "
            f"JSON, {len(run['rows'])} rows); with the report ({len(report) / 1e3:.0f} kB) {report_s:.2f} s"
        )

        server = ViewServer(ViewApp(detect(directory)), port=0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            t0 = time.perf_counter()
            for path in (
                "/",
                "/static/echarts.min.js",
                "/static/view.js",
                "/static/view.css",
                "/api/info",
                "/api/run",
            ):
                _http_get(server, path)
            first_page_s = time.perf_counter() - t0
            _http_get(server, "/api/report")
            report_page_s = time.perf_counter() - t0
            print(
                "over HTTP, cold server: first page (page, scripts, /api/info, /api/run: the table) "
                f"{first_page_s:.2f} s; with /api/report {report_page_s:.2f} s"
            )
            key = run["rows"][len(run["rows"]) // 2][0]
            t0 = time.perf_counter()
            _http_get(server, "/api/sample?" + "key=" + key.replace("|", "%7C"))
            first_sample_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            _http_get(server, "/api/sample?key=" + run["rows"][-1][0].replace("|", "%7C"))
            second_sample_s = time.perf_counter() - t0
            print(
                f"first sample (the trace index, started with the server): {first_sample_s:.2f} s; "
                f"next sample: {second_sample_s:.3f} s"
            )
            t0 = time.perf_counter()
            _http_get(server, "/api/run")
            print(f"/api/run again (log unchanged, cached): {time.perf_counter() - t0:.3f} s")
        finally:
            server.shutdown()
            server.server_close()

        t0 = time.perf_counter()
        out = export_html(app, Path(tmp) / "run.html")
        print(f"--html export: {time.perf_counter() - t0:.2f} s, {out.stat().st_size / 1e6:.1f} MB")
        for what, seconds in (("first page", first_page_s), ("first page with the report", report_page_s)):
            print(f"target {what} < 2 s: {'PASS' if seconds < 2.0 else 'FAIL'} ({seconds:.2f} s)")


if __name__ == "__main__":
    main()
