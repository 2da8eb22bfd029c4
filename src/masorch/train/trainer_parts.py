"""What the GRPO and SFT trainers share: TRL arguments, the JSONL log callback (with a wall-clock
stop), LoRA, training and saving."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from masorch.errors import UsageError, require_extra
from masorch.files import iter_jsonl

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
    keep_checkpoints: int
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
        "save_total_limit": cfg.keep_checkpoints,
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
    top_p: float
    top_k: int | None
    min_p: float | None
    max_completion_length: int
    trl: dict[str, Any]


def grpo_args(cfg: GrpoFields, weights: list[float], precision: str, **extra: Any) -> Any:
    """TRL's ``GRPOConfig`` of a config: the common arguments, the GRPO fields, the reward weights,
    ``extra`` arguments, then the config's ``trl`` pass-through (its ``generation_kwargs`` added to
    those of ``extra``, key by key)."""
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
            "top_p": cfg.top_p,
            **{k: v for k, v in (("top_k", cfg.top_k), ("min_p", cfg.min_p)) if v is not None},
            "max_completion_length": cfg.max_completion_length,
            "reward_weights": weights,
            "gradient_accumulation_steps": 1,
            **extra,
        }
    )
    trl = dict(cfg.trl)
    if isinstance(args.get("generation_kwargs"), dict) and isinstance(trl.get("generation_kwargs"), dict):
        trl["generation_kwargs"] = {**args["generation_kwargs"], **trl["generation_kwargs"]}
    args.update(trl)
    return trl_config(GRPOConfig, args)


def trl_config(config_class: Any, args: Mapping[str, Any]) -> Any:
    """``config_class(**args)`` (TRL's ``GRPOConfig`` or ``SFTConfig``), whose refusal of a key or
    value, mostly one the config's ``trl`` pass-through named, is a UsageError saying TRL's words."""
    try:
        return config_class(**args)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"TRL's {config_class.__name__} refused the config: {exc}",
            hint=f"fix what it names: a `trl:` pass-through key or value ({config_class.__name__}'s fields), "
            "or the config field masorch sets it from",
        ) from None


@dataclass(frozen=True)
class Trained:
    """What :func:`train_and_save` gives back: the trained model (LoRA merged), its directory,
    the optimisation steps, this sitting's training time and the step it started from."""

    model: Any
    final: Path
    steps: int
    train_s: float
    first_step: int = 0

    @property
    def seconds_per_step(self) -> float:
        """Training seconds per step of this sitting (a resumed run's earlier steps not counted;
        0 when it trained none: a finished run started again)."""
        trained = self.steps - self.first_step
        return self.train_s / trained if trained > 0 else 0.0


@dataclass(frozen=True)
class Sitting:
    """Where a training run starts: from scratch, or from its newest checkpoint (``step`` > 0)."""

    checkpoint: Path | None = None
    step: int = 0


def make_output_dir(out: Path) -> bool:
    """Make ``out`` (checked by :func:`check_output_dir` first); True when it did not exist, so that
    a run that then fails before it starts can remove it again (:func:`discard_output_dir`)."""
    check_output_dir(out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    return created


def discard_output_dir(out: Path, created: bool) -> None:
    """Remove ``out`` and what a run that could not start put there (a sub-agent cache), if that
    run made it: a refused start leaves no directory behind."""
    if created:
        shutil.rmtree(out, ignore_errors=True)


def check_output_dir(out: Path) -> None:
    """A UsageError unless ``out`` is a directory, or can be made as one, that this process may write
    in; nothing is created (a run refused later leaves no empty directory behind)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"output_dir {out} is a file, not a directory", hint="choose another output_dir")
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(
            f"output_dir {out} cannot be written ({existing} is not a writable directory)",
            hint="choose an output_dir in a writable place",
        )


#: The config of the run an output_dir holds (written by :func:`begin_sitting`, checked on resume).
RUN_CONFIG_FILE = "run_config.json"
#: Config fields a later sitting of the same run may change: how long it trains (a run extended by
#: more steps continues too), what it evaluates at its end, how it logs and caches; never what or
#: how it trains.
SITTING_FIELDS = frozenset(
    {
        "max_train_s",
        "max_steps",
        "epochs",
        "resume",
        "overwrite",
        "output_dir",
        "eval_limit",
        "eval_sampled",
        "concurrency",
        "logging_steps",
        "keep_checkpoints",
        "cache_mode",
        "cache_path",
    }
)


def held_run(out: Path) -> list[str]:
    """What of a training run ``out`` holds: its config record, ``checkpoint-*`` and ``final``."""
    if not out.is_dir():
        return []
    names = [RUN_CONFIG_FILE, *sorted(p.name for p in out.glob("checkpoint-*") if p.is_dir()), "final"]
    return [name for name in names if (out / name).exists()]


def check_resume_config(
    out: Path, config: Mapping[str, Any], *, resume: bool, overwrite: bool = False
) -> None:
    """Refuse (UsageError) a sitting that would continue or destroy another run in ``out``.

    Without ``resume`` or ``overwrite``, a directory that holds a run (:func:`held_run`) is refused:
    starting over deletes its checkpoints. With ``resume``, a run whose recorded config differs from
    ``config`` in a field other than :data:`SITTING_FIELDS` is refused: its checkpoint would continue
    another run. A field one of the two lacks (added to masorch since) is not compared; a directory
    without the record (a new one, or a run begun before it existed) passes. Call it before loading
    a model."""
    if not resume:
        held = held_run(out)
        if held and not overwrite:
            shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
            raise UsageError(
                f"output_dir {out} holds a training run ({shown})",
                hint="continue it with resume: true, start it over with overwrite: true (deletes its "
                "checkpoints, log and sampled plans), or choose another output_dir",
            )
        return
    path = out / RUN_CONFIG_FILE
    if not path.is_file():
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        stored = None
    if not isinstance(stored, dict):
        raise UsageError(
            f"{path} is not the config record of a training run",
            hint="remove it to resume as this config says, or choose another output_dir",
        )
    differ = sorted(
        k for k in stored.keys() & config.keys() if k not in SITTING_FIELDS and stored[k] != config[k]
    )
    if differ:
        shown = ", ".join(f"{k} (run: {stored[k]!r}, now: {config[k]!r})" for k in differ[:3])
        raise UsageError(
            f"output_dir {out} holds a run of another config: {shown}"
            + (f" and {len(differ) - 3} more" if len(differ) > 3 else ""),
            hint="resume it with its own config, start it over with resume: false and overwrite: true "
            "(deletes its checkpoints), or choose another output_dir",
        )


def begin_sitting(
    out: Path,
    step_files: Mapping[str, int],
    *,
    resume: bool,
    config: Mapping[str, Any],
    overwrite: bool = False,
) -> Sitting:
    """Prepare ``out`` for a run of ``config`` (a config's JSON dump): fresh, or continuing from its
    newest ``checkpoint-N``.

    ``step_files`` maps the run's JSONL files to the offset of their ``step`` field: a line is kept
    on resume when ``step < N + offset`` (the trainer's log counts finished steps, offset 1; the
    sampled plans the step they were sampled in, offset 0). A fresh run (in a directory holding a
    run only with ``overwrite``) deletes them all, and the checkpoints of the run it replaces (a
    later resume would otherwise continue that run from them); a resume that finds no checkpoint
    deletes the lines (they belong to no saved step).
    ``config`` is recorded in :data:`RUN_CONFIG_FILE` for :func:`check_resume_config`.
    """
    check_resume_config(out, config, resume=resume, overwrite=overwrite)
    step, checkpoint = 0, None
    found = sorted(
        (int(p.name.removeprefix("checkpoint-")), p)
        for p in out.glob("checkpoint-*")
        if p.name.removeprefix("checkpoint-").isdigit() and p.is_dir()
    )
    if resume:
        usable = [(n, p) for n, p in found if (p / "trainer_state.json").is_file()]
        if usable:
            step, checkpoint = usable[-1]
            logger.info("resuming from %s (step %d)", checkpoint, step)
        else:
            logger.info("resume: no checkpoint in %s yet, starting the run", out)
    else:
        for _, stale in found:
            logger.info("a fresh run: removing %s of the run it replaces", stale)
            shutil.rmtree(stale)
    for name, offset in step_files.items():
        _keep_lines(out / name, step + offset)
    (out / RUN_CONFIG_FILE).write_text(json.dumps(dict(config), indent=2, sort_keys=True), encoding="utf-8")
    return Sitting(checkpoint, step)


def _step_of(line: str) -> int:
    try:
        value = json.loads(line).get("step")
    except (ValueError, AttributeError):
        return 1 << 62  # a torn or foreign line: dropped
    return int(value) if isinstance(value, int) else 0


def _keep_lines(path: Path, below: int) -> None:
    """Keep the whole lines of ``path`` whose step is below ``below``."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if line.endswith("\n") and _step_of(line) < below]
    if len(kept) != len(lines):
        path.write_text("".join(kept), encoding="utf-8")


def train_and_save(
    trainer: Any, tokenizer: Any, out: Path, *, lora: bool, sitting: Sitting | None = None
) -> Trained:
    """Run a TRL trainer (from ``sitting``'s checkpoint if it has one), then save the model (LoRA
    merged) and tokenizer as ``out/final``.

    A sitting whose checkpoint is already at the run's ``max_steps`` (the command started again
    after the last step, or killed between the last checkpoint and the final model) trains nothing:
    the trainer would go on for a step past ``max_steps``. The final model is saved from the
    checkpoint's weights.
    """
    t0 = time.monotonic()
    checkpoint = sitting.checkpoint if sitting else None
    max_steps = int(getattr(trainer.args, "max_steps", -1) or -1)
    model: Any = trainer.model
    if checkpoint is not None and sitting is not None and 0 < max_steps <= sitting.step:
        logger.info(
            "%s is at step %d of %d: the run is complete, nothing to train",
            checkpoint,
            sitting.step,
            max_steps,
        )
        model = checkpoint_weights(model, checkpoint, lora=lora)
    else:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        model = trainer.model
    train_s = time.monotonic() - t0
    if lora:
        model = model.merge_and_unload()
    final = out / "final"
    model.save_pretrained(final)
    tokenizer.save_pretrained(final)
    steps = max(int(trainer.state.global_step), sitting.step if sitting else 0)
    return Trained(model, final, steps, train_s, sitting.step if sitting else 0)


def checkpoint_weights(model: Any, checkpoint: Path, *, lora: bool) -> Any:
    """``model`` with the weights saved in ``checkpoint``: its LoRA adapter loaded into the (PEFT)
    model, or, for full fine-tuning, the checkpoint's model itself."""
    if lora:
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights

        set_peft_model_state_dict(model, load_peft_weights(str(checkpoint)))
        return model
    return type(model).from_pretrained(checkpoint, dtype=model.dtype).to(model.device)


def log_callback(
    path: Path, on_log: Callable[[dict[str, Any]], None] | None, max_train_s: float | None
) -> Any:
    """A ``TrainerCallback`` that appends each log line to ``path`` (and passes it to ``on_log``),
    and stops training cleanly once ``max_train_s`` seconds have passed.

    Its ``lines`` start with those already in ``path`` (the earlier sittings' steps that
    :func:`begin_sitting` kept), so a report made from them covers the whole run, also when a
    sitting trains nothing (a finished run started again)."""
    from transformers import TrainerCallback

    earlier = (
        [line for _, line in iter_jsonl(path, what="training log", hint="delete it to start afresh")]
        if path.is_file()
        else []
    )

    class JsonlLog(TrainerCallback):
        """Appends every trainer log line (with its step and wall time) to a JSONL file.

        With ``max_train_s``, it also asks the trainer to stop after the step that passes that
        time, so a bounded run still ends with a saved model and its evaluation.
        """

        def __init__(self) -> None:
            self.t0 = time.monotonic()
            self.lines: list[dict[str, Any]] = list(earlier)

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
