"""Masked SFT of the multi-round orchestrator on collected trajectories, with TRL's ``SFTTrainer``.

:func:`train_sft` reads the records ``masorch train collect`` wrote, turns each into a pre-tokenized
example whose labels are the orchestrator's own tokens (:mod:`masorch.train.sft_data`; -100 on
the prompt, the tool results and every other environment message), and hands them to TRL's
``SFTTrainer``, which uses a ``labels`` column as it is. LoRA (peft) or full training, and the
precision and gradient checkpointing of GRPO. The final model is a plain Hugging Face checkpoint
in ``<output_dir>/final`` (LoRA merged), usable as ``hf:<dir>`` and as GRPO's starting model.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.train.sft_config import SftConfig
from masorch.train.sft_data import IGNORE, read_records, sft_examples
from masorch.train.trainer_parts import (
    LOG_FILE,
    REPORT_FILE,
    begin_sitting,
    check_output_dir,
    check_resume_config,
    common_args,
    log_callback,
    lora_config,
    precisions,
    require_train_stack,
    train_and_save,
    trl_config,
)

logger = logging.getLogger(__name__)


@dataclass
class SftReport:
    """What an SFT run did: data, steps, time per step, loss tokens and the per-step logs."""

    output_dir: str
    final_model: str
    precision: str
    examples: int
    left_out_too_long: int
    loss_tokens: int
    tokens: int
    steps: int
    seconds_per_step: float
    wall_s: float
    logs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the content of ``report.json``)."""
        return asdict(self)


def _sft_args(cfg: SftConfig, precision: str) -> Any:
    from trl import SFTConfig

    args = common_args(cfg, precision)
    args.update(
        {
            "per_device_train_batch_size": cfg.batch_size,
            "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
            "num_train_epochs": cfg.epochs,
            "max_steps": cfg.max_steps if cfg.max_steps > 0 else -1,
            "learning_rate": cfg.learning_rate,
            "max_length": cfg.max_length,
        }
    )
    args.update(cfg.trl)
    return trl_config(SFTConfig, args)


def train_sft(
    cfg: SftConfig,
    *,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    policy: tuple[Any, Any] | None = None,
) -> SftReport:
    """Train as ``cfg`` says; ``policy`` (model, tokenizer) replaces loading ``cfg.model`` (tests)."""
    require_train_stack()
    from datasets import Dataset
    from trl import SFTTrainer

    from masorch.train.gguf import check_model_source, load_policy

    out = Path(cfg.output_dir)
    t_start = time.monotonic()
    if policy is None:
        check_model_source(cfg.model)
    check_output_dir(out)
    run_config = cfg.model_dump(mode="json")
    check_resume_config(out, run_config, resume=cfg.resume, overwrite=cfg.overwrite)
    records = list(read_records(cfg.data_path))
    if not records:
        raise UsageError(
            f"{cfg.data_path} holds no trajectories",
            hint="`masorch train collect` writes them; check that it kept some (its report says how many)",
        )
    precision, weights_dtype = precisions(cfg.precision, cfg.lora)
    args = _sft_args(cfg, precision)  # TRL's checks of the config, before a model loads
    model, tokenizer = policy or load_policy(cfg.model, dtype=weights_dtype)
    examples, too_long = sft_examples(tokenizer, records, max_length=cfg.max_length)
    if not examples:
        raise UsageError(
            f"no trajectory of {cfg.data_path} fits max_length={cfg.max_length} ({len(records)} records)",
            hint="raise max_length, or collect shorter trajectories",
        )
    loss_tokens = sum(sum(1 for t in ex["labels"] if t != IGNORE) for ex in examples)
    tokens = sum(len(ex["input_ids"]) for ex in examples)
    logger.info(
        "%d trajectories (%d left out as too long): %d tokens, %d of them with loss",
        len(examples),
        too_long,
        tokens,
        loss_tokens,
    )
    # the run's log changes only now, with the config, the data and the policy known good
    out.mkdir(parents=True, exist_ok=True)
    sitting = begin_sitting(out, {LOG_FILE: 1}, resume=cfg.resume, config=run_config, overwrite=cfg.overwrite)
    callback = log_callback(out / LOG_FILE, on_log, cfg.max_train_s)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        peft_config=lora_config(cfg) if cfg.lora else None,
        callbacks=[callback],
    )
    trained = train_and_save(trainer, tokenizer, out, lora=cfg.lora, sitting=sitting)
    report = SftReport(
        output_dir=str(out),
        final_model=str(trained.final),
        precision=precision,
        examples=len(examples),
        left_out_too_long=too_long,
        loss_tokens=loss_tokens,
        tokens=tokens,
        steps=trained.steps,
        seconds_per_step=trained.seconds_per_step,
        wall_s=time.monotonic() - t_start,
        logs=callback.lines,
    )
    (out / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
    return report
