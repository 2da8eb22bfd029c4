"""The configuration of ``masorch train collect``: a teacher, a training set, K samples, selection, faults.

Read from YAML like the GRPO config (:mod:`masorch.train.config`): fields document themselves,
unknown keys are errors naming the closest field, ``--show-config`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.run.faults import FAULT_STATUSES, ToolFaults
from masorch.run.system import System
from masorch.train.config import _h, describe, load_yaml


@dataclass
class DataConfig:
    """One part of the training set: anything ``masorch eval run --data`` reads, graded by its scorer."""

    spec: str = field(
        default="",
        metadata=_h(
            "a dataset name (math500, hotpotqa: with its corpus), a MASBench file or directory "
            "(`masorch bench make --split train`), your .jsonl/.parquet/.csv, or hf:NAME[:CONFIG][:SPLIT]"
        ),
    )
    limit: int | None = field(
        default=None, metadata=_h("keep the first N questions (per axis value for MASBench)")
    )
    sample: int | None = field(default=None, metadata=_h("keep a seeded random N questions"))
    seed: int = field(default=0, metadata=_h("seed of `sample`"))
    scorer: str | None = field(
        default=None,
        metadata=_h("grading (default: the dataset's; required for plain rows: math, exact, f1)"),
    )


@dataclass
class CollectConfig:
    """Everything ``masorch train collect`` needs."""

    teacher: str = field(
        default="", metadata=_h("the orchestrator that writes the trajectories: any model string (required)")
    )
    subagent: str | None = field(default=None, metadata=_h("the sub-agent model (default: the teacher)"))
    system: str = field(default="mas:rounds", metadata=_h("mas:rounds or mas:rounds-serial"))
    system_fields: dict[str, Any] = field(
        default_factory=dict,
        metadata=_h(
            "more System fields of the run (max_rounds, pool, synthesis, tool_costs, max_units, budget, "
            "timeout_s, node_timeout_s, agent_models, ...), as in an eval systems file"
        ),
    )
    data: list[DataConfig] = field(default_factory=list, metadata=_h("the training set (at least one part)"))
    data_dir: str | None = field(
        default=None, metadata=_h("the datasets' cache directory (default: masorch's)")
    )
    samples: int = field(default=4, metadata=_h("K: trajectories sampled per question"))
    temperature: float = field(default=0.8, metadata=_h("the teacher's sampling temperature (> 0)"))
    seed: int = field(default=0, metadata=_h("sample k of a question is sampled with seed `seed + k`"))
    stop_when_recovered: bool = field(
        default=True,
        metadata=_h("stop sampling a question once one of its trajectories is correct and recovered"),
    )
    max_tool_share: float = field(
        default=0.5,
        metadata=_h("tool balance: no tool may make more than this share of the kept set's tool calls"),
    )
    fault_rate: float = field(
        default=0.2, metadata=_h("share of checked tool calls made to fail on purpose (0: no faults)")
    )
    fault_kinds: list[str] = field(
        default_factory=lambda: list(FAULT_STATUSES), metadata=_h("statuses injected faults end with")
    )
    fault_seed: int = field(default=0, metadata=_h("seed of the fault draws"))
    faults_per_run: int | None = field(
        default=2, metadata=_h("at most this many injected faults per trajectory")
    )
    retry_errors: bool = field(
        default=False,
        metadata=_h("on a rerun, sample again the attempts that ended with status error (an outage)"),
    )
    subagent_max_tokens: int | None = field(
        default=None, metadata=_h("completion cap of each sub-agent call")
    )
    cache_path: str | None = field(
        default=None,
        metadata=_h("record/replay SQLite cache of every call (default: <output_dir>/calls.sqlite)"),
    )
    cache_mode: str = field(
        default="read_write", metadata=_h("cache mode: read_write, replay, record or off")
    )
    concurrency: int = field(default=4, metadata=_h("questions sampled at once"))
    output_dir: str = field(
        default="runs/collect", metadata=_h("where attempts, the dataset and the summary go")
    )

    def __post_init__(self) -> None:
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
        self._faults()  # checks the fault fields

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
    """Read a YAML collect config; ``overrides`` (top-level keys) win over the file."""
    cfg = load_yaml(CollectConfig, path, overrides, what="collect config")
    if not cfg.data:
        raise UsageError(f"{path} has no data", hint="data: [{spec: data/masbench_train}]")
    cfg.system_for(0)  # a bad system field is a usage error now, not after the first question
    return cfg


def describe_collect() -> list[tuple[str, str, str]]:
    """(name, default, help) of every collect config field, the data fields as ``data[]: <name>``."""
    return describe(CollectConfig) + describe(DataConfig, "data[]: ")
