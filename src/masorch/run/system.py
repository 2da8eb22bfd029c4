"""A system: what answers a question, as one typed record that every entry point builds alike.

``sas:KIND`` runs one sub-agent of that kind on the whole question (the single-agent baselines);
``mas:low`` / ``mas:high`` ask an orchestrator for a whole plan in one step under that degree of
multi-agent structure (DoM) and run it; ``mas:rounds`` is the multi-round agent-as-tool mode. A
:class:`System` carries the models per role, the plan dialect, the budget and the deadlines, with
the same field names in ``masorch run`` flags, eval systems files and training configs, and
:func:`masorch.run.run` answers a question with it.

>>> System.parse("mas:high", model="local:m").dom
<DoM.HIGH: 'high'>
>>> System.parse("sas:sc", model="local:m", params={"n": 3}).name
'sas:sc'
>>> System.parse("mas:rounds", model="local:m").mode
'rounds'
>>> System.parse("mas:rounds-serial", model="local:m").max_calls_per_round
1
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from masorch.backends.base import Sampling
from masorch.config import config_error
from masorch.errors import UsageError
from masorch.plan.model import DoM
from masorch.plan.parse import Dialect
from masorch.redact import redact
from masorch.run.budget import Budget

SAS_KINDS: tuple[str, ...] = ("cot", "sc", "debate", "reflexion", "search", "python")
MAS_VARIANTS: tuple[str, ...] = ("low", "high", "rounds", "rounds-serial")
Mode = Literal["sas", "mas", "rounds"]
#: The orchestrator prompt profiles: masorch's own prompt, or the layout of the released
#: MAS-Orchestra checkpoints (:mod:`masorch.run.official`; the xml dialect only).
PromptProfile = Literal["default", "official"]
#: The task families the official prompts come in: ``general``; ``choice`` (low DoM: answers
#: written as a letter or an integer); ``masbench`` (high DoM: arithmetic word problems, CoT only).
PromptFamily = Literal["general", "choice", "masbench"]
#: The plan token cap when none is set: the default prompt's plans are short; the checkpoints were
#: trained with up to 8192 response tokens, and their high-DoM plans run to several thousand.
DEFAULT_PLAN_TOKENS: dict[str, int] = {"default": 1024, "official": 8192}

#: Where an error in a system's fields points the user.
_SEE = "see docs/eval.md for the system fields"

#: Budget keys as configs write them -> Budget fields (the field names are read too).
BUDGET_KEYS = {"calls": "max_calls", "tokens": "max_tokens", "cost": "max_cost", "wall_s": "max_wall_s"}


class PoolModel(BaseModel):
    """A model of the rounds mode's pool: its model string and the one line the orchestrator reads.

    In YAML either ``{model: MODEL, description: TEXT}`` or the text ``"MODEL: TEXT"`` (the first
    colon followed by a space ends the model string).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    model: str = Field(min_length=1)
    description: str = ""

    @classmethod
    def parse(cls, text: str) -> PoolModel:
        """``"MODEL: description"`` as a PoolModel.

        >>> PoolModel.parse("openai:gpt-4o-mini: fast, cheap").model
        'openai:gpt-4o-mini'
        """
        model, sep, description = text.partition(": ")
        if not sep or not model.strip() or " " in model.strip():
            raise UsageError(
                f"pool entry {text[:80]!r} is not 'MODEL: description'",
                hint="e.g. 'local:qwen2.5-coder-0.5b: small and fast' (a colon and a space end the model)",
            )
        return cls(model=model.strip(), description=description.strip())


#: The fields only the rounds systems take (another system given one is a usage error).
ROUNDS_ONLY = ("pool", "synthesis", "tool_costs", "max_units", "max_rounds", "max_calls_per_round")


class System(BaseModel):
    """One system: its mode and variant (agent kind or DoM), models per role, plan and run limits.

    ``model`` is the sub-agent model (and the orchestrator's when ``orchestrator`` is None);
    ``agent_models`` overrides it per agent kind; ``params`` are the sas agent's parameters (e.g.
    ``n`` of sc); ``dialect``, ``repair``, ``constrain``, ``prune`` (leave out agents that feed
    nothing into the final one) and ``plan_tokens`` shape the orchestrator's plan (mas) or each
    orchestrator turn (rounds); ``plan_tokens`` is the plan's own token cap, apart from the
    sub-agents' (default 1024; 8192 with the official prompt). ``prompt`` picks the orchestrator
    prompt of a ``mas:low|high`` system: ``default`` (masorch's) or ``official`` (the message
    layout the released MAS-Orchestra checkpoints were trained on; xml dialect, which it selects
    when no dialect is given, and free decoding unless ``constrain`` is set), ``prompt_family``
    its task family (``general``, ``choice`` at low DoM, ``masbench`` at high DoM); ``prompt_file``
    loads a user's own copy of the official templates (YAML, see
    :func:`masorch.run.official.load_prompt_file`); ``prompt_examples`` replaces the worked example
    plans of the default prompt (calls and json dialects; "" leaves them out). ``timeout_s`` bounds the
    whole run and ``node_timeout_s`` each node; ``max_rounds`` and ``max_calls_per_round`` bound the
    rounds mode (``mas:rounds-serial`` is the rounds mode with one call per round). The rounds mode also
    takes a ``pool`` of named, described models each call may choose from, the ``synthesis`` model that
    answers from the trajectory at the round cap (default: the orchestrator), ``tool_costs`` (cost units
    per tool, over :data:`~masorch.run.round_calls.DEFAULT_TOOL_COSTS`) and ``max_units`` (the run's
    budget in those units). ``temperature`` and ``seed`` are the orchestrator's sampling (0 and None:
    greedy, the default; trajectory collection samples K runs with distinct seeds); ``top_p``,
    ``top_k`` and ``min_p`` cut the distribution it samples from (``top_k``/``min_p`` None: the
    backend's default, see :class:`~masorch.backends.base.GenerateConfig`).
    ``name`` labels the system in logs and reports (default: :attr:`label`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    #: Set from the ``sas:KIND`` / ``mas:DOM`` text, never written as keys.
    hidden_keys: ClassVar[tuple[str, ...]] = ("mode", "variant")

    mode: Mode
    variant: str = ""
    model: str = Field(min_length=1)
    name: str = ""
    orchestrator: str | None = None
    judge: str | None = None
    agent_models: dict[str, str] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    dialect: Dialect = "calls"
    prompt: PromptProfile = "default"
    prompt_family: PromptFamily = "general"
    prompt_file: str | None = None
    prompt_examples: str | None = Field(default=None, max_length=4000)
    repair: int = Field(default=0, ge=0)
    constrain: bool = True
    prune: bool = True
    plan_tokens: int = Field(default=1024, ge=1)
    budget: Budget = Field(default_factory=Budget)
    timeout_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    node_timeout_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_rounds: int = Field(default=12, ge=1, le=12)
    max_calls_per_round: int = Field(default=4, ge=1, le=4)
    pool: dict[str, PoolModel] = Field(default_factory=dict)
    synthesis: str | None = None
    tool_costs: dict[str, float] = Field(default_factory=dict)
    max_units: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    temperature: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None

    @field_validator("pool", mode="before")
    @classmethod
    def _pool(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: PoolModel.parse(v) if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("tool_costs", mode="before")
    @classmethod
    def _costs(cls, value: Any) -> Any:
        # YAML writes whole units as ints; strict mode would refuse them as floats.
        if isinstance(value, Mapping):
            return {
                k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in value.items()
            }
        return value

    @field_validator("tool_costs", mode="after")
    @classmethod
    def _costs_finite(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: v for k, v in value.items() if not (math.isfinite(v) and v >= 0)}
        if bad:
            raise ValueError(f"tool costs must be finite numbers of units >= 0, got {bad}")
        return value

    @field_validator("budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return budget_from(value)
        if not isinstance(value, Budget):
            raise ValueError(f"must be a mapping, got {value!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _default_name(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and not data.get("name"):
            mode, variant = data.get("mode"), data.get("variant", "")
            data = {**data, "name": system_label(str(mode), str(variant))}
        return data

    @model_validator(mode="before")
    @classmethod
    def _prompt_defaults(cls, data: Any) -> Any:
        # The official prompt writes the xml dialect and longer plans: its defaults, where unset.
        if isinstance(data, Mapping) and data.get("prompt_file") and data.get("prompt") is None:
            data = {**data, "prompt": "official"}
        # Only one-step plans use it (sas and rounds systems ignore it, so eval defaults can set it).
        if isinstance(data, Mapping) and data.get("mode") == "mas" and isinstance(data.get("prompt"), str):
            if data.get("plan_tokens") is None:
                data = {**data, "plan_tokens": DEFAULT_PLAN_TOKENS.get(data["prompt"], 1024)}
            if data["prompt"] == "official" and data.get("dialect") is None:
                data = {**data, "dialect": "xml"}
            if data["prompt"] == "official" and data.get("constrain") is None:
                data = {**data, "constrain": False}  # the checkpoints were trained decoding freely
        return data

    @model_validator(mode="after")
    def _variant(self) -> System:
        if self.mode == "sas" and self.variant not in SAS_KINDS:
            raise UsageError(
                f"unknown single-agent system 'sas:{self.variant}'",
                hint=f"use one of: {', '.join('sas:' + k for k in SAS_KINDS)}",
            )
        if self.mode == "mas" and self.variant not in ("low", "high"):
            raise UsageError(
                f"unknown multi-agent system 'mas:{self.variant}'",
                hint="use mas:low, mas:high, mas:rounds or mas:rounds-serial",
            )
        if self.mode == "rounds" and self.variant not in ("", "serial"):
            raise UsageError(
                f"unknown rounds variant {self.variant!r}", hint="use mas:rounds or mas:rounds-serial"
            )
        rounds_only = [
            name
            for name in ROUNDS_ONLY
            if getattr(self, name) != type(self).model_fields[name].get_default(call_default_factory=True)
        ]
        if self.mode != "rounds" and rounds_only:
            raise UsageError(
                f"{self.name}: {', '.join(rounds_only)} "
                f"{'applies' if len(rounds_only) == 1 else 'apply'} only to the rounds systems",
                hint="leave them out, or use mas:rounds or mas:rounds-serial",
            )
        if self.variant == "serial" and self.max_calls_per_round != 1:
            raise UsageError(
                f"{self.name} makes one call per round, not max_calls_per_round={self.max_calls_per_round}",
                hint="use mas:rounds for parallel calls",
            )
        if self.mode == "mas" and self.prompt == "official" and self.dialect != "xml":
            raise UsageError(
                f"{self.name}: the official prompt asks for the xml dialect, not {self.dialect!r}",
                hint="use dialect xml (or leave it unset) with prompt official",
            )
        if self.mode == "mas" and self.prompt_family != "general":
            wants = {"choice": "low", "masbench": "high"}[self.prompt_family]
            if self.prompt != "official" or self.variant != wants:
                raise UsageError(
                    f"{self.name}: prompt_family {self.prompt_family} is an official prompt for mas:{wants}",
                    hint=f"use it with prompt official on mas:{wants}, or leave prompt_family unset",
                )
        if self.prompt_examples is not None and (self.prompt != "default" or self.dialect == "xml"):
            raise UsageError(
                f"{self.name}: prompt_examples replaces the examples of the default prompt's calls and "
                f"json dialects, not of prompt {self.prompt} with dialect {self.dialect}",
                hint="use prompt default with dialect calls or json, or leave prompt_examples unset",
            )
        if self.prompt_file is not None and self.prompt != "official":
            raise UsageError(
                f"{self.name}: prompt_file holds official templates, so it needs prompt official",
                hint="set prompt: official (or leave prompt unset)",
            )
        bad = [n for n in self.pool if not n or not n.replace("-", "_").isidentifier()]
        if bad:
            raise UsageError(f"bad pool model names: {bad}", hint="name pool models like fast, big, coder_7b")
        return self

    @classmethod
    def parse(cls, text: str, /, **fields: Any) -> System:
        """The system ``mode:variant`` (``sas:cot``, ``mas:high``, ``mas:rounds``) with ``fields``.

        Bad values are a :class:`~masorch.errors.UsageError` naming the system and the field; the
        mode and variant come from ``text`` alone.
        """
        hidden = [k for k in fields if k in cls.hidden_keys]
        if hidden:
            raise UsageError(
                f"system {text[:60]!r}: {hidden[0]} is not a field (the system's name sets it)",
                hint=f"remove {hidden[0]}; name another system instead, e.g. sas:sc or mas:high",
            )
        mode, sep, variant = text.strip().partition(":")
        if not sep or mode not in ("sas", "mas"):
            raise UsageError(
                f"system {text!r} is not sas:KIND or mas:DOM",
                hint="e.g. sas:cot, sas:sc, mas:low, mas:high, mas:rounds "
                f"(sas kinds: {', '.join(SAS_KINDS)})",
            )
        if mode == "mas" and variant == "rounds":
            mode, variant = "rounds", ""
        elif mode == "mas" and variant == "rounds-serial":
            mode, variant = "rounds", "serial"
            fields = {"max_calls_per_round": 1, **fields}
        try:
            return cls(mode=mode, variant=variant, **fields)  # type: ignore[arg-type]  # validated
        except ValidationError as exc:
            raise config_error(cls, exc, context=f"system {text[:60]!r}", see=_SEE) from None

    @property
    def label(self) -> str:
        """``sas:KIND``, ``mas:DOM``, ``mas:rounds`` or ``mas:rounds-serial``."""
        return system_label(self.mode, self.variant)

    @property
    def is_sas(self) -> bool:
        """True for a single-agent baseline."""
        return self.mode == "sas"

    @property
    def dom(self) -> DoM | None:
        """The DoM of a one-step plan (mas), else None."""
        return DoM(self.variant) if self.mode == "mas" else None

    def sampling(self) -> dict[str, Any]:
        """The orchestrator's sampling fields, as :class:`~masorch.backends.base.Sampling` names them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(Sampling)}

    @property
    def orchestrator_model(self) -> str:
        """The orchestrator's model string (the sub-agent model unless set)."""
        return self.orchestrator or self.model

    def model_roles(self) -> list[tuple[str, str]]:
        """Each field that names a model this system calls, with its model string, in a stable order.

        >>> System.parse("mas:rounds", model="a:x", pool={"big": "b:y: large"}).model_roles()
        [('model', 'a:x'), ('orchestrator', 'a:x'), ('pool big', 'b:y')]
        """
        roles = [("model", self.model), *((f"agent_models {k}", m) for k, m in self.agent_models.items())]
        if not self.is_sas:
            roles.append(("orchestrator", self.orchestrator_model))
        if self.mode == "rounds":
            roles += [(f"pool {n}", p.model) for n, p in self.pool.items()]
            if self.synthesis:
                roles.append(("synthesis", self.synthesis))
        if self.judge:
            roles.append(("judge", self.judge))
        return roles

    def model_strings(self) -> list[str]:
        """Every distinct model string this system calls, in a stable order."""
        return list(dict.fromkeys(m for _, m in self.model_roles()))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in run log headers); :meth:`from_dict` inverts it.

        Model strings are redacted (:func:`masorch.redact.redact`): a key in a server URL stays out
        of logs and reports, so the inverse has no credentials either.
        """
        out = self.model_dump(mode="json")
        for role in ("model", "orchestrator", "judge", "synthesis"):
            if isinstance(out[role], str):
                out[role] = redact(out[role])
        out["agent_models"] = {k: redact(v) for k, v in self.agent_models.items()}
        for entry in out["pool"].values():
            entry["model"] = redact(entry["model"])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> System:
        """The system a :meth:`to_dict` dict describes."""
        try:
            return cls(**data)
        except ValidationError as exc:
            name = str(data.get("name", "?"))[:60]
            raise config_error(cls, exc, context=f"system {name!r}", see=_SEE) from None


def system_label(mode: str, variant: str) -> str:
    """The name a system is written as, from its logged mode and variant.

    >>> system_label("rounds", ""), system_label("sas", "cot")
    ('mas:rounds', 'sas:cot')
    """
    if mode == "rounds":
        return "mas:rounds-serial" if variant == "serial" else "mas:rounds"
    return f"{mode}:{variant}"


def budget_from(data: Mapping[str, Any] | None) -> Budget:
    """A Budget from ``{calls, tokens, cost, wall_s}`` (config keys; the field names are read too).

    >>> budget_from({"calls": 12, "tokens": 5000}).describe()
    '12 calls, 5000 tokens'
    """
    data = data or {}
    fields = {BUDGET_KEYS.get(str(k), str(k)): v for k, v in data.items()}
    unknown = sorted(set(fields) - set(BUDGET_KEYS.values()))
    if unknown:
        raise UsageError(f"unknown budget keys: {', '.join(unknown)}", hint=f"use {', '.join(BUDGET_KEYS)}")
    for key, value in fields.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UsageError(f"budget {key} must be a number, got {value!r}", hint="e.g. budget: {calls: 20}")
    return Budget(**fields)
