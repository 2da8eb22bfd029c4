"""GRPO rollouts decoded under a grammar: TRL's ``GRPOTrainer`` whose policy writes every turn
under the grammar an embedded model gets at inference (``constrain_rollouts: true`` in a training
config).

TRL 1.16 gives its sampler no logits-processor hook, in a tool loop or out of it. The trainer
:func:`grpo_trainer` makes is TRL's, with one method replaced: ``_generate_single_turn``, which
TRL calls for each turn of every rollout (the first and, in a tool loop, each after the tool
results). Here it left-pads the turn's prompts, generates them together with TRL's generation
config (temperature, top-k, min-p, the turn cap, the end tokens) and one
:class:`masorch.backends.hf_grammar.GrammarProcessor` holding each row to the grammar, and cuts
each row after its first end token, as TRL's own regular path does. Each turn starts the grammar
afresh. The mask acts before TRL's sampling warpers (transformers applies a caller's processors
first), so the cut of the distribution is taken among the tokens the grammar allows.

What the policy learns from is unchanged: TRL scores the sampled tokens under the policy's own,
unconstrained distribution; the grammar only decides which tokens can be sampled. Only
transformers' generation is served (no vLLM, no continuous batching, text only): anything else
is refused before training starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from masorch.backends.hf_grammar import GrammarProcessor, TokenIndex, constraint_text
from masorch.errors import UsageError


def grpo_trainer(grammar: str | None, json_schema: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """TRL's ``GRPOTrainer(**kwargs)``; with a ``grammar`` (GBNF of :mod:`masorch.plan.grammar`) or
    a ``json_schema``, one whose rollouts decode under it (see the module's text)."""
    from trl import GRPOTrainer

    if grammar is None and json_schema is None:
        return GRPOTrainer(**kwargs)
    trainer = _constrained_class(GRPOTrainer)(**kwargs)
    if trainer.use_vllm or trainer.use_transformers_continuous_batching:
        raise UsageError(
            "constrain_rollouts: true decodes the rollouts with transformers' generate",
            hint="turn off vLLM and continuous batching, or set constrain_rollouts: false",
        )
    trainer.constrain_to(grammar, json_schema)
    return trainer


def _constrained_class(base: type) -> type:
    """A subclass of TRL's trainer ``base`` whose turns decode under a grammar."""

    class ConstrainedGRPOTrainer(base):
        _grammar: tuple[TokenIndex, str]

        def constrain_to(self, grammar: str | None, json_schema: Mapping[str, Any] | None) -> None:
            """Decode every later turn under ``grammar`` (or ``json_schema``)."""
            vocab = int(self.model.config.vocab_size)
            index = TokenIndex(self._tokenizer, vocab_size=vocab, end_ids=self.eos_token_ids)
            self._grammar = (index, constraint_text(grammar, json_schema, index.special))

        def _generate_single_turn(
            self,
            prompt_ids: list[list[int]],
            images: Any,
            multimodal_fields: Any,
            num_generations: int,
            has_tool_images: bool = False,
        ) -> tuple[list[list[int]], None]:
            if multimodal_fields or has_tool_images or (images and any(i is not None for i in images)):
                raise UsageError(
                    "constrain_rollouts: true serves text-only policies", hint="set constrain_rollouts: false"
                )
            return _constrained_turn(self, prompt_ids, *self._grammar), None

    return ConstrainedGRPOTrainer


def _constrained_turn(
    trainer: Any, prompt_ids: list[list[int]], index: TokenIndex, grammar: str
) -> list[list[int]]:
    """One turn of every row of ``prompt_ids`` under ``grammar``: each row's completion up to and
    including its first end token (or the turn cap)."""
    import torch
    from transformers import LogitsProcessorList
    from trl.models.utils import unwrap_model_for_generation

    width = max(len(ids) for ids in prompt_ids)
    pad = trainer._tokenizer.pad_token_id
    device = trainer.accelerator.device
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in prompt_ids], device=device)
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompt_ids], device=device)
    processor = GrammarProcessor(index, grammar, prompt_len=width, rows=len(prompt_ids))
    args = trainer.args
    with (
        unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=args.ds3_gather_for_generation,
            generation_kwargs=trainer.generation_kwargs,
            gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
        ) as model,
        torch.no_grad(),
    ):
        out = model.generate(
            input_ids=input_ids,
            attention_mask=mask,
            generation_config=trainer.generation_config,
            logits_processor=LogitsProcessorList([processor]),
        )
    ends = set(trainer.eos_token_ids)
    turns = []
    for row in out[:, width:].tolist():
        stop = next((i for i, tok in enumerate(row) if tok in ends), len(row) - 1)
        turns.append(row[: stop + 1])
    return turns


__all__ = ["grpo_trainer"]
