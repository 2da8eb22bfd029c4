"""``masorch train collect``: sample a teacher's multi-round trajectories over a training set, keep the
good ones, and write them as a chat-format SFT dataset.

For every question of the training set (:class:`~masorch.train.collect_config.DataConfig` parts,
read by the eval harness's :func:`~masorch.eval.sources.resolve`) the teacher runs the multi-round
mode up to K times through the one run path (:func:`masorch.run.run`), sample k with seed
``seed + k`` at the configured temperature, with tool faults injected on purpose
(:mod:`masorch.run.faults`); each run is graded by the scorer eval uses
(:func:`masorch.eval.item.grade`). Every attempt is appended to ``attempts.jsonl`` as soon as it
ends, so a killed run loses nothing: a rerun skips the samples already there (and every call is in
the record/replay cache), after grading the logged answers again with today's scorer
(:func:`regrade`: a verdict that changed is logged again, the earlier one kept). Then
:func:`~masorch.train.collect_select.select` keeps at most one correct trajectory per question,
recoveries first, under the tool-balance constraint, and the kept set is written as ``sft.jsonl``
(and ``sft.parquet`` where pyarrow is installed) with ``summary.json``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.agents.base import AgentRegistry
from masorch.backends.base import Backend, Usage
from masorch.backends.cache import CachingFactory
from masorch.backends.registry import check_model_string
from masorch.errors import UsageError
from masorch.eval.datasets import Sample
from masorch.eval.item import grade, regrade_all
from masorch.eval.sources import DataSource, resolve
from masorch.files import iter_jsonl, json_object, read_text
from masorch.run.environment import Environment, EnvSpec, default_backend_factory
from masorch.run.lifecycle import run
from masorch.run.result import RunResult
from masorch.score.scorer import Score
from masorch.train.collect_config import CollectConfig
from masorch.train.collect_output import summarize, write_dataset, write_parquet
from masorch.train.collect_select import best_possible, protocol_errors, recovered, select
from masorch.train.trainer_parts import check_output_dir

logger = logging.getLogger(__name__)

ATTEMPTS_FILE = "attempts.jsonl"
DATASET_FILE = "sft.jsonl"
PARQUET_FILE = "sft.parquet"
SUMMARY_FILE = "summary.json"
CACHE_FILE = "calls.sqlite"
SETTINGS_FILE = "collect.json"

#: The config fields that shape an attempt: a rerun in the same directory must keep them. The
#: others (the data, K, selection, cache, concurrency) may change between runs.
SAMPLING_FIELDS = (
    "teacher",
    "subagent",
    "system",
    "system_fields",
    "temperature",
    "seed",
    "fault_rate",
    "fault_kinds",
    "fault_seed",
    "faults_per_run",
    "subagent_max_tokens",
)

Attempt = dict[str, Any]


@dataclass(frozen=True)
class Question:
    """One question of the training set: its sample and the data source (scorer, corpus) it is from."""

    source: DataSource
    sample: Sample

    @property
    def key(self) -> str:
        """The question's id in attempts and in the dataset: ``DATASET/SAMPLE_ID``."""
        # Plain data files already name their samples so; MASBench and registered datasets do not.
        sid, dataset = self.sample.id, self.source.name
        return sid if sid.startswith(f"{dataset}/") else f"{dataset}/{sid}"


def _as_keys(hint: str) -> str:
    """An eval hint about ``--data``/``--scorer``/``--limit``/``--sample`` in a data entry's keys."""
    for flag in ("data", "scorer", "limit", "sample", "skip", "seed"):
        hint = hint.replace(f"--{flag}", flag if flag != "data" else "spec")
    return hint.replace(" (judge, with --judge-model)", "")


def questions(cfg: CollectConfig) -> list[Question]:
    """The training set's questions, part by part, in order."""
    cache_dir = Path(cfg.data_dir) if cfg.data_dir else None
    out = []
    for i, part in enumerate(cfg.data):
        try:
            src = resolve(
                part.spec,
                limit=part.limit,
                sample=part.sample,
                seed=part.seed,
                skip=part.skip,
                cache_dir=cache_dir,
                scorer=part.scorer,
            )
        except UsageError as exc:  # eval's words name its flags; a collect config has keys
            raise UsageError(
                f"config.data[{i}]: {exc.message.replace('--data ', 'spec ')}",
                hint=_as_keys(exc.hint or ""),
            ) from None
        out += [Question(src, s) for s in src.samples]
    seen: set[str] = set()
    unique = []
    for q in out:
        if q.key in seen:
            logger.warning("question %s appears twice in the training set; the copy is skipped", q.key)
            continue
        seen.add(q.key)
        unique.append(q)
    return unique


def attempt_stats(
    question: Question, k: int, seed: int | None, result: RunResult, verdict: Score | None
) -> Attempt:
    """One attempt as a JSON-ready dict: the question, how the run went, its grade and its chat record.

    ``failures`` counts calls that did not end OK; ``recovered`` is true for a correct run in which
    a tool call failed (``EXEC_ERR``, ``TIMEOUT``: :func:`~masorch.train.collect_select.recovered`;
    the teacher's own ``FORMAT_ERR``/``REJECTED`` calls are protocol errors, not failures it
    recovered from); ``tools`` counts the calls per tool that ran (``final_answer`` and calls
    refused before running left out).
    """
    traj = result.trajectory
    if traj is None:
        raise ValueError("attempt_stats needs a multi-round run (its result has no trajectory)")
    calls = traj.calls
    statuses = traj.statuses()
    correct = bool(verdict.correct) if verdict is not None else False
    failures = sum(1 for c in calls if c.status != "OK")
    usage = result.usage
    orch = result.ledger.for_role("orchestrator") if result.ledger is not None else Usage()
    return {
        "id": question.key,
        "dataset": question.source.name,
        "question_id": question.sample.id,
        "sample": k,
        "seed": seed,
        "question": question.sample.question,
        "gold": question.sample.answer,
        "scorer": question.source.scorer,
        "answer": result.answer,
        "status": result.status,
        "error": result.error,
        "ended_by": traj.ended_by,
        "correct": correct,
        "score": float(verdict.value) if verdict is not None else 0.0,
        "rounds": len(traj.rounds),
        "statuses": statuses,
        "tools": traj.tools_ran(),
        "failures": failures,
        "injected": sum(1 for c in calls if c.injected),
        "recovered": recovered({"correct": correct, "statuses": statuses}),
        "undelivered": traj.undelivered_calls,
        "protocol_errors": protocol_errors({"statuses": statuses, "undelivered": traj.undelivered_calls}),
        "tokens": {
            "prompt": usage.prompt_tokens,
            "completion": usage.completion_tokens,
            "total": usage.prompt_tokens + usage.completion_tokens,
            "orchestrator_completion": orch.completion_tokens,
        },
        "units": traj.units,
        "wall_s": round(result.wall_s, 3),
        "chat": traj.to_chat(),
    }


class AttemptLog:
    """``attempts.jsonl``: one line per finished attempt, appended and flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[Attempt]:
        """Every attempt written so far (a last line cut short by a killed run is left out: it is
        redone); a line that is not an attempt's JSON, or bytes that are not text, is a UsageError
        naming the file and line."""
        if not self.path.is_file():
            return []
        hint = "restore the file, or move it away and use a new output_dir (nothing is deleted)"
        return [
            a
            for _, a in iter_jsonl(
                self.path, what="attempts log", item="an attempt", hint=hint, complete_only=True
            )
        ]

    def append(self, attempt: Attempt) -> None:
        """Write one attempt."""
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(attempt, ensure_ascii=False) + "\n")
            fh.flush()


def _repair_tail(path: Path) -> None:
    # A run killed mid-line leaves a partial last line: cut it off (its attempt is redone).
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        logger.warning("%s ends in a line cut short (a killed run); that attempt is redone", path)
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


@dataclass(frozen=True)
class CollectReport:
    """What a collection wrote: the summary and the paths of its files."""

    summary: Mapping[str, Any]
    attempts: Path
    dataset: Path
    parquet: Path | None
    summary_path: Path


#: Called before anything runs with (questions in all, questions already finished).
StartHook = Callable[[int, int], None]
#: Called with each new attempt and whether its question is now finished.
AttemptHook = Callable[[Attempt, bool], None]


def env_spec(
    cfg: CollectConfig,
    *,
    backend_factory: Callable[[str], Backend] | None = None,
    agents_factory: Callable[[], AgentRegistry] | None = None,
) -> EnvSpec:
    """The environment of a collection: every call through the record/replay cache, faults injected."""
    spec = EnvSpec.default(max_tokens=cfg.subagent_max_tokens, faults=cfg.faults())
    factory = backend_factory or default_backend_factory
    if cfg.cache_mode != "off":
        cache = Path(cfg.cache_path) if cfg.cache_path else cfg.out / CACHE_FILE
        factory = CachingFactory(factory, cache, cfg.cache_mode)
    spec = dataclasses.replace(spec, backend_factory=factory)
    if agents_factory is not None:
        spec = dataclasses.replace(spec, agents_factory=agents_factory)
    return spec


def collect(
    cfg: CollectConfig,
    *,
    spec: EnvSpec | None = None,
    on_start: StartHook | None = None,
    on_attempt: AttemptHook | None = None,
) -> CollectReport:
    """Sample, grade and log the attempts still missing, then select and write the dataset.

    ``spec`` is the environment (default :func:`env_spec`: the cache and the config's faults).
    """
    out = cfg.out
    # What the config names is checked before anything is written, so that a failed start leaves
    # nothing the corrected rerun would trip on.
    for model in cfg.system_for(0).model_strings():
        check_model_string(model)
    items = questions(cfg)
    if not items:
        raise UsageError(
            "the collect config's data holds no questions",
            hint="check its data entries' files, and that limit/sample are not 0",
        )
    check_output_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    log = AttemptLog(out / ATTEMPTS_FILE)
    _repair_tail(log.path)
    every = log.read()
    check_settings(cfg, sampled=bool(every))
    logged = [a for a in latest(every) if int(a["sample"]) < cfg.samples]
    _check_scorers(items, logged)
    spec = spec or env_spec(cfg)
    logged = asyncio.run(regrade(items, logged, spec, log))
    earlier = _earlier(cfg, logged)
    todo = [q for q in items if not _finished(cfg, earlier.get(q.key, []))]
    if on_start is not None:
        on_start(len(items), len(items) - len(todo))
    t0 = time.monotonic()
    asyncio.run(_sample_all(cfg, spec, todo, earlier, log, on_attempt))
    wall = time.monotonic() - t0
    attempts = _config_attempts(cfg, items, log.read())
    selection = select(attempts, max_tool_share=cfg.max_tool_share)
    dataset = out / DATASET_FILE
    write_dataset(selection.kept, dataset)
    parquet = write_parquet(selection.kept, out / PARQUET_FILE)
    summary = summarize(cfg, attempts, selection, wall_s=wall)
    summary_path = out / SUMMARY_FILE
    summary_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return CollectReport(summary, log.path, dataset, parquet, summary_path)


async def regrade(
    items: Sequence[Question], logged: Sequence[Attempt], spec: EnvSpec, log: AttemptLog | None
) -> list[Attempt]:
    """``logged`` graded again by today's scorers (:func:`masorch.eval.item.regrade`, as eval grades
    a resumed log). An attempt whose verdict changed (a scorer fixed since it was logged) is
    appended to ``log`` (when given) again with the new verdict and the earlier one under
    ``regraded``; it replaces the old line (:func:`latest`), which stays in the log."""
    by_key = {q.key: q for q in items}

    def find(a: Attempt) -> tuple[Sample, str] | None:
        q = by_key.get(str(a["id"]))
        return (q.sample, q.source.scorer) if q is not None else None

    out: list[Attempt] = []
    for a, again in await regrade_all(logged, find, spec):
        if again is None:
            out.append(a)
            continue
        again["recovered"] = recovered({"correct": again["correct"], "statuses": a["statuses"]})
        logger.warning(
            "%s sample %s: answer %r graded again: %s (was %s)",
            a["id"],
            a["sample"],
            a["answer"],
            *("correct" if v else "wrong" for v in (again["correct"], a["correct"])),
        )
        if log is not None:
            log.append(again)
        out.append(again)
    return out


def _config_attempts(
    cfg: CollectConfig, items: Sequence[Question], logged: Sequence[Attempt]
) -> list[Attempt]:
    """The attempts a collection selects from: the latest of each of its questions' K samples."""
    keys = {q.key for q in items}
    return [a for a in latest(logged) if a["id"] in keys and int(a["sample"]) < cfg.samples]


def _earlier(cfg: CollectConfig, logged: Sequence[Attempt]) -> dict[str, list[Attempt]]:
    """The logged attempts that count as done, per question (with ``retry_errors``, an attempt
    that ended ``error`` is sampled again: the new line replaces it)."""
    earlier: dict[str, list[Attempt]] = {}
    for a in logged:
        if not (cfg.retry_errors and a.get("status") == "error"):
            earlier.setdefault(str(a["id"]), []).append(a)
    return earlier


def collect_state(cfg: CollectConfig) -> dict[str, Any]:
    """Where a collection stands, from its attempts log alone (no model runs, nothing is written;
    logged answers are graded again as a rerun grades them):
    the figures :func:`collect` would write if it stopped now (``wall_s_this_run`` is 0), and how
    many of its questions are finished."""
    log = AttemptLog(cfg.out / ATTEMPTS_FILE)
    if not log.path.is_file():
        raise UsageError(
            f"no attempts at {log.path} yet", hint="start the collection: masorch train collect --config FILE"
        )
    items = questions(cfg)
    attempts = _config_attempts(cfg, items, log.read())
    attempts = asyncio.run(regrade(items, attempts, EnvSpec(), None))  # as a rerun would grade them
    by_question = _earlier(cfg, attempts)
    state = summarize(cfg, attempts, select(attempts, max_tool_share=cfg.max_tool_share), wall_s=0.0)
    state["questions_total"] = len(items)
    state["questions_finished"] = sum(1 for q in items if _finished(cfg, by_question.get(q.key, [])))
    return state


def check_settings(cfg: CollectConfig, *, sampled: bool) -> None:
    """Record the sampling settings in ``collect.json``. Where ``output_dir`` holds attempts already
    (``sampled``), a rerun that changes them is a UsageError (its attempts would mix with the
    earlier ones); where it holds none, the settings recorded by a start that sampled nothing are
    replaced. A ``collect.json`` that is not the JSON masorch wrote is a UsageError naming it."""
    path = cfg.out / SETTINGS_FILE
    now = {name: getattr(cfg, name) for name in SAMPLING_FIELDS}
    if path.is_file():
        before = _read_settings(path)
        changed = sorted(
            k for k in SAMPLING_FIELDS if k in before and before[k] != json.loads(json.dumps(now[k]))
        )
        if changed and sampled:
            raise UsageError(
                f"{cfg.out} holds attempts sampled with other {', '.join(changed)}",
                hint="use a new output_dir, or the settings of the earlier run (see its collect.json)",
            )
    path.write_text(json.dumps(now, indent=2) + "\n", encoding="utf-8")


def _read_settings(path: Path) -> dict[str, Any]:
    """The settings an earlier run recorded in ``path``."""
    hint = (
        f"it records the settings the attempts beside it were sampled with: restore it, or delete it "
        f"and {ATTEMPTS_FILE} to start afresh, or use a new output_dir"
    )
    try:
        text = read_text(path, what="settings file")
    except UsageError as exc:  # binary or not UTF-8: the same fix as a file that is not JSON
        raise UsageError(exc.message, hint=hint) from None
    return json_object(text, str(path), item="the settings", hint=hint)


def _check_scorers(items: Sequence[Question], attempts: Sequence[Attempt]) -> None:
    """A logged attempt is graded again by its question's scorer, which must not change under it."""
    scorer = {q.key: q.source.scorer for q in items}
    for a in attempts:
        now, then = scorer.get(str(a["id"])), a.get("scorer")
        if now is not None and then is not None and now != then:
            raise UsageError(
                f"{a['id']} was graded with the {then!r} scorer and this config grades it with {now!r}",
                hint="use a new output_dir, or the scorer of the earlier run",
            )


def latest(attempts: Sequence[Attempt]) -> list[Attempt]:
    """The last attempt logged for each (question, sample), in first-logged order.

    >>> [a["v"] for a in latest([{"id": "q", "sample": 0, "v": 1}, {"id": "q", "sample": 0, "v": 2}])]
    [2]
    """
    last: dict[tuple[str, int], Attempt] = {}
    for a in attempts:
        last[(str(a["id"]), int(a["sample"]))] = a
    return list(last.values())


def _finished(cfg: CollectConfig, attempts: Sequence[Attempt]) -> bool:
    done = {int(a["sample"]) for a in attempts}
    if cfg.stop_when_recovered and any(best_possible(a) for a in attempts):
        return True
    return all(k in done for k in range(cfg.samples))


async def _sample_all(
    cfg: CollectConfig,
    spec: EnvSpec,
    todo: Sequence[Question],
    earlier: Mapping[str, list[Attempt]],
    log: AttemptLog,
    on_attempt: AttemptHook | None,
) -> None:
    env = Environment(spec)
    queue = iter(todo)

    async def worker() -> None:
        for q in queue:
            attempts = list(earlier.get(q.key, []))
            for k in range(cfg.samples):
                if _finished(cfg, attempts):
                    break
                if any(int(a["sample"]) == k for a in attempts):
                    continue
                system = cfg.system_for(k)
                result = await run(system, q.sample.question, env, corpus=q.source.corpus)
                verdict = await grade(result, q.sample, q.source.scorer, env)
                attempt = attempt_stats(q, k, system.seed, result, verdict)
                log.append(attempt)
                attempts.append(attempt)
                if on_attempt is not None:
                    on_attempt(attempt, _finished(cfg, attempts))

    try:
        await asyncio.gather(*(worker() for _ in range(cfg.concurrency)))
    finally:
        await env.aclose()
