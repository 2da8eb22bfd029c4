"""Settings shared by every component: where masorch keeps its caches, and the config record base."""

from __future__ import annotations

import difflib
import os
import typing
from collections.abc import Mapping
from contextvars import ContextVar
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from masorch.errors import UsageError
from masorch.files import load_yaml_file


def cache_dir(kind: str, env: Mapping[str, str] | None = None) -> Path:
    """The cache directory for ``kind`` (``models``, ``data``, ...).

    ``$MASORCH_CACHE/<kind>`` where set, else ``$XDG_CACHE_HOME/masorch/<kind>``, else
    ``~/.cache/masorch/<kind>``.

    >>> cache_dir("models", {"MASORCH_CACHE": "/srv/cache"}).as_posix()
    '/srv/cache/models'
    >>> cache_dir("data", {"XDG_CACHE_HOME": "/xdg"}).as_posix()
    '/xdg/masorch/data'
    """
    env = os.environ if env is None else env
    if env.get("MASORCH_CACHE"):
        return Path(env["MASORCH_CACHE"]).expanduser() / kind
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "masorch" / kind


#: True while a config record is being built: pydantic calls the ``__init__`` of nested records
#: too, and only the outermost one knows the whole place of a bad key (``config.train[0].axes``).
_BUILDING: ContextVar[bool] = ContextVar("masorch_config_building", default=False)

_M = typing.TypeVar("_M", bound=BaseModel)


class ConfigModel(BaseModel):
    """A configuration record read from YAML: strict, frozen, unknown keys refused, fields described.

    Every field carries its meaning in ``Field(description=...)``; :func:`describe_fields` lists
    them (the ``--show-config`` of a command). Building one with a bad value raises a
    :class:`~masorch.errors.UsageError` naming the key (``config.train[0].axes``) and, for an
    unknown key, the closest known one, never a pydantic traceback. Subclasses check their
    cross-field rules in a ``model_validator(mode="after")`` that raises UsageError itself.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, allow_inf_nan=False)

    #: The command that lists the fields: every error's hint points to it.
    show_config: ClassVar[str] = ""
    #: What the file holds, as error messages name it.
    what: ClassVar[str] = "config"

    def __init__(self, /, **data: Any) -> None:  # positional-only: a key named `self` is a bad key
        if _BUILDING.get():  # a nested record: the outermost one reports the problem with its place
            super().__init__(**data)
            return
        token = _BUILDING.set(True)
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(type(self), exc) from None
        finally:
            _BUILDING.reset(token)

    @classmethod
    def load(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> Self:
        """Read a YAML file as this config; ``overrides`` win over the file.

        An override's key is a top-level key or a dotted path into nested mappings
        (``rewards.theta_tool``), which changes that one field and keeps its siblings.
        """
        p = Path(path)
        if p.is_dir():
            raise UsageError(f"{p} is a directory, not a config file", hint="give the path of a YAML file")
        if not p.is_file():
            problem = f"{p} is not a regular file" if p.exists() else f"no such config file: {p}"
            raise UsageError(problem, hint="give the path of a YAML file")
        data = load_yaml_file(p, what=cls.what)
        data = {} if data is None else data  # an empty file: every default
        if not isinstance(data, dict):
            raise UsageError(f"{p} must hold a YAML mapping", hint="write key: value lines")
        for key, value in (overrides or {}).items():
            _set_path(data, str(key), value)
        return cls(**{str(k): v for k, v in data.items()})


def _set_path(data: dict[Any, Any], key: str, value: Any) -> None:
    """Set ``data[a][b]...`` for the dotted ``key`` ``a.b...``, making the mappings it lacks.

    >>> d = {"rewards": {"w": 1}}
    >>> _set_path(d, "rewards.theta_tool", 2); d
    {'rewards': {'w': 1, 'theta_tool': 2}}
    """
    *parents, last = key.split(".")
    if not all(parents) or not last:
        raise UsageError(
            f"cannot set {key!r}: a dotted key has an empty part", hint="e.g. rewards.theta_tool=2"
        )
    where = data
    for i, part in enumerate(parents):
        child = where.setdefault(part, {})
        if child is None:
            child = where[part] = {}
        if not isinstance(child, dict):
            place = ".".join(parents[: i + 1])
            raise UsageError(
                f"cannot set {key}: {place} is not a mapping", hint=f"set {place} as a whole: {place}=VALUE"
            )
        where = child
    where[last] = value


_TYPE_NAMES = {
    "int_type": "int",
    "float_type": "float",
    "string_type": "str",
    "bool_type": "bool",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
}


def config_error(
    cls: type[BaseModel], exc: ValidationError, *, context: str = "", see: str | None = None
) -> UsageError:
    """The first problem of a validation error as a UsageError that names the key and the fix.

    The key is named from the config's root (``config.train[0].axes``), or after ``context`` when
    the record is one entry of something larger (``system 'sas:cot': budget``); ``see`` replaces the
    hint's pointer to the fields (default: the class's ``show_config`` command).
    """
    errors = exc.errors()
    # A misspelt key explains the missing one beside it: name the unknown key first.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = first["loc"]
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
    where = f"{context}: {path.lstrip('.') or 'value'}" if context else "config" + path
    if see is None:
        command = getattr(cls, "show_config", "")
        see = f"see `{command}`" if command else "see the docs of this config"
    kind = first["type"]
    if kind == "extra_forbidden":
        known = _field_names_at(cls, loc[:-1])
        if not loc[:-1]:  # fields the record sets itself are no key for the user to mean
            known = [k for k in known if k not in getattr(cls, "hidden_keys", ())]
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        did_you_mean = f"did you mean {close[0]!r}? " if close else ""
        return UsageError(f"unknown key {where}", hint=did_you_mean + see)
    value = first.get("input")
    expected = _TYPE_NAMES.get(kind) or first["msg"].removeprefix("Input should be ")
    if expected == first["msg"]:  # not an "Input should be ..." message: say it as it is
        said = expected.removeprefix("Value error, ")
        return UsageError(f"{where} {said}" if said.startswith("must ") else f"{where}: {said}", hint=see)
    return UsageError(f"{where} must be {expected}, got {value!r}", hint="fix the value; " + see)


def _nested_model(annotation: Any, base: type[_M]) -> type[_M] | None:
    """The ``base`` class inside ``annotation`` (``list[SourceConfig]``, ``X | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, base):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested_model(arg, base)
        if found is not None:
            return found
    return None


def _field_names_at(cls: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names of the (nested) record that ``loc`` points into."""
    model: type[BaseModel] | None = cls
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        info = model.model_fields.get(part)
        model = _nested_model(info.annotation, BaseModel) if info is not None else None
    return list(model.model_fields) if model is not None else []


def describe_fields(cls: type[ConfigModel]) -> list[tuple[str, str, str]]:
    """(name, default, help) of every field, then the fields of nested configs as ``a[] / b[]: <name>``.

    >>> from pydantic import Field
    >>> class Part(ConfigModel):
    ...     spec: str = Field(default="", description="what to read")
    ...     limit: int | None = Field(default=None, description="keep the first N")
    >>> describe_fields(Part)
    [('spec', "''", 'what to read'), ('limit', 'None', 'keep the first N')]
    """
    rows = _rows(cls, "")
    nested: dict[type[ConfigModel], list[str]] = {}
    for name, info in cls.model_fields.items():
        inner = _nested_model(info.annotation, ConfigModel)
        if inner is not None:
            listed = typing.get_origin(info.annotation) is list
            nested.setdefault(inner, []).append(f"{name}[]" if listed else name)
    for inner, names in nested.items():
        rows += _rows(inner, " / ".join(names) + ("." if len(names) == 1 and "[" not in names[0] else ": "))
    return rows


def _rows(cls: type[ConfigModel], prefix: str) -> list[tuple[str, str, str]]:
    return [
        (prefix + name, _default(info), info.description or "") for name, info in cls.model_fields.items()
    ]


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "(required)"
    value = info.get_default(call_default_factory=True)
    return repr(value.value if isinstance(value, Enum) else value)
