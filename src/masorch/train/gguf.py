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


def load_policy(spec: str, *, models_dir: Path | None = None) -> tuple[Any, Any]:
    """The model (float32, CPU or wherever torch puts it) and tokenizer of ``spec``."""
    require_extra("torch", "train")
    require_extra("transformers", "train")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = resolve_model(spec, models_dir)
    kwargs: dict[str, Any] = {"gguf_file": src.gguf_file} if src.is_gguf else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(src.location, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(src.location, dtype=torch.float32, **kwargs)
    except OSError as exc:
        raise UsageError(
            f"cannot load the model {spec!r}: {exc}",
            hint="give local:<embedded name>, a .gguf file or a Hugging Face model directory",
        ) from None
    if src.is_gguf:
        clear_quantizer_marker(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    logger.info("loaded policy %s (%s)", spec, type(model).__name__)
    return model, tokenizer
