"""Scale-out: run work items as Ray tasks on an existing cluster (or a local Ray when no address).

Each Ray worker builds its own :class:`~masorch.run.environment.Environment` from the picklable
:class:`~masorch.run.environment.EnvSpec` (once per worker actor) and runs items with
:func:`~masorch.eval.item.run_item`, exactly as a local run does. Records and trace events come
back to the driver, which writes them to the same log and trace file as a local run, in the order
they finish, so the log and the report do not depend on where samples ran.

Items go to a pool of async actors; at most ``concurrency`` items are in flight across the pool.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from masorch.errors import UsageError, require_extra
from masorch.eval.item import Recorder, WorkItem, failed_record, run_item
from masorch.redact import redact
from masorch.run.environment import Environment, EnvSpec

logger = logging.getLogger(__name__)


class _Worker:
    """The body of a Ray actor: one environment, many concurrent items."""

    def __init__(self, spec: EnvSpec) -> None:
        self._env = Environment(spec)

    async def run(self, item: WorkItem) -> tuple[dict[str, Any], list[Any]]:
        """Run one item; the record and its trace events."""
        return await run_item(item, self._env)

    async def close(self) -> None:
        """Close the backends."""
        await self._env.aclose()


#: How ``--ray`` names a cluster (``local`` is no address: a Ray started on this machine).
ADDRESS_FORMS = "ray://HOST:10001 or HOST:6379"


def check_address(address: str | None) -> None:
    """A UsageError unless ``address`` is None or ``local`` (a local Ray), ``auto`` or ``[ray://]HOST:PORT``.

    Checked without Ray, before anything is written: Ray itself only says ``Invalid address format``.

    >>> check_address("ray://head:10001")
    >>> check_address("bogus")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    masorch.errors.UsageError: --ray 'bogus' is not a Ray cluster address (hint: ...)
    """
    if address in (None, "local", "auto"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(
            f"--ray {redact(address)[:80]!r} is not a Ray cluster address",
            hint=f"use --ray local, or a cluster's address: {ADDRESS_FORMS}",
        )


def connect(address: str | None) -> Any:
    """The ``ray`` module, connected to the cluster at ``address`` (None: a local Ray), once per process.

    A malformed address, a missing ``ray`` or an unreachable cluster is a UsageError.
    """
    check_address(address)
    require_extra("ray", "ray")
    import ray

    if not ray.is_initialized():
        try:
            if address is None:
                ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
        except ConnectionError as exc:
            raise UsageError(
                f"cannot connect to the Ray cluster at {address}: {exc}",
                hint=f"check the address ({ADDRESS_FORMS}) or use --ray local",
            ) from exc
    return ray


def run_ray(
    items: Sequence[WorkItem],
    spec: EnvSpec,
    record: Recorder,
    *,
    concurrency: int,
    address: str | None = None,
    actors: int | None = None,
) -> None:
    """Run ``items`` on Ray with at most ``concurrency`` in flight; ``record`` each result as it lands.

    ``actors`` defaults to the cluster's CPU count (at least 1, at most ``concurrency``).
    """
    if not items:
        return
    ray = connect(address)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    n_actors = max(1, min(actors or cpus, concurrency, len(items)))
    per_actor = max(1, -(-concurrency // n_actors))
    worker_cls = ray.remote(num_cpus=0)(_Worker).options(max_concurrency=per_actor)
    pool = [worker_cls.remote(spec) for _ in range(n_actors)]
    pending: dict[Any, WorkItem] = {}
    queue = list(items)
    next_actor = 0
    try:
        while queue or pending:
            while queue and len(pending) < concurrency:
                item = queue.pop(0)
                pending[pool[next_actor % n_actors].run.remote(item)] = item
                next_actor += 1
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                item = pending.pop(ref)
                t0 = time.monotonic()
                try:
                    rec, events = ray.get(ref)
                except Exception as exc:  # a lost worker is this sample's failure, recorded and counted
                    rec, events = (
                        failed_record(item, f"ray: {type(exc).__name__}: {exc}", time.monotonic() - t0),
                        [],
                    )
                record(rec, events)
    finally:
        for actor in pool:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception as exc:  # closing is best effort; the results are already recorded
                logger.warning("a Ray eval worker did not close cleanly: %s", exc)
            ray.kill(actor)


def shutdown() -> None:
    """Stop the Ray runtime this process started (for tests and scripts)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
