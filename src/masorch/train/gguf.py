"""The policy's precision for training; its loading (re-exported here) lives in :mod:`masorch.backends.hf`.

transformers reads a GGUF file directly (``gguf_file=``) and dequantises it to float weights; it
still marks the model as quantized, which trainers refuse to fine-tune. The weights are plain
floats by then, so :func:`clear_quantizer_marker` removes the marker (docs/train.md, "The policy").
"""

from __future__ import annotations

import logging

from masorch.backends.hf import (
    ModelSource,
    check_model_source,
    clear_quantizer_marker,
    load_policy,
    resolve_model,
)
from masorch.errors import UsageError

logger = logging.getLogger(__name__)


def fast_bf16() -> bool:
    """True when bfloat16 matmuls are fast here: a CUDA GPU with bf16, or a CPU with AMX/AVX512-BF16.

    On such CPUs oneDNN runs bf16 far faster than float32: on a 2-core AMX Xeon, 4.1x for a matmul
    and 3.4x for a forward+backward of a 0.5B model (``bench/train_precision.py``); elsewhere bf16
    is emulated and slower.
    """
    import torch

    if torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    return bool(torch.cpu._is_amx_tile_supported() or torch.ops.mkldnn._is_mkldnn_bf16_supported())


def resolve_precision(precision: str) -> str:
    """``auto`` becomes ``bf16`` where :func:`fast_bf16` holds, else ``fp32``; others pass through."""
    from masorch.train.config import PRECISIONS

    if precision not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}", hint="precision: auto, bf16 or fp32")
    if precision == "auto":
        return "bf16" if fast_bf16() else "fp32"
    return precision


__all__ = [
    "ModelSource",
    "check_model_source",
    "clear_quantizer_marker",
    "fast_bf16",
    "load_policy",
    "resolve_model",
    "resolve_precision",
]
