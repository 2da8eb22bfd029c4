"""Loading the policy for training: a Hugging Face model dir, or a GGUF file (embedded or on disk).

transformers reads a GGUF file directly (``gguf_file=``) and dequantises it to float weights; it
still marks the model as quantized, which trainers refuse to fine-tune. The weights are plain
floats by then, so :func:`clear_quantizer_marker` removes the marker (measured in MODELS.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.errors import UsageError, require_extra

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelSource:
    """Where a policy's weights are: a directory (or hub id) and, for GGUF, the file inside it."""

    location: str
    gguf_file: str | None = None

    @property
    def is_gguf(self) -> bool:
        """True when the weights come from a GGUF file."""
        return self.gguf_file is not None


def resolve_model(spec: str, models_dir: Path | None = None) -> ModelSource:
    """Where ``spec`` points: ``local:<embedded name>``, a ``.gguf`` path or a model directory.

    >>> resolve_model("/models/x.gguf")
    ModelSource(location='/models', gguf_file='x.gguf')
    >>> resolve_model("runs/grpo/final")
    ModelSource(location='runs/grpo/final', gguf_file=None)
    """
    rest = spec.removeprefix("local:")
    if rest.endswith(".gguf"):
        p = Path(rest).expanduser()
        return ModelSource(str(p.parent), p.name)
    if spec.startswith("local:"):
        from masorch.backends.models import ModelStore

        path = ModelStore(models_dir).path(rest)  # a UsageError naming `masorch models pull` if absent
        return ModelSource(str(path.parent), path.name)
    return ModelSource(spec)


def clear_quantizer_marker(model: Any) -> None:
    """Mark a GGUF-loaded (already dequantised) model as plain float weights, so it can be trained."""
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


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


def load_policy(spec: str, *, models_dir: Path | None = None, dtype: str = "fp32") -> tuple[Any, Any]:
    """The model (weights in ``dtype``: fp32 or bf16) and tokenizer of ``spec``."""
    require_extra("torch", "train")
    require_extra("transformers", "train")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in ("fp32", "bf16"):
        raise UsageError(f"unknown dtype {dtype!r}", hint="fp32 or bf16")
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    src = resolve_model(spec, models_dir)
    kwargs: dict[str, Any] = {"gguf_file": src.gguf_file} if src.is_gguf else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(src.location, **kwargs)
        # A GGUF file is loaded as float32, then cast: loaded straight into bf16, transformers warns
        # (wrongly: the weights are dequantised to plain tensors either way) that it stays packed.
        load_dtype = torch.float32 if src.is_gguf else torch_dtype
        model = AutoModelForCausalLM.from_pretrained(src.location, dtype=load_dtype, **kwargs)
    except OSError as exc:
        raise UsageError(
            f"cannot load the model {spec!r}: {exc}",
            hint="give local:<embedded name>, a .gguf file or a Hugging Face model directory",
        ) from None
    if src.is_gguf:
        clear_quantizer_marker(model)
    if load_dtype is not torch_dtype:
        model = model.to(torch_dtype)  # type: ignore[arg-type]  # transformers types .to narrowly
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    logger.info("loaded policy %s (%s)", spec, type(model).__name__)
    return model, tokenizer
