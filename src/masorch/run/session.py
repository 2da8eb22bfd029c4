"""One run's shared state and its call gate: budget check -> call -> ledger -> trace event.

Every LLM call of a run (orchestrator, sub-agents, judge) goes through :meth:`RunSession.complete`.
Retrying retryable backend errors is the backend's job (``OpenAIBackend`` retries with backoff
itself); the gate never retries, so a call is never retried twice over.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from masorch.backends.base import Backend, Completion, GenerateConfig, Message
from masorch.errors import DeadlineExceeded, MasorchError
from masorch.redact import redact
from masorch.run.budget import Budget, CallRecord, CallRole, Ledger
from masorch.run.result import RunResult
from masorch.trace.events import EventBase, LlmCall, RunFinished, RunStarted, UsageSummary
from masorch.trace.writer import TraceSink


class RunSession:
    """The ledger, trace sink, run id and deadline of one run; the gate every call goes through.

    ``deadline_s`` is a hard limit on the whole run's wall time (the executor cancels what still
    runs when it passes); ``budget.max_wall_s`` only stops new calls from starting.
    """

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        trace: TraceSink | None = None,
        deadline_s: float | None = None,
        run_id: str | None = None,
    ) -> None:
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.ledger = Ledger(budget)
        self.trace = trace
        self._t0 = time.monotonic()
        self.deadline_at = None if deadline_s is None else self._t0 + deadline_s
        self.deadline_s = deadline_s

    @property
    def elapsed_s(self) -> float:
        """Seconds since the session started."""
        return time.monotonic() - self._t0

    def remaining_s(self) -> float | None:
        """Seconds left before the run deadline (never negative), or None without a deadline."""
        if self.deadline_at is None:
            return None
        return max(0.0, self.deadline_at - time.monotonic())

    def past_deadline(self) -> bool:
        """Whether the run deadline has passed (False without one)."""
        return self.deadline_at is not None and time.monotonic() >= self.deadline_at

    def emit(self, event_type: type[EventBase], **fields: Any) -> None:
        """Make an event of this run and send it to the trace sink, if any."""
        if self.trace is not None:
            self.trace.emit(event_type(run_id=self.run_id, **fields))  # type: ignore[arg-type]

    async def run(
        self,
        question: str,
        body: Callable[[RunSession], Awaitable[RunResult]],
        *,
        mode: str,
        models: Mapping[str, str],
        dom: str | None = None,
        dialect: str | None = None,
    ) -> RunResult:
        """The lifecycle of every run: the run_started event, ``body``, the run_finished event."""
        self.emit(
            RunStarted,
            question=question,
            mode=mode,
            dom=dom,
            dialect=dialect,
            models=dict(models),
            budget=dataclasses.asdict(self.ledger.budget),
        )
        result = await body(self)
        self.finish(result)
        return result

    def finish(self, result: RunResult) -> None:
        """Emit the run_finished event of ``result``."""
        self.emit(
            RunFinished,
            status=result.status,
            answer=result.answer,
            error=result.error,
            usage=UsageSummary.of(result.usage),
            wall_s=result.wall_s,
        )

    async def complete(
        self,
        backend: Backend,
        messages: Sequence[Message],
        config: GenerateConfig,
        *,
        role: CallRole,
        node: str | None = None,
    ) -> Completion:
        """One gated call: raises BudgetExceeded or, past the run deadline, DeadlineExceeded before
        calling (a call that returns without waiting, a cache hit, would never meet the deadline's
        cancellation), BackendError as the backend does."""
        if self.past_deadline():
            raise DeadlineExceeded(f"the run deadline of {self.deadline_s:g} s has passed; call not started")
        self.ledger.check_before_call()
        model = backend.model_id
        t0 = time.monotonic()
        try:
            completion = await backend.complete(messages, config)
        except BaseException as exc:
            # Recorded (the call was made and may have cost something), then re-raised unchanged.
            cancelled = isinstance(exc, asyncio.CancelledError)
            # The requests really sent (retries included) when the backend says, else the one call.
            attempts = getattr(exc, "attempts", None)
            self._record(
                CallRecord(
                    role,
                    node,
                    model,
                    latency_s=time.monotonic() - t0,
                    status="cancelled" if cancelled else "error",
                    error="cancelled" if cancelled else _describe(exc),
                    attempts=attempts if isinstance(attempts, int) else 1,
                ),
                messages,
            )
            raise
        usage = completion.usage
        self._record(
            CallRecord(
                role,
                node,
                completion.model or model,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                latency_s=completion.latency_s or (time.monotonic() - t0),
                cost=usage.cost,
                cached=completion.cached,
                attempts=completion.attempts,
            ),
            messages,
            completion,
        )
        return completion

    def _record(
        self, record: CallRecord, messages: Sequence[Message], completion: Completion | None = None
    ) -> None:
        self.ledger.record(record)
        self.emit(
            LlmCall,
            role=record.role,
            node=record.node,
            model=record.model,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            latency_s=record.latency_s,
            cost=record.cost,
            cached=record.cached,
            attempts=record.attempts,
            error=record.error,
            finish=completion.finish if completion is not None else "",
            messages=[{"role": m.role, "content": m.content} for m in messages],
            response=completion.text if completion is not None else "",
            tool_calls=[
                {"id": c.id, "name": c.name, "arguments": c.arguments}
                for c in (completion.tool_calls if completion is not None else ())
            ],
        )


def _describe(exc: BaseException) -> str:
    """``code: message`` for a masorch error, ``Type: message`` for anything else (URL credentials
    redacted: a client exception may quote the URL it failed on)."""
    code = getattr(exc, "code", None)
    return redact(f"{code}: {exc}" if isinstance(exc, MasorchError) else f"{type(exc).__name__}: {exc}")
