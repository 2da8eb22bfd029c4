"""What the GRPO and SFT trainers share: TRL arguments, the JSONL log callback (with a wall-clock
stop), LoRA, training and saving."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from masorch.errors import require_extra

logger = logging.getLogger(__name__)

#: Every trainer log line, one JSON object a line, in the output directory.
LOG_FILE = "log.jsonl"
#: The run's summary, in the output directory.
REPORT_FILE = "report.json"


class LoraFields(Protocol):
    """The LoRA fields of a training config."""

    lora_r: int
    lora_alpha: int
    lora_dropout: float
    lora_target_modules: list[str]


def require_train_stack() -> None:
    """A clear error naming the ``train`` extra unless torch, transformers, trl and datasets import."""
    for mod in ("torch", "transformers", "trl", "datasets"):
        require_extra(mod, "train")


def precisions(precision: str, lora: bool) -> tuple[str, str]:
    """The training precision (``auto`` resolved) and the dtype the policy's weights are loaded in.

    LoRA freezes the base weights, so they can live in bf16; full training keeps fp32 masters.
    """
    from masorch.train.gguf import resolve_precision

    resolved = resolve_precision(precision)
    weights = "bf16" if resolved == "bf16" and lora else "fp32"
    logger.info("precision %s (policy weights %s)", resolved, weights)
    return resolved, weights


def lora_config(cfg: LoraFields) -> Any:
    """peft's ``LoraConfig`` for a causal LM from a config's LoRA fields."""
    require_extra("peft", "train")
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=cfg.lora_target_modules,
        task_type="CAUSAL_LM",
    )


class CommonFields(Protocol):
    """The fields every training config has, named alike."""

    output_dir: str
    logging_steps: int
    save_steps: int
    seed: int
    gradient_checkpointing: bool


def common_args(cfg: CommonFields, precision: str) -> dict[str, Any]:
    """The TRL config arguments GRPO and SFT set alike: output, logging, saving, seed, precision,
    checkpointing, and the CPU where no CUDA device is."""
    import torch

    args: dict[str, Any] = {
        "output_dir": cfg.output_dir,
        "logging_steps": cfg.logging_steps,
        "save_strategy": "steps" if cfg.save_steps else "no",
        "save_steps": cfg.save_steps or 500,
        "seed": cfg.seed,
        "report_to": [],
        "bf16": precision == "bf16",
        "gradient_checkpointing": cfg.gradient_checkpointing,
        "disable_tqdm": True,
    }
    if not torch.cuda.is_available():
        args["use_cpu"] = True
    return args


class GrpoFields(CommonFields, Protocol):
    """The GRPO fields of a training config, named alike in ``train grpo`` and ``train rounds``."""

    batch_size: int
    num_generations: int
    max_steps: int
    learning_rate: float
    beta: float
    temperature: float
    max_completion_length: int
    trl: dict[str, Any]


def grpo_args(cfg: GrpoFields, weights: list[float], precision: str, **extra: Any) -> Any:
    """TRL's ``GRPOConfig`` of a config: the common arguments, the GRPO fields, the reward weights,
    ``extra`` arguments, then the config's ``trl`` pass-through."""
    from trl import GRPOConfig

    args = common_args(cfg, precision)
    args.update(
        {
            "per_device_train_batch_size": cfg.batch_size,
            "num_generations": cfg.num_generations,
            "max_steps": cfg.max_steps,
            "learning_rate": cfg.learning_rate,
            "beta": cfg.beta,
            "temperature": cfg.temperature,
            "max_completion_length": cfg.max_completion_length,
            "reward_weights": weights,
            "gradient_accumulation_steps": 1,
            **extra,
        }
    )
    args.update(cfg.trl)
    return GRPOConfig(**args)


@dataclass(frozen=True)
class Trained:
    """What :func:`train_and_save` gives back: the trained model (LoRA merged), its directory,
    the optimisation steps and the training time."""

    model: Any
    final: Path
    steps: int
    train_s: float


def train_and_save(trainer: Any, tokenizer: Any, out: Path, *, lora: bool) -> Trained:
    """Run a TRL trainer, then save the model (LoRA merged) and tokenizer as ``out/final``."""
    t0 = time.monotonic()
    trainer.train()
    train_s = time.monotonic() - t0
    model: Any = trainer.model
    if lora:
        model = model.merge_and_unload()
    final = out / "final"
    model.save_pretrained(final)
    tokenizer.save_pretrained(final)
    return Trained(model, final, int(trainer.state.global_step), train_s)


def log_callback(
    path: Path, on_log: Callable[[dict[str, Any]], None] | None, max_train_s: float | None
) -> Any:
    """A ``TrainerCallback`` that appends each log line to ``path`` (and passes it to ``on_log``),
    and stops training cleanly once ``max_train_s`` seconds have passed."""
    from transformers import TrainerCallback

    class JsonlLog(TrainerCallback):
        """Appends every trainer log line (with its step and wall time) to a JSONL file.

        With ``max_train_s``, it also asks the trainer to stop after the step that passes that
        time, so a bounded run still ends with a saved model and its evaluation.
        """

        def __init__(self) -> None:
            self.t0 = time.monotonic()
            self.lines: list[dict[str, Any]] = []

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t0 = time.monotonic()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if max_train_s is not None and time.monotonic() - self.t0 >= max_train_s:
                logger.info("max_train_s=%g reached after step %d: stopping", max_train_s, state.global_step)
                control.should_training_stop = True

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            line = {"step": state.global_step, "wall_s": round(time.monotonic() - self.t0, 2), **(logs or {})}
            self.lines.append(line)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
            if on_log is not None:
                on_log(line)

    return JsonlLog()
