"""The training config: YAML in, typed and checked fields out; prompt rows built from sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.errors import UsageError
from masorch.train.config import SourceConfig, TrainConfig, describe, load_config
from masorch.train.data import build_rows
from masorch.train.gguf import resolve_model


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_yaml_config_reads_nested_sources_and_overrides(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "train:\n  - {kind: masbench_gen, axis: depth, values: '2-3', count: 4}\n"
        "reward_weights: {correctness: 1.0, validity: 0.5}\nlearning_rate: 1\nmax_steps: 3\n",
    )
    cfg = load_config(p, {"max_steps": 7})
    assert cfg.max_steps == 7 and cfg.learning_rate == 1.0 and isinstance(cfg.learning_rate, float)
    assert cfg.train == [SourceConfig(kind="masbench_gen", axis="depth", values="2-3", count=4)]
    assert cfg.reward_weights == {"correctness": 1.0, "validity": 0.5}


def test_a_dotted_override_changes_one_nested_field(tmp_path: Path) -> None:
    p = write(tmp_path, "train: [{kind: masbench_gen}]\nreward_weights: {correctness: 1.0, validity: 0.5}\n")
    cfg = load_config(p, {"reward_weights.validity": 0.25, "reward_weights.dom": 0.1})
    assert cfg.reward_weights == {"correctness": 1.0, "validity": 0.25, "dom": 0.1}


def test_a_dotted_override_through_a_scalar_names_the_key(tmp_path: Path) -> None:
    p = write(tmp_path, "train: [{kind: masbench_gen}]\nmax_steps: 3\n")
    with pytest.raises(UsageError, match="max_steps is not a mapping"):
        load_config(p, {"max_steps.x": 1})


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("train: [{kind: masbench_gen}]\nmax_step: 3\n", "did you mean 'max_steps'"),
        ("train: [{kind: masbench_gen}]\nmax_steps: many\n", "must be int"),
        ("train: [{kind: masbench_gen, axes: depth}]\n", r"config.train\[0\].axes"),
        ("train: [{kind: masbench_gen}]\nnum_generations: 4\nbatch_size: 6\n", "multiple"),
        ("train: [{kind: masbench_gen}]\ndom: medium\n", "dom"),
        ("max_steps: 3\n", "no train sources"),
        ("- a list\n", "mapping"),
        ("train: [{kind: masbench_gen}]\nmax_steps: -5\n", r"config.max_steps.*greater than or equal to 1"),
        ("train: [{kind: masbench_gen}]\nlearning_rate: -1\n", "learning_rate"),
        ("train: [{kind: masbench_gen}]\nlora_dropout: 5\n", "lora_dropout"),
        ("train: [{kind: masbench_gen}]\nmax_train_s: .nan\n", "max_train_s"),
        ("train: [{kind: masbench_gen}]\nsave_steps: -1\n", "save_steps"),
        ("train: [{kind: masbench_gen}]\nmodel: ''\n", "config.model"),
        (
            "train: [{kind: masbench_gen}]\nsubagent: foo\n",
            "config.subagent: a model string is not provider:model",
        ),
        ("train: [{kind: masbench_gen}]\nsubagent_models: {cot: nosuch:m}\n", "subagent_models.cot: unknown"),
        ("train: [{kind: masbench_gen}]\nreward_weights: {bogus: 1}\n", "unknown component 'bogus'"),
        ("train: [{kind: masbench_gen, split: bogus}]\n", r"config.train\[0\].split"),
        ("train: [{kind: masbench_gen, count: -3}]\n", r"config.train\[0\].count"),
        ("train: [{kind: dataset, name: math500-subset, scorer: nosuch}]\n", "unknown scorer 'nosuch'"),
        # values that passed every check and failed only after the policy had loaded (or never)
        ("train: [{kind: masbench_gen}]\ntemperature: 0\n", "config.temperature"),
        ("train: [{kind: masbench_gen}]\ntemperature: .inf\n", "config.temperature"),
        ("train: [{kind: masbench_gen}]\nbatch_size: 0\n", "config.batch_size"),
        ("train: [{kind: masbench_gen}]\nplan_deadline_s: 0\n", "config.plan_deadline_s"),
        ("train: [{kind: masbench_gen}]\nplan_max_calls: 0\n", "config.plan_max_calls"),
        ("train: [{kind: masbench_gen}]\nlora_target_modules: []\n", "config.lora_target_modules"),
        ("train: [{kind: masbench_gen}]\noutput_dir: ''\n", "config.output_dir"),
        ("train: [{kind: masbench_gen}]\nreward_weights: {correctness: .nan}\n", "reward_weights"),
        ("train: [{kind: masbench_gen}]\nreward_weights: {correctness: -1}\n", "a weight is >= 0"),
        (
            "train: [{kind: masbench_gen}]\nreward_weights: {correctness: 0, validity: 0, dom: 0, cost: 0}\n",
            "every weight is 0",
        ),
        ("train: [{kind: masbench_gen}]\ntrl: {max_steps: 0}\n", "trl.max_steps.*`max_steps`"),
        (
            "train: [{kind: dataset, name: aime24, limit: 20}]\n"
            "eval: [{kind: dataset, name: aime24, skip: 10}]\n",
            r"config.eval\[0\] overlaps config.train\[0\]",
        ),
        ("train: [{kind: masbench_gen}]\neval: [{kind: masbench_gen}]\n", "overlaps"),
        ("train: [{kind: masbench_gen}]\ntrl: {output_dir: elsewhere}\n", "trl.output_dir"),
        ("train: [{kind: masbench_gen}]\ntrl: {per_device_train_batch_size: 0}\n", "`batch_size`"),
        # a field another kind of source reads was ignored without a word
        (
            "train: [{kind: dataset, name: math500-subset, count: 10, path: x.jsonl}]\n",
            r"config.train\[0\]: a dataset source does not read count, path",
        ),
        ("train: [{kind: masbench_gen, name: aime24}]\n", "a masbench_gen source does not read name"),
        ("train: [{kind: dataset, name: aime24, seed: 7}]\n", "a dataset source does not read seed"),
    ],
)
def test_bad_configs_name_the_problem(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        load_config(write(tmp_path, text))


def test_a_run_that_cannot_start_leaves_the_previous_runs_files_alone(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from masorch.train.grpo import train_grpo

    out = tmp_path / "run"
    out.mkdir()
    (out / "log.jsonl").write_text('{"step": 1}\n{"step": 2}\n', encoding="utf-8")
    (out / "samples.jsonl").write_text('{"step": 0}\n', encoding="utf-8")
    # A sub-agent that needs no pulled model (an HTTP backend connects only when called).
    subagent = "vllm:http://127.0.0.1:9/v1#m"
    cfg = TrainConfig(
        train=[SourceConfig(kind="masbench", path=str(tmp_path / "nope.jsonl"))],
        output_dir=str(out),
        subagent=subagent,
    )
    with pytest.raises(UsageError, match=r"nope\.jsonl"):
        train_grpo(cfg)
    cfg = load_config(
        write(
            tmp_path,
            f"train: [{{kind: masbench_gen}}]\noutput_dir: {out}\nsubagent: '{subagent}'\n"
            "trl: {bogus_key: 1}\n",
        )
    )
    with pytest.raises(UsageError, match=r"GRPOConfig refused the config.*bogus_key"):
        train_grpo(cfg)
    assert (out / "log.jsonl").read_text(encoding="utf-8") == '{"step": 1}\n{"step": 2}\n'
    assert (out / "samples.jsonl").read_text(encoding="utf-8") == '{"step": 0}\n'


def test_every_field_documents_itself() -> None:
    rows = describe()
    assert all(help_text for _, _, help_text in rows)
    names = [n for n, _, _ in rows]
    assert "reward_weights" in names and "train[] / eval[]: path" in names


def test_rows_carry_the_orchestrator_prompt_with_the_dom_and_grading() -> None:
    src = SourceConfig(kind="masbench_gen", axis="depth", values="2", count=3, limit=2)
    rows = build_rows([src], dom="low", dialect="calls", catalogue=builtin_catalogue())
    assert len(rows) == 2
    r = rows[0]
    assert [m["role"] for m in r["prompt"]] == ["system", "user"]
    assert r["question"] in r["prompt"][1]["content"]
    assert "LOW" in r["prompt"][0]["content"].upper()
    assert (r["dom"], r["scorer"], r["data_source"]) == ("low", "masbench", "masbench/depth")
    assert r["ground_truth"].isdigit()
    rest = build_rows(
        [src.model_copy(update={"skip": 1})], dom="low", dialect="calls", catalogue=builtin_catalogue()
    )
    every = build_rows(
        [src.model_copy(update={"limit": None})], dom="low", dialect="calls", catalogue=builtin_catalogue()
    )
    assert [x["id"] for x in rest] == [x["id"] for x in every[1:3]]  # skip, then limit


def test_a_dataset_source_keeps_the_items_its_where_names(monkeypatch) -> None:
    import masorch.eval.datasets as datasets
    from masorch.eval.datasets import Sample

    items = [Sample(f"q{i}", f"Question {i}?", "yes" if i % 2 else "Paris", "hotpotqa",
                    {"type": "comparison" if i % 2 else "bridge"}) for i in range(6)]  # fmt: skip
    monkeypatch.setattr(datasets, "load", lambda spec, seed=0: items)
    source = SourceConfig(kind="dataset", name="hotpotqa", where={"type": "bridge"}, skip=1, limit=1)
    rows = build_rows([source], dom="low", dialect="calls", catalogue=builtin_catalogue())
    assert [r["id"] for r in rows] == ["q2"]  # bridge items q0, q2, q4: skip one, keep one
    # a misspelled `where` value gives no rows: refused, naming the source, not trained on less data
    misspelled = SourceConfig(kind="dataset", name="hotpotqa", where={"type": "bridg"})
    with pytest.raises(
        UsageError, match=r"prompt source 2 \(dataset hotpotqa, where .*bridg.*\) gives no rows"
    ):
        build_rows([source, misspelled], dom="low", dialect="calls", catalogue=builtin_catalogue())
    with pytest.raises(UsageError, match="where"):
        build_rows(
            [SourceConfig(kind="masbench_gen", where={"type": "bridge"})],
            dom="low",
            dialect="calls",
            catalogue=builtin_catalogue(),
        )


def test_masbench_file_source_and_bad_sources(tmp_path: Path) -> None:
    from masorch.masbench.axes import generate_instance
    from masorch.masbench.export import write_records

    path = tmp_path / "d.jsonl"
    write_records(path, [generate_instance("depth", 2, split="test", seed=0, index=i) for i in range(2)])
    rows = build_rows(
        [SourceConfig(kind="masbench", path=str(path))],
        dom="high",
        dialect="calls",
        catalogue=builtin_catalogue(),
    )
    assert len(rows) == 2 and rows[0]["dom"] == "high"
    with pytest.raises(UsageError, match="kind"):
        build_rows([SourceConfig(kind="web")], dom="low", dialect="calls", catalogue=builtin_catalogue())
    with pytest.raises(UsageError, match="path"):
        build_rows([SourceConfig(kind="masbench")], dom="low", dialect="calls", catalogue=builtin_catalogue())


def test_model_specs_resolve_to_gguf_files_or_dirs(tmp_path: Path) -> None:
    assert resolve_model("local:/m/q.gguf").gguf_file == "q.gguf"
    assert not resolve_model("runs/final").is_gguf
    with pytest.raises(UsageError, match="models pull"):
        resolve_model("local:smollm2-135m", models_dir=tmp_path)


def test_default_config_is_the_papers_reward() -> None:
    assert TrainConfig().reward_weights == {"correctness": 1.0, "validity": 0.0, "dom": 0.0, "cost": 0.0}


def test_precision_is_checked_and_auto_resolves_to_what_the_hardware_runs_fast(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="precision"):
        load_config(write(tmp_path, "train: [{kind: masbench_gen}]\nprecision: fp16\n"))
    pytest.importorskip("torch")
    from masorch.train.gguf import fast_bf16, resolve_precision

    assert resolve_precision("fp32") == "fp32" and resolve_precision("bf16") == "bf16"
    assert resolve_precision("auto") == ("bf16" if fast_bf16() else "fp32")
    with pytest.raises(UsageError, match="precision"):
        resolve_precision("half")


@pytest.mark.parametrize("name", ["smoke.yaml", "qwen05b_low_masbench.yaml"])
def test_the_configs_shipped_in_the_docs_load(name: str) -> None:
    cfg = load_config(Path(__file__).parents[2] / "docs" / "train" / name)
    assert cfg.train and cfg.batch_size % cfg.num_generations == 0


def test_a_hotpotqa_source_gives_search_agents_its_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from masorch.train.grpo import search_corpus, search_retriever

    masbench_only = TrainConfig(train=[SourceConfig(kind="masbench_gen")])
    assert search_corpus(masbench_only.train) is None and search_retriever(None) is None
    monkeypatch.setenv("MASORCH_CACHE", str(tmp_path))
    with_hotpot = TrainConfig(
        train=[SourceConfig(kind="masbench_gen")], eval=[SourceConfig(kind="dataset", name="hotpotqa")]
    )
    with pytest.raises(UsageError, match="HotpotQA corpus") as err:
        # not pulled into this empty cache: the error says how to get it
        search_corpus([*with_hotpot.train, *with_hotpot.eval])
    assert "masorch data pull hotpotqa" in str(err.value.hint)


def test_system_fields_have_the_system_types_and_make_one_policy_system() -> None:
    from masorch.plan.model import DoM
    from masorch.run.budget import Budget
    from masorch.train.grpo import rollout_settings

    cfg = TrainConfig(
        train=[SourceConfig(kind="masbench_gen")],
        dom="high",
        dialect="json",
        constrain=True,
        subagent="scripted:sub",
        plan_max_calls=5,
        plan_deadline_s=30,
        max_completion_length=99,
    )
    assert cfg.dom is DoM.HIGH and cfg.plan_deadline_s == 30.0
    system = cfg.policy_system()
    assert (system.name, system.dom, system.dialect, system.constrain) == ("mas:high", DoM.HIGH, "json", True)
    assert (system.model, system.plan_tokens, system.repair, system.temperature) == (
        "scripted:sub",
        99,
        0,
        0.0,
    )
    assert system.budget == cfg.plan_budget == Budget(max_calls=5)
    rollout = rollout_settings(cfg)  # the rollouts run what the policy system says
    assert (rollout.dialect, rollout.budget, rollout.timeout_s) == ("json", system.budget, 30.0)
    assert rollout.concurrency == cfg.concurrency


def test_building_a_config_in_code_gives_the_same_usage_errors_as_yaml() -> None:
    with pytest.raises(UsageError, match=r"config\.train\[0\]\.axes") as err:
        TrainConfig(train=[{"kind": "masbench_gen", "axes": "depth"}])
    assert "did you mean 'axis'" in str(err.value.hint)
    assert "masorch train grpo --show-config" in str(err.value.hint)
    with pytest.raises(UsageError, match=r"config\.subagent must be str, got 3"):
        TrainConfig(subagent=3)
    with pytest.raises(UsageError, match=r"config\.dialect must be 'calls', 'json' or 'xml'"):
        TrainConfig(dialect="yaml")
    with pytest.raises(UsageError, match=r"config\.cache_mode"):
        TrainConfig(cache_mode="rw")


def test_the_samplers_cut_reaches_trl_when_set_and_leaves_trls_default_otherwise(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from masorch.train.trainer_parts import grpo_args

    out = str(tmp_path / "o")
    cut = grpo_args(TrainConfig(top_p=0.9, top_k=40, min_p=0.05, output_dir=out), [1.0] * 4, "fp32")
    assert (cut.top_p, cut.top_k, cut.min_p) == (0.9, 40, 0.05)
    default = grpo_args(TrainConfig(output_dir=out), [1.0] * 4, "fp32")
    assert (default.top_p, default.top_k, default.min_p) == (1.0, 0, None)
    with pytest.raises(UsageError, match="top_k"):
        TrainConfig(top_k=-1)


def test_a_dotted_override_sets_one_reward_threshold_of_train_rounds(tmp_path: Path) -> None:
    from masorch.train.rounds_config import load_rounds_config

    p = write(tmp_path, "train: [{kind: masbench_gen}]\nrewards: {theta_par: 1.5}\n")
    cfg = load_rounds_config(p, {"rewards.theta_tool": 2})
    assert (cfg.rewards.theta_tool, cfg.rewards.theta_par) == (2, 1.5)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("temperature: .inf\n", "config.temperature"),
        ("learning_rate: .inf\n", "config.learning_rate"),
        ("beta: .inf\n", "config.beta"),
        ("rewards: {success: .nan}\n", "config.rewards.success"),
        ("rewards: {success: -1}\n", "a weight is >= 0"),
        ("rewards: {success: 0, protocol: 0, diversity: 0, efficiency: 0}\n", "every weight is 0"),
        ("trl: {temperature: 2}\n", "trl.temperature"),
        ("output_dir: ''\n", "config.output_dir"),
    ],
)
def test_bad_rounds_configs_are_refused_on_loading(tmp_path: Path, text: str, match: str) -> None:
    from masorch.train.rounds_config import load_rounds_config

    with pytest.raises(UsageError, match=match):
        load_rounds_config(write(tmp_path, "train: [{kind: masbench_gen}]\n" + text))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("epochs: .nan\n", "config.epochs"),
        ("epochs: .inf\n", "config.epochs"),
        ("max_steps: -1\n", "max_steps must be >= 0"),
        ("trl: {max_length: -5}\n", "trl.max_length.*`max_length`"),
        ("trl: {num_train_epochs: 3}\n", "`epochs`"),
    ],
)
def test_bad_sft_configs_are_refused_on_loading(tmp_path: Path, text: str, match: str) -> None:
    from masorch.train.sft_config import load_sft_config

    with pytest.raises(UsageError, match=match):
        load_sft_config(write(tmp_path, "data: runs/collect/sft.jsonl\n" + text))


def test_a_config_path_that_is_no_file_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such config file"):
        load_config(tmp_path / "absent.yaml")
    with pytest.raises(UsageError, match="/dev/null is not a regular file"):
        load_config("/dev/null")


def test_held_out_questions_that_are_also_training_questions_are_refused(tmp_path: Path) -> None:
    from masorch.train.grpo import prompt_rows, train_agents

    # Two generated sets that differ only in size share their first tasks; the config alone
    # cannot tell (it compares sources spelled alike).
    cfg = load_config(
        write(
            tmp_path,
            "train: [{kind: masbench_gen, values: '2', count: 6}]\n"
            "eval: [{kind: masbench_gen, values: '2', count: 3}]\neval_limit: 3\n",
        )
    )
    with pytest.raises(UsageError, match=r"3 of the 3 held-out questions are also training questions"):
        prompt_rows(cfg, train_agents(cfg, None))
    allowed = cfg.model_copy(update={"eval_overlaps_train": True})
    train, held = prompt_rows(allowed, train_agents(allowed, None))
    assert (len(train), len(held)) == (6, 3)
    disjoint = cfg.model_copy(
        update={"eval": [SourceConfig(kind="masbench_gen", values="2", count=3, seed=1)]}
    )
    assert len(prompt_rows(disjoint, train_agents(disjoint, None))[1]) == 3
