"""Reward components for training an orchestrator: pure, batched, ``(completions, **columns) -> list``.

Every component follows TRL's reward-function contract: it takes the batch of completions (plan
texts, or chat messages whose last message is the plan) and per-row columns as keyword lists, and
returns one float per completion, or ``None`` where the component does not apply. Extra keywords
are ignored, so one column dict can feed every component.

* :func:`plan_validity` - 1.0 when the plan parses and validates under the row's DoM, else 0.0;
* :func:`dom_compliance` - 1.0 when no DoM rule is broken (``dom_*`` diagnostics), else 0.0;
  ``None`` when no plan could be read at all;
* :func:`answer_correctness` - the row's scorer (:mod:`masorch.score`, the contract eval grades
  with) on the executed plan's reply; 0.0 for an invalid plan or a run that did not finish ``ok``
  (the paper's reward);
* :func:`cost_penalty` - 0.0 within the call/token targets, falling linearly to ``-cap`` as the
  larger overshoot ratio grows; ``None`` for a plan that was not executed.

The columns ``status``, ``answer``, ``reply``, ``calls`` and ``tokens`` come from executing the
plans (:mod:`masorch.train.rollout`); this module never executes anything. The plans' execution
and the trainer-facing functions are :class:`masorch.train.rewards.PlanRewards`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from masorch.agents.signatures import builtin_catalogue
from masorch.errors import UsageError
from masorch.plan import DoM, Limits, check
from masorch.plan.catalogue import KindSignature
from masorch.plan.parse import DialectChoice
from masorch.score.registry import get_scorer, graded_text
from masorch.score.scorer import AsyncScorer, Scorer, reward_value


def completion_text(completion: Any) -> str:
    """The plan text of a completion: a string, or the content of the last chat message.

    >>> completion_text([{"role": "assistant", "content": "final_answer('4')"}])
    "final_answer('4')"
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    raise UsageError(
        f"a completion must be text or a list of chat messages, got {type(completion).__name__}",
        hint="pass the trainer's completions unchanged",
    )


def _dom(value: str | DoM) -> DoM:
    try:
        return value if isinstance(value, DoM) else DoM(str(value).lower())
    except ValueError:
        raise UsageError(f"unknown DoM {value!r} in the dom column", hint="use 'low' or 'high'") from None


def _catalogue() -> Mapping[str, KindSignature]:
    return builtin_catalogue()


def plan_validity(
    completions: Sequence[Any],
    *,
    dom: Sequence[str],
    catalogue: Mapping[str, KindSignature] | None = None,
    limits: Limits | None = None,
    dialect: DialectChoice = "auto",
    **_: Any,
) -> list[float | None]:
    """1.0 for each completion whose plan parses and validates under its row's DoM, else 0.0.

    ``dialect`` is the plan dialect the orchestrator was asked for (``auto``: any of them); train
    with the one inference will parse, so that a rewarded plan is one ``masorch run`` accepts.

    >>> plan_validity(['create_agent(id="a", kind="cot", task="Solve it.")', "no plan"], dom=["low", "low"])
    [1.0, 0.0]
    """
    cat = _catalogue() if catalogue is None else catalogue
    lim = limits or Limits()
    return [
        1.0 if check(completion_text(c), _dom(d), cat, dialect, lim).valid else 0.0
        for c, d in zip(completions, dom, strict=True)
    ]


def dom_compliance(
    completions: Sequence[Any],
    *,
    dom: Sequence[str],
    catalogue: Mapping[str, KindSignature] | None = None,
    limits: Limits | None = None,
    dialect: DialectChoice = "auto",
    **_: Any,
) -> list[float | None]:
    """1.0 when a plan breaks no DoM rule, 0.0 when it does, None when no plan could be read.

    >>> two = 'create_agent(id="a", kind="cot", task="x")\\ncreate_agent(id="b", kind="cot", task="y")'
    >>> dom_compliance([two, two, "nothing"], dom=["low", "high", "low"])
    [0.0, 1.0, None]
    """
    cat = _catalogue() if catalogue is None else catalogue
    lim = limits or Limits()
    out: list[float | None] = []
    for c, d in zip(completions, dom, strict=True):
        result = check(completion_text(c), _dom(d), cat, dialect, lim)
        if result.plan is None:
            out.append(None)
            continue
        broken = any(x.code.startswith("dom_") for x in result.diagnostics)
        out.append(0.0 if broken else 1.0)
    return out


def answer_correctness(
    completions: Sequence[Any],
    *,
    status: Sequence[str],
    answer: Sequence[str],
    ground_truth: Sequence[str],
    scorer: Sequence[str] | str = "masbench",
    question: Sequence[str] | None = None,
    reply: Sequence[str] | None = None,
    **_: Any,
) -> list[float | None]:
    """The row's scorer on each executed plan's reply, as a reward; 0.0 unless the run finished ``ok``.

    ``scorer`` names the grading per row (or one for all), any name of
    :func:`masorch.score.registry.get_scorer` with a sync scorer (``masbench``, ``math``, ``exact``,
    ``f1``). The scorer grades what eval grades: the sink's whole ``reply`` for ``masbench`` (every
    box, in order), the extracted ``answer`` otherwise; without a ``reply`` column a bare answer is
    read as one box. The reward is :func:`masorch.score.scorer.reward_value` of the verdict
    (``masbench``: all or nothing).

    >>> answer_correctness(["p1", "p2", "p3"], status=["ok", "ok", "invalid_plan"],
    ...                    answer=["17", "3", ""], ground_truth=["17", "17", "17"])
    [1.0, 0.0, 0.0]
    """
    n = len(completions)
    names = [scorer] * n if isinstance(scorer, str) else list(scorer)
    questions = list(question) if question is not None else [""] * n
    replies: list[str | None] = list(reply) if reply is not None else [None] * n
    scorers: dict[str, Scorer] = {}
    out: list[float | None] = []
    for st, pred, full, gold, name, q in zip(
        status, answer, replies, ground_truth, names, questions, strict=True
    ):
        if st != "ok":
            out.append(0.0)
            continue
        impl = scorers.get(name)
        if impl is None:
            impl = scorers[name] = reward_scorer(name)
        out.append(grade(impl, pred, gold, q, reply=full))
    return out


@dataclass(frozen=True)
class _Gold:
    answer: str
    question: str


def reward_scorer(name: str) -> Scorer:
    """The scorer ``name`` of the registry, as a reward grades with it: sync, math-verify in-thread.

    >>> reward_scorer("masbench").name
    'masbench'
    """
    # In-thread math-verify: no worker processes to leak from a reward called at every step.
    impl: Scorer | AsyncScorer = get_scorer(name, isolation="thread") if name == "math" else get_scorer(name)
    if inspect.iscoroutinefunction(impl.score):
        raise UsageError(
            f"scorer {name!r} is async", hint="rewards use sync scorers: masbench, math, exact, f1"
        )
    return impl  # type: ignore[return-value]  # sync: checked above


def grade(
    scorer: Scorer, answer: str, ground_truth: str, question: str, *, reply: str | None = None
) -> float:
    """The reward of one executed plan: ``scorer``'s verdict on what eval grades, as a value in [0, 1].

    >>> grade(reward_scorer("masbench"), "40", "17", "")  # 40 = 17 mod 23; a bare answer is one box
    1.0
    """
    text = graded_text(scorer.name, answer, reply)  # what eval grades of the same run
    return reward_value(scorer, scorer.score(text, _Gold(ground_truth, question)))


@dataclass(frozen=True)
class CostTarget:
    """What a plan may spend before the cost component turns negative, and its floor.

    ``calls`` and ``tokens`` are targets per plan (None: not counted); the penalty is
    ``-min(cap, max(0, ratio - 1))`` where ``ratio`` is the larger of spent/target.
    """

    calls: int | None = 8
    tokens: int | None = None
    cap: float = 1.0

    def __post_init__(self) -> None:
        for name in ("calls", "tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(
                    f"cost target {name} must be > 0, got {value}", hint="use null for no target"
                )
        if self.cap < 0:
            raise UsageError(f"cost cap must be >= 0, got {self.cap}", hint="e.g. cap: 1.0")


def cost_penalty(
    completions: Sequence[Any],
    *,
    status: Sequence[str],
    calls: Sequence[int],
    tokens: Sequence[int],
    target: CostTarget | None = None,
    **_: Any,
) -> list[float | None]:
    """0.0 within the targets, down to ``-cap`` as spending exceeds them; None for unexecuted plans.

    >>> cost_penalty(["a", "b", "c", "d"], status=["ok", "ok", "budget", "invalid_plan"],
    ...              calls=[4, 12, 40, 0], tokens=[0, 0, 0, 0], target=CostTarget(calls=8, cap=1.0))
    [0.0, -0.5, -1.0, None]
    """
    t = target or CostTarget()
    out: list[float | None] = []
    for st, n_calls, n_tokens in zip(status, calls, tokens, strict=True):
        if st == "invalid_plan":
            out.append(None)
            continue
        ratios = [0.0]
        if t.calls is not None:
            ratios.append(n_calls / t.calls)
        if t.tokens is not None:
            ratios.append(n_tokens / t.tokens)
        over = max(0.0, max(ratios) - 1.0)
        out.append(-min(t.cap, over) if over else 0.0)
    return out


#: The components by name, in the order they are logged.
COMPONENTS: dict[str, Callable[..., list[float | None]]] = {
    "correctness": answer_correctness,
    "validity": plan_validity,
    "dom": dom_compliance,
    "cost": cost_penalty,
}

#: The paper's reward: correctness only (an invalid plan earns 0); the others are logged at weight 0.
DEFAULT_WEIGHTS: dict[str, float] = {"correctness": 1.0, "validity": 0.0, "dom": 0.0, "cost": 0.0}
