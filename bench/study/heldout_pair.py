"""Evaluate a training config's held-out rows with the untrained policy and with a trained checkpoint.

The same evaluation ``masorch train grpo`` runs before and after training (its ``HeldOut``: the eval
harness, the config's prompt, grammar, sub-agents, sampler and seed), without training: the
untrained policy is read as the trainer reads it, the trained one from a saved ``final/`` directory.
Both evaluations run on this machine, in one sitting, into ``<output_dir>/eval_before[_sampled]`` and
``eval_after[_sampled]``, so ``bench/train_report.py <output_dir>`` pairs them. A stopped run goes
on where it stopped (the eval logs resume), so evaluate another checkpoint into another ``output_dir``:
the logs do not record which checkpoint wrote them.

    python bench/study/heldout_pair.py --config bench/study/grpo_math_e.yaml --checkpoint runs/study2d/final
"""

from __future__ import annotations

import argparse
import gc
import logging
from pathlib import Path

from masorch.errors import MasorchError
from masorch.train.config import load_config
from masorch.train.gguf import load_policy
from masorch.train.grpo import HeldOut, prompt_rows, search_corpus, train_agents
from masorch.train.trainer_parts import precisions


def main() -> None:
    try:
        _main()
    except MasorchError as exc:  # a bad config, a missing model or extra: its message and fix
        raise SystemExit(f"error: {exc}") from None


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True, help="a `masorch train grpo` config")
    parser.add_argument("--checkpoint", type=Path, required=True, help="a trained run's final/ directory")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if not (args.checkpoint / "config.json").is_file():
        raise SystemExit(f"{args.checkpoint} holds no transformers checkpoint (no config.json)")
    cfg = load_config(args.config)
    Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
    agents = train_agents(cfg)
    _, held_rows = prompt_rows(cfg, agents)
    if not held_rows:
        raise SystemExit(f"{args.config} names no held-out rows (eval: / eval_limit)")
    held_out = HeldOut(cfg, held_rows, agents, search_corpus([*cfg.train, *cfg.eval]))  # as train grpo
    _, weights_dtype = precisions(cfg.precision, cfg.lora)
    model, tokenizer = load_policy(cfg.model, dtype=weights_dtype)
    held_out.evaluate("before", model, tokenizer, resume=True)
    del model
    gc.collect()
    trained, _ = load_policy(str(args.checkpoint), dtype=weights_dtype)
    held_out.evaluate("after", trained, tokenizer, resume=True)  # the trainer's tokenizer, as in train grpo


if __name__ == "__main__":
    main()
