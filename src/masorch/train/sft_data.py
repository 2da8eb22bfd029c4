"""SFT examples from collected trajectories, with the loss on the orchestrator's own tokens only.

A record of ``masorch train collect`` (``sft.jsonl``) is one conversation: the system prompt, the
question, the orchestrator's turns (text and tool calls) and the environment's replies (``tool``
results, the between-round user messages), and, for a run that ended in a synthesis, the synthesis
request and answer. The masked objective trains on the orchestrator's turns and nothing else: the
prompt, the tool results, the environment's text and the synthesis answer are context, not
targets.

:func:`masked_example` renders the whole conversation once with the tokenizer's chat template (the
tools offered included), finds each assistant turn's character span by rendering the conversation
up to it (with the generation prompt) and through it, and gives the tokens whose text starts inside
a span their own id as label; every other token gets ``-100``. The template must render a
conversation's prefixes as prefixes of the whole (Qwen2.5's does, with tools: a model-tier test
checks it); one that does not is a UsageError, never a silently wrong mask.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from masorch.backends.chat import arguments_object
from masorch.errors import UsageError
from masorch.files import iter_jsonl

logger = logging.getLogger(__name__)

#: The label of a token that carries no loss (PyTorch's cross-entropy ``ignore_index``).
IGNORE = -100


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The record's messages as chat templates read them: tool-call arguments as JSON objects.

    >>> m = {"role": "assistant", "content": "", "tool_calls": [
    ...     {"id": "c", "type": "function", "function": {"name": "cot", "arguments": '{"task": "t"}'}}]}
    >>> template_messages([m])[0]["tool_calls"][0]["function"]["arguments"]
    {'task': 't'}
    """
    out = []
    for m in messages:
        msg = dict(m)
        if msg.get("tool_calls"):
            calls = []
            for c in msg["tool_calls"]:
                fn = dict(c["function"])
                if isinstance(fn.get("arguments"), str):
                    fn["arguments"] = arguments_object(fn["arguments"])
                calls.append({**c, "function": fn})
            msg["tool_calls"] = calls
        else:
            msg.pop("tool_calls", None)
        if msg.get("tool_call_id") is None:
            msg.pop("tool_call_id", None)
        out.append(msg)
    return out


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: Any, *, generation_prompt: bool) -> str:
    return str(
        tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=generation_prompt
        )
    )


def assistant_spans(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Any = None
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character span of each assistant turn in it."""
    msgs = template_messages(messages)
    text = _render(tokenizer, msgs, tools, generation_prompt=False)
    spans = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        before = _render(tokenizer, msgs[:i], tools, generation_prompt=True)
        through = _render(tokenizer, msgs[: i + 1], tools, generation_prompt=False)
        if not (text.startswith(before) and text.startswith(through) and through.startswith(before)):
            raise UsageError(
                f"the chat template does not render message {i}'s conversation as a prefix of the whole, "
                "so the orchestrator's tokens cannot be told apart",
                hint="use a model whose template renders each prefix as a prefix (Qwen2.5's does)",
            )
        spans.append((len(before), len(through)))
    return text, spans


def synthesized(record: Mapping[str, Any]) -> bool:
    """Whether the record's last assistant turn is the synthesis model's answer, not an orchestrator
    turn (the run ended at the round cap or on ``final_answer`` with ``synthesize``).

    >>> synthesized({"meta": {"ended_by": "synthesis"}}), synthesized({"meta": {"ended_by": "final_answer"}})
    (True, False)
    """
    meta = record.get("meta")
    return isinstance(meta, Mapping) and meta.get("ended_by") == "synthesis"


def masked_example(tokenizer: Any, record: Mapping[str, Any]) -> dict[str, list[int]]:
    """``input_ids`` and ``labels`` of one record: labels are the ids of the orchestrator turns'
    tokens and ``-100`` elsewhere (what TRL's SFTTrainer takes as a pre-tokenized example).

    A synthesis answer (:func:`synthesized`) is context: another model may have written it, and the
    RL stage never asks the policy for it."""
    text, spans = assistant_spans(tokenizer, record["messages"], record.get("tools"))
    if synthesized(record) and spans:
        spans = spans[:-1]
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    labels = []
    for tok, (start, end) in zip(ids, enc["offset_mapping"], strict=True):
        inside = end > start and any(a <= start < b for a, b in spans)
        labels.append(tok if inside else IGNORE)
    return {"input_ids": ids, "labels": labels}


def loss_text(tokenizer: Any, example: Mapping[str, Sequence[int]]) -> str:
    """The text of the tokens that carry loss, in order (for checks and for reading a mask)."""
    return str(tokenizer.decode([t for t in example["labels"] if t != IGNORE]))


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of an ``sft.jsonl`` file (or of ``DIR/sft.jsonl`` for a collect output directory),
    read by the one bounded JSONL reader; a record whose ``messages`` is not a list of chat
    messages is a UsageError naming its line."""
    if path.is_dir():
        path = path / "sft.jsonl"
    if not path.is_file():
        raise UsageError(
            f"no SFT data at {path}", hint="give the sft.jsonl that `masorch train collect` wrote"
        )
    hint = "give a file `masorch train collect` wrote (or rerun it)"
    for n, record in iter_jsonl(path, what="SFT data", item="a trajectory", hint=hint):
        messages = record.get("messages")
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages
        ):
            raise UsageError(f"{path} line {n}: `messages` is not a list of chat messages", hint=hint)
        yield record


def sft_examples(
    tokenizer: Any, records: Sequence[Mapping[str, Any]], *, max_length: int | None = None
) -> tuple[list[dict[str, list[int]]], int]:
    """The masked examples of ``records`` and how many were left out for passing ``max_length``.

    A trajectory longer than ``max_length`` is left out, not cut: a cut one would lose its end,
    the turns that answer.
    """
    examples, too_long = [], 0
    for record in records:
        ex = masked_example(tokenizer, record)
        if max_length is not None and len(ex["input_ids"]) > max_length:
            too_long += 1
            continue
        examples.append(ex)
    if too_long:
        logger.info("%d trajectories are longer than max_length=%s tokens: left out", too_long, max_length)
    return examples, too_long
