"""Check of the verl path (< 5 min): verl's batch reward manager drives masorch's reward.

Run where verl imports (a verl GPU image; the reward path needs no GPU, so a CPU venv with
``pip install torch==2.13.0 verl==0.9.1 'transformers<5.11'`` and masorch works too), from the
repository root::

    PYTHONPATH=src python bench/gpu/verl_reward_check.py --tokenizer /path/to/hf/model
    PYTHONPATH=src python bench/gpu/verl_reward_check.py --tokenizer local:smollm2-135m

It serves a scripted sub-agent on a loopback OpenAI server, writes a training config that points
at it, builds verl's ``batch`` reward manager with ``masorch.train.verl_reward.compute_score_batch``,
feeds it a DataProto of a K=4 group (two right plans, one wrong, one invalid), and checks the
token-level reward tensor (score on each response's last token) and the time the group took.
It prints the figures and exits non-zero on a mismatch; it skips (exit 0, says so) without verl.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOOD = 'create_agent(id="a", kind="cot", task="Solve it carefully.")'
BAD = 'create_agent(id="a", kind="cot", task="Solve it.")'


def responder(messages: list[dict[str, Any]]) -> str:
    text = " ".join(str(m["content"]) for m in messages)
    return "\\boxed{17}" if "carefully" in text else "\\boxed{4}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tokenizer",
        required=True,
        help="whose tokenizer to use: a Hugging Face model dir, or local:<embedded model> (GGUF)",
    )
    parser.add_argument("--latency-ms", type=float, default=200.0, help="simulated sub-agent latency")
    args = parser.parse_args()
    if importlib.util.find_spec("verl") is None:
        print("SKIP: verl is not importable here")
        return 0
    import numpy as np
    import torch
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.workers.reward_manager import get_reward_manager_cls

    from masorch.backends.loopback import LoopbackServer
    from masorch.train.gguf import resolve_model
    from masorch.train.verl_reward import compute_score_batch

    src = resolve_model(args.tokenizer)
    tok = AutoTokenizer.from_pretrained(src.location, **({"gguf_file": src.gguf_file} if src.is_gguf else {}))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    group = [GOOD, GOOD.replace('"a"', '"b"'), BAD, "I would rather not plan."]
    expected = [1.0, 1.0, 0.0, 0.0]
    with (
        LoopbackServer(responder, latency_ms=args.latency_ms) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        cfg = Path(tmp) / "train.yaml"
        cfg.write_text(
            f'train: [{{kind: masbench_gen, count: 2}}]\nsubagent: "vllm:{server.base_url}#scripted"\n'
            f"cache_path: {tmp}/cache.sqlite\noutput_dir: {tmp}/out\n",
            encoding="utf-8",
        )
        info = {"question": "What is x?", "dom": "low", "scorer": "masbench"}

        def batch(texts: list[str]) -> tuple[Any, Any]:
            n = len(texts)
            prompt = tok(["Plan."] * n, return_tensors="pt", padding=True)["input_ids"]
            resp = tok(texts, return_tensors="pt", padding="max_length", max_length=64, truncation=True)
            responses, resp_mask = resp["input_ids"], resp["attention_mask"]
            attention = torch.cat([torch.ones_like(prompt), resp_mask], dim=1)
            data = DataProto.from_dict(
                tensors={"prompts": prompt, "responses": responses, "attention_mask": attention},
                non_tensors={
                    "data_source": np.array(["masbench/depth"] * n, dtype=object),
                    "reward_model": np.array([{"ground_truth": "17"}] * n, dtype=object),
                    "extra_info": np.array([dict(info) for _ in range(n)], dtype=object),
                },
            )
            return data, resp_mask

        manager = get_reward_manager_cls("batch")(
            tokenizer=tok, num_examine=0, compute_score=compute_score_batch, config=str(cfg)
        )
        # Warm-up: the first call builds the executor of this process (config, agents, backend);
        # its plan differs from the group's, so the sub-agent cache cannot answer the group.
        manager(batch([GOOD.replace("carefully", "with care")])[0], return_dict=True)
        warm_requests = server.request_count
        data, resp_mask = batch(group)
        t0 = time.monotonic()
        out = manager(data, return_dict=True)
        elapsed = time.monotonic() - t0
        reward = out["reward_tensor"] if isinstance(out, dict) else out
        lengths = resp_mask.sum(dim=1)
        got = [float(reward[i, int(lengths[i]) - 1]) for i in range(4)]
        print(
            f"scores {got} (expected {expected}); group of 4 in {elapsed:.2f} s; "
            f"sub-agent requests {server.request_count - warm_requests} "
            "(2 distinct valid plans -> 2 expected)"
        )
        if got != expected:
            print("FAIL: scores differ")
            return 1
        if elapsed > 1.9 * args.latency_ms / 1000 + 1.0:
            print("FAIL: the plans of the group did not run concurrently")
            return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
