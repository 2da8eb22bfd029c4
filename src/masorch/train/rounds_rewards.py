"""Reward components of a multi-round trajectory: pure functions of what the trajectory did.

One GRPO sample of the multi-round orchestrator is a whole trajectory (docs/rounds.md); its reward
is a weighted sum of four components, each in [0, 1], computed from the trajectory's figures
(:class:`TrajectoryFigures`, which :mod:`masorch.train.rounds_env` records while the trajectory
runs) and nothing else:

* :func:`task_success` - the scorer's verdict on the final answer; 0 without one;
* :func:`protocol_compliance` - the share of well-formed calls within the limits, the missing or
  malformed ``final_answer`` counted as one more bad call;
* :func:`diversity` - half for a mean of at least ``theta_par`` parallel calls per round, half for
  at least ``theta_tool`` distinct tools in the trajectory;
* :func:`efficiency` - the mean of two soft budgets (:func:`soft_budget`) on the total tokens ``L``
  and on the cost units ``C``: 1 at or under the target, falling linearly to 0 at the maximum.

:func:`trajectory_reward` weighs them (:class:`masorch.train.rounds_config.RoundsRewardConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Statuses that say the orchestrator broke the protocol (the call was not run because of it).
PROTOCOL_ERRORS = frozenset({"FORMAT_ERR", "REJECTED"})


@dataclass(frozen=True)
class TrajectoryFigures:
    """What the reward reads of one trajectory.

    ``calls_per_round``: the calls of each round that ran (``OK``, ``EXEC_ERR``, ``TIMEOUT``:
    :data:`masorch.run.trajectory.RAN_STATUSES`; refused ones, ``BUDGET``, ``FORMAT_ERR`` and
    ``REJECTED``, do not count as parallel work); ``statuses``: every call's status,
    ``final_answer`` left out unless it failed; ``tools``: the tool of each call that ran
    (``final_answer`` left out);
    ``undelivered``: calls the trainer could not hand to the environment (an unknown tool name, or
    arguments the trainer could not read); ``answered``: the trajectory ended with a well-formed
    ``final_answer``; ``tokens``: the total tokens ``L``; ``units``: the cost units ``C``.
    """

    calls_per_round: tuple[int, ...] = ()
    statuses: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    undelivered: int = 0
    answered: bool = False
    tokens: int = 0
    units: float = 0.0


def task_success(score: float | None, answered: bool) -> float:
    """The scorer's verdict in [0, 1] when the trajectory answered, else 0.

    >>> task_success(1.0, True), task_success(1.0, False), task_success(None, True)
    (1.0, 0.0, 0.0)
    """
    if not answered or score is None:
        return 0.0
    return min(1.0, max(0.0, float(score)))


def protocol_compliance(statuses: Sequence[str], *, undelivered: int = 0, answered: bool = True) -> float:
    """The share of the trajectory's calls that kept the protocol, in [0, 1].

    A call breaks it when it ended ``FORMAT_ERR`` or ``REJECTED`` (bad arguments, over the
    per-round limit, after the round cap, an unknown tool) or never reached the environment
    (``undelivered``); a trajectory without a well-formed ``final_answer`` counts one more bad
    call. ``EXEC_ERR``, ``TIMEOUT`` and ``BUDGET`` are not the orchestrator's fault here.

    >>> protocol_compliance(["OK", "OK", "FORMAT_ERR", "EXEC_ERR"])  # 4 calls + final_answer, 1 bad
    0.8
    >>> protocol_compliance(["OK"], answered=False)
    0.5
    >>> protocol_compliance([], answered=False), protocol_compliance([], undelivered=1)
    (0.0, 0.5)
    """
    total = len(statuses) + undelivered + 1
    bad = sum(s in PROTOCOL_ERRORS for s in statuses) + undelivered + (0 if answered else 1)
    return 1.0 - bad / total


def diversity(
    calls_per_round: Sequence[int], tools: Sequence[str], *, theta_par: float = 1.25, theta_tool: int = 3
) -> float:
    """Half for at least ``theta_par`` calls per round on average, half for at least
    ``theta_tool`` distinct tools; 0 for a trajectory without a round.

    >>> diversity([2, 1], ["cot", "python", "sc"])  # 1.5 calls a round, 3 tools
    1.0
    >>> diversity([1, 1], ["cot", "cot"]), diversity([3], ["cot", "cot", "sc"])
    (0.0, 0.5)
    >>> diversity([], [])
    0.0
    """
    if not calls_per_round:
        return 0.0
    parallel = sum(calls_per_round) / len(calls_per_round) >= theta_par
    varied = len(set(tools)) >= theta_tool
    return 0.5 * parallel + 0.5 * varied


def soft_budget(value: float, target: float, maximum: float) -> float:
    """1 at or under ``target``, falling linearly to 0 at ``maximum`` (and 0 beyond).

    >>> soft_budget(8, 8, 16), soft_budget(12, 8, 16), soft_budget(20, 8, 16)
    (1.0, 0.5, 0.0)
    """
    if value <= target:
        return 1.0
    if maximum <= target or value >= maximum:
        return 0.0
    return (maximum - value) / (maximum - target)


def efficiency(
    tokens: float,
    units: float,
    *,
    tokens_target: float = 12_288,
    tokens_max: float = 24_576,
    units_target: float = 8,
    units_max: float = 16,
) -> float:
    """The mean of the soft budgets on the total tokens ``L`` and the cost units ``C``.

    >>> efficiency(6_000, 4), efficiency(18_432, 4), efficiency(30_000, 12)
    (1.0, 0.75, 0.25)
    """
    return 0.5 * (
        soft_budget(tokens, tokens_target, tokens_max) + soft_budget(units, units_target, units_max)
    )


COMPONENTS = ("success", "protocol", "diversity", "efficiency")


def components(
    figures: TrajectoryFigures,
    score: float | None,
    *,
    theta_par: float = 1.25,
    theta_tool: int = 3,
    tokens_target: float = 12_288,
    tokens_max: float = 24_576,
    units_target: float = 8,
    units_max: float = 16,
    shaping_needs_success: bool = False,
) -> dict[str, float]:
    """Every component of one trajectory, by name (:data:`COMPONENTS`).

    With ``shaping_needs_success``, diversity and efficiency are 0 unless the task succeeded, so
    that a wrong trajectory cannot earn them.

    >>> f = TrajectoryFigures((2, 1), ("OK", "OK", "EXEC_ERR"), ("cot", "python", "cot"), answered=True,
    ...                       tokens=2_000, units=4)
    >>> components(f, 1.0)
    {'success': 1.0, 'protocol': 1.0, 'diversity': 0.5, 'efficiency': 1.0}
    >>> components(f, 0.0, shaping_needs_success=True)["efficiency"]
    0.0
    """
    success = task_success(score, figures.answered)
    shaped = success > 0 or not shaping_needs_success
    return {
        "success": success,
        "protocol": protocol_compliance(
            figures.statuses, undelivered=figures.undelivered, answered=figures.answered
        ),
        "diversity": diversity(
            figures.calls_per_round, figures.tools, theta_par=theta_par, theta_tool=theta_tool
        )
        if shaped
        else 0.0,
        "efficiency": efficiency(
            figures.tokens,
            figures.units,
            tokens_target=tokens_target,
            tokens_max=tokens_max,
            units_target=units_target,
            units_max=units_max,
        )
        if shaped
        else 0.0,
    }


def trajectory_reward(parts: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """The weighted sum of the components (a component without a weight counts 0).

    >>> trajectory_reward({"success": 1.0, "protocol": 0.5}, {"success": 1.0, "protocol": 0.2})
    1.1
    """
    return sum(weights.get(name, 0.0) * value for name, value in parts.items())
