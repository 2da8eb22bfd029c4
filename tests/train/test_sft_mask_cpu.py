"""The masked SFT objective: exactly the orchestrator's tokens carry loss.

A small two-round trajectory (a tool call, its result, a between-round message, the final answer)
is tokenized by a word-level tokenizer with a plain chat template, and the positions whose label
is not -100 are checked one by one: the assistant turns (their tool calls and the end marker),
and nothing of the system prompt, the question, the tool result or the round message. The same is
checked with the real chat template of Qwen2.5 (model tier: it needs the pulled GGUF file).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")  # the masks are checked on real chat templates
pytest.importorskip("tokenizers")
from sft_helpers import RECORD, tokenizer_for

from masorch.errors import UsageError
from masorch.train.sft_data import (
    IGNORE,
    assistant_spans,
    loss_text,
    masked_example,
    read_records,
    sft_examples,
)


def test_only_the_assistant_turns_carry_loss() -> None:
    tokenizer = tokenizer_for(RECORD)
    ex = masked_example(tokenizer, RECORD)
    tokens = tokenizer.convert_ids_to_tokens(ex["input_ids"])
    assert "[UNK]" not in tokens
    carried = [tok for tok, label in zip(tokens, ex["labels"], strict=True) if label != IGNORE]
    first = [
        "<",
        "call",
        ">",
        "cot",
        '{"',
        "task",
        '":',
        '"',
        "add",
        '"}',
        "</",
        "call",
        ">",
        "<|",
        "end",
        "|>",
    ]
    second = [
        "retry",
        "<",
        "call",
        ">",
        "final_answer",
        '{"',
        "answer",
        '":',
        '"',
        "5",
        '"}',
        "</",
        "call",
        ">",
    ]
    assert carried == first + second + ["<|", "end", "|>"]
    # Position by position: a label is the token's own id where it carries loss.
    for i, label in enumerate(ex["labels"]):
        assert label in (IGNORE, ex["input_ids"][i])
    text = tokenizer.decode(ex["input_ids"])
    for context in ("orchestrate", "two plus three", "EXEC_ERR", "reset", "round one done"):
        assert context.split()[0] in text and context.split()[0] not in loss_text(tokenizer, ex)
    # The assistant marker that opens a turn is the prompt's, not the target's.
    assert tokens.count("assistant") == 2 and "assistant" not in carried


def test_a_synthesis_answer_is_context() -> None:
    record = {
        **RECORD,
        "messages": [
            *RECORD["messages"][:-1],
            {"role": "user", "content": "no rounds left answer now"},
            {"role": "assistant", "content": "the sum is five"},
        ],
        "meta": {"ended_by": "synthesis"},
    }
    tokenizer = tokenizer_for(record)
    ex = masked_example(tokenizer, record)
    carried = loss_text(tokenizer, ex)
    assert "cot" in carried and "sum" not in carried and "five" not in carried
    # The same conversation ended by the orchestrator's own turn trains on that turn.
    ex = masked_example(tokenizer, {**record, "meta": {"ended_by": "final_answer"}})
    assert "five" in loss_text(tokenizer, ex)


def test_spans_cover_each_assistant_turn() -> None:
    tokenizer = tokenizer_for(RECORD)
    text, spans = assistant_spans(tokenizer, RECORD["messages"])
    assert len(spans) == 2
    assert [text[a:b] for a, b in spans] == [
        ' <call> cot {"task": "add"} </call> <|end|>\n',
        'retry <call> final_answer {"answer": "5"} </call> <|end|>\n',
    ]


def test_a_template_that_rewrites_history_is_refused() -> None:
    tokenizer = tokenizer_for(RECORD)
    # Renders the last message differently from the earlier ones: prefixes are not prefixes.
    tokenizer.chat_template = (
        "{% for m in messages %}{% if loop.last %}LAST {% endif %}{{ m.content }} {% endfor %}"
    )
    with pytest.raises(UsageError, match="prefix"):
        masked_example(tokenizer, RECORD)


def test_long_trajectories_are_left_out_and_records_are_read(tmp_path: Path) -> None:
    tokenizer = tokenizer_for(RECORD)
    n = len(masked_example(tokenizer, RECORD)["input_ids"])
    examples, too_long = sft_examples(tokenizer, [RECORD, RECORD], max_length=n - 1)
    assert (examples, too_long) == ([], 2)
    examples, too_long = sft_examples(tokenizer, [RECORD], max_length=n)
    assert len(examples) == 1 and too_long == 0
    (tmp_path / "sft.jsonl").write_text(json.dumps(RECORD) + "\n")
    assert list(read_records(tmp_path)) == [RECORD]
    (tmp_path / "sft.jsonl").write_text('{"id": 1}\n')
    with pytest.raises(UsageError, match="`messages` is not a list of chat messages"):
        list(read_records(tmp_path / "sft.jsonl"))


@pytest.mark.model
def test_qwen_template_masks_the_orchestrator_turns() -> None:
    from masorch.backends.models import ModelStore

    try:
        path = ModelStore().path("qwen2.5-coder-0.5b")
    except UsageError:
        pytest.skip("masorch models pull qwen2.5-coder-0.5b")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tools = [{"type": "function", "function": {"name": "cot", "description": "reason", "parameters": {}}}]
    ex = masked_example(tokenizer, {**RECORD, "tools": tools})
    assert loss_text(tokenizer, ex) == (
        '<tool_call>\n{"name": "cot", "arguments": {"task": "add"}}\n</tool_call><|im_end|>\n'
        'retry\n<tool_call>\n{"name": "final_answer", "arguments": {"answer": "5"}}\n</tool_call><|im_end|>\n'
    )


def test_each_turn_is_trained_on_the_context_inference_renders() -> None:
    """The text before each orchestrator turn of an SFT example is, byte for byte, the prompt the
    ``hf:`` backend renders for the same conversation at inference (record written as a collection
    writes it; Qwen2.5's template, which renders the tools, the calls' arguments and the results)."""
    templates = pytest.importorskip("trl.chat_template_utils")
    from sft_helpers import word_tokenizer

    from masorch.backends.base import GenerateConfig, Message, ToolCall, ToolSpec
    from masorch.backends.chat import messages_payload, tools_payload
    from masorch.backends.hf import chat_template_inputs

    n = {"type": "integer", "minimum": 1, "maximum": 16, "default": 5}
    tools = (
        ToolSpec(
            "sc", "samples and votes", {"type": "object", "properties": {"task": {"type": "string"}, "n": n}}
        ),
        ToolSpec(
            "final_answer", "ends the run", {"type": "object", "properties": {"answer": {"type": "string"}}}
        ),
    )
    messages = [
        Message("system", "you orchestrate"),
        Message("user", "what is two plus three"),
        Message(
            "assistant",
            "two calls",
            tool_calls=(
                ToolCall("sc", '{"task": "add", "n": 3}', id="c1"),
                ToolCall("sc", '{"task": "x"}', id="c2"),
            ),
        ),
        Message("tool", "status: EXEC_ERR error: reset", tool_call_id="c1"),
        Message("tool", "status: OK\n5", tool_call_id="c2"),
        Message("user", "round 1 of 3 done"),
        Message("assistant", "", tool_calls=(ToolCall("final_answer", '{"answer": "5"}', id="c3"),)),
    ]
    record = {"messages": messages_payload(messages), "tools": tools_payload(tools)}
    tokenizer = word_tokenizer([])
    tokenizer.chat_template = templates.qwen2_5_chat_template
    text, spans = assistant_spans(tokenizer, record["messages"], record["tools"])
    assert len(spans) == 2
    for (start, _), turn in zip(spans, (2, 6), strict=True):
        inference = tokenizer.apply_chat_template(
            **chat_template_inputs(messages[:turn], GenerateConfig(tools=tools)),
            add_generation_prompt=True,
            tokenize=False,
        )
        assert text[:start] == inference
    # The check has teeth: the schemas' bounds and the arguments as objects are in the rendering.
    assert '"maximum": 16' in text and '{"name": "sc", "arguments": {"task": "add", "n": 3}}' in text
