"""Samples of one prompt asked for at the same time go to the server as one request.

A self-consistency node asks for ``n`` samples of the same prompt at once (``sample_index`` 0..n-1),
each a call of its own through the run's gate (budget, ledger, trace, cache). Sent one by one to a
llama.cpp server, every request processes the shared prompt again, so on a CPU the samples cost
``n`` prompts. :class:`SampleBatcher` gathers the calls that differ only in ``sample_index`` and
arrive within a short window, and sends each run of consecutive sample indexes as one request with
``n`` completions: the server processes the prompt once and decodes the samples side by side. Each
caller still gets its own completion, so the agents, the ledger and the cache see no difference.

A caller that is cancelled (a node timeout) leaves its batch; the request is cancelled when no
caller is left, which closes its connection and stops the server generating.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from masorch.backends.base import Completion, GenerateConfig, Message

#: Sends ``n`` completions of one prompt as one request (samples ``config.sample_index`` onwards).
SendN = Callable[[Sequence[Message], GenerateConfig, int], Awaitable[list[Completion]]]


@dataclass
class _Batch:
    messages: Sequence[Message]
    config: GenerateConfig
    #: The event loop whose timer flushes the batch: a batch of another loop is never joined.
    loop: asyncio.AbstractEventLoop
    waiters: dict[int, asyncio.Future[Completion]] = field(default_factory=dict)


class SampleBatcher:
    """Coalesces concurrent calls that differ only in ``sample_index`` into ``n``-completion requests.

    ``send_n`` makes one request; ``max_n`` is the most completions one request may ask for (a
    llama.cpp server needs a free slot per completion); ``window_s`` is how long the first call
    of a prompt waits for its siblings. Greedy calls and calls with tools are sent alone.
    """

    def __init__(self, send_n: SendN, *, max_n: int, window_s: float = 0.01) -> None:
        self._send_n = send_n
        self.max_n = max(1, max_n)
        self.window_s = window_s
        self._open: dict[str, _Batch] = {}
        self._tasks: set[asyncio.Future[None]] = set()

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """This call's completion, sent alone or with the siblings that arrive in the window."""
        if self.max_n == 1 or config.temperature <= 0 or config.tools:
            return (await self._send_n(messages, config, 1))[0]
        key = _key(messages, config)
        loop = asyncio.get_running_loop()
        batch = self._open.get(key)
        # A batch left by a loop that ended inside its window (a cancelled call, then asyncio.run
        # returned) is never flushed: joining it would wait forever.
        if batch is None or batch.loop is not loop:
            batch = _Batch(messages, dataclasses.replace(config, sample_index=0), loop)
            self._open[key] = batch
            loop.call_later(self.window_s, self._flush, key, batch)
        if config.sample_index in batch.waiters:  # the same sample twice: no sharing, send it alone
            return (await self._send_n(messages, config, 1))[0]
        future: asyncio.Future[Completion] = loop.create_future()
        batch.waiters[config.sample_index] = future
        return await future

    def _flush(self, key: str, batch: _Batch) -> None:
        """The window of ``batch`` is over: send its samples, one request per consecutive run."""
        if self._open.get(key) is batch:
            del self._open[key]
        for indexes in _runs(sorted(batch.waiters), self.max_n):
            task = asyncio.ensure_future(self._send(batch, indexes))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: _Batch, indexes: list[int]) -> None:
        """One request for the samples ``indexes`` (consecutive); each waiter gets its completion."""
        futures = [batch.waiters[i] for i in indexes]
        if all(f.done() for f in futures):  # every caller left during the window
            return
        config = dataclasses.replace(batch.config, sample_index=indexes[0])
        request = asyncio.ensure_future(self._send_n(batch.messages, config, len(indexes)))

        def abandon(_: asyncio.Future[Completion]) -> None:
            if all(f.cancelled() for f in futures):
                request.cancel()

        for f in futures:
            f.add_done_callback(abandon)
        try:
            completions = await request
        except asyncio.CancelledError:
            for f in futures:
                f.cancel()
            return
        except BaseException as exc:  # every waiter gets the request's error
            for f in futures:
                if not f.done():
                    f.set_exception(exc)
            return
        for f, completion in zip(futures, completions, strict=True):
            if not f.done():
                f.set_result(completion)


def _key(messages: Sequence[Message], config: GenerateConfig) -> str:
    """What siblings share: the messages and every setting but the sample index."""
    settings = dataclasses.asdict(dataclasses.replace(config, sample_index=0))
    chat = [dataclasses.asdict(m) for m in messages]
    return json.dumps([chat, settings], sort_keys=True, default=str)


def _runs(indexes: list[int], max_n: int) -> list[list[int]]:
    """Consecutive runs of ``indexes`` (sorted), each at most ``max_n`` long.

    >>> _runs([0, 1, 2, 4, 5], 2)
    [[0, 1], [2], [4, 5]]
    """
    runs: list[list[int]] = []
    for i in indexes:
        if runs and runs[-1][-1] == i - 1 and len(runs[-1]) < max_n:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs
