"""Sub-agent signatures as data: what the validator checks and what an orchestrator sees.

``plan/`` imports nothing else of masorch, so the catalogue is plain data passed in by the caller
(``masorch.agents`` builds the default one from its registry).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

ParamType = Literal["int", "float", "str", "bool", "list[str]"]


class ParamSpec(BaseModel):
    """One typed parameter of a sub-agent kind, with its default and allowed range."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    type: ParamType
    description: str = ""
    default: Any = None
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    min_items: int | None = None
    max_items: int | None = None

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not acceptable for this parameter, or None when it is.

        >>> ParamSpec(name="n", type="int", minimum=1, maximum=16).problem(40)
        'n must be at most 16, got 40'
        >>> ParamSpec(name="n", type="int").problem("5") is not None
        True
        """
        if self.type == "bool":
            if not isinstance(value, bool):
                return f"{self.name} must be true or false, got {value!r}"
            return None
        if self.type in ("int", "float"):
            numeric = (int,) if self.type == "int" else (int, float)
            if isinstance(value, bool) or not isinstance(value, numeric):
                kind = "an integer" if self.type == "int" else "a number"
                return f"{self.name} must be {kind}, got {value!r}"
            if isinstance(value, float) and not math.isfinite(value):  # NaN passes every range test
                return f"{self.name} must be a finite number, got {value!r}"
            if self.minimum is not None and value < self.minimum:
                return f"{self.name} must be at least {_num(self.minimum)}, got {value}"
            if self.maximum is not None and value > self.maximum:
                return f"{self.name} must be at most {_num(self.maximum)}, got {value}"
            return None
        if self.type == "str":
            if not isinstance(value, str):
                return f"{self.name} must be a string, got {value!r}"
            if self.choices is not None and value not in self.choices:
                return f"{self.name} must be one of {', '.join(self.choices)}, got {value!r}"
            return _text_problem(self.name, value)
        # list[str]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"{self.name} must be a list of strings, got {value!r}"
        if self.min_items is not None and len(value) < self.min_items:
            return f"{self.name} needs at least {self.min_items} items, got {len(value)}"
        if self.max_items is not None and len(value) > self.max_items:
            return f"{self.name} takes at most {self.max_items} items, got {len(value)}"
        return next((p for i, v in enumerate(value) if (p := _text_problem(f"{self.name}[{i}]", v))), None)


#: The longest string parameter, or item of a list parameter (a debate role): a line, not a document
#: (the plan schema for constrained decoding has the same bound).
PARAM_TEXT_CHARS = 200


def _text_problem(name: str, text: str) -> str | None:
    """Why ``text`` is no string parameter value: longer than :data:`PARAM_TEXT_CHARS`.

    >>> _text_problem("roles[1]", "x" * 201)
    'roles[1] is 201 characters long; at most 200'
    """
    if len(text) > PARAM_TEXT_CHARS:
        return f"{name} is {len(text)} characters long; at most {PARAM_TEXT_CHARS}"
    return None


class KindSignature(BaseModel):
    """The signature of one sub-agent kind: its name, one-line capability and parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    summary: str
    params: tuple[ParamSpec, ...] = ()

    def param(self, name: str) -> ParamSpec | None:
        """The parameter with this name, or None."""
        return next((p for p in self.params if p.name == name), None)

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults filled in for every parameter not given (no checking: validate first)."""
        out = {p.name: p.default for p in self.params}
        out.update(given)
        return out


#: Kind name -> signature. Order is the order shown to an orchestrator.
Catalogue = Mapping[str, KindSignature]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
