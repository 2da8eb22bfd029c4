"""The plan language: parse, validate and render whole multi-agent plans (pure, no I/O)."""

from masorch.plan.catalogue import Catalogue, KindSignature, ParamSpec
from masorch.plan.model import AgentSpec, DoM, Flow, Plan, ValidatedPlan
from masorch.plan.refs import Ref, find_refs, substitute

__all__ = [
    "AgentSpec",
    "Catalogue",
    "DoM",
    "Flow",
    "KindSignature",
    "ParamSpec",
    "Plan",
    "Ref",
    "ValidatedPlan",
    "find_refs",
    "substitute",
]
