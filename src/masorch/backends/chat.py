"""The OpenAI chat-completion wire format, shared by the HTTP and the in-process backends.

Request pieces (messages, tools) and the parsing of a reply's first choice, checked field by field so
that a malformed reply becomes a clear error instead of an ``AttributeError`` deep in a caller.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from masorch.backends.base import FinishReason, Message, ToolCall, ToolSpec

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "error",
}


def message_payload(message: Message, *, arguments_as_object: bool = False) -> dict[str, Any]:
    """One message in the chat wire format, with its tool calls or the id of the call it answers.

    ``arguments_as_object`` gives each call's arguments as a JSON object instead of text, as
    Hugging Face chat templates expect (arguments that are not an object stay text).

    >>> message_payload(Message("tool", "4", tool_call_id="c1"))
    {'role': 'tool', 'content': '4', 'tool_call_id': 'c1'}
    """
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": arguments_object(call.arguments) if arguments_as_object else call.arguments,
                },
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def messages_payload(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as the ``messages`` field of a chat request (tool calls and tool results included)."""
    return [message_payload(m) for m in messages]


def arguments_object(arguments: str) -> Any:
    """A call's arguments text as the JSON object it holds; text that is not an object stays text.

    >>> arguments_object('{"task": "t"}'), arguments_object("[1]"), arguments_object("")
    ({'task': 't'}, '[1]', {})
    """
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):  # not JSON, a number too long to convert, or nested too deeply
        return arguments
    return value if isinstance(value, dict) else arguments


def tools_payload(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as the ``tools`` field of a chat request (function tools)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
        }
        for t in tools
    ]


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters a token) for servers that report no usage.

    >>> estimate_tokens("abcdefgh")
    2
    """
    return math.ceil(len(text) / 4)


def parse_chat_choice(data: Any) -> tuple[str, tuple[ToolCall, ...], FinishReason]:
    """Text, tool calls and finish reason of the first choice of a chat-completion object.

    Raises ``ValueError`` naming what is wrong when ``data`` is not a chat completion.

    >>> parse_chat_choice({"choices": [{"message": {"content": "hi"}, "finish_reason": "length"}]})
    ('hi', (), 'length')
    """
    choice = _first_choice(data)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ValueError("choice without a message")
    text = _content_text(message.get("content"))
    if text is None:
        raise ValueError(f"message content of type {type(message.get('content')).__name__}")
    tool_calls = _tool_calls(message.get("tool_calls"))
    if tool_calls is None:
        raise ValueError("malformed tool_calls")
    finish = _FINISH.get(str(choice.get("finish_reason") or "stop"), "stop")
    if tool_calls and finish == "stop":
        finish = "tool_calls"
    return text, tool_calls, finish


def _content_text(content: Any) -> str | None:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers send content parts
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(str(p) for p in parts)
    return None


def _tool_calls(raw: Any) -> tuple[ToolCall, ...] | None:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        return None
    calls: list[ToolCall] = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return None
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):  # some servers send the arguments as an object
            arguments = json.dumps(arguments)
        calls.append(ToolCall(name=function["name"], arguments=arguments, id=str(item.get("id") or "")))
    return tuple(calls)


#: The tag a Hermes-style chat template (Qwen 2.5, Hermes, ...) asks a model to write each tool call in.
HERMES_TAG = "<tool_call>"
_HERMES_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def hermes_block_count(text: str) -> int:
    """How many ``<tool_call>`` blocks ``text`` holds, readable or not.

    >>> hermes_block_count('<tool_call>{"name": "cot"}</tool_call><tool_call>{bad</tool_call>')
    2
    """
    return len(_HERMES_CALL.findall(text))


def hermes_calls(text: str) -> tuple[str, tuple[ToolCall, ...]] | None:
    """The text before the first ``<tool_call>`` block and the calls of the blocks, or None when
    ``text`` holds no block or a block that is not a ``{"name", "arguments"}`` object (cut short,
    say): the caller then keeps the whole text.

    >>> hermes_calls('Two steps.\\n<tool_call>\\n{"name": "cot", "arguments": {"task": "t"}}\\n</tool_call>')
    ('Two steps.', (ToolCall(name='cot', arguments='{"task": "t"}', id=''),))
    >>> hermes_calls('<tool_call>\\n{"name": "cot", "argum') is None
    True
    >>> hermes_calls("<tool_call>" + "[" * 5000 + "]" * 5000 + "</tool_call>") is None  # too deep to read
    True
    """
    start = text.find(HERMES_TAG)
    if start < 0:
        return None
    blocks = list(_HERMES_CALL.finditer(text, start))
    rest = _HERMES_CALL.sub("", text[start:]).strip()
    if not blocks or rest:
        return None
    calls = []
    for block in blocks:
        try:
            value = json.loads(block.group(1))
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return None
        arguments = value.get("arguments", {})
        if not isinstance(arguments, dict):
            return None
        calls.append(ToolCall(value["name"], json.dumps(arguments, ensure_ascii=False)))
    return text[:start].strip(), tuple(calls)


def parse_text_choice(data: Any) -> tuple[str, FinishReason]:
    """Text and finish reason of the first choice of a text-completion object (``/v1/completions``).

    >>> parse_text_choice({"choices": [{"text": "hi", "finish_reason": "length"}]})
    ('hi', 'length')
    """
    choice = _first_choice(data)
    text = choice.get("text")
    if not isinstance(text, str):
        raise ValueError(f"choice text of type {type(text).__name__}")
    return text, _FINISH.get(str(choice.get("finish_reason") or "stop"), "stop")


def _first_choice(data: Any) -> dict[str, Any]:
    """The first choice of a completion object; ValueError naming what is wrong when there is none."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if "error" in data and "choices" not in data:
        raise ValueError(f"error object {json.dumps(data['error'])}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices")
    return choices[0]
