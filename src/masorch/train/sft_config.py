"""The configuration of ``masorch train sft``: the model, the collected trajectories, LoRA, precision.

Read from YAML like the GRPO config (:mod:`masorch.train.config`), with the same names for the
fields both have (model, LoRA, precision, gradient checkpointing, learning rate, steps, logging,
saving, ``max_train_s``, seed, ``trl`` pass-through).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.train.config import PRECISIONS, _h, describe, load_yaml


@dataclass
class SftConfig:
    """Everything ``masorch train sft`` needs; the defaults make a small LoRA run."""

    model: str = field(
        default="local:qwen2.5-coder-0.5b",
        metadata=_h(
            "orchestrator to train: local:<embedded GGUF>, a .gguf path, or a Hugging Face model dir"
        ),
    )
    data: str = field(
        default="",
        metadata=_h("the sft.jsonl `masorch train collect` wrote, or its output directory (required)"),
    )
    lora: bool = field(default=True, metadata=_h("train LoRA adapters (peft) instead of all weights"))
    lora_r: int = field(default=8, metadata=_h("LoRA rank"))
    lora_alpha: int = field(default=16, metadata=_h("LoRA alpha"))
    lora_dropout: float = field(default=0.0, metadata=_h("LoRA dropout"))
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"], metadata=_h("modules LoRA adapts")
    )
    precision: str = field(
        default="auto",
        metadata=_h("auto, bf16 or fp32, as for GRPO (auto: bf16 where the hardware runs it fast)"),
    )
    gradient_checkpointing: bool = field(
        default=True, metadata=_h("recompute activations in the backward pass: more compute, far less memory")
    )
    max_length: int = field(
        default=8192, metadata=_h("trajectories longer than this many tokens are left out (not cut)")
    )
    learning_rate: float = field(default=1e-4, metadata=_h("learning rate (1e-4 suits LoRA; ~1e-5 full)"))
    epochs: float = field(default=1.0, metadata=_h("passes over the data (when max_steps is 0)"))
    max_steps: int = field(default=0, metadata=_h("optimisation steps (0: run `epochs`)"))
    batch_size: int = field(default=1, metadata=_h("trajectories per device step"))
    gradient_accumulation_steps: int = field(default=4, metadata=_h("device steps per optimisation step"))
    logging_steps: int = field(default=1, metadata=_h("log every N steps"))
    save_steps: int = field(default=0, metadata=_h("save a checkpoint every N steps (0: only at the end)"))
    max_train_s: float | None = field(
        default=None, metadata=_h("stop training cleanly after this many seconds (then save); None: no limit")
    )
    seed: int = field(default=0, metadata=_h("random seed"))
    output_dir: str = field(default="runs/sft", metadata=_h("where checkpoints, logs and the final model go"))
    trl: dict[str, Any] = field(
        default_factory=dict, metadata=_h("extra SFTConfig fields passed through unchanged (see TRL's docs)")
    )

    def __post_init__(self) -> None:
        if not self.data:
            raise UsageError("the SFT config names no data", hint="data: runs/collect/sft.jsonl")
        if self.precision not in PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r}", hint="precision: auto, bf16 or fp32")
        for name in ("max_length", "batch_size", "gradient_accumulation_steps"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1, got {getattr(self, name)}", hint=f"{name}: 1")
        if self.max_steps < 0 or (self.max_steps == 0 and self.epochs <= 0):
            raise UsageError(
                "nothing to train: max_steps 0 and epochs <= 0", hint="max_steps: 100 or epochs: 1"
            )

    @property
    def data_path(self) -> Path:
        """The data file or directory."""
        return Path(self.data)


def load_sft_config(path: str | Path, overrides: dict[str, Any] | None = None) -> SftConfig:
    """Read a YAML SFT config; ``overrides`` (top-level keys) win over the file."""
    return load_yaml(SftConfig, path, overrides, what="SFT config")


def describe_sft() -> list[tuple[str, str, str]]:
    """(name, default, help) of every SFT config field."""
    return describe(SftConfig)
