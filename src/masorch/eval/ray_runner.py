"""Scale-out: run work items as Ray tasks on an existing cluster (or a local Ray when no address).

Each Ray worker builds its own :class:`~masorch.run.environment.Environment` from the picklable
:class:`~masorch.run.environment.EnvSpec` (once per worker actor) and runs items with
:func:`~masorch.eval.item.run_item`, exactly as a local run does. Records and trace events come
back to the driver, which writes them to the same log and trace file as a local run, in the order
they finish, so the log and the report do not depend on where samples ran.

Items go to a pool of async actors; at most ``concurrency`` items are in flight across the pool.
The pool starts before the run's log is written: each actor builds the run's models first, so a
model that some worker's host cannot build (an unknown local model, a missing API key there) stops
the run with its usage error, naming the host, instead of failing every sample.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterable, Sequence
from typing import Any

from masorch.errors import MasorchError, UsageError, require_extra
from masorch.eval.item import Recorder, WorkItem, failed_record, run_item
from masorch.redact import redact
from masorch.run.environment import Environment, EnvSpec

logger = logging.getLogger(__name__)


class _Worker:
    """The body of a Ray actor: one environment, many concurrent items."""

    def __init__(self, spec: EnvSpec) -> None:
        self._env = Environment(spec)

    def ready(self, models: list[str]) -> tuple[str, str, str] | None:
        """Build ``models`` now; None, or (this host, the usage error's message, its hint)."""
        try:
            self._env.build_backends(models)
        except MasorchError as exc:
            return socket.gethostname(), exc.message, exc.hint
        return None

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


class RayPool:
    """Async Ray actors, each with its own environment, that run work items.

    :meth:`start` makes the pool and builds the run's models in every actor; :meth:`run` runs items
    with at most ``concurrency`` in flight; :meth:`close` closes every actor's backends.
    """

    def __init__(self, ray: Any, actors: list[Any], concurrency: int) -> None:
        self._ray = ray
        self._actors = actors
        self._concurrency = concurrency

    @classmethod
    def start(
        cls,
        spec: EnvSpec,
        *,
        concurrency: int,
        n_items: int,
        models: Iterable[str] = (),
        address: str | None = None,
        actors: int | None = None,
    ) -> RayPool:
        """A pool of actors, connected to ``address`` (None: a local Ray), each with ``models`` built.

        ``actors`` defaults to the cluster's CPU count (at least 1, at most ``concurrency`` and
        ``n_items``). A model an actor cannot build is a UsageError naming its host; the pool is
        then closed.
        """
        ray = connect(address)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n_actors = max(1, min(actors or cpus, concurrency, n_items))
        per_actor = max(1, -(-concurrency // n_actors))
        worker_cls = ray.remote(num_cpus=0)(_Worker).options(max_concurrency=per_actor)
        pool = cls(ray, [worker_cls.remote(spec) for _ in range(n_actors)], concurrency)
        wanted = list(dict.fromkeys(models))
        try:
            for failure in ray.get([actor.ready.remote(wanted) for actor in pool._actors]):
                if failure is not None:
                    host, message, hint = failure
                    raise UsageError(f"a Ray worker on {host}: {message}", hint=hint)
        except BaseException:
            pool.close()
            raise
        return pool

    def run(self, items: Sequence[WorkItem], record: Recorder) -> None:
        """Run ``items``; ``record`` each result as it lands (a lost worker fails its sample)."""
        ray, pool = self._ray, self._actors
        pending: dict[Any, WorkItem] = {}
        queue = list(items)
        next_actor = 0
        while queue or pending:
            while queue and len(pending) < self._concurrency:
                item = queue.pop(0)
                pending[pool[next_actor % len(pool)].run.remote(item)] = item
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

    def close(self) -> None:
        """Close every actor's backends and stop the actors (best effort: results are recorded)."""
        for actor in self._actors:
            try:
                self._ray.get(actor.close.remote(), timeout=30)
            except Exception as exc:
                logger.warning("a Ray eval worker did not close cleanly: %s", exc)
            self._ray.kill(actor)
        self._actors = []


def shutdown() -> None:
    """Stop the Ray runtime this process started (for tests and scripts)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
