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


def test_a_policy_stops_where_the_engine_would(tmp_path) -> None:
    """A saved policy whose config knows only ``<|im_end|>`` still ends a turn at ``<|endoftext|>``
    (llama.cpp's end tokens), and so does the hf backend: one token, finish ``stop``, not the cap."""
    pytest.importorskip("torch")
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    import asyncio

    from masorch.backends.hf import HFBackend, load_policy
    from tiny_models import tiny_qwen2

    vocab = {"[UNK]": 0, "<": 1, ">": 2, "user": 3, "hi": 4}
    raw = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, chat_template=TEMPLATE, unk_token="[UNK]"
    )
    tokenizer.add_special_tokens({"eos_token": "<|im_end|>", "additional_special_tokens": ["<|endoftext|>"]})
    end_of_text = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    tiny_qwen2(tokenizer, hidden_size=8, pad_token_id=None).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model, tok = load_policy(str(tmp_path))
    assert model.generation_config.eos_token_id == [tokenizer.eos_token_id, end_of_text]

    def always_end_of_text(module, inputs, logits):  # the policy's every next token: <|endoftext|>
        logits[..., :] = 0.0
        logits[..., end_of_text] = 10.0
        return logits

    model.lm_head.register_forward_hook(always_end_of_text)
    done = asyncio.run(HFBackend(model, tok).complete([Message("user", "hi")], GenerateConfig(max_tokens=8)))
    assert (done.usage.completion_tokens, done.finish, done.text) == (1, "stop", "")
