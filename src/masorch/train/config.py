"""The GRPO training configuration: dataclasses whose fields document themselves, read from YAML.

Every field carries its meaning in ``metadata["help"]``; :func:`describe` lists them, and
``masorch train grpo --show-config`` prints that list. Unknown keys are errors that name the key
and the closest known one, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.files import load_yaml_file
from masorch.plan.parse import Dialect
from masorch.train.reward_components import DEFAULT_WEIGHTS

#: The values of ``TrainConfig.precision``.
PRECISIONS = ("auto", "bf16", "fp32")


def _h(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass
class SourceConfig:
    """One source of prompts: a MASBench file, generated MASBench tasks, or an eval dataset."""

    kind: str = field(
        default="masbench",
        metadata=_h("masbench (a JSONL/parquet file), masbench_gen (generated now) or dataset"),
    )
    path: str | None = field(
        default=None, metadata=_h("masbench: the .jsonl or .parquet file of MASBench instances")
    )
    name: str | None = field(
        default=None, metadata=_h("dataset: a masorch.eval.datasets name (aime24, hotpotqa, ...)")
    )
    axis: str = field(default="depth", metadata=_h("masbench_gen: the MASBench axis"))
    values: str = field(default="2-4", metadata=_h("masbench_gen: axis values, e.g. 2-4 or 2,3,8"))
    count: int = field(default=32, metadata=_h("masbench_gen: instances in all (spread over the values)"))
    split: str = field(default="train", metadata=_h("masbench_gen: train or test (template-disjoint)"))
    seed: int = field(default=0, metadata=_h("masbench_gen: generator seed; dataset: sampling seed"))
    limit: int | None = field(default=None, metadata=_h("keep at most this many prompts of this source"))
    scorer: str | None = field(
        default=None, metadata=_h("grading of the executed answer (default: masbench, or the dataset's)")
    )


@dataclass
class TrainConfig:
    """Everything ``masorch train grpo`` needs; the defaults make a small LOW-DoM MASBench run."""

    # -- the policy (the orchestrator being trained) --
    model: str = field(
        default="local:qwen2.5-coder-0.5b",
        metadata=_h(
            "orchestrator to train: local:<embedded GGUF>, a .gguf path, or a Hugging Face model dir"
        ),
    )
    lora: bool = field(default=True, metadata=_h("train LoRA adapters (peft) instead of all weights"))
    lora_r: int = field(default=8, metadata=_h("LoRA rank"))
    lora_alpha: int = field(default=16, metadata=_h("LoRA alpha"))
    lora_dropout: float = field(default=0.0, metadata=_h("LoRA dropout"))
    precision: str = field(
        default="auto",
        metadata=_h(
            "auto (bf16 where the hardware has fast bf16: a CUDA GPU, or a CPU with AMX/AVX512-BF16; "
            "else fp32), bf16 or fp32. bf16 with LoRA keeps the frozen base weights in bf16 and the "
            "adapters in fp32; full training keeps fp32 weights under bf16 autocast"
        ),
    )
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"], metadata=_h("modules LoRA adapts")
    )
    # -- prompts --
    train: list[SourceConfig] = field(
        default_factory=list, metadata=_h("prompt sources for training (at least one)")
    )
    eval: list[SourceConfig] = field(
        default_factory=list, metadata=_h("held-out prompt sources for the before/after evaluation")
    )
    eval_limit: int = field(
        default=16, metadata=_h("held-out prompts evaluated before and after training (0: no evaluation)")
    )
    dom: str = field(
        default="low", metadata=_h("degree of MAS in the orchestrator prompt and validation: low or high")
    )
    dialect: Dialect = field(
        default="calls", metadata=_h("plan dialect the orchestrator is asked to write: calls, json or xml")
    )
    constrain: bool = field(
        default=False,
        metadata=_h(
            "decode the held-out evaluation's plans under the dialect's grammar where the backend can; "
            "the sampled training plans always decode freely (invalid plans must be learnable)"
        ),
    )
    # -- the sub-agents that execute sampled plans --
    subagent: str = field(
        default="local:smollm2-135m", metadata=_h("sub-agent model string (provider:model)")
    )
    subagent_max_tokens: int = field(default=256, metadata=_h("completion cap of each sub-agent call"))
    cache_path: str | None = field(
        default=None,
        metadata=_h(
            "record/replay SQLite cache of sub-agent calls (default: <output_dir>/subagent_cache.sqlite)"
        ),
    )
    cache_mode: str = field(
        default="read_write", metadata=_h("sub-agent cache mode: read_write, replay, record or off")
    )
    plan_max_calls: int | None = field(default=16, metadata=_h("per-plan budget: sub-agent calls"))
    plan_max_tokens: int | None = field(default=None, metadata=_h("per-plan budget: sub-agent tokens"))
    plan_deadline_s: float | None = field(
        default=180.0, metadata=_h("per-plan wall-clock deadline (seconds)")
    )
    concurrency: int = field(default=4, metadata=_h("sampled plans executed at once"))
    # -- reward --
    reward_weights: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        metadata=_h("weight of each component: correctness, validity, dom, cost"),
    )
    cost_target_calls: int | None = field(
        default=8, metadata=_h("cost component: sub-agent calls per plan before a penalty")
    )
    cost_target_tokens: int | None = field(
        default=None, metadata=_h("cost component: sub-agent tokens per plan before a penalty")
    )
    cost_cap: float = field(default=1.0, metadata=_h("cost component: largest penalty"))
    # -- GRPO (TRL) --
    num_generations: int = field(default=4, metadata=_h("K: plans sampled per prompt (the GRPO group)"))
    batch_size: int = field(
        default=4, metadata=_h("completions per optimisation step (a multiple of num_generations)")
    )
    max_steps: int = field(default=20, metadata=_h("optimisation steps"))
    learning_rate: float = field(
        default=1e-4, metadata=_h("learning rate (1e-4 suits LoRA; use ~1e-6 for full fine-tuning)")
    )
    beta: float = field(
        default=0.0, metadata=_h("KL coefficient (0: no reference model, as in recent GRPO practice)")
    )
    temperature: float = field(default=1.0, metadata=_h("sampling temperature of the K plans"))
    max_completion_length: int = field(default=160, metadata=_h("token cap of a sampled plan"))
    gradient_checkpointing: bool = field(
        default=True,
        metadata=_h(
            "recompute activations in the backward pass instead of keeping them: more compute, far less "
            "memory (without it, GRPO on 8 x 1,300-token sequences of a 0.5B model passed 24 GB on a CPU)"
        ),
    )
    logging_steps: int = field(default=1, metadata=_h("log every N steps"))
    max_train_s: float | None = field(
        default=None,
        metadata=_h("stop training cleanly after this many seconds (then save and evaluate); None: no limit"),
    )
    save_steps: int = field(default=0, metadata=_h("save a checkpoint every N steps (0: only at the end)"))
    seed: int = field(default=0, metadata=_h("random seed"))
    output_dir: str = field(
        default="runs/grpo", metadata=_h("where checkpoints, logs and the final model go")
    )
    trl: dict[str, Any] = field(
        default_factory=dict, metadata=_h("extra GRPOConfig fields passed through unchanged (see TRL's docs)")
    )

    def __post_init__(self) -> None:
        if self.dom not in ("low", "high"):
            raise UsageError(f"dom must be low or high, got {self.dom!r}", hint="dom: low")
        if self.dialect not in ("calls", "json", "xml"):
            raise UsageError(f"unknown dialect {self.dialect!r}", hint="dialect: calls, json or xml")
        if self.precision not in PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r}", hint="precision: auto, bf16 or fp32")
        if self.num_generations < 2:
            raise UsageError(
                "num_generations must be >= 2: GRPO compares plans within a group", hint="e.g. 4"
            )
        if self.batch_size % self.num_generations:
            raise UsageError(
                f"batch_size {self.batch_size} is not a multiple of num_generations {self.num_generations}",
                hint=f"e.g. batch_size: {2 * self.num_generations}",
            )


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(inner[0], value, where)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise UsageError(f"{where} must be a list, got {type(value).__name__}", hint="write a YAML list")
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise UsageError(f"{where} must be a mapping", hint="write a YAML mapping")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise UsageError(f"{where} must be a mapping", hint=f"fields: {', '.join(field_names(tp))}")
        return from_dict(tp, value, where)  # type: ignore[arg-type]
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if (tp in (int, float, str, bool) and not isinstance(value, tp)) or (
        tp is int and isinstance(value, bool)
    ):
        raise UsageError(f"{where} must be {tp.__name__}, got {value!r}", hint="fix the value in the config")
    return value


def field_names(cls: Any) -> list[str]:
    """The field names of a config dataclass, in order."""
    return [f.name for f in dataclasses.fields(cls)]


T = typing.TypeVar("T")


def from_dict(cls: type[T], data: Mapping[str, Any], where: str = "config") -> T:
    """Build ``cls`` from a mapping, checking keys and types; errors name the key and a fix."""
    hints = typing.get_type_hints(cls)
    names = field_names(cls)
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            raise UsageError(
                f"unknown key {where}.{key}",
                hint=(f"did you mean {close[0]!r}? " if close else "")
                + "see `masorch train grpo|collect --show-config`",
            )
        kwargs[key] = _convert(hints[key], value, f"{where}.{key}")
    return cls(**kwargs)


def load_yaml(
    cls: type[T], path: str | Path, overrides: Mapping[str, Any] | None = None, what: str = ""
) -> T:
    """Read a YAML config file as ``cls``; ``overrides`` (top-level keys) win over the file."""
    p = Path(path)
    what = what or "training config"
    if not p.is_file():
        raise UsageError(f"no such config file: {p}", hint="give the path of a YAML file")
    data = load_yaml_file(p, what=what) or {}
    if not isinstance(data, dict):
        raise UsageError(f"{p} must hold a YAML mapping", hint="write key: value lines")
    data.update(overrides or {})
    return from_dict(cls, data)


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """Read a YAML training config; ``overrides`` (top-level keys) win over the file."""
    cfg = load_yaml(TrainConfig, path, overrides)
    if not cfg.train:
        raise UsageError(
            f"{path} has no train sources", hint="add train: [{kind: masbench_gen, axis: depth}]"
        )
    return cfg


def describe(cls: Any = TrainConfig, prefix: str = "") -> list[tuple[str, str, str]]:
    """(name, default, help) of every field, nested source fields as ``train[].<name>``."""
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        out.append((prefix + f.name, default, f.metadata.get("help", "")))
    if cls is TrainConfig:
        out += describe(SourceConfig, "train[] / eval[]: ")
    return out
