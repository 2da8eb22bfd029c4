"""The training environment of the multi-round orchestrator: one instance per trajectory, for TRL.

TRL's ``GRPOTrainer(environment_factory=...)`` makes one environment per rollout, calls its
``reset(**row)`` before generation, exposes its public methods as the policy's tools, calls the
tools the policy names in a turn, returns each result as a ``tool`` message and generates the next
turn, until a turn without a tool call. :func:`environment_class` builds that class from the tools
the multi-round mode offers (:attr:`masorch.run.round_exec.RoundCalls.tools`: one per sub-agent
kind plus ``final_answer``, the same names, descriptions and parameters), so the trained policy
sees at training time the tools it calls at inference (TRL renders the methods' schemas through
the chat template; :func:`masorch.train.rounds_grpo.offered_schemas` makes that tools block the
inference one, bounds, defaults and order included).

A turn's calls are one round. TRL calls async tools of one turn together (``asyncio.gather`` on
its event loop), so the first call of a turn waits one loop step for the others to register, then
plays the whole round through :meth:`RoundCalls.play` (the same checks, units, statuses and
parallel execution as ``masorch run --mode rounds``) and every call returns its own outcome's
message. The rollout's state (:class:`Rollout`) keeps the rounds, statuses, units, the sub-agent
ledger and the final answer; the reward components read it (:mod:`masorch.train.rounds_rewards`).

``final_answer`` with ``synthesize: true`` ends the trajectory and asks the setting's synthesis
model (the config's ``synthesis``) to write the answer from it, through the inference path's
:func:`masorch.run.rounds.synthesize` (same prompt, same parsing); its call is in the rollout's
ledger like the sub-agents' (its tokens count for the efficiency reward). The synthesis runs when
the trajectory is closed before it is scored (:meth:`Rollout.close`, which the reward functions
and the verl loop call), so that it reads the text of every turn, which TRL knows only then;
the policy, as at inference, never reads the synthesized answer. A synthesis that fails leaves
the trajectory without an answer, its ``final_answer`` call with the failure's status
(``EXEC_ERR``, ``BUDGET``, ``TIMEOUT`` past ``node_timeout_s``). A trajectory that used every
round without a final answer is closed the same way: the synthesis model answers, as inference
does at the round cap; so is one the trainer stopped earlier without an answer (a turn without a
call it could deliver, or the completion's length), the last turn's text included, where inference
would have reminded the policy and gone on to the round cap: such a trajectory is scored on the
answer inference would give it, not left without one. A turn that held no call at all counts as
one undelivered call, as at inference.

Where training differs from inference: TRL's tool messages carry the tool name, not a
``tool_call_id``; the between-rounds note (round done, rounds left, units spent) ends the round's
last tool message instead of being a user message; a turn without a call ends the trajectory (no
reminder; the synthesis answers, as above); after ``final_answer`` TRL generates one more turn,
whose calls are refused; TRL hands the environment the calls only, so the reward functions give
:meth:`Rollout.close` the turns' texts from the completions (the verl loop hands them over every
turn); without a synthesis model ``final_answer`` with ``synthesize: true`` is refused
(``FORMAT_ERR``) and a trajectory that ends without a final answer has none.

As at inference, each turn of the policy is a call of the run's budget (``max_calls``): it is
counted in the trajectory's ledger before its round runs, and a round after which no call is left
ends the trajectory without an answer (:attr:`Rollout.budget_error`); the turn's tokens are not
known here, so a ``max_tokens`` budget counts the other calls' tokens only.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from masorch.agents.base import AgentRegistry, Retriever
from masorch.backends.base import Backend, Message, ToolCall, ToolSpec
from masorch.backends.chat import hermes_block_count
from masorch.run.budget import CallRecord
from masorch.run.executor import RoleBackends
from masorch.run.round_calls import FINAL_TOOL, SYNTHESIS_ACK, call_ids, final_answer, wants_synthesis
from masorch.run.round_exec import RoundCalls, RoundsOptions, bad_final, rounds_system_prompt
from masorch.run.rounds import Stop, synthesize
from masorch.run.session import RunSession
from masorch.run.trajectory import RAN_STATUSES, CallOutcome
from masorch.score.scorer import Scorer
from masorch.train.reward_components import grade, reward_scorer
from masorch.train.rounds_config import RoundsRewardConfig
from masorch.train.rounds_rewards import TrajectoryFigures, components

#: The model name of the policy's turns in a trajectory's ledger (the trainer generates them).
POLICY_MODEL = "policy"

_PY_TYPES: Mapping[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list[str],
}


@dataclass(frozen=True)
class RoundsSetting:
    """What every trajectory of a run shares: the sub-agents and their models, the limits, the
    search retriever and the synthesis model (None: ``synthesize: true`` is refused)."""

    agents: AgentRegistry
    backends: RoleBackends
    options: RoundsOptions
    retriever: Retriever | None = None
    synthesis: Backend | None = None

    def tool_calls(self, question: str = "") -> RoundCalls:
        """A fresh tool side for one trajectory of ``question``, with its own session and ledger."""
        session = RunSession(self.options.budget, deadline_s=self.options.timeout_s)
        return RoundCalls(question, self.backends, self.agents, self.options, session, self.retriever)

    def prompt(self, question: str) -> list[dict[str, str]]:
        """The orchestrator's chat before its first turn (:func:`rounds_prompt`)."""
        return rounds_prompt(self.agents, self.options, question)


def rounds_prompt(agents: AgentRegistry, options: RoundsOptions, question: str) -> list[dict[str, str]]:
    """The orchestrator's chat before its first turn: the rounds system prompt and the question."""
    return [
        {"role": "system", "content": rounds_system_prompt(agents, options)},
        {"role": "user", "content": question},
    ]


class Rollout:
    """The state of one trajectory: its rounds (through :class:`RoundCalls`), the calls outside any
    round (refused, or a failed synthesis), the conversation as the environment sees it, the final
    answer."""

    def __init__(self, setting: RoundsSetting, row: Mapping[str, Any]) -> None:
        self.row = dict(row)
        self.question = str(row.get("question", ""))
        self.calls = setting.tool_calls(self.question)
        self.options = setting.options
        self.synthesis = setting.synthesis
        # What the synthesis model reads: the prompt, each turn's calls and their results.
        self.messages = [Message("system", self.calls.system_prompt()), Message("user", self.question)]
        self.turns = 0
        self.answer = ""
        self.ended = False
        self.delivered = 0
        self.outside: list[CallOutcome] = []
        self.components: dict[str, float] | None = None
        self.figures_seen: TrajectoryFigures | None = None
        #: whether the answer was written by the synthesis model (asked for, or at the round cap)
        self.synthesized = False
        #: why the synthesis gave no answer ("" when it did, or did not run)
        self.synthesis_error = ""
        #: why the run's budget ended the trajectory without an answer ("" when it did not)
        self.budget_error = ""
        #: whether the trainer stopped it before the round cap without an answer (then closed
        #: by the synthesis, as inference closes a run at the round cap)
        self.stopped_early = False
        #: whether the turn that stopped it held no call at all (a prose turn)
        self.prose_end = False
        # The synthesis final_answer asked for: its call, round and conversation length then.
        self._requested: tuple[ToolCall, int, int] | None = None
        self._closing: asyncio.Future[None] | None = None

    @property
    def rounds(self) -> int:
        """Rounds played (the turn of ``final_answer`` aside)."""
        return len(self.calls.rounds)

    @property
    def outcomes(self) -> list[CallOutcome]:
        """Every call's outcome: the rounds' calls, then those refused outside any round."""
        return [c for r in self.calls.rounds for c in r.calls] + self.outside

    def subagent_tokens(self) -> int:
        """The tokens the trajectory's sub-agent calls used."""
        return self.calls.session.ledger.totals().total_tokens

    def figures(self, *, trainer_calls: int, policy_tokens: int) -> TrajectoryFigures:
        """The reward's view of this trajectory. ``trainer_calls``: the tool calls the trainer parsed
        from the policy's turns (those it could not deliver count as protocol errors);
        ``policy_tokens``: the tokens of the policy's turns and the tool results it read, to which
        the sub-agents' tokens are added for ``L``."""
        outcomes = self.outcomes
        return TrajectoryFigures(
            calls_per_round=tuple(sum(c.status in RAN_STATUSES for c in r.calls) for r in self.calls.rounds),
            statuses=tuple(c.status for c in outcomes if c.tool != FINAL_TOOL or c.status != "OK"),
            tools=tuple(c.tool for c in outcomes if c.status in RAN_STATUSES and c.tool != FINAL_TOOL),
            undelivered=max(0, trainer_calls - self.delivered) + self.prose_end,
            answered=bool(self.answer),
            tokens=policy_tokens + self.subagent_tokens(),
            units=self.calls.units,
        )

    def score(
        self,
        config: RoundsRewardConfig,
        scorers: dict[str, Scorer],
        *,
        trainer_calls: int,
        policy_tokens: int,
    ) -> dict[str, float]:
        """The reward components of this trajectory (kept in :attr:`components`, its figures in
        :attr:`figures_seen`): the row's scorer on the final answer, and :func:`components` of
        :meth:`figures`. ``scorers`` caches one scorer per name across trajectories."""
        figures = self.figures(trainer_calls=trainer_calls, policy_tokens=policy_tokens)
        verdict = None
        if self.answer:
            name = str(self.row.get("scorer") or "exact")
            scorer = scorers.get(name) or scorers.setdefault(name, reward_scorer(name))
            verdict = grade(scorer, self.answer, str(self.row.get("ground_truth", "")), self.question)
        self.components = components(figures, verdict, **config.thresholds())
        self.figures_seen = figures
        return dict(self.components)

    async def play_turn(self, calls: Sequence[ToolCall], text: str = "") -> list[str]:
        """One turn of the policy: a round of tool calls, its ``final_answer``, or calls refused
        because the trajectory has ended or the round cap is reached; one message per call.
        ``text``: what the turn wrote beside its calls, where the trainer hands it over."""
        self.turns += 1
        self.delivered += len(calls)
        calls = call_ids(calls, self.rounds + 1)
        texts = await self._play(calls)
        self.messages.append(Message("assistant", text, tool_calls=tuple(calls)))
        self.messages += [Message("tool", t, tool_call_id=c.id) for c, t in zip(calls, texts, strict=True)]
        return texts

    async def _play(self, calls: Sequence[ToolCall]) -> list[str]:
        t0 = time.perf_counter()
        round_no = self.rounds + 1
        final_alone = len(calls) == 1 and calls[0].name == FINAL_TOOL
        if not self.ended:
            self._charge_turn()
        if self.budget_error:
            refused = [
                _outcome(c, round_no, i, f"not run: {self.budget_error}; the run has ended", "BUDGET")
                for i, c in enumerate(calls, 1)
            ]
            self.outside += refused
            return [o.message_text() for o in refused]
        # The turn after the last round may still give the answer (the last round's note asks for it).
        if self.ended or (round_no > self.options.max_rounds and not final_alone):
            why = (
                "the final answer was given"
                if self.ended
                else f"all {self.options.max_rounds} rounds are used"
            )
            refused = [
                _outcome(c, round_no, i, f"not run: {why}; call nothing more") for i, c in enumerate(calls, 1)
            ]
            self.outside += refused
            return [o.message_text() for o in refused]
        if final_alone:
            answer = final_answer(calls[0])
            if answer is not None:
                self.answer, self.ended = answer, True
                return [f"status: OK\nfinal answer recorded: {answer}"]
            if self.synthesis is not None and wants_synthesis(calls[0]):
                # Run when the trajectory is closed, when every turn's text is known.
                self.ended, self._requested = True, (calls[0], round_no, len(self.messages))
                return [SYNTHESIS_ACK]
            outcome = bad_final(calls[0], round_no)
            if "synthesize" in calls[0].arguments:
                outcome = _outcome(
                    calls[0], round_no, 1, "no synthesis model while training: give the answer", "FORMAT_ERR"
                )
            if round_no > self.options.max_rounds:  # no round left to record it in
                self.outside.append(outcome)
                note = "No round is left: call final_answer alone with the answer."
                return [f"{outcome.message_text()}\n\n{note}"]
            outcomes = [outcome]
        else:
            outcomes = await self.calls.play(round_no, calls)
        self.calls.record(round_no, outcomes, time.perf_counter() - t0)
        texts = [o.message_text() for o in outcomes]
        spent = self.calls.session.ledger.exhausted()
        if spent is not None:  # inference ends the run here, without an answer
            self.ended, self.budget_error = True, spent
            texts[-1] = f"{texts[-1]}\n\nThe run's budget is spent ({spent}): the run ends without an answer."
            return texts
        if round_no < self.options.max_rounds:
            note = self.calls.between("rounds/round_done.j2", round_no)
        else:
            note = f"Round {round_no} of {round_no} was the last: call final_answer alone with the answer."
        texts[-1] = f"{texts[-1]}\n\n{note}"
        return texts

    def _charge_turn(self) -> None:
        """Count the policy's turn in the run's budget, as inference counts each orchestrator turn
        (a call of its own, checked before it is made); a spent budget ends the trajectory as
        inference ends the run, without an answer. Its tokens are not known here (the trainer
        generated the turn), so a ``max_tokens`` budget counts the other calls' tokens only."""
        ledger = self.calls.session.ledger
        spent = ledger.exhausted()
        if spent is not None:
            self.ended, self.budget_error = True, spent
            return
        ledger.record(CallRecord("orchestrator", None, POLICY_MODEL))

    async def close(self, turns: Sequence[tuple[str, Sequence[str]]] = ()) -> None:
        """End the trajectory before it is scored: the synthesis model writes the answer where
        ``final_answer`` asked for it, or where the trajectory ended without a final answer, every
        round used (as inference ends a run at the round cap) or stopped earlier by the trainer
        (:attr:`stopped_early`), if the setting has one; why none came is kept in
        :attr:`synthesis_error`. ``turns``: the text and the tool names of each of the policy's
        turns, in order, where the trainer knows them (a turn none of whose calls reached the
        environment is skipped by its names). Idempotent: later calls wait for the first."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close(turns))
        await asyncio.shield(self._closing)

    async def _close(self, turns: Sequence[tuple[str, Sequence[str]]]) -> None:
        if self._requested is not None:
            # The inference path's conversation then: the prompt, the rounds, the final_answer turn
            # and the tool message that answers it.
            said = self.messages[: self._requested[2] + 2]
        elif self.ended or self.answer or self.synthesis is None:
            return
        else:
            self.ended, said = True, self.messages
            if self.rounds < self.options.max_rounds:
                said = [*said, *self._stopped_turn(turns)]
        got = await self._synthesis(_with_texts(said, turns), requested=self._requested is not None)
        if isinstance(got, str):
            self.answer, self.synthesized = got, True
            return
        self.synthesis_error = got.error
        if self._requested is not None:
            call, round_no, _ = self._requested
            status = {"budget": "BUDGET", "timeout": "TIMEOUT"}.get(got.status, "EXEC_ERR")
            self.outside.append(_outcome(call, round_no, 1, got.error, status))

    def _stopped_turn(self, turns: Sequence[tuple[str, Sequence[str]]]) -> list[Message]:
        """The trainer stopped the trajectory before the round cap (a turn without a call it could
        deliver, or the completion's length): the last turn's text as a message, where it held no
        parsed call (its calls would have a message already), and :attr:`prose_end` set where it
        held no call at all (inference counts such a turn as one undelivered call)."""
        self.stopped_early = True
        if not turns or turns[-1][1]:
            return []
        text = turns[-1][0]
        self.prose_end = not hermes_block_count(text)
        return [Message("assistant", text)] if text.strip() else []

    async def _synthesis(self, messages: list[Message], *, requested: bool) -> str | Stop:
        """The synthesis model's answer from ``messages`` within ``node_timeout_s``, or why none."""
        assert self.synthesis is not None
        session, limit = self.calls.session, self.options.node_timeout_s
        try:
            async with asyncio.timeout(limit):
                return await synthesize(
                    session, self.synthesis, messages, self.question, self.options, requested=requested
                )
        except TimeoutError:
            return Stop("timeout", "timeout", f"synthesis: no reply within {limit:g} s")


class RoundsEnvironment:
    """The base of the environment classes :func:`environment_class` makes: ``reset`` and the
    state; the tools are added per catalogue. Its only public attributes are ``reset`` and the
    tools, since TRL offers every other public method to the policy as a tool."""

    _setting: RoundsSetting

    def __init__(self) -> None:
        self._rollout: Rollout | None = None
        self._pending: list[ToolCall] = []
        self._turn: asyncio.Future[list[str]] | None = None

    @property
    def rollout(self) -> Rollout:
        """The current trajectory's state (after ``reset``)."""
        if self._rollout is None:
            raise RuntimeError("reset() was not called: no trajectory has started")
        return self._rollout

    def reset(self, **row: Any) -> None:
        """Start a new trajectory for a dataset row (its ``question``, ``ground_truth``, ``scorer``)."""
        self._rollout = Rollout(self._setting, row)
        self._pending, self._turn = [], None

    async def _call(self, name: str, args: Mapping[str, Any]) -> str:
        """One tool call of the current turn; the turn's first call plays the whole round."""
        index = len(self._pending)
        if index == 0:
            self._turn = asyncio.get_running_loop().create_future()
        self._pending.append(ToolCall(name, json.dumps(dict(args))))
        turn = self._turn
        assert turn is not None
        if index == 0:
            # TRL gathers a turn's async tool calls: they are all scheduled before any of them runs,
            # so after one loop step every call of this turn has registered.
            await asyncio.sleep(0)
            calls, self._pending = self._pending, []
            try:
                turn.set_result(await self.rollout.play_turn(calls))
            except BaseException as exc:
                turn.set_exception(exc)
                raise
        return (await turn)[index]


def environment_class(tools: Sequence[ToolSpec]) -> type[RoundsEnvironment]:
    """An environment class with one async method per tool (``final_answer`` included), each
    with the signature and Google-style docstring from which transformers renders the schema."""
    methods: dict[str, Any] = {name: _tool_method(spec) for spec in tools for name in [spec.name]}
    return type("RoundsEnvironment", (RoundsEnvironment,), methods)


def environment_factory(setting: RoundsSetting) -> Callable[[], RoundsEnvironment]:
    """The ``environment_factory`` for TRL: a fresh environment of ``setting``'s tools per call."""
    cls = environment_class(setting.tool_calls().tools)

    def make() -> RoundsEnvironment:
        env = cls()
        env._setting = setting
        return env

    return make


def _tool_method(spec: ToolSpec) -> Callable[..., Any]:
    name = spec.name

    async def tool(self: RoundsEnvironment, **kwargs: Any) -> str:
        return await self._call(name, kwargs)

    props: Mapping[str, Any] = spec.parameters.get("properties", {})
    required = set(spec.parameters.get("required", ()))
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    doc = [spec.description, "", "Args:"]
    for pname, schema in props.items():
        annotations[pname] = _PY_TYPES.get(schema.get("type", "string"), str)
        default = inspect.Parameter.empty if pname in required else schema.get("default")
        params.append(
            inspect.Parameter(
                pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotations[pname]
            )
        )
        text = " ".join(str(schema.get("description") or pname).split())
        if "enum" in schema:
            text += f" (choices: {json.dumps(schema['enum'])})"
        doc.append(f"    {pname}: {text}")
    annotations["return"] = str
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = "\n".join(doc)
    tool.__annotations__ = annotations
    tool.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    return tool


def _with_texts(messages: Sequence[Message], turns: Sequence[tuple[str, Sequence[str]]]) -> list[Message]:
    """``messages`` with the text of each assistant turn filled in from the trainer's ``turns``:
    an assistant message takes the text of the next trainer turn whose tool names include all of
    its calls' (turns none of whose calls reached the environment have no message and are passed
    over).

    >>> from masorch.backends.base import ToolCall
    >>> said = [Message("assistant", "", (ToolCall("cot", "{}"),)), Message("tool", "4")]
    >>> [m.content for m in _with_texts(said, [("bad", ["nope"]), ("Add first.", ["cot", "x"])])]
    ['Add first.', '4']
    """
    pending = iter(turns)
    out = []
    for m in messages:
        if m.role == "assistant" and not m.content:
            names = {c.name for c in m.tool_calls}
            text = next((t for t, used in pending if names <= set(used)), "")
            m = Message(m.role, text, m.tool_calls)
        out.append(m)
    return out


def _outcome(call: ToolCall, round_no: int, i: int, error: str, status: str = "REJECTED") -> CallOutcome:
    return CallOutcome(round_no, call.id, f"r{round_no}c{i}", call.name, status, error=error)  # type: ignore[arg-type]
