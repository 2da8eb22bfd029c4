"""Tiny random models and byte-level tokenizers for tests that need a real transformers policy.

The model is a one-layer Qwen2 (the embedded models' architecture) over whatever tokenizer the test
builds; its weights are random, so what it writes is noise unless a test steers it. The byte-level
tokenizer has one token a byte (any text encodes and decodes exactly), plus the special and added
tokens the test names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: A minimal ChatML template (Qwen's turn markers, no tools block).
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_tokenizer(
    special: Mapping[str, Any], *, added: Sequence[str] = (), chat_template: str | None = None
) -> Any:
    """A byte-level fast tokenizer with ``special`` (``add_special_tokens``' mapping) and the
    ``added`` tokens (e.g. ``<tool_call>``, as Qwen's tokenizer has them)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    raw = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    raw.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, chat_template=chat_template)
    tok.add_special_tokens(dict(special))
    if added:
        tok.add_tokens(list(added))
    return tok


def tiny_qwen2(tokenizer: Any, *, hidden_size: int = 16, **config: Any) -> Any:
    """A random one-layer Qwen2 causal LM over ``tokenizer``'s vocabulary; ``config`` adds or
    overrides ``Qwen2Config`` fields (the end and pad ids default to the tokenizer's)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    fields: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden_size,
        "intermediate_size": 2 * hidden_size,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    return Qwen2ForCausalLM(Qwen2Config(**(fields | config)))
