"""The multi-round orchestrator as a verl agent loop: one trajectory of tool rounds per sample.

verl (0.9.1) runs each training sample through an agent loop registered by name
(``verl.experimental.agent_loop.agent_loop.register``) and chosen per row by its ``agent_name``
column or by ``actor_rollout_ref.rollout.agent.default_agent_loop``. :data:`NAME` is this one:
``RoundsAgentLoop``, a subclass of verl's ``AgentLoopBase`` built on first access (so this module
imports without verl; only the class needs it). Per trajectory it keeps a
:class:`masorch.train.rounds_env.Rollout` and, each turn:

1. generates with verl's server manager (``generate(request_id=..., prompt_ids=...,
   sampling_params=...)``, a ``TokenOutput``) and appends the tokens with response mask 1;
2. reads the turn's tool calls with verl's tool parser for the model's format
   (``actor_rollout_ref.rollout.multi_turn.format``, ``hermes`` by default: the
   ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` format of TRL's Qwen2.5 template, which
   the TRL path (:mod:`masorch.train.rounds_grpo`) reads with transformers' response parser);
3. plays them as one round with :meth:`Rollout.play_turn` (the round code of inference and of TRL
   training) and appends the tool messages, tokenized by the chat template through verl's
   Continuous Token builder, with response mask 0;

until a turn without a call, the ``final_answer`` turn, ``max_rounds + 1`` turns or the response
length; a trajectory that ended without an answer is then closed by the synthesis model
(:meth:`Rollout.close`), which reads the text of every turn, as inference at the round cap. The
trajectory's reward components (:mod:`masorch.train.rounds_rewards`, the final answer graded by
the row's scorer) go in the output's ``extra_fields`` under
:data:`masorch.train.verl_reward.ROUNDS_KEY`, which verl's reward loop merges into the
``extra_info`` of the reward function (:func:`masorch.train.verl_reward.compute_rounds_score`);
with ``score_in_loop`` the loop sets ``reward_score`` itself and verl skips its reward loop.

The sub-agents and limits come from the ``masorch train rounds`` YAML config named by the loop's
``config`` keyword (the agent-loop config file's entry), built once per worker process.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import uuid4

from masorch.backends.base import Message, ToolCall
from masorch.backends.chat import message_payload, tools_payload
from masorch.errors import UsageError, require_extra
from masorch.run.round_calls import FINAL_TOOL
from masorch.score.scorer import Scorer
from masorch.train.rounds_config import RoundsTrainConfig, load_rounds_config
from masorch.train.rounds_env import Rollout, RoundsSetting
from masorch.train.rounds_rewards import trajectory_reward
from masorch.train.verl_reward import ROUNDS_KEY, rounds_reward_info

#: The name the loop is registered under (a row's ``agent_name``).
NAME = "masorch_rounds"

_LOCK = threading.Lock()


class RoundsService:
    """One config and :class:`RoundsSetting` (sub-agent backend, cache, limits) per config path,
    built on first use and kept for the worker process's life (verl makes a loop per sample)."""

    def __init__(self) -> None:
        self._by_config: dict[str, tuple[RoundsTrainConfig, RoundsSetting]] = {}
        self.scorers: dict[str, Scorer] = {}

    def get(self, config: str | None) -> tuple[RoundsTrainConfig, RoundsSetting]:
        """The rounds config at ``config`` (a YAML path) and its setting, built once."""
        if not config:
            raise UsageError(
                f"the {NAME} agent loop needs a `masorch train rounds` config",
                hint="give its entry in the agent-loop config file `config: /path/to/rounds.yaml` "
                "(actor_rollout_ref.rollout.agent.agent_loop_config_path; docs/train.md)",
            )
        with _LOCK:
            built = self._by_config.get(config)
            if built is None:
                from masorch.train.rounds_grpo import rounds_setting

                cfg = load_rounds_config(config)
                built = self._by_config[config] = (cfg, rounds_setting(cfg))
            return built


#: The process-wide service the agent loops use (one per worker process; built lazily).
SERVICE = RoundsService()


def row_of(sample: Mapping[str, Any]) -> dict[str, Any]:
    """What the round code and the reward read of a verl sample: ``question``, ``ground_truth``,
    ``scorer``, ``id`` (from ``extra_info`` and ``reward_model``, as ``masorch train data`` writes
    them; the question falls back to the prompt's last user message).

    >>> row_of({"extra_info": {"question": "Q?", "scorer": "masbench", "id": "r1"},
    ...         "reward_model": {"ground_truth": "3"}})
    {'question': 'Q?', 'ground_truth': '3', 'scorer': 'masbench', 'id': 'r1'}
    >>> row_of({"raw_prompt": [{"role": "user", "content": "Hi?"}]})["question"]
    'Hi?'
    """
    info: Mapping[str, Any] = sample.get("extra_info") or {}
    gold: Mapping[str, Any] = sample.get("reward_model") or {}
    question = info.get("question")
    if not question:
        users = [m.get("content", "") for m in sample.get("raw_prompt") or () if m.get("role") == "user"]
        question = users[-1] if users else ""
    return {
        "question": str(question),
        "ground_truth": str(gold.get("ground_truth", "")),
        "scorer": str(info.get("scorer") or "exact"),
        "id": str(info.get("id", "")),
    }


def written_calls(parser: Any, text: str, parsed: int) -> int:
    """The tool calls the policy wrote in a turn: what the parser read, or more where its pattern
    finds blocks it could not read (verl's hermes parser drops a malformed call and logs it).

    >>> import re
    >>> class Hermes: tool_call_regex = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
    >>> written_calls(Hermes(), "<tool_call>{bad</tool_call><tool_call>{}</tool_call>", 0)
    2
    """
    pattern = getattr(parser, "tool_call_regex", None)
    found = len(pattern.findall(text)) if pattern is not None else 0
    return max(parsed, found)


def trajectory_record(rollout: Rollout, reward: float, status: str) -> dict[str, Any]:
    """What the loop hands to verl of one played trajectory (``extra_fields[ROUNDS_KEY]``)."""
    figures = rollout.figures_seen
    if figures is None or rollout.components is None:
        raise ValueError("the trajectory is not scored yet: call Rollout.score first")
    return {
        "status": status,
        "reward": reward,
        "components": dict(rollout.components),
        "answer": rollout.answer,
        "answered": figures.answered,
        "synthesized": rollout.synthesized,
        "synthesis_error": rollout.synthesis_error,
        "rounds": rollout.rounds,
        "calls_per_round": list(figures.calls_per_round),
        "statuses": list(figures.statuses),
        "tools": list(figures.tools),
        "undelivered": figures.undelivered,
        "tokens": figures.tokens,
        "units": figures.units,
    }


def __getattr__(name: str) -> Any:
    # The verl class is built on first access, so that importing this module needs no verl
    # (hydra's `_target_: masorch.train.verl_agent_loop.RoundsAgentLoop` resolves through here).
    if name == "RoundsAgentLoop":
        return agent_loop_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def agent_loop_class() -> type:
    """verl's agent-loop class for the rounds mode, registered as :data:`NAME` (needs verl)."""
    require_extra("verl", "verl")
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.tools.schemas import OpenAIFunctionToolSchema

    class RoundsAgentLoop(AgentLoopBase):
        """One multi-round trajectory per sample (see :mod:`masorch.train.verl_agent_loop`).

        ``config``: the ``masorch train rounds`` YAML; ``score_in_loop``: set ``reward_score``
        (the weighted reward) and ``reward_extra_info`` here, so that verl needs no reward function.
        """

        def __init__(
            self, *args: Any, config: str | None = None, score_in_loop: bool = False, **kwargs: Any
        ) -> None:
            kwargs.pop("tools", None)  # verl's tool list: the round code has its own tools
            kwargs.pop("name", None)  # the agent-loop config file's entry name, passed by hydra
            super().__init__(*args, **kwargs)
            self.rounds_config, self.setting = SERVICE.get(config)
            self.score_in_loop = bool(score_in_loop)
            multi_turn = self.rollout_config.multi_turn
            self.tool_parser = ToolParser.get_tool_parser(multi_turn.format, self.tokenizer)
            self.response_length = int(self.rollout_config.response_length)

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            """Play one trajectory of the sample ``kwargs`` (its dataset fields)."""
            row = row_of(kwargs)
            rollout = Rollout(self.setting, row)
            messages = [dict(m) for m in kwargs.get("raw_prompt") or self.setting.prompt(row["question"])]
            tools = tools_payload(rollout.calls.tools)
            schemas = [OpenAIFunctionToolSchema.model_validate(t) for t in tools]
            turns = _Turns(await self.ct_build_initial_tokens(messages, tools=tools))
            params = dict(sampling_params)
            if self.tool_parser.stop_token_ids:
                stops = set(params.get("stop_token_ids") or []) | set(self.tool_parser.stop_token_ids)
                params["stop_token_ids"] = sorted(stops)
            request_id = uuid4().hex
            status = "turns"
            last_turn: list[tuple[str, list[str]]] = []  # a last turn without a parsed call
            for _ in range(rollout.options.max_rounds + 1):
                room = self.response_length - len(turns.mask)
                if room <= 0:
                    status = "length"
                    break
                t0 = time.perf_counter()
                out = await self.server_manager.generate(
                    request_id=request_id,
                    prompt_ids=turns.ids,
                    sampling_params={**params, "max_tokens": room},
                )
                turns.timing["generate_sequences"] += time.perf_counter() - t0
                turns.take(await self.ct_merge_assistant_token(*turns.assistant_args(out)))
                turns.assistant += 1
                content, parsed = await self.tool_parser.extract_tool_calls(out.token_ids, schemas)
                answer_only = len(parsed) == 1 and parsed[0].name == FINAL_TOOL
                if len(turns.mask) >= self.response_length and not answer_only:
                    status = "length"  # no room for a tool message: only a final answer can still count
                    break
                text = await self.loop.run_in_executor(None, self.tokenizer.decode, out.token_ids)
                written = written_calls(self.tool_parser, text, len(parsed))
                turns.trainer_calls += written
                if not parsed:
                    status = "unreadable_calls" if written else "no_call"
                    # what the synthesis reads of it (Rollout.close): its calls' blocks if it wrote any
                    last_turn = [(text if written else content, [])]
                    break
                calls = [ToolCall(c.name, c.arguments, id=c.tool_call_id or "") for c in parsed]
                t0 = time.perf_counter()
                texts = await rollout.play_turn(calls, content)
                turns.timing["tool_calls"] += time.perf_counter() - t0
                if rollout.ended:
                    status = "answered"
                    break
                said = Message("assistant", content, tuple(calls))
                before = [*messages, message_payload(said, arguments_as_object=True)]
                after = [*before, *_tool_messages(calls, texts)]
                merged = await self.ct_merge_context_msg(
                    before, after, turns.ids, turns.mask, turns.logprobs or None, tools=tools
                )
                if len(merged[1]) >= self.response_length:
                    status = "length"
                    break
                turns.take(merged)
                turns.tool_turns += 1
                messages = after
            return await self._finish(rollout, turns, status, AgentLoopOutput, last_turn)

        async def _finish(
            self,
            rollout: Rollout,
            turns: _Turns,
            status: str,
            output_cls: Any,
            last_turn: Sequence[tuple[str, Sequence[str]]] = (),
        ) -> Any:
            prompt_ids, response_ids = turns.split()
            response_ids = response_ids[: self.response_length]
            # the synthesis model answers where asked for, at the round cap, or after a turn without
            # a call (the verl turns' texts are in the rollout's messages already; only the last
            # turn's, which reached no round, is handed over)
            await rollout.close(last_turn)
            await self.loop.run_in_executor(
                None,
                functools.partial(
                    rollout.score,
                    self.rounds_config.rewards,
                    SERVICE.scorers,
                    trainer_calls=turns.trainer_calls,
                    policy_tokens=len(response_ids),
                ),
            )
            reward = trajectory_reward(rollout.components or {}, self.rounds_config.rewards.weights())
            record = trajectory_record(rollout, reward, status)
            extra: dict[str, Any] = {ROUNDS_KEY: record}
            if self.score_in_loop:
                extra["reward_extra_info"] = rounds_reward_info(record)
            return output_cls(
                prompt_ids=prompt_ids,
                response_ids=response_ids,
                response_mask=turns.mask[: self.response_length],
                response_logprobs=turns.logprobs[: self.response_length] if turns.logprobs else None,
                reward_score=reward if self.score_in_loop else None,
                num_turns=turns.assistant + turns.tool_turns + 1,
                metrics=dict(turns.timing),
                extra_fields=extra,
            )

    # Where hydra finds it (through this module's __getattr__): @register records this path.
    RoundsAgentLoop.__module__, RoundsAgentLoop.__qualname__ = __name__, "RoundsAgentLoop"
    return register(NAME)(RoundsAgentLoop)


class _Turns:
    """The token stream of one trajectory: prompt and response ids, the response mask (1 for the
    policy's tokens) and log-probs, the turn counts and timings."""

    def __init__(self, prompt_ids: Sequence[int]) -> None:
        self.ids = list(prompt_ids)
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.assistant = 0
        self.tool_turns = 0
        self.trainer_calls = 0
        self.timing = {"generate_sequences": 0.0, "tool_calls": 0.0}

    def assistant_args(self, out: Any) -> tuple[Any, ...]:
        """The arguments of ``ct_merge_assistant_token`` for the generated ``TokenOutput``."""
        keep = self.logprobs if (self.logprobs or out.log_probs) else None
        return (self.ids, list(out.token_ids), self.mask, keep, out.log_probs or None)

    def take(self, merged: tuple[Any, list[int], list[float] | None]) -> None:
        """Take the result of one of verl's Continuous Token merges: ids, mask, log-probs."""
        result, mask, logprobs = merged
        self.ids, self.mask = list(result.token_ids), list(mask)
        if logprobs is not None:
            self.logprobs = list(logprobs)

    def split(self) -> tuple[list[int], list[int]]:
        """(prompt ids, response ids): the response is the part the mask covers."""
        cut = len(self.ids) - len(self.mask)
        return self.ids[:cut], self.ids[cut:]


def _tool_messages(calls: Sequence[ToolCall], texts: Sequence[str]) -> list[dict[str, Any]]:
    """One ``tool`` message per call, named after its tool (and its id where the model gave one)."""
    out = []
    for call, text in zip(calls, texts, strict=True):
        message: dict[str, Any] = {"role": "tool", "name": call.name, "content": text}
        if call.id:
            message["tool_call_id"] = call.id
        out.append(message)
    return out
