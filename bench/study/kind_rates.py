"""How often an untrained policy's sampled plans pick each sub-agent kind, per sampling temperature.

A pilot for a GRPO study (docs/train.md, study 2h): GRPO learns which kind to use only from groups
in which some plan tries another kind, so the rate at which the sampler tries each kind bounds
what a run of a given length can learn. This samples plans as the trainer does (the config's
prompt, its rollout grammar, the trainer's top-k/top-p/min-p cut, no cut unless set) on the
config's *training* rows, without executing any plan, and prints the kinds chosen at each
temperature. It samples through the model's own generation config, as the embedded (GGUF) models
have it, which sets no other knob; a checkpoint whose generation config sets one (say a
``repetition_penalty``), or a config that passes ``trl`` generation settings, samples otherwise
in training.

    python bench/study/kind_rates.py --config bench/study/grpo_math_g.yaml --prompts 20 --samples 6 \
        --temperatures 1.0 1.5 2.0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections import Counter
from pathlib import Path

from masorch.backends.base import GenerateConfig, Message
from masorch.backends.hf import HFBackend
from masorch.errors import MasorchError
from masorch.plan.model import kinds_label
from masorch.plan.parse import DialectChoice, parse
from masorch.train.config import TrainConfig, load_config
from masorch.train.gguf import load_policy
from masorch.train.grpo import prompt_rows, rollout_constraint, train_agents
from masorch.train.trainer_parts import precisions


def main() -> None:
    try:
        _main()
    except MasorchError as exc:  # a bad config or a missing model: its message and fix
        raise SystemExit(f"error: {exc}") from None


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True, help="a `masorch train grpo` config")
    parser.add_argument("--prompts", type=int, default=20, help="the first N training rows")
    parser.add_argument("--samples", type=int, default=6, help="plans per prompt and temperature")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 1.5, 2.0])
    parser.add_argument("--out", type=Path, help="write every sampled plan here (JSONL)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    cfg = load_config(args.config)
    agents = train_agents(cfg)
    rows = prompt_rows(cfg, agents)[0][: args.prompts]
    constraint = rollout_constraint(cfg, agents)
    _, weights_dtype = precisions(cfg.precision, cfg.lora)
    model, tokenizer = load_policy(cfg.model, dtype=weights_dtype)
    model.eval()
    backend = HFBackend(model, tokenizer, name=cfg.model)
    out = args.out.open("w", encoding="utf-8") if args.out else None
    for temperature in args.temperatures:
        kinds: Counter[str] = Counter()
        for i, row in enumerate(rows):
            messages = [Message(role=m["role"], content=m["content"]) for m in row["prompt"]]
            for k in range(args.samples):
                config = _sampling(cfg, constraint, temperature, seed=cfg.seed + 1000 * i + k)
                text = asyncio.run(backend.complete(messages, config)).text
                kind = _kind(text, cfg.dialect)
                kinds[kind] += 1
                if out is not None:
                    record = {"temperature": temperature, "row": i, "sample": k, "kind": kind, "plan": text}
                    out.write(json.dumps(record) + "\n")
                    out.flush()
            sys.stderr.write(f"\rT={temperature}: {i + 1}/{len(rows)} prompts")
        sys.stderr.write("\n")
        total = sum(kinds.values())
        shares = ", ".join(f"{kind} {n} ({100 * n / total:.0f}%)" for kind, n in kinds.most_common())
        sys.stdout.write(f"temperature {temperature}: {total} plans: {shares}\n")
        sys.stdout.flush()
    if out is not None:
        out.close()


def _sampling(cfg: TrainConfig, constraint: GenerateConfig, temperature: float, seed: int) -> GenerateConfig:
    # The trainer's sampler: TRL cuts nothing unless top_k/min_p are set (transformers' own default
    # top-k of 50 is turned off with 0).
    return GenerateConfig(
        temperature=temperature,
        max_tokens=cfg.max_completion_length,
        top_p=cfg.top_p,
        top_k=cfg.top_k if cfg.top_k is not None else 0,
        min_p=cfg.min_p,
        seed=seed,
        grammar=constraint.grammar,
        json_schema=constraint.json_schema,
    )


def _kind(text: str, dialect: DialectChoice) -> str:
    plan = parse(text, dialect).plan
    return "invalid" if plan is None else kinds_label(agent.kind for agent in plan.agents)


if __name__ == "__main__":
    main()
