"""Where an orchestrator's reply holds its plan: the reply's text, or its native tool calls.

A server that supports tool calling (OpenAI, vLLM with a tool parser, llama.cpp with ``--jinja``)
may return the plan as ``tool_calls`` with an empty text, whatever dialect the prompt asked for.
Those calls are the json dialect's calls, so they are written out as that dialect's array and read
by the same parser; the text beside them is reasoning, not plan.
"""

from __future__ import annotations

import json

from masorch.backends.base import Completion
from masorch.plan.parse import Dialect


def plan_text(completion: Completion, dialect: Dialect) -> tuple[str, Dialect]:
    """The text to read a plan from and the dialect to read it in.

    >>> from masorch.backends.base import ToolCall
    >>> c = Completion("thinking...", tool_calls=(ToolCall("final_answer", '{"text": "4"}'),))
    >>> plan_text(c, "calls")
    ('[{"name": "final_answer", "arguments": "{\\\\"text\\\\": \\\\"4\\\\"}"}]', 'json')
    >>> plan_text(Completion('final_answer("4")'), "calls")
    ('final_answer("4")', 'calls')
    """
    if not completion.tool_calls:
        return completion.text, dialect
    calls = [{"name": call.name, "arguments": call.arguments} for call in completion.tool_calls]
    return json.dumps(calls, ensure_ascii=False), "json"
