"""The signatures of the built-in sub-agents: the default catalogue, as data.

Defaults follow the MAS-Orchestra paper's agents (docs/agents.md lists them). The agent classes take
their signature from here, so the catalogue an orchestrator sees and what runs cannot drift apart.
"""

from __future__ import annotations

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
