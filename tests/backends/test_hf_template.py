"""The hf backend's chat-template inputs: tool calls, tool results and tools reach the template."""

from __future__ import annotations

import json

import pytest

from masorch.backends.base import GenerateConfig, Message, ToolCall, ToolSpec
from masorch.backends.hf import chat_template_inputs

# A small chat template in the style of the Qwen/Hermes ones: tools listed in the system turn, calls
# as JSON in <tool_call> tags, results in <tool_response> tags.
TEMPLATE = (
    "{% if tools %}TOOLS:{% for t in tools %} {{ t.function.name }}{% endfor %}\n{% endif %}"
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} {{ c.function.arguments | tojson }}"
    "</tool_call>{% endfor %}"
    "{% if m.tool_call_id %}<tool_response id={{ m.tool_call_id }}>{% endif %}\n{% endfor %}"
)


def test_tool_calls_results_and_tools_render_through_a_chat_template():
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = {"[UNK]": 0}
    raw = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, chat_template=TEMPLATE)
    messages = [
        Message("user", "2+2?"),
        Message("assistant", "", tool_calls=(ToolCall("cot", '{"task": "add"}', id="c1"),)),
        Message("tool", "status: OK", tool_call_id="c1"),
    ]
    tools = (ToolSpec("cot", "reason", {"type": "object", "properties": {}}),)
    inputs = chat_template_inputs(messages, GenerateConfig(tools=tools))
    text = tokenizer.apply_chat_template(**inputs, tokenize=False)
    assert text.startswith("TOOLS: cot") and "<user>2+2?" in text
    assert '<assistant><tool_call>cot {"task": "add"}</tool_call>' in text  # arguments as an object
    assert "<tool>status: OK<tool_response id=c1>" in text
    assert chat_template_inputs(messages[:1], GenerateConfig())["tools"] is None
    assert json.loads(json.dumps(inputs["conversation"]))[1]["tool_calls"][0]["id"] == "c1"
