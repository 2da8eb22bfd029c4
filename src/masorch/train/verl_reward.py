"""The plan reward (and the rounds agent loop's) as verl custom reward functions (no verl import here).

verl loads a reward function by path (``custom_reward_function.path`` / ``.name``) and passes
``custom_reward_function.reward_kwargs`` as keywords:

* :func:`compute_score` - the single-row signature ``(data_source, solution_str, ground_truth,
  extra_info)`` that verl's ``naive`` reward manager calls once per response;
* :func:`compute_score_batch` - the batched signature ``(data_sources, solution_strs,
  ground_truths, extra_infos)`` of verl's ``batch`` reward manager, which is where the K plans of
  a group (and the whole batch) execute concurrently.

Both return dicts with ``score`` (the weighted reward) plus every component and plan statistic,
which verl logs as ``reward_extra_info``. Each worker process builds one :class:`PlanRewards` per
config (sub-agent backend, record/replay cache, loop thread) and keeps it for the process's life.
Rows come from :mod:`masorch.train.verl_data`: ``extra_info`` carries ``question``, ``dom`` and
``scorer``.

:func:`compute_rounds_score` (single-row signature) scores trajectories of the multi-round mode,
which the ``masorch_rounds`` agent loop (:mod:`masorch.train.verl_agent_loop`) has already played
and graded: it reads their record from ``extra_info``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from masorch.errors import UsageError
from masorch.train.config import TrainConfig, load_config
from masorch.train.reward_components import COMPONENTS
from masorch.train.rewards import PlanRewards

_LOCK = threading.Lock()


class RewardService:
    """One :class:`PlanRewards` per config path, built on first use (a per-process service)."""

    def __init__(self) -> None:
        self._by_config: dict[str, PlanRewards] = {}

    def get(self, config: str | None) -> PlanRewards:
        """The rewards of the training config at ``config`` (a YAML path), built once."""
        if not config:
            raise UsageError(
                "the masorch verl reward needs a training config",
                hint="set custom_reward_function.reward_kwargs.config=/path/to/train.yaml",
            )
        with _LOCK:
            rewards = self._by_config.get(config)
            if rewards is None:
                rewards = self._by_config[config] = build_rewards(load_config(config))
            return rewards


def build_rewards(cfg: TrainConfig) -> PlanRewards:
    """The PlanRewards of a training config (sub-agent backends with their cache, per-plan limits)."""
    from masorch.train.grpo import plan_rewards, search_corpus, search_retriever, train_agents

    retriever = search_retriever(search_corpus([*cfg.train, *cfg.eval]))
    return plan_rewards(cfg, train_agents(cfg), retriever)


#: The process-wide service verl's entry points use (one per worker process; built lazily).
SERVICE = RewardService()


def _column(
    extra_infos: Sequence[Mapping[str, Any] | None], key: str, ground_truths: Sequence[Any]
) -> list[Any]:
    out = []
    for i, info in enumerate(extra_infos):
        if not info or key not in info:
            raise UsageError(
                f"row {i} lacks extra_info[{key!r}]",
                hint="convert prompts with `masorch train data` (masorch.train.verl_data)",
            )
        out.append(info[key])
    return out


def score_rows(
    rewards: PlanRewards,
    solution_strs: Sequence[str],
    ground_truths: Sequence[str],
    extra_infos: Sequence[Mapping[str, Any] | None],
) -> list[dict[str, float]]:
    """Every component and the weighted score of each row (one concurrent execution of the batch)."""
    columns = {
        "question": _column(extra_infos, "question", ground_truths),
        "dom": _column(extra_infos, "dom", ground_truths),
        "scorer": _column(extra_infos, "scorer", ground_truths),
        "ground_truth": [str(g) for g in ground_truths],
    }
    outcomes = rewards.outcomes(solution_strs, columns["question"], columns["dom"])
    per = {name: rewards.score(name, solution_strs, **dict(columns)) for name in COMPONENTS}
    rows = []
    for i, o in enumerate(outcomes):
        row: dict[str, float] = {}
        total = 0.0
        for name in COMPONENTS:
            value = per[name][i]
            # verl stacks extra infos into arrays: NaN, not None, marks "not applicable".
            row[name] = float("nan") if value is None else float(value)
            total += rewards.weights[name] * (value or 0.0)
        row |= {
            "score": total,
            "valid": float(o.valid),
            "n_agents": float(o.n_agents),
            "calls": float(o.calls),
        }
        rows.append(row)
    return rows


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[str],
    extra_infos: Sequence[Mapping[str, Any] | None],
    config: str | None = None,
    **_: Any,
) -> list[dict[str, float]]:
    """verl ``batch`` reward manager entry: score a whole batch, executing its plans concurrently."""
    return score_rows(SERVICE.get(config), solution_strs, ground_truths, extra_infos)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    config: str | None = None,
    **_: Any,
) -> dict[str, float]:
    """verl ``naive`` reward manager entry: score one response (its plan runs alone)."""
    return score_rows(SERVICE.get(config), [solution_str], [ground_truth], [extra_info])[0]


#: The key of the trajectory record the ``masorch_rounds`` agent loop
#: (:mod:`masorch.train.verl_agent_loop`) puts in its output's ``extra_fields``; verl's reward
#: loop merges those fields into the ``extra_info`` a reward function receives.
ROUNDS_KEY = "masorch_rounds"


def rounds_reward_info(record: Mapping[str, Any]) -> dict[str, float]:
    """The score and the figures verl logs of one trajectory record of the rounds agent loop.

    >>> info = rounds_reward_info({"reward": 1.1, "components": {"success": 1.0, "protocol": 0.5},
    ...     "rounds": 2, "answered": True, "units": 3.0, "tokens": 90, "undelivered": 0})
    >>> info["score"], info["protocol"], info["answered"], info["tokens"]
    (1.1, 0.5, 1.0, 90.0)
    """
    out = {"score": float(record["reward"])}
    out |= {name: float(value) for name, value in record["components"].items()}
    out |= {k: float(record[k]) for k in ("rounds", "answered", "units", "tokens", "undelivered")}
    return out


def compute_rounds_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **_: Any,
) -> dict[str, float]:
    """verl reward function for trajectories of the ``masorch_rounds`` agent loop: their reward.

    The agent loop already played the trajectory and computed its components (the final answer
    graded by the row's scorer, :mod:`masorch.train.rounds_rewards`); this reads them from
    ``extra_info`` and returns ``score`` (the weighted reward) with every component and figure.
    """
    record = (extra_info or {}).get(ROUNDS_KEY)
    if not isinstance(record, Mapping):
        raise UsageError(
            f"extra_info has no {ROUNDS_KEY!r} record: the response was not played by the rounds agent loop",
            hint="select the loop: actor_rollout_ref.rollout.agent.default_agent_loop=masorch_rounds "
            "(docs/train.md, 'verl agent loop')",
        )
    return rounds_reward_info(record)
