"""The signatures of the built-in sub-agents, as data: the default catalogue and the agent profiles.

The ``default`` profile is masorch's: the paper's agents, plus ``python``, with defaults tuned for
small local models (greedy single calls, 2 debate rounds). The ``paper`` profile is the agent set and
the settings of the official MAS-Orchestra agents (docs/agents.md compares them). The agent classes
take their signature from here, so the catalogue an orchestrator sees and what runs cannot drift
apart; :func:`masorch.agents.registry.default_registry` builds a profile's agents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from masorch.errors import UsageError
from masorch.plan.catalogue import KindSignature, ParamSpec

#: The sampling temperature of a one-call agent (greedy by default).
TEMPERATURE = ParamSpec(
    name="temperature",
    type="float",
    default=0.0,
    minimum=0.0,
    maximum=2.0,
    description="sampling temperature",
)

COT = KindSignature(
    kind="cot",
    summary="Chain-of-thought: one model call that reasons step by step and gives an answer.",
    params=(TEMPERATURE,),
)

SC = KindSignature(
    kind="sc",
    summary="Self-consistency: n independent chain-of-thought samples, majority vote on the answer.",
    params=(
        ParamSpec(name="n", type="int", default=5, minimum=1, maximum=16, description="number of samples"),
        TEMPERATURE.model_copy(update={"default": 0.7, "description": "sampling temperature of each sample"}),
    ),
)

DEBATE = KindSignature(
    kind="debate",
    summary="Debate: agents with different roles argue over rounds; a final judge decides.",
    params=(
        ParamSpec(
            name="roles",
            type="list[str]",
            default=["Mathematician", "Critical Reviewer"],
            min_items=2,
            max_items=5,
            description="the debaters' roles",
        ),
        ParamSpec(name="rounds", type="int", default=2, minimum=1, maximum=4, description="debate rounds"),
    ),
)

REFLEXION = KindSignature(
    kind="reflexion",
    summary="Reflexion: answer, then a critic reviews and the answer is refined until accepted.",
    params=(
        ParamSpec(
            name="max_rounds",
            type="int",
            default=5,
            minimum=1,
            maximum=5,
            description="most critic/refine rounds",
        ),
    ),
)

SEARCH = KindSignature(
    kind="search",
    summary="Search: multi-hop retrieval over a document corpus, then an answer grounded in it.",
    params=(
        ParamSpec(
            name="top_k", type="int", default=5, minimum=1, maximum=20, description="documents per query"
        ),
        ParamSpec(
            name="max_hops", type="int", default=3, minimum=1, maximum=6, description="most search queries"
        ),
    ),
)

PYTHON = KindSignature(
    kind="python",
    summary="Python: writes a program, runs it in a sandbox and answers from its output.",
    params=(
        ParamSpec(
            name="timeout_s",
            type="float",
            default=10.0,
            minimum=1.0,
            maximum=60.0,
            description="wall-time limit of one program run",
        ),
        ParamSpec(
            name="max_attempts",
            type="int",
            default=2,
            minimum=1,
            maximum=3,
            description="programs tried when one fails",
        ),
    ),
)

REVIEW = KindSignature(
    kind="review",
    summary="Critical review: reads the reasoning so far and lists its issues, each with a fix.",
    params=(
        ParamSpec(
            name="max_issues", type="int", default=5, minimum=1, maximum=10, description="most issues listed"
        ),
        TEMPERATURE,
    ),
)

#: The kinds a one-step plan may use (the plan catalogue).
BUILTIN_SIGNATURES: tuple[KindSignature, ...] = (COT, SC, DEBATE, REFLEXION, SEARCH, PYTHON)
#: Kinds that need a reasoning history, which only the multi-round mode has.
HISTORY_SIGNATURES: tuple[KindSignature, ...] = (REVIEW,)


def builtin_catalogue() -> dict[str, KindSignature]:
    """The built-in plan kinds and their signatures, in the order an orchestrator sees them."""
    return {s.kind: s for s in BUILTIN_SIGNATURES}


AgentProfileName = Literal["default", "paper"]


@dataclass(frozen=True)
class AgentProfile:
    """A named agent set: the plan kinds with their signatures (defaults and ranges), and the
    temperature of the calls inside an agent that no parameter sets (debate speakers and judge,
    reflexion drafts, search steps; None: each agent's own)."""

    name: AgentProfileName
    signatures: tuple[KindSignature, ...]
    inner_temperature: float | None = None

    def catalogue(self) -> dict[str, KindSignature]:
        """The profile's kinds and signatures, in catalogue order."""
        return {s.kind: s for s in self.signatures}


#: Every call of the official agents samples at this temperature.
PAPER_TEMPERATURE = 0.5


def _paper(sig: KindSignature, **defaults: object) -> KindSignature:
    """``sig`` with the official agents' defaults (a ``temperature`` parameter at 0.5)."""
    params = []
    for p in sig.params:
        if p.name == "temperature":
            p = p.model_copy(update={"default": PAPER_TEMPERATURE})
        if p.name in defaults:
            update = defaults[p.name]
            p = p.model_copy(update=update if isinstance(update, dict) else {"default": update})
        params.append(p)
    return sig.model_copy(update={"params": tuple(params)})


#: masorch's own agents and defaults.
DEFAULT_PROFILE = AgentProfile(name="default", signatures=BUILTIN_SIGNATURES)
#: The official MAS-Orchestra agents: no python; 5 samples, 5 debate rounds (roles must be given),
#: up to 5 reflexion rounds, up to 5 search steps; every call at temperature 0.5.
PAPER_PROFILE = AgentProfile(
    name="paper",
    signatures=(
        _paper(COT),
        _paper(SC, n=5),
        _paper(DEBATE, roles={"default": None, "required": True}, rounds={"default": 5, "maximum": 5}),
        _paper(REFLEXION, max_rounds=5),
        _paper(SEARCH, max_hops=5),
    ),
    inner_temperature=PAPER_TEMPERATURE,
)
AGENT_PROFILES: dict[str, AgentProfile] = {p.name: p for p in (DEFAULT_PROFILE, PAPER_PROFILE)}


def agent_profile_name(name: str) -> AgentProfileName:
    """``name`` as a profile name, or a UsageError listing the profiles."""
    if name not in AGENT_PROFILES:
        raise UsageError(f"unknown agent profile {name!r}", hint=f"use one of: {', '.join(AGENT_PROFILES)}")
    return AGENT_PROFILES[name].name
