"""A Backend over an in-memory transformers model: drives a policy (or a saved checkpoint) as orchestrator.

Used by the before/after evaluation (the model being trained writes plans through the same
:func:`masorch.run.orchestrate.orchestrate` path as any other orchestrator), and by
:func:`make_orchestrator` for ``hf:<checkpoint dir>`` model strings. Generation runs in a worker
thread, one call at a time (a model object is not safe to share between threads).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from masorch.backends.base import Backend, Completion, FinishReason, GenerateConfig, Message, Usage
from masorch.errors import BackendError


class HFBackend:
    """Chat completions from a transformers causal LM and its tokenizer (chat template applied)."""

    def __init__(self, model: Any, tokenizer: Any, *, name: str = "policy") -> None:
        self._model = model
        self._tokenizer = tokenizer
        self._name = name
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """``hf:<name>``."""
        return f"hf:{self._name}"

    async def complete(self, messages: Sequence[Message], config: GenerateConfig) -> Completion:
        """One completion (greedy at temperature 0, else sampled); json_schema, tools, grammar ignored."""
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
        chat = [{"role": m.role, "content": m.content} for m in messages]
        ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        input_ids = ids["input_ids"].to(self._model.device)
        sample = config.temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": config.max_tokens, "do_sample": sample}
        if sample:
            kwargs |= {"temperature": config.temperature, "top_p": config.top_p}
        with self._lock:
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

    async def aclose(self) -> None:
        """Nothing to release (the model belongs to the caller)."""
        return None


def make_orchestrator(spec: str) -> Backend:
    """A backend for ``spec``: ``hf:<checkpoint dir>`` loads it with transformers, else the registry's."""
    if spec.startswith("hf:"):
        from masorch.train.gguf import load_policy

        path = spec.removeprefix("hf:")
        model, tokenizer = load_policy(path)
        model.eval()
        return HFBackend(model, tokenizer, name=str(Path(path)))
    from masorch.backends.registry import make_backend

    return make_backend(spec)
