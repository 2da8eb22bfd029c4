"""Systems under evaluation: single-agent baselines (``sas:KIND``) and orchestrated MAS (``mas:DOM``).

A system is (mode, models, DoM, budget). ``sas:cot|sc|debate|reflexion|search`` runs one sub-agent of
that kind on the whole task; ``mas:low|mas:high`` asks an orchestrator for a plan in one shot and runs
it. Systems come from the command line (``--systems sas:cot,mas:high`` plus shared model flags) or
from a YAML file::

    defaults:                      # applied to every system (each may override)
      model: local:qwen2.5-coder-0.5b
      budget: {calls: 40, tokens: 60000}
    systems:
      - sas:cot
      - {system: sas:sc, name: sas:sc5, params: {n: 5}}
      - {system: mas:high, orchestrator: openai:gpt-4o-mini, repair: 1}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from masorch.errors import UsageError
from masorch.files import MAX_YAML_BYTES, load_yaml, read_text
from masorch.redact import redact
from masorch.run.budget import Budget

SAS_KINDS: tuple[str, ...] = ("cot", "sc", "debate", "reflexion", "search")
MAS_DOMS: tuple[str, ...] = ("low", "high")
Mode = Literal["sas", "mas"]

_BUDGET_KEYS = {"calls": "max_calls", "tokens": "max_tokens", "cost": "max_cost", "wall_s": "max_wall_s"}
_FIELDS = (
    "name",
    "model",
    "orchestrator",
    "judge",
    "agent_models",
    "params",
    "dialect",
    "repair",
    "constrain",
    "plan_tokens",
    "budget",
    "timeout_s",
    "node_timeout_s",
)


@dataclass(frozen=True)
class SystemSpec:
    """One system: ``mode`` sas or mas, ``variant`` the agent kind (sas) or DoM (mas), and its models.

    ``model`` is the sub-agent model (and the orchestrator's when ``orchestrator`` is None);
    ``agent_models`` overrides it per agent kind; ``params`` are the sas agent's parameters
    (e.g. ``n`` of sc); ``plan_tokens`` caps the orchestrator's plan (mas); ``constrain`` decodes
    the plan under its dialect's grammar or schema where the backend can (mas; false: free
    decoding). ``name`` labels the system in logs and reports (default ``mode:variant``).
    """

    mode: Mode
    variant: str
    model: str
    name: str = ""
    orchestrator: str | None = None
    judge: str | None = None
    agent_models: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    dialect: str = "calls"
    repair: int = 0
    constrain: bool = True
    plan_tokens: int = 1024
    budget: Budget = field(default_factory=Budget)
    timeout_s: float | None = None
    node_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.mode == "sas" and self.variant not in SAS_KINDS:
            raise UsageError(
                f"unknown single-agent system 'sas:{self.variant}'",
                hint=f"use one of: {', '.join('sas:' + k for k in SAS_KINDS)}",
            )
        if self.mode == "mas" and self.variant not in MAS_DOMS:
            raise UsageError(
                f"unknown multi-agent system 'mas:{self.variant}'", hint="use mas:low or mas:high"
            )
        if self.mode not in ("sas", "mas"):
            raise UsageError(f"unknown system mode {self.mode!r}", hint="systems are sas:KIND or mas:DOM")
        if self.dialect not in ("calls", "json", "xml"):
            raise UsageError(f"unknown plan dialect {self.dialect!r}", hint="use calls, json or xml")
        if not self.model:
            raise UsageError(f"system {self.label} has no model", hint="pass --model PROVIDER:MODEL")
        if not self.name:
            object.__setattr__(self, "name", self.label)

    @property
    def label(self) -> str:
        """``mode:variant``, e.g. ``sas:cot``."""
        return f"{self.mode}:{self.variant}"

    @property
    def is_sas(self) -> bool:
        """True for a single-agent baseline."""
        return self.mode == "sas"

    @property
    def orchestrator_model(self) -> str:
        """The orchestrator's model string (the sub-agent model unless set)."""
        return self.orchestrator or self.model

    def model_strings(self) -> list[str]:
        """Every distinct model string this system calls, in a stable order."""
        names = [self.model, *self.agent_models.values()]
        if self.mode == "mas":
            names.append(self.orchestrator_model)
        if self.judge:
            names.append(self.judge)
        return list(dict.fromkeys(names))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in the run log's header); :func:`system_from_dict` inverts it.

        Model strings are redacted (:func:`masorch.redact.redact`): a key in a server URL stays out
        of logs and reports, so the inverse has no credentials either.
        """
        out = asdict(self)
        for role in ("model", "orchestrator", "judge"):
            if isinstance(out[role], str):
                out[role] = redact(out[role])
        out["agent_models"] = {k: redact(v) for k, v in self.agent_models.items()}
        out["params"] = dict(self.params)
        return out


def system_from_dict(data: Mapping[str, Any]) -> SystemSpec:
    """The spec a :meth:`SystemSpec.to_dict` dict describes."""
    values = dict(data)
    values["budget"] = Budget(**values.get("budget", {}))
    return SystemSpec(**values)


def parse_system(text: str, **defaults: Any) -> SystemSpec:
    """A spec from ``mode:variant`` with keyword defaults (model, orchestrator, budget, ...).

    >>> parse_system("sas:sc", model="local:m", params={"n": 3}).name
    'sas:sc'
    >>> parse_system("mas:high", model="local:m").orchestrator_model
    'local:m'
    """
    mode, sep, variant = text.strip().partition(":")
    if not sep or mode not in ("sas", "mas"):
        raise UsageError(
            f"system {text!r} is not sas:KIND or mas:DOM",
            hint=f"e.g. sas:cot, sas:sc, mas:low, mas:high (sas kinds: {', '.join(SAS_KINDS)})",
        )
    return SystemSpec(mode=mode, variant=variant, **defaults)  # type: ignore[arg-type]


def parse_systems(text: str, **defaults: Any) -> list[SystemSpec]:
    """Comma-separated systems with shared defaults; names must be distinct."""
    specs = [parse_system(part, **defaults) for part in text.split(",") if part.strip()]
    if not specs:
        raise UsageError("no systems given", hint="e.g. --systems sas:cot,mas:low,mas:high")
    return check_unique(specs)


def check_unique(specs: Sequence[SystemSpec]) -> list[SystemSpec]:
    """``specs`` unchanged, or a UsageError naming a repeated system name."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise UsageError(
                f"two systems are named {spec.name!r}", hint="give each variant its own `name:` in the YAML"
            )
        seen.add(spec.name)
    return list(specs)


def budget_from(data: Mapping[str, Any] | None) -> Budget:
    """A Budget from ``{calls, tokens, cost, wall_s}`` (YAML keys); unknown keys are a UsageError."""
    data = data or {}
    unknown = sorted(set(data) - set(_BUDGET_KEYS))
    if unknown:
        raise UsageError(f"unknown budget keys: {', '.join(unknown)}", hint=f"use {', '.join(_BUDGET_KEYS)}")
    return Budget(**{_BUDGET_KEYS[k]: v for k, v in data.items()})


def _entry(entry: Any, defaults: Mapping[str, Any]) -> SystemSpec:
    if isinstance(entry, str):
        entry = {"system": entry}
    if not isinstance(entry, Mapping) or "system" not in entry:
        raise UsageError(
            f"bad system entry {str(entry)[:80]!r}",
            hint="each entry is 'sas:cot' or a mapping with a `system:` key",
        )
    merged = {**defaults, **{k: v for k, v in entry.items() if k != "system"}}
    unknown = sorted(set(merged) - set(_FIELDS))
    if unknown:
        raise UsageError(
            f"unknown keys in system {entry['system']!r}: {', '.join(unknown)}",
            hint=f"allowed: {', '.join(_FIELDS)}",
        )
    for key, value in merged.items():
        _check_type(key, value, str(entry["system"]))
    merged["budget"] = budget_from(merged.get("budget"))
    merged["agent_models"] = dict(merged.get("agent_models") or {})
    merged["params"] = dict(merged.get("params") or {})
    return parse_system(str(entry["system"]), **merged)


_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "model": (str,),
    "orchestrator": (str,),
    "judge": (str,),
    "dialect": (str,),
    "agent_models": (Mapping,),
    "params": (Mapping,),
    "budget": (Mapping,),
    "repair": (int,),
    "plan_tokens": (int,),
    "timeout_s": (int, float),
    "node_timeout_s": (int, float),
}


def _check_type(key: str, value: Any, system: str) -> None:
    """A YAML value of the wrong type is a UsageError naming the system and key (None means unset)."""
    types = _TYPES.get(key)
    if value is None or types is None:
        return
    ok = isinstance(value, types) and not isinstance(value, bool)
    if ok and key == "agent_models":
        ok = all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    if not ok:
        names = " or ".join("mapping" if t is Mapping else t.__name__ for t in types)
        raise UsageError(
            f"system {system[:60]!r}: {key} must be of type {names}, got {type(value).__name__}",
            hint="see docs/eval.md for the systems file layout",
        )


def systems_from_yaml(text: str, **overrides: Any) -> list[SystemSpec]:
    """The systems of a YAML config (see the module docs); ``overrides`` replace its defaults."""
    data = load_yaml(text, what="systems file")
    if not isinstance(data, Mapping) or not isinstance(data.get("systems"), list):
        raise UsageError("the systems file has no `systems:` list", hint="see docs/eval.md for the layout")
    if not isinstance(data.get("defaults") or {}, Mapping):
        raise UsageError("the systems file's `defaults:` is not a mapping", hint="write key: value lines")
    defaults = dict(data.get("defaults") or {})
    defaults.update({k: v for k, v in overrides.items() if v is not None})
    return check_unique([_entry(e, defaults) for e in data["systems"]])


def load_systems_file(path: Path, **overrides: Any) -> list[SystemSpec]:
    """:func:`systems_from_yaml` of a file; a missing file is a UsageError."""
    return systems_from_yaml(read_text(path, what="systems file", max_bytes=MAX_YAML_BYTES), **overrides)
