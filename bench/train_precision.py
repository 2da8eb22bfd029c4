"""bf16 against fp32 for training on this CPU: matmul throughput and one policy forward+backward.

    PYTHONPATH=src python bench/train_precision.py [--model local:qwen2.5-coder-0.5b] [--batch 4 --seq 1250]

Prints, measured in one run, the GFLOPS of a float32 and a bfloat16 matmul of the orchestrator's
shapes, and the wall time of one forward+backward of the policy over ``batch x seq`` tokens (the
size of a GRPO step's loss pass) in each precision, with the ratios. ``masorch train grpo`` picks
bf16 by itself (``precision: auto``) where :func:`masorch.train.gguf.fast_bf16` holds.
"""

from __future__ import annotations

import argparse
import time


def matmul_gflops(dtype: object, repeat: int = 10) -> float:
    import torch

    a = torch.randn(2048, 896, dtype=dtype)  # type: ignore[call-overload]
    b = torch.randn(896, 4864, dtype=dtype)  # type: ignore[call-overload]
    for _ in range(2):
        a @ b
    t0 = time.perf_counter()
    for _ in range(repeat):
        a @ b
    return 2 * 2048 * 896 * 4864 * repeat / (time.perf_counter() - t0) / 1e9


def forward_backward_s(model: object, batch: int, seq: int) -> float:
    import torch

    ids = torch.randint(100, 20000, (batch, seq))
    emb = model.get_input_embeddings()  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    x = emb(ids).detach().requires_grad_(True)
    loss = model(inputs_embeds=x).logits[:, -80:].float().logsumexp(-1).sum()  # type: ignore[operator]
    loss.backward()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=1250)
    parser.add_argument("--no-model", action="store_true", help="matmuls only")
    args = parser.parse_args()

    import torch

    from masorch.train.gguf import fast_bf16, load_policy

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, fast_bf16() = {fast_bf16()}")
    f32, b16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    print(f"matmul 2048x896 @ 896x4864: fp32 {f32:.0f} GFLOPS, bf16 {b16:.0f} GFLOPS, ratio {b16 / f32:.2f}")
    if args.no_model:
        return
    model, _ = load_policy(args.model)
    for p in model.parameters():
        p.requires_grad_(False)
    forward_backward_s(model, 1, 64)  # warm-up
    t32 = forward_backward_s(model, args.batch, args.seq)
    model = model.to(torch.bfloat16)
    forward_backward_s(model, 1, 64)
    t16 = forward_backward_s(model, args.batch, args.seq)
    print(
        f"{args.model} forward+backward {args.batch}x{args.seq} tokens: fp32 {t32:.1f} s, "
        f"bf16 {t16:.1f} s, speed-up {t32 / t16:.2f}x"
    )


if __name__ == "__main__":
    main()
