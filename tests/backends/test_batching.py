"""Samples of one prompt share one request: the batcher, and complete_n on a real HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from masorch.backends.base import Completion, GenerateConfig, Message, Usage
from masorch.backends.batching import SampleBatcher
from masorch.backends.loopback import LoopbackServer
from masorch.backends.openai_compat import OpenAIBackend
from masorch.errors import BackendError

pytestmark = pytest.mark.timeout(60)

ASK = [Message("user", "what is two plus two")]
SAMPLE = GenerateConfig(temperature=0.7, seed=3)


class Recorder:
    """A ``send_n`` that records each request's first sample index and size."""

    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        self.requests: list[tuple[int, int]] = []
        self.cancelled = 0
        self.delay_s, self.fail = delay_s, fail

    async def __call__(self, messages: Sequence[Message], config: GenerateConfig, n: int) -> list[Completion]:
        self.requests.append((config.sample_index, n))
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail:
            raise BackendError("server down", hint="start it", code="backend_connection")
        first = config.sample_index
        return [Completion(text=f"sample {first + j}", usage=Usage(calls=1)) for j in range(n)]


def samples(indexes: Sequence[int], config: GenerateConfig = SAMPLE) -> list[GenerateConfig]:
    return [GenerateConfig(**{**config.__dict__, "sample_index": i}) for i in indexes]


async def test_concurrent_samples_of_one_prompt_go_as_one_request() -> None:
    send = Recorder()
    batcher = SampleBatcher(send, max_n=8)
    out = await asyncio.gather(*(batcher.complete(ASK, c) for c in samples(range(5))))
    assert [c.text for c in out] == [f"sample {i}" for i in range(5)]
    assert send.requests == [(0, 5)]


async def test_runs_are_consecutive_and_capped_by_the_slots() -> None:
    send = Recorder()
    batcher = SampleBatcher(send, max_n=2)
    out = await asyncio.gather(*(batcher.complete(ASK, c) for c in samples([0, 1, 2, 4, 5])))
    assert [c.text for c in out] == ["sample 0", "sample 1", "sample 2", "sample 4", "sample 5"]
    assert sorted(send.requests) == [(0, 2), (2, 1), (4, 2)]


async def test_greedy_calls_other_prompts_and_one_slot_go_alone() -> None:
    send = Recorder()
    batcher = SampleBatcher(send, max_n=8)
    greedy = GenerateConfig(temperature=0.0)
    await asyncio.gather(*(batcher.complete(ASK, c) for c in samples(range(3), greedy)))
    await asyncio.gather(batcher.complete(ASK, SAMPLE), batcher.complete([Message("user", "other")], SAMPLE))
    single = Recorder()
    await asyncio.gather(*(SampleBatcher(single, max_n=1).complete(ASK, c) for c in samples(range(3))))
    assert send.requests == [(0, 1), (1, 1), (2, 1), (0, 1), (0, 1)]
    assert single.requests == [(0, 1), (1, 1), (2, 1)]


async def test_a_failed_request_fails_every_sample_in_it() -> None:
    batcher = SampleBatcher(Recorder(fail=True), max_n=8)
    results = await asyncio.gather(
        *(batcher.complete(ASK, c) for c in samples(range(3))), return_exceptions=True
    )
    assert all(isinstance(r, BackendError) and r.code == "backend_connection" for r in results)


async def _in_flight(send: Recorder, requests: int) -> None:
    """Wait (at most 5 s) until ``send`` has been asked ``requests`` times: the request is in flight
    (a fixed sleep missed it on a stalled event loop, and the samples left before it was sent)."""
    for _ in range(500):
        if len(send.requests) >= requests:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no request {requests} within 5 s: {send.requests}")


async def test_a_cancelled_sample_leaves_and_the_last_one_cancels_the_request() -> None:
    send = Recorder(delay_s=0.3)
    batcher = SampleBatcher(send, max_n=8)
    tasks = [asyncio.ensure_future(batcher.complete(ASK, c)) for c in samples(range(3))]
    await _in_flight(send, 1)
    tasks[0].cancel()
    assert [t.text for t in await asyncio.gather(*tasks[1:])] == ["sample 1", "sample 2"]
    assert send.cancelled == 0
    tasks = [asyncio.ensure_future(batcher.complete(ASK, c)) for c in samples(range(3))]
    await _in_flight(send, 2)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0.05)
    assert send.cancelled == 1, "nobody waits any more: the request is cancelled"


async def test_complete_n_asks_for_n_and_splits_the_usage() -> None:
    with LoopbackServer() as server:
        backend = OpenAIBackend("echo-model", base_url=server.base_url, timeout_s=5)
        out = await backend.complete_n(ASK, GenerateConfig(temperature=0.7, seed=3, sample_index=2), 3)
        await backend.aclose()
    assert server.bodies[0]["n"] == 3 and server.bodies[0]["seed"] == 5  # seed + first sample index
    assert [c.text for c in out] == ["echo: what is two plus two"] * 3
    assert [c.usage.prompt_tokens for c in out] == [5, 0, 0], "the prompt is processed once"
    assert sum(c.usage.completion_tokens for c in out) == 18 and all(c.usage.calls == 1 for c in out)


async def test_a_server_that_ignores_n_is_a_named_error() -> None:
    with LoopbackServer() as server:
        backend = OpenAIBackend("echo-model", base_url=server.base_url, timeout_s=5)
        backend.extra_body = {"n": 1}  # what a server that ignores n would answer
        with pytest.raises(BackendError, match="asked for 3 completions") as caught:
            await backend.complete_n(ASK, SAMPLE, 3)
        await backend.aclose()
    assert caught.value.code == "backend_bad_reply"


async def test_a_reply_that_counts_the_first_choice_only_has_the_others_estimated() -> None:
    with LoopbackServer() as server:
        backend = OpenAIBackend("echo-model", base_url=server.base_url, timeout_s=5, n_usage="first")
        out = await backend.complete_n(ASK, SAMPLE, 2)
        await backend.aclose()
    assert out[0].usage.completion_tokens == 12 and not out[0].usage.estimated  # what the reply says
    assert out[1].usage.estimated and out[1].usage.completion_tokens > 0


def test_a_batch_left_by_an_ended_event_loop_is_not_joined() -> None:
    # A sampled call cancelled inside the window as its loop ends (a node timeout, then asyncio.run
    # returns) left its batch open; the next call of the prompt on a new loop joined it and hung.
    send = Recorder()
    batcher = SampleBatcher(send, max_n=8, window_s=0.5)

    async def cancelled_at_once() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batcher.complete(ASK, samples([0])[0]), 0.01)

    asyncio.run(cancelled_at_once())

    async def later() -> Completion:
        return await asyncio.wait_for(batcher.complete(ASK, samples([1])[0]), 5)

    assert asyncio.run(later()).text == "sample 1"
