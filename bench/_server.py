"""A loopback OpenAI-compatible server in its own process, for the benchmarks (no GIL shared with
the code under measurement)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from collections.abc import Iterator
from typing import Any

from masorch.backends.loopback import LoopbackServer, Responder, echo_responder


def _serve(port_queue: Any, stop: Any, latency_ms: float, responder: Responder) -> None:
    """Child process: run the loopback server until told to stop."""
    with LoopbackServer(responder, latency_ms=latency_ms, record_bodies=False) as server:
        port_queue.put(server.base_url)
        stop.wait()


@contextlib.contextmanager
def loopback_process(latency_ms: float, responder: Responder = echo_responder) -> Iterator[str]:
    """The base URL of a loopback server in a child process; the process ends with the block.

    ``responder`` must be picklable (a module-level function).
    """
    queue: Any = mp.Queue()
    stop = mp.Event()
    server = mp.Process(target=_serve, args=(queue, stop, latency_ms, responder), daemon=True)
    server.start()
    try:
        yield queue.get(timeout=30)
    finally:
        stop.set()
        server.join(timeout=10)
