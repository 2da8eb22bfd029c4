"""The configuration of ``masorch train collect``: a teacher, a training set, K samples, selection, faults.

Read from YAML like the GRPO config (:class:`masorch.config.ConfigModel`): fields document
themselves, unknown keys are errors naming the closest field, ``--show-config`` lists them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, model_validator

from masorch.backends.cache import CacheMode
from masorch.config import ConfigModel, describe_fields
from masorch.errors import UsageError
from masorch.run.faults import FAULT_KINDS, ToolFaults
from masorch.run.system import System


class DataConfig(ConfigModel):
    """One part of the training set: anything ``masorch eval run --data`` reads, graded by its scorer."""

    spec: str = Field(
        default="",
        description=(
            "a dataset name (math500, hotpotqa: with its corpus), a MASBench file or directory "
            "(`masorch bench make --split train`), your .jsonl/.parquet/.csv, or hf:NAME[:CONFIG][:SPLIT]"
        ),
    )
    skip: int = Field(
        default=0, ge=0, description="leave out the first N questions (MASBench: records), before the rest"
    )
    limit: int | None = Field(
        default=None, ge=0, description="keep the first N questions (per axis value for MASBench)"
    )
    sample: int | None = Field(default=None, ge=0, description="keep a seeded random N questions")
    seed: int = Field(default=0, description="seed of `sample`")
    scorer: str | None = Field(
        default=None,
        description="grading (default: the dataset's; required for plain rows: math, exact, f1)",
    )


#: System fields a collect config sets from its own fields (system field: config field).
_OWN_SYSTEM_FIELDS = {
    "model": "subagent",
    "orchestrator": "teacher",
    "temperature": "temperature",
    "seed": "seed",
}


class CollectConfig(ConfigModel):
    """Everything ``masorch train collect`` needs."""

    show_config: ClassVar[str] = "masorch train collect --show-config"
    what: ClassVar[str] = "collect config"

    teacher: str = Field(
        default="", description="the orchestrator that writes the trajectories: any model string (required)"
    )
    subagent: str | None = Field(default=None, description="the sub-agent model (default: the teacher)")
    system: str = Field(default="mas:rounds", description="mas:rounds or mas:rounds-serial")
    system_fields: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "more System fields of the run (max_rounds, pool, synthesis, tool_costs, max_units, "
            "budget, timeout_s, node_timeout_s, agent_models, ...), as in an eval systems file"
        ),
    )
    data: list[DataConfig] = Field(default_factory=list, description="the training set (at least one part)")
    data_dir: str | None = Field(
        default=None, description="the datasets' cache directory (default: masorch's)"
    )
    samples: int = Field(default=4, description="K: trajectories sampled per question")
    temperature: float = Field(default=0.8, description="the teacher's sampling temperature (> 0)")
    seed: int = Field(default=0, description="sample k of a question is sampled with seed `seed + k`")
    stop_when_recovered: bool = Field(
        default=True,
        description="stop sampling a question once one of its trajectories is correct and recovered",
    )
    max_tool_share: float = Field(
        default=0.5,
        description="tool balance: no tool may make more than this share of the kept set's tool calls",
    )
    fault_rate: float = Field(
        default=0.2, description="share of checked tool calls made to fail on purpose (0: no faults)"
    )
    fault_kinds: list[str] = Field(
        default_factory=lambda: list[str](FAULT_KINDS),
        description="the faults injected: EXEC_ERR, TIMEOUT, FORMAT_DRIFT (an unreadable reply: EXEC_ERR)",
    )
    fault_seed: int = Field(default=0, description="seed of the fault draws")
    faults_per_run: int | None = Field(
        default=2, description="at most this many injected faults per trajectory"
    )
    retry_errors: bool = Field(
        default=False,
        description="on a rerun, sample again the attempts that ended with status error (an outage)",
    )
    subagent_max_tokens: int | None = Field(
        default=None, ge=1, description="completion cap of each sub-agent call"
    )
    cache_path: str | None = Field(
        default=None,
        description="record/replay SQLite cache of every call (default: <output_dir>/calls.sqlite)",
    )
    cache_mode: CacheMode = Field(
        default="read_write", description="cache mode: read_write, replay, record or off"
    )
    concurrency: int = Field(default=4, description="questions sampled at once")
    output_dir: str = Field(
        default="runs/collect", min_length=1, description="where attempts, the dataset and the summary go"
    )

    @model_validator(mode="after")
    def _check(self) -> CollectConfig:
        if not self.teacher:
            raise UsageError("the collect config names no teacher", hint="teacher: openai:gpt-4o-mini")
        if self.samples < 1:
            raise UsageError(f"samples must be >= 1, got {self.samples}", hint="samples: 4")
        if self.samples > 1 and self.temperature <= 0:
            raise UsageError(
                f"{self.samples} samples at temperature {self.temperature} would be one trajectory repeated",
                hint="temperature: 0.8",
            )
        if not 0 < self.max_tool_share <= 1:
            raise UsageError(
                f"max_tool_share {self.max_tool_share} is not in (0, 1]", hint="max_tool_share: 0.5"
            )
        if self.concurrency < 1:
            raise UsageError("concurrency must be >= 1", hint="concurrency: 4")
        owned = sorted(self.system_fields.keys() & _OWN_SYSTEM_FIELDS.keys())
        if owned:  # one of the two values would be dropped without a word
            raise UsageError(
                f"system_fields sets {', '.join(owned)}, which the collect config sets itself",
                hint="use " + ", ".join(f"{_OWN_SYSTEM_FIELDS[k]}:" for k in owned) + " instead",
            )
        self._faults()  # checks the fault fields
        return self

    def faults(self) -> ToolFaults | None:
        """The fault injection this config asks for (None at rate 0)."""
        return self._faults() if self.fault_rate > 0 else None

    def _faults(self) -> ToolFaults:
        return ToolFaults(
            rate=self.fault_rate,
            kinds=tuple(self.fault_kinds),  # type: ignore[arg-type]  # checked by ToolFaults
            seed=self.fault_seed,
            max_per_run=self.faults_per_run,
        )

    def system_for(self, k: int) -> System:
        """The system of sample ``k``: the teacher as orchestrator, sampled with seed ``seed + k``."""
        fields = {
            "model": self.subagent or self.teacher,
            "orchestrator": self.teacher,
            **self.system_fields,
            "temperature": self.temperature,
            "seed": self.seed + k,
        }
        system = System.parse(self.system, **fields)
        if system.mode != "rounds":
            raise UsageError(
                f"collect runs the multi-round mode, not {self.system}", hint="system: mas:rounds"
            )
        return system

    @property
    def out(self) -> Path:
        """The output directory."""
        return Path(self.output_dir)


def load_collect_config(path: str | Path, overrides: dict[str, Any] | None = None) -> CollectConfig:
    """Read a YAML collect config; ``overrides`` (keys, dotted for nested ones) win over the file."""
    cfg = CollectConfig.load(path, overrides)
    if not cfg.data:
        raise UsageError(f"{path} has no data", hint="data: [{spec: data/masbench_train}]")
    cfg.system_for(0)  # a bad system field is a usage error now, not after the first question
    return cfg


def describe_collect() -> list[tuple[str, str, str]]:
    """(name, default, help) of every collect config field, the data fields as ``data[]: <name>``."""
    return describe_fields(CollectConfig)
