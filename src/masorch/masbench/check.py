"""Auditing generated files: re-solve from text, re-measure axes, verify templates and split disjointness."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from masorch.masbench.evaluator import EvaluationError, solve_text
from masorch.masbench.instance import AXES, SEPARATOR
from masorch.masbench.splits import BUCKETS, split_overlap
from masorch.masbench.templates import SketchError, canonical_sketch, template_hash


@dataclass
class CheckReport:
    """What a check found: how many records it read and every problem, one line each."""

    n: int = 0
    problems: list[str] = field(default_factory=list)
    by_split: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        """True when nothing disagreed."""
        return not self.problems


def check_record(rec: dict[str, Any]) -> list[str]:
    """Every disagreement of one record: answers, measured axes, controls, templates, ground truth."""
    rid = rec.get("id", "?")
    out: list[str] = []
    try:
        got = solve_text(rec["question"], rec["worlds"])
    except EvaluationError as exc:
        return [f"{rid}: the evaluator cannot solve the text: {exc}"]
    if got.answers != rec["answers"]:
        out.append(f"{rid}: evaluator answers {got.answers} != stored {rec['answers']}")
    if len(rec["subtasks"]) > 1:
        # Sub-problems must not leak into each other: reading them all as one context changes nothing.
        try:
            joint = solve_text(rec["question"], rec["worlds"], joint=True).answers
            if joint != got.answers:
                out.append(f"{rid}: solving the sub-problems together gives {joint}, alone {got.answers}")
        except EvaluationError as exc:
            out.append(f"{rid}: the sub-problems cannot be solved together: {exc}")
    if got.measured != rec["measured"]:
        out.append(f"{rid}: axes measured from the text {got.measured} != stored {rec['measured']}")
    # The stored values must be the effective ones: no quantity on the declared longest chain, no input
    # of the widest quantity and no chained answer (robustness: no decoy) may be unable to change it.
    lower = {a: v for a, v in got.effective.items() if v != rec["measured"][a]}
    if lower:
        out.append(f"{rid}: effective axis values {lower} differ from the measured {rec['measured']}")
    if rec["measured"][rec["axis"]] != rec["value"]:
        out.append(f"{rid}: measured {rec['axis']} {rec['measured'][rec['axis']]} != value {rec['value']}")
    for axis, (lo, hi) in rec["controls"].items():
        if not lo <= rec["measured"][axis] <= hi:
            out.append(f"{rid}: {axis} {rec['measured'][axis]} outside its control range {lo}..{hi}")
    if rec["ground_truth"] != SEPARATOR.join(str(a) for a in rec["answers"]):
        out.append(f"{rid}: ground_truth {rec['ground_truth']!r} does not match the answers")
    verification = rec.get("verification")
    verified = verification.get("answers") if isinstance(verification, dict) else None
    if verified != rec["answers"]:
        out.append(f"{rid}: verification answers {verified} != the answers {rec['answers']}")
    # The notes' wrong values and the answers they lead to, read from the text by the evaluator.
    if rec.get("decoys") != got.decoys:
        out.append(f"{rid}: decoys {rec.get('decoys')} != the notes' values in the text {got.decoys}")
    if rec.get("attacked_answers") != got.attacked:
        out.append(
            f"{rid}: attacked_answers {rec.get('attacked_answers')} != the answers under the notes' "
            f"values {got.attacked}"
        )
    for k, sub in enumerate(rec["subtasks"], 1):
        if sub["kind"] != "igsm":
            continue
        try:
            digest, bucket = template_hash(sub["sketch"])
            canonical = canonical_sketch(sub["sketch"]) == sub["sketch"]
        except SketchError as exc:
            out.append(f"{rid}: sub-task {k} sketch cannot be read: {exc}")
            continue
        if digest != sub["template_hash"] or bucket != sub["bucket"]:
            out.append(f"{rid}: sub-task {k} template hash does not match its canonical sketch")
        if not canonical:
            out.append(f"{rid}: sub-task {k} sketch is not in canonical form")
        if bucket not in BUCKETS[rec["split"]]:
            out.append(f"{rid}: sub-task {k} template bucket {bucket} is not in the {rec['split']} split")
    return out


def check_records(records: Iterable[dict[str, Any]]) -> CheckReport:
    """Check every record and, across them, unique ids and train/test template and text disjointness."""
    report = CheckReport()
    seen: dict[str, None] = {}
    by_split: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for rec in records:
        report.n += 1
        report.by_split[rec["split"]] += 1
        if rec["id"] in seen:
            report.problems.append(f"{rec['id']}: the id occurs twice")
        seen[rec["id"]] = None
        report.problems.extend(check_record(rec))
        slim = {
            "question": rec["question"],
            # Recomputed from the sketch, so a record with a stale (pre-canonical) hash is still caught.
            "subtasks": [{"template_hash": _shape(s["sketch"])} for s in rec["subtasks"]],
        }
        by_split.setdefault(rec["split"], []).append(slim)
    overlap = split_overlap(by_split["train"], by_split["test"])
    for h in overlap["template_hashes"]:
        report.problems.append(f"canonical template shape {h[:12]} occurs in both train and test")
    for q in overlap["questions"]:
        report.problems.append(f"a question occurs in both train and test: {q[:60]!r}")
    return report


def _shape(sketch: str) -> str:
    """The canonical template hash of a sketch ("" for none or an unreadable one, reported elsewhere)."""
    try:
        return template_hash(sketch)[0] if sketch else ""
    except SketchError:
        return ""


def stats(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Counts per (axis, split, value), answer histogram, measured-axis ranges and text lengths."""
    counts: Counter[tuple[str, str, int]] = Counter()
    answers: Counter[int] = Counter()
    ranges: dict[str, list[int]] = {}
    lengths: list[int] = []
    for rec in records:
        counts[(rec["axis"], rec["split"], rec["value"])] += 1
        answers.update(rec["answers"])
        for axis in AXES:
            v = rec["measured"][axis]
            lo_hi = ranges.setdefault(axis, [v, v])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], v), max(lo_hi[1], v)
        lengths.append(len(rec["question"]))
    n_ans = sum(answers.values())
    expected = n_ans / 23 if n_ans else 0.0
    chi2 = sum((answers[k] - expected) ** 2 / expected for k in range(23)) if expected else 0.0
    return {
        "instances": len(lengths),
        "counts": [{"axis": a, "split": s, "value": v, "n": n} for (a, s, v), n in sorted(counts.items())],
        "answer_histogram": [answers[k] for k in range(23)],
        "answer_chi2": chi2,
        "measured_ranges": ranges,
        "question_chars": {
            "min": min(lengths, default=0),
            "mean": statistics.fmean(lengths) if lengths else 0.0,
            "max": max(lengths, default=0),
        },
    }
