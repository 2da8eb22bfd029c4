"""The python agent end to end: model-written programs run in the real sandbox."""

from __future__ import annotations

from masorch.agents.base import NodeInput, NodeStatus
from masorch.agents.python import PythonAgent, extract_code

NODE = NodeInput("p", "What is the sum of the integers from 1 to 100?", "", params={"max_attempts": 2})


def fenced(code: str) -> str:
    return f"Here is the program:\n```python\n{code}\n```\n"


async def test_program_output_feeds_the_final_answer(make_ctx):
    ctx = make_ctx([fenced("print(sum(range(1, 101)))"), r"The program printed 5050. \boxed{5050}"])
    out = await PythonAgent().run(NODE, ctx)
    assert out.status is NodeStatus.OK and out.answer == "5050"
    assert ctx.calls == 2 and out.details["attempts"] == 1
    assert out.details["file_boundary"].endswith("audit_hook")  # the layers that confined its files
    final_prompt = ctx.backend.calls[1][0][-1].content
    assert "5050" in final_prompt
    assert "sum(range(1, 101))" in out.rationale and "5050" in out.rationale


async def test_an_exception_is_fed_back_and_the_fix_runs(make_ctx):
    ctx = make_ctx(
        [
            fenced("total = 5050 / 0\nprint(total)"),
            fenced("print(5050)"),
            r"\boxed{5050}",
        ]
    )
    out = await PythonAgent().run(NODE, ctx)
    assert out.status is NodeStatus.OK and out.answer == "5050" and ctx.calls == 3
    retry_prompt = ctx.backend.calls[1][0][-1].content
    assert "ZeroDivisionError" in retry_prompt and "main.py" in retry_prompt
    assert out.details["failures"][0].startswith("attempt 1: ")


async def test_a_failing_last_program_leaves_its_output_verbatim(make_ctx):
    code = "print('partial 1')\nraise KeyError('no such key')"
    ctx = make_ctx([fenced(code)])
    out = await PythonAgent().run(NodeInput("p", "Fail.", "", params={"max_attempts": 1}), ctx)
    assert out.status is NodeStatus.ERROR
    assert out.details["stdout"] == "partial 1\n"
    assert "KeyError: 'no such key'" in out.details["stderr"] and "Traceback" in out.details["stderr"]
    assert out.details["exit"] == "exited with status 1"


async def test_a_timeout_on_every_attempt_is_an_error(make_ctx):
    ctx = make_ctx([fenced("while True:\n    pass"), fenced("while True:\n    pass")])
    node = NodeInput("p", "Loop.", "", params={"max_attempts": 2, "timeout_s": 1.0})
    out = await PythonAgent().run(node, ctx)
    assert out.status is NodeStatus.ERROR and ctx.calls == 2
    assert "did not finish in time" in out.error
    assert "did not finish within 1 seconds" in ctx.backend.calls[1][0][-1].content


async def test_missing_code_and_silent_programs_are_fed_back(make_ctx):
    ctx = make_ctx(["I think it is 5050.", fenced("x = 5050"), fenced("print(5050)"), r"\boxed{5050}"])
    node = NodeInput("p", "Sum 1..100.", "", params={"max_attempts": 3})
    out = await PythonAgent().run(node, ctx)
    assert out.status is NodeStatus.OK and out.answer == "5050" and ctx.calls == 4
    assert "no fenced ```python code block" in ctx.backend.calls[1][0][-1].content
    assert "printed nothing" in ctx.backend.calls[2][0][-1].content


async def test_programs_can_use_installed_packages(make_ctx):
    ctx = make_ctx([fenced("import sympy\nprint(sympy.factorint(5050))"), r"\boxed{2 \cdot 5^2 \cdot 101}"])
    out = await PythonAgent().run(NODE, ctx)
    assert out.status is NodeStatus.OK
    assert "{2: 1, 5: 2, 101: 1}" in ctx.backend.calls[1][0][-1].content


def test_extract_code_prefers_the_last_python_block():
    text = "```\nplain\n```\n```python\nfirst\n```\n```py\nsecond\n```\n```text\nnot code\n```"
    assert extract_code(text) == "second\n"
    assert extract_code("```\nonly plain\n```") == "only plain\n"
    assert extract_code("```python\n\n```") is None
