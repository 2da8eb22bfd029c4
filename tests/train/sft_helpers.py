"""A small trajectory record and a word-level tokenizer with a plain chat template, for SFT tests."""

from __future__ import annotations

import json
import re
from typing import Any

from masorch.train.sft_data import assistant_spans

TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|> {{ m.content }}"
    "{% for c in m.tool_calls or [] %} <call> {{ c.function.name }} {{ c.function.arguments | tojson }}"
    " </call>{% endfor %} <|end|>\n{% endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


RECORD = {
    "messages": [
        {"role": "system", "content": "you orchestrate"},
        {"role": "user", "content": "what is two plus three"},
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "cot", {"task": "add"})]},
        {"role": "tool", "content": "status: EXEC_ERR error: reset", "tool_call_id": "c1"},
        {"role": "user", "content": "round one done"},
        {
            "role": "assistant",
            "content": "retry",
            "tool_calls": [call("c2", "final_answer", {"answer": "5"})],
        },
    ],
    "tools": [],
}


def word_tokenizer(texts: list[str]) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]+", t)})
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    fast.chat_template = TEMPLATE
    return fast


def tokenizer_for(record: dict[str, Any]) -> Any:
    """A word-level tokenizer whose vocabulary holds every word of the rendered record."""
    text, _ = assistant_spans(word_tokenizer([TEMPLATE]), record["messages"])
    return word_tokenizer([text])
