"""Eval harness throughput against a loopback OpenAI-compatible server, and the cache's replay speed-up.

The server (in its own process, so it shares no GIL with the harness) answers every call after
``--latency-ms`` ms with the right ``\\boxed{}`` answer of a synthetic sum. The harness runs
``sas:cot`` (one call per sample) over MASBench-layout samples at each concurrency and prints
samples/s and the ratio to the ideal ``concurrency / latency`` (target >= 0.8 at 64), and, as
"direct", the calls/s of the same calls made straight through the backend with no harness (what
the HTTP client stack itself allows on this machine), with the harness's ratio to it, and
"no-HTTP ratio": the harness with in-process backends that sleep the same latency (the harness's
own overhead, with no HTTP client or server), as a ratio to the ideal. Everything
the real path does runs: model string -> OpenAI backend, executor, ledger, trace events, scoring in
a worker thread, one flushed log line per sample.

Then the same evaluation runs twice through a SQLite record/replay cache: the first run records,
the second (a new run directory) replays every call from the cache; it prints the speed-up.

    PYTHONPATH=src python bench/eval_throughput.py [--latency-ms 100] [--concurrency 1 8 32 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from masorch.backends.loopback import LoopbackServer
from masorch.eval.harness import EnvSpec, EvalOptions, evaluate
from masorch.eval.sources import resolve
from masorch.eval.systems import parse_systems

_SUM = re.compile(r"What is (\d+) plus (\d+)\?")


def answer_sum(messages: list[dict[str, Any]]) -> str:
    """The loopback responder: the sum mod 23 of the question's two numbers, boxed."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    match = _SUM.search(text)
    value = (int(match.group(1)) + int(match.group(2))) % 23 if match else 0
    return f"The sum is computed.\n\\boxed{{{value}}}"


def write_samples(path: Path, n: int) -> Path:
    """``n`` MASBench-layout sum questions (one answer each)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            a, b = i, 3 * i + 1
            rec = {
                "id": f"sum-{i}",
                "axis": "depth",
                "value": 2,
                "question": f"Item {i}. What is {a} plus {b}? All calculations are done modulo 23.",
                "answers": [(a + b) % 23],
                "ground_truth": str((a + b) % 23),
            }
            fh.write(json.dumps(rec) + "\n")
    return path


def _serve(port_queue: Any, stop: Any, latency_ms: float) -> None:
    with LoopbackServer(answer_sum, latency_ms=latency_ms, record_bodies=False) as server:
        port_queue.put(server.base_url)
        stop.wait()


class _SleepBackends:
    """Backends that answer like the server after the same latency, without HTTP (harness cost only)."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    def __call__(self, spec: str) -> Any:
        from masorch.backends.scripted import ScriptedBackend

        def reply(messages: Any, config: Any) -> str:
            return answer_sum([{"content": m.content} for m in messages])

        return ScriptedBackend(reply, name=spec, delay_s=self.latency_s)


def _run(
    model: str, data: Path, out: Path, concurrency: int, cache: Path | None, env: EnvSpec | None = None
) -> tuple[float, int, int]:
    systems = parse_systems("sas:cot", model=model)
    env = env or EnvSpec.default(cache_path=cache)
    t0 = time.perf_counter()
    tally = evaluate(
        systems, [resolve(str(data))], out, options=EvalOptions(concurrency=concurrency), env_spec=env
    )
    return time.perf_counter() - t0, tally.done, tally.correct


async def _direct(model: str, n: int, concurrency: int) -> float:
    """The same calls made straight through the backend (no harness): what the HTTP client costs."""
    from masorch.backends.base import GenerateConfig, Message
    from masorch.backends.registry import make_backend

    backend = make_backend(model)
    gate = asyncio.Semaphore(concurrency)
    config = GenerateConfig(max_tokens=64)

    async def one(i: int) -> None:
        async with gate:
            await backend.complete([Message("user", f"Item {i}. What is {i} plus 1?")], config)

    await one(-1)  # client start-up
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    wall = time.perf_counter() - t0
    await backend.aclose()
    return wall


def main() -> None:
    """Parse flags, start the server, print throughput per concurrency and the cache speed-up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--batches", type=int, default=6, help="samples per run = batches x concurrency")
    parser.add_argument("--cache-samples", type=int, default=256)
    args = parser.parse_args()
    queue: Any = mp.Queue()
    stop = mp.Event()
    server = mp.Process(target=_serve, args=(queue, stop, args.latency_ms), daemon=True)
    server.start()
    latency = args.latency_ms / 1000
    try:
        url = queue.get(timeout=30)
        model = f"vllm:{url}#bench"
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            # Warm-up: imports and first-call costs are paid once per process, not per measurement.
            _run(model, write_samples(root / "warm.jsonl", 8), root / "warm", 8, None)
            print(f"loopback latency {args.latency_ms:g} ms per call; system sas:cot (1 call per sample)")
            head = ("concurrency", "samples", "wall s", "samples/s", "ideal", "ratio", "direct", "vs direct")
            print("{:>11} {:>8} {:>8} {:>10} {:>8} {:>6} {:>8} {:>9}   no-HTTP ratio".format(*head))
            for c in args.concurrency:
                n = max(8, args.batches * c)
                data = write_samples(root / f"d{c}.jsonl", n)
                wall, done, correct = _run(model, data, root / f"run-c{c}", c, None)
                assert done == n and correct == n, (done, correct, n)
                rate, ideal = done / wall, c / latency
                direct = n / asyncio.run(_direct(model, n, c))
                sleep_env = EnvSpec(backend_factory=_SleepBackends(latency))
                no_http, _, _ = _run("scripted:sleep", data, root / f"sleep-c{c}", c, None, sleep_env)
                print(
                    f"{c:>11} {done:>8} {wall:>8.2f} {rate:>10.1f} {ideal:>8.1f} {rate / ideal:>6.2f} "
                    f"{direct:>8.1f} {rate / direct:>9.2f}   {n / no_http / ideal:>13.2f}"
                )
            data = write_samples(root / "cache.jsonl", args.cache_samples)
            cache = root / "calls.sqlite"
            c = 32
            first, done, _ = _run(model, data, root / "rec", c, cache)
            second, done2, correct2 = _run(model, data, root / "replay", c, cache)
            assert done2 == done == correct2, (done, done2, correct2)
            print(
                f"cache: {done} samples at concurrency {c}: first run {first:.2f} s (recording), "
                f"re-run {second:.2f} s (replay), speed-up x{first / second:.1f}"
            )
    finally:
        stop.set()
        server.join(timeout=10)


if __name__ == "__main__":
    main()
