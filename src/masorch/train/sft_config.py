"""The configuration of ``masorch train sft``: the model, the collected trajectories, LoRA, precision.

Read from YAML like the GRPO config (:mod:`masorch.train.config`), with the same fields for what
both have (:class:`~masorch.train.config.PolicyTraining`: model, LoRA, precision, gradient
checkpointing, logging, saving, ``max_train_s``, seed) and the same names for learning rate,
steps, output directory and the ``trl`` pass-through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, model_validator

from masorch.config import describe_fields
from masorch.errors import UsageError
from masorch.train.config import COMMON_OWNED, PolicyTraining, check_trl


class SftConfig(PolicyTraining):
    """Everything ``masorch train sft`` needs; the defaults make a small LoRA run."""

    show_config: ClassVar[str] = "masorch train sft --show-config"
    what: ClassVar[str] = "SFT config"

    data: str = Field(
        default="",
        description="the sft.jsonl `masorch train collect` wrote, or its output directory (required)",
    )
    max_length: int = Field(
        default=8192, description="trajectories longer than this many tokens are left out (not cut)"
    )
    learning_rate: float = Field(
        default=1e-4, gt=0, allow_inf_nan=False, description="learning rate (1e-4 suits LoRA; ~1e-5 full)"
    )
    epochs: float = Field(default=1.0, description="passes over the data (when max_steps is 0)")
    max_steps: int = Field(default=0, description="optimisation steps (0: run `epochs`)")
    batch_size: int = Field(default=1, description="trajectories per device step")
    gradient_accumulation_steps: int = Field(default=4, description="device steps per optimisation step")
    output_dir: str = Field(
        default="runs/sft", min_length=1, description="where checkpoints, logs and the final model go"
    )
    trl: dict[str, Any] = Field(
        default_factory=dict, description="extra SFTConfig fields passed through unchanged (see TRL's docs)"
    )

    @model_validator(mode="after")
    def _check(self) -> SftConfig:
        if not self.data:
            raise UsageError("the SFT config names no data", hint="data: runs/collect/sft.jsonl")
        for name in ("max_length", "batch_size", "gradient_accumulation_steps"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1, got {getattr(self, name)}", hint=f"{name}: 1")
        if self.max_steps < 0:
            raise UsageError(
                f"max_steps must be >= 0, got {self.max_steps}", hint="max_steps: 100, or 0 to run `epochs`"
            )
        if self.max_steps == 0 and self.epochs <= 0:
            raise UsageError(
                "nothing to train: max_steps 0 and epochs <= 0", hint="max_steps: 100 or epochs: 1"
            )
        check_trl(
            self.trl,
            {
                **COMMON_OWNED,
                "gradient_accumulation_steps": "gradient_accumulation_steps",
                "num_train_epochs": "epochs",
                "max_length": "max_length",
            },
        )
        return self

    @property
    def data_path(self) -> Path:
        """The data file or directory."""
        return Path(self.data)


def load_sft_config(path: str | Path, overrides: dict[str, Any] | None = None) -> SftConfig:
    """Read a YAML SFT config; ``overrides`` (keys, dotted for nested ones) win over the file."""
    return SftConfig.load(path, overrides)


def describe_sft() -> list[tuple[str, str, str]]:
    """(name, default, help) of every SFT config field."""
    return describe_fields(SftConfig)
