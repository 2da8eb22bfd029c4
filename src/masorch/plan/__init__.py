"""The plan language: parse, validate and render whole multi-agent plans (pure, no I/O)."""

from masorch.plan.catalogue import Catalogue, KindSignature, ParamSpec
from masorch.plan.diagnostics import CODES, Diagnostic, Severity, code_counts, compliance
from masorch.plan.model import AgentSpec, DoM, Flow, Plan, ValidatedPlan, kinds_label
from masorch.plan.parse import Dialect, ParseResult, detect_dialect, parse
from masorch.plan.refs import Ref, find_refs, substitute
from masorch.plan.render import render, to_mermaid, tool_calls
from masorch.plan.repair import repair_message
from masorch.plan.validate import CheckResult, Limits, ValidationResult, check, validate

__all__ = [
    "CODES",
    "AgentSpec",
    "Catalogue",
    "CheckResult",
    "Diagnostic",
    "Dialect",
    "DoM",
    "Flow",
    "KindSignature",
    "Limits",
    "ParamSpec",
    "ParseResult",
    "Plan",
    "Ref",
    "Severity",
    "ValidatedPlan",
    "ValidationResult",
    "check",
    "code_counts",
    "compliance",
    "detect_dialect",
    "find_refs",
    "kinds_label",
    "parse",
    "render",
    "repair_message",
    "substitute",
    "to_mermaid",
    "tool_calls",
    "validate",
]
