"""Backend overheads, measured in one run.

* OpenAIBackend against the loopback server at 0 ms latency: calls/s, sequential and concurrent
  (the client's cost per call, server included, both in this process);
* 64 calls in parallel at L ms latency: wall time over L (1.0 would be perfect overlap);
* CachedBackend hits/s;
* with ``--local NAME``: generation and prompt tokens/s of an embedded model (must be pulled).

    PYTHONPATH=src python bench/backends.py [--calls 400] [--local smollm2-135m]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import time
from multiprocessing.connection import Connection

from masorch.backends.base import GenerateConfig, Message
from masorch.backends.cache import CachedBackend, ResponseCache
from masorch.backends.loopback import LoopbackServer
from masorch.backends.openai_compat import OpenAIBackend

ASK = [Message("system", "You are terse."), Message("user", "What is 2 + 2?")]


async def openai_overhead(calls: int) -> None:
    with LoopbackServer(record_bodies=False) as server:
        backend = OpenAIBackend("bench", base_url=server.base_url, api_key="bench")
        await backend.complete(ASK, GenerateConfig())  # connect once
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            await backend.complete(ASK, GenerateConfig())
        sequential = calls / (time.perf_counter() - start)
        cpu_ms = (time.process_time() - cpu) * 1000 / calls
        print(
            f"openai->loopback 0 ms, sequential: {sequential:.0f} calls/s ({1000 / sequential:.2f} ms/call; "
            f"{cpu_ms:.2f} ms CPU/call, client and server together)"
        )
        for width in (16, 64):
            gate = asyncio.Semaphore(width)

            async def one(gate: asyncio.Semaphore = gate) -> None:
                async with gate:
                    await backend.complete(ASK, GenerateConfig())

            start = time.perf_counter()
            await asyncio.gather(*[one() for _ in range(calls)])
            rate = calls / (time.perf_counter() - start)
            print(f"openai->loopback 0 ms, {width} in flight: {rate:.0f} calls/s")
        await backend.aclose()


def _serve_in_child(latency_ms: float, conn: Connection) -> None:
    with LoopbackServer(latency_ms=latency_ms, record_bodies=False) as server:
        conn.send(server.base_url)
        conn.recv()  # stop when the parent says so


async def openai_overhead_out_of_process(calls: int, latency_ms: float, width: int) -> None:
    """The client's cost alone: the server runs in another process (on another core, if free)."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=_serve_in_child, args=(0.0, child), daemon=True)
    process.start()
    url = parent.recv()
    backend = OpenAIBackend("bench", base_url=url, api_key="bench")
    await backend.complete(ASK, GenerateConfig())
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await backend.complete(ASK, GenerateConfig())
    rate = calls / (time.perf_counter() - start)
    cpu_ms = (time.process_time() - cpu) * 1000 / calls
    await backend.aclose()
    parent.send("stop")
    process.join(timeout=10)
    print(
        f"openai->loopback in another process, 0 ms, sequential: {rate:.0f} calls/s; {cpu_ms:.2f} ms CPU/call"
    )

    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=_serve_in_child, args=(latency_ms, child), daemon=True)
    process.start()
    url = parent.recv()
    backend = OpenAIBackend("bench", base_url=url, api_key="bench")
    await asyncio.gather(*[backend.complete(ASK, GenerateConfig()) for _ in range(width)])
    start = time.perf_counter()
    await asyncio.gather(*[backend.complete(ASK, GenerateConfig()) for _ in range(width)])
    wall = time.perf_counter() - start
    await backend.aclose()
    parent.send("stop")
    process.join(timeout=10)
    print(
        f"{width} parallel calls at {latency_ms:.0f} ms, server in another process: "
        f"wall {wall * 1000:.0f} ms = {wall * 1000 / latency_ms:.2f} x latency"
    )


async def parallel_latency(latency_ms: float, width: int) -> None:
    with LoopbackServer(latency_ms=latency_ms, record_bodies=False) as server:
        backend = OpenAIBackend("bench", base_url=server.base_url, api_key="bench")
        await asyncio.gather(*[backend.complete(ASK, GenerateConfig()) for _ in range(width)])  # open conns
        start = time.perf_counter()
        await asyncio.gather(*[backend.complete(ASK, GenerateConfig()) for _ in range(width)])
        wall = time.perf_counter() - start
        await backend.aclose()
    print(
        f"{width} parallel calls at {latency_ms:.0f} ms latency: wall {wall * 1000:.0f} ms "
        f"= {wall * 1000 / latency_ms:.2f} x latency"
    )


async def cache_hits(calls: int) -> None:
    with LoopbackServer(record_bodies=False) as server:
        inner = OpenAIBackend("bench", base_url=server.base_url, api_key="bench")
        cached = CachedBackend(inner, ResponseCache(":memory:"))
        await cached.complete(ASK, GenerateConfig())
        start = time.perf_counter()
        for _ in range(calls):
            await cached.complete(ASK, GenerateConfig())
        rate = calls / (time.perf_counter() - start)
        await cached.aclose()
    print(f"cache hits: {rate:.0f} calls/s")


async def local_speed(name: str) -> None:
    from masorch.backends.local import LocalBackend
    from masorch.backends.models import ModelStore

    backend = LocalBackend(ModelStore().path(name), name=name)
    start = time.perf_counter()
    backend.load()
    print(f"local {name}: load {time.perf_counter() - start:.2f}s, {backend.n_threads} threads")
    long_prompt = [Message("user", "Summarise: " + "The cat sat on the mat and looked at the door. " * 30)]
    short = await backend.complete([Message("user", "Hi")], GenerateConfig(max_tokens=1))
    prompt = await backend.complete(long_prompt, GenerateConfig(max_tokens=1))
    prompt_rate = (prompt.usage.prompt_tokens - short.usage.prompt_tokens) / max(
        prompt.latency_s - short.latency_s, 1e-9
    )
    story = [Message("user", "Write a long story about a lighthouse keeper.")]
    rates = []
    for _ in range(2):
        few = await backend.complete(story, GenerateConfig(max_tokens=8))
        many = await backend.complete(story, GenerateConfig(max_tokens=136))
        made = many.usage.completion_tokens - few.usage.completion_tokens
        rates.append(made / max(many.latency_s - few.latency_s, 1e-9))
    await backend.aclose()
    print(f"local {name}: generate {max(rates):.1f} tok/s (best of 2), prompt {prompt_rate:.0f} tok/s")


def main() -> None:
    """Run the measurements and print one line per figure."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--local", action="append", default=[], help="embedded model name (repeatable)")
    args = parser.parse_args()
    asyncio.run(openai_overhead(args.calls))
    for width in (64, 256):
        asyncio.run(parallel_latency(args.latency_ms, width))
    asyncio.run(openai_overhead_out_of_process(args.calls, args.latency_ms, 64))
    asyncio.run(cache_hits(args.calls))
    for name in args.local:
        asyncio.run(local_speed(name))


if __name__ == "__main__":
    main()
