"""An independent solver: reads a task's rendered text (and its worlds' item levels) and solves it.

It shares no code with the generator: it parses the sentences, rebuilds the dependency graph from the
text, computes every answer mod 23 and measures the five axes from what it read.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

_MOD = 23
_PROBLEM = re.compile(r"^Problem (\d+):$", re.M)
# A definition is "The number of each OWNER's QUANTITY equals RHS." with no period inside. It is read
# one period-free segment at a time (see _sentence), never by a search over the whole text: a search
# restarts at every "The number of each" and rescans the rest, quadratic on a long hostile text.
_LEAD = "The number of each "
_AFTER_LEAD = re.compile(r"([^']+)'s ([^']+?) equals (.+)", re.S)
_NEEDLE = re.compile(r"One of the special magic numbers for (\S+) is: (\d+)\.")
_QUESTION_HEAD, _QUESTION_TAIL, _DOES = "Question: How many ", " have?", " does "
_NEEDLE_Q = re.compile(r"^Question: What is the special magic number for (\S+) mentioned", re.M)
_NOTE = re.compile(r"^Note: ", re.M)
# What a note claims: "... the answer to Problem P is D." at the end of its line.
_NOTE_CLAIM = re.compile(r"^Note: [^\n]*?the answer to Problem (\d+) is (\d+)\.$", re.M)
_ANSWER_REF = re.compile(r"\[answer(\d+)\]")


class EvaluationError(ValueError):
    """The text could not be read or solved (unknown name, missing definition, cycle)."""


@dataclass
class ProblemReading:
    """What the evaluator read and computed for one problem of a task."""

    answer: int
    depth: int = 0
    breadth: int = 0
    refs: list[int] = field(default_factory=list)
    note: bool = False
    effective_depth: int = 0
    effective_breadth: int = 0
    effective_refs: list[int] = field(default_factory=list)


@dataclass
class TextSolution:
    """Answers and axes measured from a task's text."""

    answers: list[int]
    problems: list[ProblemReading]
    measured: dict[str, int]
    effective: dict[str, int] = field(default_factory=dict)
    # Per problem: the wrong value a note claims for it (``decoys``), and the answer of the problem that
    # carries the note when that claim is believed (``attacked``); None where no note says so.
    decoys: list[int | None] = field(default_factory=list)
    attacked: list[int | None] = field(default_factory=list)


class _Names:
    def __init__(self, worlds: list[dict[str, Any]]) -> None:
        self.item_level: dict[str, tuple[int, int]] = {}
        self.category_level: dict[tuple[int, str], int] = {}
        for wi, world in enumerate(worlds):
            for li, level in enumerate(world["levels"]):
                self.category_level[(wi, level["category"])] = li
                for item in level["items"]:
                    self.item_level[item] = (wi, li)


def _split_problems(text: str) -> list[str]:
    marks = list(_PROBLEM.finditer(text))
    if not marks:
        return [text]
    return [
        text[m.end() : (marks[i + 1].start() if i + 1 < len(marks) else len(text))]
        for i, m in enumerate(marks)
    ]


def _short(name: str, limit: int = 60) -> str:
    """A name cut to ``limit`` characters for an error message (a hostile text's names can be huge)."""
    return name if len(name) <= limit else name[: limit - 3] + "..."


def _ref(text: str) -> tuple[str, str]:
    m = _ANSWER_REF.fullmatch(text)
    if m:
        return ("answer", m.group(1))
    if not text.startswith("each ") or "'s " not in text:
        raise EvaluationError(f"cannot read the quantity {_short(text)!r}")
    owner, _, target = text[5:].partition("'s ")
    return (owner, target)


def _rhs(text: str) -> tuple[str, int, str, list[tuple[str, str]]]:
    """(modifier, constant, combine, refs) of a right-hand side."""
    if text.isdigit():
        return ("", int(text), "const", [])
    mod, const = "", 0
    m = re.fullmatch(r"(\d+) (more than|times as much as) (.+)", text)
    if m:
        mod, const, text = ("plus" if m.group(2) == "more than" else "times"), int(m.group(1)), m.group(3)
    if text.startswith("the sum of "):
        return (mod, const, "sum", [_ref(t) for t in re.split(r", | and ", text[len("the sum of ") :])])
    if text.startswith("the difference of "):
        a, sep, b = text[len("the difference of ") :].partition(" and ")
        if not sep:
            raise EvaluationError(f"cannot read the difference {_short(text)!r}")
        return (mod, const, "diff", [_ref(a), _ref(b)])
    return (mod, const, "one", [_ref(text)])


Key = tuple[str, str]
# A computation that yields each quantity it needs and is sent back its value (see _Solver.value).
_Steps = Generator[Key, int, int]


class _Solver:
    def __init__(self, defs: dict[Key, str], names: _Names, answers: dict[int, int]) -> None:
        self.defs = {k: _rhs(v) for k, v in defs.items()}
        self.names = names
        self.answers = answers
        self.values: dict[Key, int] = {}
        self.depths: dict[Key, int] = {}
        self.deps: dict[Key, list[Key]] = {}
        self.partials: dict[Key, list[tuple[Key, int]]] = {}
        self.active: set[Key] = set()
        self.owned: dict[str, list[Key]] = {}
        for k in self.defs:
            self.owned.setdefault(k[0], []).append(k)

    def is_total(self, key: Key) -> bool:
        return key[1] not in self.names.item_level

    def children(self, owner: str) -> list[Key]:
        return self.owned.get(owner, [])

    def value(self, key: Key) -> int:
        """The value of ``key`` mod 23, computing first what it depends on.

        Depth-first like a recursion, but on an explicit stack of computations: a text may chain
        thousands of definitions, past Python's recursion limit.
        """
        known = self._known(key)
        if known is not None:
            return known
        stack = [self._compute(key)]
        sent: int | None = None
        while True:
            try:
                need = next(stack[-1]) if sent is None else stack[-1].send(sent)
            except StopIteration as done:
                stack.pop()
                if not stack:
                    return int(done.value)
                sent = done.value
                continue
            sent = self._known(need)
            if sent is None:
                stack.append(self._compute(need))

    def _known(self, key: Key) -> int | None:
        """The value of an answer reference or of a quantity already computed, else None."""
        if key[0] == "answer":
            if int(key[1]) not in self.answers:
                raise EvaluationError(f"[answer{key[1]}] is used before Problem {key[1]} is solved")
            return self.answers[int(key[1])]
        return self.values.get(key)

    def _compute(self, key: Key) -> _Steps:
        if key in self.active:
            raise EvaluationError(f"the definition of 'each {_short(key[0])}'s {_short(key[1])}' is circular")
        self.active.add(key)
        if self.is_total(key):
            val, deps = yield from self._total(key)
        elif key in self.defs:
            mod, const, combine, refs = self.defs[key]
            vals = []
            for r in refs:
                vals.append((yield r))
            base = const if combine == "const" else vals[0] - vals[1] if combine == "diff" else sum(vals)
            val = base + const if mod == "plus" else base * const if mod == "times" else base
            deps = refs
            scale = const if mod == "times" else 1
            signs = [] if combine == "const" else [1, -1] if combine == "diff" else [1] * len(refs)
            self.partials[key] = [(r, s * scale) for r, s in zip(refs, signs, strict=True)]
        else:
            raise EvaluationError(f"'each {_short(key[0])}'s {_short(key[1])}' is used but never stated")
        self.active.discard(key)
        self.deps[key] = deps
        self.values[key] = val % _MOD
        real = [d for d in deps if d[0] != "answer"]
        self.depths[key] = 1 + max((self.depths[d] for d in real), default=0)
        return self.values[key]

    def _total(self, key: Key) -> Generator[Key, int, tuple[int, list[Key]]]:
        owner, category = key
        if owner not in self.names.item_level:
            raise EvaluationError(f"unknown item {_short(owner)!r}")
        wi, owner_level = self.names.item_level[owner]
        level = self.names.category_level.get((wi, category))
        if level is None or level <= owner_level:
            raise EvaluationError(f"{_short(owner)!r} cannot hold {_short(category)!r}")
        total, deps, partials = 0, [], []
        for child in self.children(owner):
            count = yield child
            deps.append(child)
            if self.names.item_level[child[1]][1] == level:
                total += count
                partials.append((child, 1))
            else:
                inner = (child[1], category)
                inner_value = yield inner
                total += count * inner_value
                deps.append(inner)
                partials += [(child, inner_value), (inner, count)]
        self.partials[key] = partials
        return total, deps

    def needed(self, query: Key) -> list[Key]:
        seen: dict[Key, None] = {}
        stack = [query]
        while stack:
            k = stack.pop()
            if k in seen or k[0] == "answer":
                continue
            seen[k] = None
            stack.extend(self.deps[k])
        return list(seen)


def _solve_block(
    block: str, names: _Names, answers: dict[int, int], defs: dict[tuple[str, str], str]
) -> ProblemReading:
    note = bool(_NOTE.search(block))
    nq = _NEEDLE_Q.search(block)
    if nq:
        for m in _NEEDLE.finditer(block):
            if m.group(1) == nq.group(1):
                return ProblemReading(answer=int(m.group(2)) % _MOD, note=note)
        raise EvaluationError(f"no magic number for {_short(nq.group(1))!r} in the text")
    query = _question(block)
    if query is None:
        raise EvaluationError("a problem has no question")
    solver = _Solver(defs, names, answers)
    answer = solver.value(query)
    needed = solver.needed(query)
    breadth = max(len({d for d in solver.deps[k] if d[0] != "answer"}) for k in needed)
    refs = sorted({int(d[1]) for k in needed for d in solver.deps[k] if d[0] == "answer"})
    eff_depth, eff_breadth, eff_refs = _effective(solver, query)
    return ProblemReading(answer, solver.depths[query], breadth, refs, note, eff_depth, eff_breadth, eff_refs)


def _effective(solver: _Solver, query: tuple[str, str]) -> tuple[int, int, list[int]]:
    """Effective depth, effective breadth and the answer references that can change the answer.

    A quantity counts when its coefficient in the answer (reverse accumulation mod 23 over the partial
    derivatives read from the text) is non-zero; see ``effective.py`` for the definitions, which the
    generator implements separately.
    """
    order = [k for k in solver.values if k in solver.partials]  # computed order: inputs first
    weight: dict[tuple[str, str], int] = {query: 1}
    for key in reversed(order):
        w = weight.get(key, 0) % _MOD
        for dep, p in solver.partials[key] if w else []:
            weight[dep] = (weight.get(dep, 0) + w * p) % _MOD
    chain: dict[tuple[str, str], int] = {}
    widest = 0
    for key in order:
        live = [d for d in dict.fromkeys(solver.deps[key]) if d[0] != "answer" and weight.get(d, 0) % _MOD]
        chain[key] = 1 + max((chain[d] for d in live), default=0)
        if weight.get(key, 0) % _MOD:
            widest = max(widest, len(live))
    refs = sorted(int(k[1]) for k, w in weight.items() if k[0] == "answer" and w % _MOD)
    return chain[query], widest, refs


def _question(block: str) -> tuple[str, str] | None:
    """(owner, quantity) of the first line "Question: How many QUANTITY does OWNER have?", else None.

    The quantity is the longest that leaves an owner (as a greedy regex would read it), found with
    ``rfind``: linear in the line, where a regex with two ``(.+)`` groups is quadratic.
    """
    for line in block.split("\n"):
        if not (line.startswith(_QUESTION_HEAD) and line.endswith(_QUESTION_TAIL)):
            continue
        body = line[len(_QUESTION_HEAD) : len(line) - len(_QUESTION_TAIL)]
        # Both parts non-empty: " does " neither first nor last in the body (overlapping head and
        # tail leave a body too short to hold it).
        at = body.rfind(_DOES, 1, len(body) - 1)
        if at >= 0 and len(line) >= len(_QUESTION_HEAD) + len(_QUESTION_TAIL):
            return (body[at + len(_DOES) :], body[:at])
    return None


def _sentence(segment: str) -> tuple[str, str, str] | None:
    """(owner, quantity, rhs) of the first definition that ends a period-free ``segment``, else None.

    A start whose owner runs up to the apostrophe at ``stop`` fails or succeeds with every later start
    before ``stop`` (they share the rest), so the next start tried is past it: each character is read
    a bounded number of times.
    """
    start = segment.find(_LEAD)
    while start >= 0:
        m = _AFTER_LEAD.match(segment, start + len(_LEAD))
        if m:
            return (m.group(1), m.group(2), m.group(3))
        stop = segment.find("'", start + len(_LEAD))
        if stop < 0:
            return None
        start = segment.find(_LEAD, stop + 1)
    return None


def _sentences(block: str) -> Iterator[tuple[str, str, str]]:
    """Every definition of ``block``, in order; a definition lies within one period-ended segment."""
    segments = block.split(".")
    for segment in segments[:-1]:  # the last segment has no period after it
        found = _sentence(segment)
        if found is not None:
            yield found


def _definitions(block: str) -> dict[tuple[str, str], str]:
    defs: dict[tuple[str, str], str] = {}
    for owner, quantity, rhs in _sentences(block):
        key = (owner, quantity)
        if key in defs:
            raise EvaluationError(f"'each {_short(owner)}'s {_short(quantity)}' is stated twice")
        defs[key] = rhs
    return defs


def solve_text(text: str, worlds: list[dict[str, Any]], *, joint: bool = False) -> TextSolution:
    """Solve every problem of a task text; ``joint`` reads all problems' sentences as one context."""
    names = _Names(worlds)
    blocks = _split_problems(text)
    shared = _definitions(text) if joint else None
    answers: dict[int, int] = {}
    readings = []
    decoys: list[int | None] = [None] * len(blocks)
    attacked: list[int | None] = [None] * len(blocks)
    for i, block in enumerate(blocks, 1):
        defs = shared if shared is not None else _definitions(block)
        reading = _solve_block(block, names, answers, defs)
        claim = _NOTE_CLAIM.search(block)
        if claim:
            target, value = int(claim.group(1)), int(claim.group(2))
            if not 1 <= target < i:
                raise EvaluationError(f"problem {i}'s note names problem {target}, not an earlier one")
            decoys[target - 1] = value
            attacked[i - 1] = _solve_block(block, names, {**answers, target: value % _MOD}, defs).answer
        answers[i] = reading.answer
        readings.append(reading)
    return TextSolution(
        [r.answer for r in readings],
        readings,
        _measure(readings),
        _measure(readings, effective=True),
        decoys,
        attacked,
    )


def _measure(readings: list[ProblemReading], *, effective: bool = False) -> dict[str, int]:
    """The five axes; ``effective``: depth, breadth and chains counted only where they change answers."""
    n = len(readings)
    longest = [1] * n
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, r in enumerate(readings):
        for j in r.effective_refs if effective else r.refs:
            longest[i] = max(longest[i], longest[j - 1] + 1)
            parent[root(j - 1)] = root(i)
    igsm = [r for r in readings if r.depth]
    notes = [r for r in readings if r.note]
    # Effective robustness: the needle plus every noted problem whose decoy can change its answer.
    robust = n if notes else 0
    if effective and notes:
        robust = n - sum(1 for i, r in enumerate(readings) if r.note and i not in r.effective_refs)
    return {
        "depth": max((r.effective_depth if effective else r.depth for r in igsm), default=0),
        "horizon": max(longest),
        "breadth": max((r.effective_breadth if effective else r.breadth for r in igsm), default=0),
        "parallel": len({root(i) for i in range(n)}),
        "robustness": robust,
    }
