"""Math answer scoring: extract the final answer, then test equivalence with math-verify, time-bounded.

math-verify's own timeouts use ``signal.alarm``, which only works in a main thread. This scorer calls it
with its timeouts disabled and bounds time itself, in one of two ways:

* ``isolation="process"`` (default): a small pool of worker interpreters (``python -m
  masorch.score.math``, JSON lines over pipes); a worker that exceeds the timeout is killed and
  replaced, so a pathological expression cannot keep burning a core. POSIX only (``select`` on pipes).
* ``isolation="thread"``: a daemon thread per comparison, joined with the timeout. No process to
  start, but weaker: a stuck computation keeps running, and one that holds the GIL in C (sympy on
  ``2^{10^{10^{10}}}``) stalls the caller too. For trusted inputs only.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any, Literal

from masorch.errors import UsageError
from masorch.score.extract import BOX_MARKERS, last_boxed
from masorch.score.scorer import HasAnswer, Score

log = logging.getLogger(__name__)

_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_STRIP = (r"\left", r"\right", r"\!", r"\,", r"\;", r"\:", r"\displaystyle", " ")


def last_number(text: str) -> str | None:
    """The last number in ``text`` (integer, decimal, ``a/b``), thousands separators removed.

    >>> last_number("7 apples cost 1,250.5 cents")
    '1250.5'
    """
    numbers = _NUMBER.findall(text)
    return numbers[-1].replace(",", "") if numbers else None


#: A word of prose between spaces (or the ends, or before a punctuation mark): ``answer``, ``cm``.
_PROSE = re.compile(r"(?:(?<=\s)|^)[A-Za-z]{2,}(?=[\s.,;:!?]|$)")
#: A word anywhere once LaTeX is taken out (``twelve`` in ``12 (twelve)``, ``two`` in ``two-digit``);
#: letters after a digit, a letter or a brace are variables (``2xy``, ``\\frac{ab}{2}``).
_WORD = re.compile(r"(?<![A-Za-z0-9{_^])[A-Za-z]{2,}")
#: What is taken out before looking for words: text groups (``\\text{ cm}``), environments'
#: names (``\\begin{pmatrix}``) and every command's name (``\\sqrt``).
_LATEX = re.compile(
    r"\\(?:text[a-z]*|mathrm|mathbf|mathit|emph|mbox|operatorname|begin|end)\s*\{[^{}]*\}|\\[A-Za-z]+"
)
#: A command that makes a value (``\\frac``, ``\\sqrt``, ``\\pi``): not a delimiter or a layout command.
_VALUE_COMMAND = re.compile(
    r"\\(?!(?:begin|end|left|right|quad|qquad|text[a-z]*|mathrm|mbox|emph)\b)[A-Za-z]+"
)
#: The longest unboxed line still read as one formula.
FORMULA_CHARS = 200


def formula(text: str) -> str | None:
    """``text`` as one formula when it is one: a single line without words, ``$``, ``**``, a leading
    ``=`` or ``:`` and end punctuation removed.

    >>> formula(r"\\frac{13}{3}"), formula("$x = 3$."), formula(r"3 \\text{ cm}"), formula("**2xy**")
    ('\\\\frac{13}{3}', 'x = 3', '3 \\\\text{ cm}', '2xy')
    >>> [formula(t) for t in ("240 outfits", "12 (twelve)", "1\\n2", r"\\boxed[9}")]
    [None, None, None, None]
    """
    line = text.replace("\\$", "").strip()
    for _ in range(2):  # "$x$.", "**12**." and ": $x$"
        line = line.rstrip(".,;:").lstrip("=:").strip().strip("$").strip("*").strip()
    if not line or "\n" in line or len(line) > FORMULA_CHARS or any(m in line for m in BOX_MARKERS):
        return None  # a box left open or misspelt (``\\boxed[9}``) is read by its last number
    return None if _WORD.search(_LATEX.sub(" ", line)) else line


def _formula_in_prose(text: str) -> str | None:
    """The last formula between the prose words of ``text``'s last line that makes a value with a
    LaTeX command (``The answer is \\frac{13}{3}`` gives ``\\frac{13}{3}``, whose last number, 3,
    is not its value); None when there is none (a plain number is then read as the last number)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    for piece in reversed(_PROSE.split(lines[-1])):
        found = formula(piece)
        if found is not None and _VALUE_COMMAND.search(found):
            return found
    return None


def extract_answer(text: str) -> str | None:
    """The final answer of a solution: its last boxed expression; else the text itself when it is one
    formula (a bare answer such as ``\\frac{13}{3}``: its last number, 3, is not its value); else the
    last LaTeX formula between the prose words of its last line; else its last number.

    >>> extract_answer(r"so \\boxed{5}"), extract_answer(r"5\\sqrt{2}"), extract_answer("it is 12, not 13")
    ('5', '5\\\\sqrt{2}', '13')
    >>> extract_answer(r"The answer is $\\frac{13}{3}$ cm."), extract_answer("Thus 240 outfits")
    ('\\\\frac{13}{3}', '240')
    """
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    for found in (formula(text), _formula_in_prose(text)):
        if found is not None:
            return found
    return last_number(text)


def _as_latex(expr: str) -> str:
    expr = expr.strip()
    return expr if "$" in expr or r"\boxed" in expr else f"${expr}$"


def _plain(expr: str) -> str:
    out = expr.strip().strip("$")
    for token in _STRIP:
        out = out.replace(token, "")
    return out.replace(r"\dfrac", r"\frac").replace(r"\tfrac", r"\frac").rstrip(".")


def math_equal(prediction: str, gold: str) -> tuple[bool, str]:
    """Whether two answer expressions are mathematically equal, and the method that decided.

    Uses math-verify (sympy) with its own timeouts off, so it has no time bound: call it through
    :class:`MathScorer` for untrusted inputs. Falls back to comparing whitespace/LaTeX-normalised
    strings when math-verify parses nothing on either side.
    """
    from math_verify import parse, verify

    gold_parsed = parse(_as_latex(gold), parsing_timeout=None)
    pred_parsed = parse(_as_latex(prediction), parsing_timeout=None)
    if gold_parsed and pred_parsed:
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=None)), "math_verify"
    return _plain(prediction) == _plain(gold), "string"


def _warm_up() -> None:
    """Import math-verify's lazy modules with one comparison, so that no timed comparison pays for them."""
    from math_verify import parse, verify

    verify(parse("1", parsing_timeout=None), parse("1", parsing_timeout=None), timeout_seconds=None)


def serve(stdin: IO[str], stdout: IO[str]) -> None:
    """The worker loop: read ``[prediction, gold]`` JSON lines, write ``["ok", [equal, method]]`` lines."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _warm_up()  # before signalling readiness: startup is not timed
    stdout.write('["ready", null]\n')
    stdout.flush()
    for line in stdin:
        prediction, gold = json.loads(line)
        try:
            reply: list[Any] = ["ok", list(math_equal(prediction, gold))]
        except Exception as exc:  # reported to the caller as a failed comparison, not lost
            reply = ["error", f"{type(exc).__name__}: {exc}"]
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


class _Worker:
    """One worker process (``python -m masorch.score.math``) spoken to in JSON lines over pipes."""

    def __init__(self, startup_s: float) -> None:
        # A fresh interpreter, not multiprocessing: spawning must not re-run the user's __main__.
        package_root = str(Path(__file__).resolve().parents[2])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "masorch.score.math"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            env=env,
        )
        if self.read(startup_s) is None:
            self.kill()
            raise UsageError(
                f"the math-verify worker did not start within {startup_s:.0f}s",
                hint="run `python -m masorch.score.math < /dev/null` to see why, or use isolation='thread'",
                code="scorer_start",
            )

    def send(self, prediction: str, gold: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps([prediction, gold]) + "\n")
        self.process.stdin.flush()

    def read(self, timeout_s: float) -> list[Any] | None:
        """The next reply, or None on timeout; EOFError when the worker died."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = self.process.stdout.readline()
        if not line:
            raise EOFError(f"worker exited with code {self.process.poll()}")
        reply: list[Any] = json.loads(line)
        return reply

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class MathScorer:
    """math-verify equivalence of the extracted final answer to the gold answer, time-bounded.

    ``timeout_s`` bounds one comparison (parse + verify of both sides); ``workers`` is the number of
    worker processes (concurrent comparisons) in process isolation. Thread-safe; close it (or use it
    as a context manager) to stop the workers.
    """

    name = "math"

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        isolation: Literal["process", "thread"] = "process",
        workers: int = 2,
        startup_s: float = 120.0,
    ) -> None:
        if isolation not in ("process", "thread"):
            raise UsageError(f"unknown isolation '{isolation}'", hint="use 'process' or 'thread'")
        if workers < 1 or timeout_s <= 0:
            raise UsageError("workers must be >= 1 and timeout_s > 0", code="bad_argument")
        self.timeout_s = timeout_s
        self.isolation = isolation
        self._workers = workers
        self._startup_s = startup_s
        self._lock = threading.Lock()
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._started = 0
        self._closed = False
        self._warm = False

    def score(self, prediction: str, sample: HasAnswer) -> Score:
        """1.0 when the extracted answer equals the gold answer; timeouts and errors score 0.0."""
        extracted = extract_answer(prediction)
        details: dict[str, Any] = {"extracted": extracted, "gold": sample.answer}
        if extracted is None:
            return Score(False, 0.0, {**details, "method": "none", "error": "no answer found"})
        status, payload = self.compare(extracted, sample.answer)
        if status != "ok":
            # undecided: the comparison timed out or failed, so this 0 is not a verdict on the answer
            return Score(False, 0.0, {**details, "method": "none", "error": payload, "undecided": True})
        equal, method = payload
        return Score(equal, float(equal), {**details, "method": method})

    def compare(self, prediction: str, gold: str) -> tuple[str, Any]:
        """``("ok", (equal, method))``, ``("timeout", message)`` or ``("error", message)``."""
        if self._closed:
            raise UsageError("this MathScorer is closed", hint="create a new scorer", code="scorer_closed")
        if self.isolation == "thread":
            return self._compare_in_thread(prediction, gold)
        return self._compare_in_process(prediction, gold)

    def _compare_in_thread(self, prediction: str, gold: str) -> tuple[str, Any]:
        with self._lock:  # warm math-verify's lazy imports once, untimed, as a worker process does
            if not self._warm:
                _warm_up()
                self._warm = True
        result: list[tuple[str, Any]] = []

        def run() -> None:
            try:
                result.append(("ok", math_equal(prediction, gold)))
            except Exception as exc:  # math-verify/sympy failures become a failed comparison with the reason
                result.append(("error", f"{type(exc).__name__}: {exc}"))

        # A daemon thread per comparison: a stuck one cannot hold up interpreter exit.
        thread = threading.Thread(target=run, name="math-verify", daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        if not result:
            log.warning(
                "math-verify timed out after %.1fs on %.80r; its thread runs on", self.timeout_s, prediction
            )
            return "timeout", f"timed out after {self.timeout_s:g}s"
        return result[0]

    def _compare_in_process(self, prediction: str, gold: str) -> tuple[str, Any]:
        worker = self._acquire()
        try:
            worker.send(prediction, gold)
            reply = worker.read(self.timeout_s)
        except (EOFError, OSError, ValueError) as exc:
            self._discard(worker)
            return "error", f"math-verify worker failed: {type(exc).__name__}: {exc}"
        if reply is None:
            log.warning(
                "math-verify timed out after %.1fs on %.80r; worker killed", self.timeout_s, prediction
            )
            self._discard(worker)
            return "timeout", f"timed out after {self.timeout_s:g}s"
        self._idle.put(worker)
        status, payload = reply
        return status, tuple(payload) if status == "ok" else payload

    def _acquire(self) -> _Worker:
        while True:
            try:
                return self._idle.get(timeout=0.05)
            except queue.Empty:
                pass
            with self._lock:
                start_new = self._started < self._workers
                if start_new:
                    self._started += 1
            if start_new:
                break
        try:
            return _Worker(self._startup_s)
        except BaseException:
            with self._lock:
                self._started -= 1
            raise

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._started -= 1

    def close(self) -> None:
        """Stop the idle worker processes; the scorer cannot be used afterwards."""
        self._closed = True
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            worker.kill()

    def __enter__(self) -> MathScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
