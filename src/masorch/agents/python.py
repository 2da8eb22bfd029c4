"""Python: the model writes a program, the sandbox runs it, the output feeds the final answer."""

from __future__ import annotations

import dataclasses
import importlib.util
import re

from masorch.agents import signatures
from masorch.agents.answer import extract_answer
from masorch.agents.base import AgentContext, NodeInput, NodeOutput
from masorch.agents.common import CallLog, missing_problem, problem_vars, system_message, tail
from masorch.agents.sandbox import SandboxLimits, SandboxResult, run_sandboxed, site_packages
from masorch.backends.base import GenerateConfig, Message
from masorch.errors import BackendError
from masorch.plan.catalogue import KindSignature
from masorch.prompts import render

_FENCE = re.compile(r"```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<code>.*?)```", re.DOTALL)
_FEEDBACK_CHARS = 3000
#: Packages the prompt mentions when they are installed and programs may import them.
_KNOWN_PACKAGES = ("numpy", "sympy", "scipy")


def extract_code(text: str) -> str | None:
    """The last fenced ``python`` block of a reply (else the last untagged fenced block), or None.

    >>> extract_code("Here:\\n```python\\nprint(6 * 7)\\n```")
    'print(6 * 7)\\n'
    >>> extract_code("no code") is None
    True
    """
    blocks = [(m.group("lang").casefold(), m.group("code")) for m in _FENCE.finditer(text)]
    for wanted in (("python", "py", "python3"), ("",)):
        chosen = [code for lang, code in blocks if lang in wanted and code.strip()]
        if chosen:
            return chosen[-1]
    return None


def _exit(result: SandboxResult) -> str:
    """How a failed program ended, in a few words (its output says the rest)."""
    if result.timed_out:
        return "did not finish in time"
    if result.killed_reason:
        return f"was stopped ({result.killed_reason})"
    if result.exit_code != 0:
        return f"exited with status {result.exit_code}"
    return "printed nothing"


def _failure(result: SandboxResult) -> str:
    """What the model is told about a failed program: its stderr after an exception, else how it ended."""
    crashed = result.exit_code != 0 and not result.timed_out and not result.killed_reason
    return (crashed and tail(result.stderr, _FEEDBACK_CHARS)) or f"the program {_exit(result)}"


class PythonAgent:
    """Up to ``max_attempts`` programs; each failure (no code, exception, timeout, no output) is fed
    back to the model with the error. The first program that prints something feeds a final call
    that states the answer. When every attempt fails, the output's details carry the last program's
    ``stdout`` and ``stderr`` verbatim and how it ended (``exit``). Programs run under
    :func:`masorch.agents.sandbox.run_sandboxed`.

    ``allow_packages`` lets programs import the running interpreter's installed packages (numpy,
    sympy, ...) read-only; the sandbox's other limits apply either way. A run offers it only where
    the sandbox can start (``requires``; :func:`masorch.agents.sandbox.sandbox_available`).
    """

    #: What this agent needs from the run's environment (see ``AgentRegistry.offered``).
    requires: frozenset[str] = frozenset({"sandbox"})

    def __init__(
        self,
        *,
        max_tokens: int = 2048,
        temperature: float = 0.0,
        limits: SandboxLimits | None = None,
        allow_packages: bool = True,
    ) -> None:
        self._max_tokens = max_tokens
        self._temperature = temperature
        base = limits or SandboxLimits()
        if allow_packages:
            base = dataclasses.replace(base, extra_paths=(*base.extra_paths, *site_packages()))
        self._limits = base
        self._packages = [
            name for name in _KNOWN_PACKAGES if allow_packages and importlib.util.find_spec(name) is not None
        ]

    @property
    def signature(self) -> KindSignature:
        """The ``python`` kind's signature from the default catalogue."""
        return signatures.PYTHON

    def _opening(self, node: NodeInput, timeout_s: float) -> list[Message]:
        """The system message and the request to write a program for ``node``."""
        write = render(
            "agents/python_write.j2",
            timeout_s=_seconds(timeout_s),
            packages=self._packages,
            **problem_vars(node),
        )
        return [system_message("an expert Python programmer"), Message("user", write)]

    async def run(self, node: NodeInput, ctx: AgentContext) -> NodeOutput:
        """Write, run, repair; then answer from the program's output."""
        problem = missing_problem(node)
        if problem is not None:
            return problem
        params = self.signature.resolve(node.params)
        timeout_s = float(params["timeout_s"])
        max_attempts = int(params["max_attempts"])
        limits = dataclasses.replace(self._limits, wall_s=timeout_s)
        config = GenerateConfig(temperature=self._temperature, max_tokens=self._max_tokens)
        opening = self._opening(node, timeout_s)
        log = CallLog()
        messages = list(opening)
        failures: list[str] = []
        try:
            for attempt in range(1, max_attempts + 1):
                reply = await log.complete(ctx, messages, config)
                code = extract_code(reply.text)
                result = await run_sandboxed(code, limits) if code is not None else None
                if result is not None and result.ok and result.stdout.strip():
                    output = tail(result.stdout, _FEEDBACK_CHARS)
                    final = await log.complete(
                        ctx,
                        [
                            *opening,
                            Message("assistant", reply.text),
                            Message("user", render("agents/python_answer.j2", stdout=output)),
                        ],
                        config,
                    )
                    answer = extract_answer(final.text)
                    if not answer:
                        return log.error("the final reply was empty")
                    rationale = f"Program:\n```python\n{code}```\nOutput:\n{output}\n\n{final.text}"
                    details = {
                        "attempts": attempt,
                        "failures": failures,
                        "isolation": list(result.isolation),
                        "file_boundary": result.file_boundary,
                    }
                    return log.ok(answer, rationale, details)
                failure = "no fenced python code block" if result is None else _failure(result)
                failures.append(f"attempt {attempt}: {failure}")
                feedback = _retry_message(result, failure, timeout_s)
                messages += [Message("assistant", reply.text), Message("user", feedback)]
        except BackendError as exc:
            return log.error(f"model call failed: {exc}")
        last = (
            {}
            if result is None
            else {"stdout": result.stdout, "stderr": result.stderr, "exit": _exit(result)}
        )
        return log.error(
            f"no program succeeded in {max_attempts} attempts: " + "; ".join(failures),
            {"attempts": max_attempts, "failures": failures, **last},
        )


def _retry_message(result: SandboxResult | None, failure: str, timeout_s: float) -> str:
    """What the model reads after a failed attempt: no code, a timeout, or the error and output."""
    return render(
        "agents/python_retry.j2",
        code_found=result is not None,
        timed_out=result is not None and result.timed_out,
        timeout_s=_seconds(timeout_s),
        stdout=tail(result.stdout, _FEEDBACK_CHARS) if result is not None else "",
        error=failure if result is not None and not result.timed_out else "",
    )


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
