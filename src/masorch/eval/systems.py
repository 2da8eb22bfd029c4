"""The systems an evaluation compares, from ``--systems`` or a YAML systems file.

Each system is a :class:`masorch.run.system.System` (``sas:KIND``, ``mas:low|high``,
``mas:rounds``). From the command line: ``--systems sas:cot,mas:high`` plus shared model flags. From
a YAML file, with the same field names as :class:`~masorch.run.system.System`::

    defaults:                      # applied to every system (each may override)
      model: local:qwen2.5-coder-0.5b
      budget: {calls: 40, tokens: 60000}
    systems:
      - sas:cot
      - {system: sas:sc, name: sas:sc5, params: {n: 5}}
      - {system: mas:high, orchestrator: openai:gpt-4o-mini, repair: 1}
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from masorch.agents.signatures import AgentProfileName
from masorch.backends.prices import PriceTable
from masorch.errors import UsageError
from masorch.files import MAX_YAML_BYTES, load_yaml, read_text
from masorch.redact import redact
from masorch.run.system import ROUNDS_ONLY, System


def parse_systems(text: str, **defaults: Any) -> list[System]:
    """Comma-separated systems with shared defaults; names must be distinct."""
    specs = [System.parse(part, **defaults) for part in text.split(",") if part.strip()]
    if not specs:
        raise UsageError("no systems given", hint="e.g. --systems sas:cot,mas:low,mas:high")
    return check_unique(specs)


def check_unique(specs: Sequence[System]) -> list[System]:
    """``specs`` unchanged, or a UsageError naming a repeated system name."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise UsageError(
                f"two systems are named {spec.name!r}", hint="give each variant its own `name:` in the YAML"
            )
        seen.add(spec.name)
    return list(specs)


def _entry(entry: Any, defaults: Mapping[str, Any]) -> System:
    if isinstance(entry, str):
        entry = {"system": entry}
    if not isinstance(entry, Mapping) or not isinstance(entry.get("system"), str):
        raise UsageError(
            f"bad system entry {str(entry)[:80]!r}",
            hint="each entry is 'sas:cot' or a mapping with a `system:` key",
        )
    if not entry["system"].startswith("mas:rounds"):  # shared defaults: rounds fields go to rounds systems
        defaults = {k: v for k, v in defaults.items() if k not in ROUNDS_ONLY}
    merged = {**defaults, **{k: v for k, v in entry.items() if k != "system"}}
    # None in YAML means "unset": the field's default applies.
    return System.parse(entry["system"], **{str(k): v for k, v in merged.items() if v is not None})


#: The top-level keys of a systems file (``prices:`` is read by :mod:`masorch.backends.prices`).
SYSTEMS_FILE_KEYS = ("systems", "defaults", "prices")


def systems_from_yaml(text: str, **overrides: Any) -> list[System]:
    """The systems of a YAML config (see the module docs); ``overrides`` replace its defaults."""
    data = load_yaml(text, what="systems file")
    if not isinstance(data, Mapping) or not isinstance(data.get("systems"), list):
        raise UsageError("the systems file has no `systems:` list", hint="see docs/eval.md for the layout")
    unknown = sorted(str(k) for k in data if k not in SYSTEMS_FILE_KEYS)
    if unknown:
        close = difflib.get_close_matches(unknown[0], SYSTEMS_FILE_KEYS, n=1)
        raise UsageError(
            f"the systems file has an unknown key {unknown[0]!r}"
            + (f": did you mean {close[0]!r}?" if close else ""),
            hint=f"its keys are {', '.join(SYSTEMS_FILE_KEYS)} (see docs/eval.md)",
        )
    if not isinstance(data.get("defaults") or {}, Mapping):
        raise UsageError("the systems file's `defaults:` is not a mapping", hint="write key: value lines")
    defaults = dict(data.get("defaults") or {})
    defaults.update({k: v for k, v in overrides.items() if v is not None})
    return check_unique([_entry(e, defaults) for e in data["systems"]])


def load_systems_file(path: Path, **overrides: Any) -> list[System]:
    """:func:`systems_from_yaml` of a file; a missing file is a UsageError."""
    return systems_from_yaml(read_text(path, what="systems file", max_bytes=MAX_YAML_BYTES), **overrides)


def systems_from_flags(systems: str | None, config: Path | None, defaults: Mapping[str, Any]) -> list[System]:
    """The systems of ``--systems`` (with the shared ``defaults``, e.g. ``model``) or of ``--config``.

    Exactly one of the two is given; ``defaults`` override a systems file's ``defaults:``.
    """
    if (systems is None) == (config is None):
        raise UsageError(
            "give exactly one of --systems and --config",
            hint="e.g. --systems sas:cot,mas:low,mas:high --model local:qwen2.5-coder-0.5b",
        )
    if config is not None:
        return load_systems_file(config, **defaults)
    if defaults.get("model") is None:
        raise UsageError("--systems needs --model", hint="e.g. --model local:qwen2.5-coder-0.5b")
    return parse_systems(systems or "", **{k: v for k, v in defaults.items() if v is not None})


def check_systems(
    specs: Sequence[System], *, agent_profile: AgentProfileName = "default", extra_models: Sequence[str] = ()
) -> None:
    """A UsageError, before anything runs or is written, for a model string that cannot build a
    backend (``extra_models`` too, e.g. a scorer's judge), an agent model or a tool cost naming no
    kind or tool of the ``agent_profile`` agents: each would fail every sample, or every request,
    one by one; likewise a ``prompt_file`` that is missing or malformed. The error names the system
    and its field.

    >>> check_systems(parse_systems("sas:cot", model="foo"))
    Traceback (most recent call last):
    masorch.errors.UsageError: system 'sas:cot' model: a model string is not provider:model (hint: ...)
    """
    from masorch.agents.registry import default_registry
    from masorch.backends.registry import check_model_string
    from masorch.plan.model import DoM
    from masorch.run.lifecycle import check_agent_models
    from masorch.run.official import load_prompt_file
    from masorch.run.round_calls import check_tool_costs

    # A malformed model string may be a key given to the wrong flag: the check echoes none of it.
    for spec in dict.fromkeys(extra_models):
        check_model_string(spec, buildable=True)
    registry = default_registry(profile=agent_profile)
    for s in specs:
        for role, spec in s.model_roles():
            _in_system(f"system {s.label!r} {role}", check_model_string, spec, buildable=True)
        _in_system(f"system {s.label!r}", check_agent_models, s.agent_models, registry)
        _in_system(f"system {s.label!r}", check_tool_costs, s.tool_costs, registry.catalogue())
        if s.prompt_file is not None:  # read by every sample's orchestrator: a bad one fails them all
            dom = s.dom or DoM.HIGH
            _in_system(f"system {s.label!r} prompt_file", load_prompt_file, s.prompt_file, dom)


def check_cost_budgets(specs: Sequence[System], table: PriceTable) -> None:
    """A UsageError for a system with a cost budget none of whose models has a price: every call
    costs 0 there, so the budget could never stop a run (a dated snapshot such as
    ``openai:gpt-4o-mini-2024-07-18``, or a local or self-hosted model, has no built-in price)."""
    for s in specs:
        if s.budget.max_cost is None:
            continue
        models = s.model_strings()
        if not any(table.lookup(m) is not None for m in models):
            raise UsageError(
                f"system {s.label!r} has a cost budget ({s.budget.max_cost:g} dollars), but none of its "
                f"models has a price ({', '.join(redact(m) for m in models)}): it would never stop a run",
                hint="price them with --price MODEL=IN,OUT (dollars per million tokens) or --prices FILE, "
                "or use --budget-tokens or --budget-calls",
                code="bad_argument",
            )


def _in_system(where: str, check: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    """``check(*args, **kwargs)``; its UsageError begins with ``where`` (the system and field)."""
    try:
        check(*args, **kwargs)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc.message}", hint=exc.hint) from None
