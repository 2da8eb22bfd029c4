"""A Backend over an in-memory transformers model: drives a policy (or a saved checkpoint) as orchestrator.

Used by the before/after evaluation (the model being trained writes plans through the same
:func:`masorch.run.orchestrate.orchestrate` path as any other orchestrator), and by the backend
registry for ``hf:<checkpoint dir>`` model strings (:func:`make_hf_backend`). Generation runs in a
worker thread, one call at a time (a model object is not safe to share between threads).

torch and transformers load only when a model is loaded or generates (``masorch[train]``), so this
module imports without them. :func:`load_policy` is also how training loads the policy it trains.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.backends.base import Completion, FinishReason, GenerateConfig, Message, Usage
from masorch.backends.chat import message_payload, tools_payload
from masorch.backends.hf_grammar import GrammarProcessor, TokenIndex, constraint_text
from masorch.errors import BackendError, UsageError, require_extra

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


def _model_dir_problem(where: Path) -> str | None:
    """Why the directory ``where`` holds no model transformers can load (None: it does)."""
    if (where / "config.json").is_file() or (where / "adapter_config.json").is_file():
        return None
    inside = [d.name for d in (where / "final", *sorted(where.glob("checkpoint-*"))) if d.is_dir()]
    found = f"; it holds {', '.join(inside[:3])}: give one of those" if inside else ""
    return f"a directory without config.json or adapter_config.json (not a model directory){found}"


def check_model_source(spec: str, models_dir: Path | None = None) -> None:
    """A UsageError where ``spec`` names weights this machine lacks: an embedded model not pulled, or
    a ``.gguf`` file or model directory that does not exist. Training checks this before it builds
    or writes anything; a Hugging Face hub id (``org/name``) is left to the load, which may fetch it.

    >>> check_model_source("/nowhere/model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    masorch.errors.UsageError: no model at '/nowhere/model': no such directory (hint: ...)
    """
    src = resolve_model(spec, models_dir)  # an embedded name not pulled: its own UsageError
    where = Path(src.location).expanduser()
    if src.is_gguf:
        problem = None if (where / str(src.gguf_file)).is_file() else "no such file"
    elif where.is_dir():
        problem = _model_dir_problem(where)
    elif where.exists():
        problem = "a file, not a model directory"
    elif re.match(r"[a-z]+:", spec):  # openai:gpt-4o, vllm:http://...: served, not weights
        problem = "a served model's string, not weights this machine can train"
    else:  # a hub id has no leading /, . or ~ and one slash at most
        hub_id = not spec.startswith(("/", ".", "~")) and spec.count("/") <= 1
        problem = None if hub_id else "no such directory"
    if problem is not None:
        raise UsageError(
            f"no model at {spec!r}: {problem}",
            hint="give local:<embedded name> (masorch models list), a .gguf file, a Hugging Face model "
            "directory or a hub id",
        )


def clear_quantizer_marker(model: Any) -> None:
    """Mark a GGUF-loaded (already dequantised) model as plain float weights, so it can be trained."""
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def chat_template_inputs(messages: Sequence[Message], config: GenerateConfig) -> dict[str, Any]:
    """The conversation and tools as a Hugging Face chat template takes them (``apply_chat_template``):
    assistant tool calls with their arguments as objects, tool results with their call's id."""
    return {
        "conversation": [message_payload(m, arguments_as_object=True) for m in messages],
        "tools": tools_payload(config.tools) or None,
    }


class HFBackend:
    """Chat completions from a transformers causal LM and its tokenizer (chat template applied)."""

    def __init__(self, model: Any, tokenizer: Any, *, name: str = "policy") -> None:
        self._model = model
        self._tokenizer = tokenizer
        self._name = name
        self._lock = threading.Lock()
        self._index: TokenIndex | None = None  # built on the first constrained call

    @property
    def model_id(self) -> str:
        """``hf:<name>``."""
        return f"hf:{self._name}"

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """One completion (greedy at temperature 0, else sampled), under ``config.grammar`` or
        ``config.json_schema`` when set (:mod:`masorch.backends.hf_grammar`).

        Tools reach the model through its chat template; the calls it writes come back as text.
        """
        t0 = time.monotonic()
        text, n_prompt, n_out, finish = await asyncio.to_thread(self._generate, messages, config)
        return Completion(
            text=text,
            usage=Usage(n_prompt, n_out, 1),
            finish=finish,
            model=self.model_id,
            latency_s=time.monotonic() - t0,
        )

    def _generate(
        self, messages: Sequence[Message], config: GenerateConfig
    ) -> tuple[str, int, int, FinishReason]:
        import torch

        tok = self._tokenizer
        ids = tok.apply_chat_template(
            **chat_template_inputs(messages, config),
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        input_ids = ids["input_ids"].to(self._model.device)
        sample = config.temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": config.max_tokens, "do_sample": sample}
        if sample:
            kwargs |= {"temperature": config.temperature, "top_p": config.top_p}
            kwargs |= {k: v for k, v in (("top_k", config.top_k), ("min_p", config.min_p)) if v is not None}
        with self._lock:
            constraint = self._constraint(config, prompt_len=int(input_ids.shape[1]))
            if constraint is not None:
                kwargs["logits_processor"] = [constraint]
            try:
                if config.seed is not None:
                    torch.manual_seed(config.seed)
                with torch.no_grad():
                    out = self._model.generate(
                        input_ids,
                        attention_mask=ids["attention_mask"].to(self._model.device),
                        pad_token_id=tok.pad_token_id,
                        **kwargs,
                    )
            except (RuntimeError, ValueError) as exc:
                raise BackendError(
                    f"{self.model_id}: generation failed: {exc}", hint="check the model"
                ) from exc
        new = out[0, input_ids.shape[1] :]
        text = tok.decode(new, skip_special_tokens=True)
        finish: FinishReason = "length" if len(new) >= config.max_tokens else "stop"
        return text, int(input_ids.shape[1]), len(new), finish

    def _constraint(self, config: GenerateConfig, *, prompt_len: int) -> GrammarProcessor | None:
        if config.grammar is None and config.json_schema is None:
            return None
        if self._index is None:
            ends = end_token_ids(self._tokenizer, self._model.generation_config.eos_token_id)
            self._index = TokenIndex(self._tokenizer, vocab_size=self._model.config.vocab_size, end_ids=ends)
        text = constraint_text(config.grammar, config.json_schema, self._index.special)
        return GrammarProcessor(self._index, text, prompt_len=prompt_len)

    async def aclose(self) -> None:
        """Nothing to release (the model belongs to the caller)."""
        return None


def make_hf_backend(spec: str) -> HFBackend:
    """The backend of an ``hf:<checkpoint dir>`` model string: the checkpoint loaded with transformers."""
    path = spec.removeprefix("hf:")
    model, tokenizer = load_policy(path)
    model.eval()
    return HFBackend(model, tokenizer, name=str(Path(path)))


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
    except (OSError, ValueError) as exc:  # ValueError: transformers' word for a malformed directory
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
    model.generation_config.eos_token_id = end_token_ids(tokenizer, model.generation_config.eos_token_id)
    logger.info("loaded policy %s (%s)", spec, type(model).__name__)
    return model, tokenizer


#: Special tokens that end a generation in the llama.cpp engine besides the model's own end token,
#: found there by their text: the end-of-turn and end-of-text markers of the common chat formats,
#: and the fill-in-the-middle pad, repository and file-separator tokens of code models.
END_TOKENS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<|end_of_text|>",
    "<EOT>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)


def end_token_ids(tokenizer: Any, eos: int | list[int] | None) -> list[int]:
    """The ids a policy's generation stops at: ``eos`` (its generation config's), the tokenizer's end
    token and every added token named in :data:`END_TOKENS`, so that an ``hf:`` policy (and the
    rollouts TRL samples from it, which stop at the generation config's ids) ends a turn where the
    llama.cpp engine would. A GGUF-read Qwen2.5 policy knows only ``<|im_end|>``; without the
    others a turn that emits ``<|endoftext|>`` would run on to its token cap."""
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    if isinstance(tokenizer.eos_token_id, int):
        ids.append(tokenizer.eos_token_id)
    added = tokenizer.get_added_vocab()
    ids += [added[text] for text in END_TOKENS if text in added]
    return list(dict.fromkeys(ids))
