"""The multi-round training environment with scripted sub-agents: rounds, statuses, state, rewards.

TRL calls a turn's async tools together with ``asyncio.gather``; :func:`turn` does the same, so
these tests drive the environment as the trainer does, without a model.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from masorch.agents.registry import default_registry, offered_registry
from masorch.backends.scripted import ScriptedBackend
from masorch.errors import BackendError
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends
from masorch.run.round_calls import tool_specs
from masorch.run.round_exec import RoundsOptions
from masorch.run.trajectory import TOOL_STATUSES
from masorch.train.config import SourceConfig
from masorch.train.rounds_config import RoundsRewardConfig, RoundsTrainConfig
from masorch.train.rounds_env import RoundsEnvironment, RoundsSetting, environment_factory
from masorch.train.rounds_grpo import RoundsRewards, rounds_setting


def subagent(messages: Any, config: Any) -> str:
    return "Done. \\boxed{7}"


def setting(**options: Any) -> RoundsSetting:
    agents = offered_registry(default_registry(), retriever=False, sandbox=False, history=True)
    return RoundsSetting(
        agents=agents,
        backends=RoleBackends(ScriptedBackend(subagent, name="sub")),
        options=RoundsOptions(max_rounds=3, max_calls_per_round=4, **options),
    )


def turn(env: RoundsEnvironment, *calls: tuple[str, dict[str, Any]]) -> list[str]:
    """One policy turn as TRL runs it: every async tool call of the turn gathered at once."""

    async def go() -> list[str]:
        coros = [getattr(env, name)(**args) for name, args in calls]
        return list(await asyncio.gather(*coros))

    return asyncio.run(go())


def fresh(**options: Any) -> RoundsEnvironment:
    env = environment_factory(setting(**options))()
    env.reset(question="What is 3 + 4?", ground_truth="7", scorer="exact", id="q1")
    return env


def test_the_tools_are_the_rounds_modes_with_their_schema() -> None:
    # the schema is what TRL reads through transformers (the train extra; the dev install lacks it)
    get_json_schema = pytest.importorskip("transformers.utils").get_json_schema

    s = setting()
    env = environment_factory(s)()
    offered = {spec.name: spec for spec in tool_specs(s.agents.catalogue())}
    # What TRL offers: the public functions of the class, reset and get_reward aside.
    functions = inspect.getmembers(type(env), predicate=inspect.isfunction)
    public = {n for n, _ in functions if not n.startswith("_")}
    assert public - {"reset"} == set(offered)
    for name, spec in offered.items():
        schema = get_json_schema(getattr(env, name))["function"]
        assert schema["name"] == name
        assert set(schema["parameters"]["properties"]) == set(spec.parameters["properties"])
        assert schema["parameters"].get("required", []) == spec.parameters.get("required", [])
    sc = get_json_schema(env.sc)["function"]["parameters"]["properties"]
    assert sc["n"]["type"] == "integer" and sc["task"]["type"] == "string"


def test_a_turn_is_one_round_with_a_status_per_call() -> None:
    env = fresh()
    texts = turn(
        env,
        ("cot", {"task": "Add 3 and 4."}),
        ("sc", {"task": "Add 3 and 4.", "n": 99}),
        ("cot", {"task": "Add them again.", "bogus": 1}),
        ("final_answer", {"answer": "7"}),
        ("cot", {"task": "A fifth call."}),
    )
    statuses = [t.splitlines()[0] for t in texts]
    assert statuses == [
        "status: OK",
        "status: FORMAT_ERR",
        "status: FORMAT_ERR",
        "status: REJECTED",
        "status: REJECTED",
    ]
    assert "Round 1 of 3 is done" in texts[-1]  # the between-rounds note ends the round
    rollout = env.rollout
    assert rollout.rounds == 1 and rollout.calls.units == 1.0 and not rollout.answer
    assert turn(env, ("final_answer", {"answer": "7"}))[0].startswith("status: OK")
    assert rollout.answer == "7" and rollout.rounds == 1  # the final turn is not a round
    late = turn(env, ("cot", {"task": "More?"}))
    assert late[0].startswith("status: REJECTED") and "final answer was given" in late[0]
    assert all(o.status in TOOL_STATUSES for o in rollout.outcomes)


def test_parallel_calls_of_a_turn_run_concurrently() -> None:
    running = {"now": 0, "most": 0}

    async def slow(messages: Any, config: Any) -> str:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        await asyncio.sleep(0.05)
        running["now"] -= 1
        return "\\boxed{1}"

    s = setting()
    s = RoundsSetting(s.agents, RoleBackends(ScriptedBackend(slow, name="slow")), s.options)
    env = environment_factory(s)()
    env.reset(question="q", ground_truth="1", scorer="exact")
    turn(env, *[("cot", {"task": f"part {i}"}) for i in range(4)])
    assert running["most"] == 4


def test_the_round_cap_and_units_budget_hold() -> None:
    env = fresh(max_units=6.0)
    turn(env, ("sc", {"task": "Vote.", "n": 2}))  # 5 units
    texts = turn(env, ("cot", {"task": "a"}), ("cot", {"task": "b"}))  # 1 unit left: one runs
    assert [t.splitlines()[0] for t in texts] == ["status: OK", "status: BUDGET"]
    last = turn(env, ("cot", {"task": "c"}))
    assert "was the last" in last[0]
    capped = turn(env, ("cot", {"task": "d"}))
    assert "rounds are used" in capped[0]
    assert env.rollout.rounds == 3
    # the turn after the last round may still answer, as the last round's note asks
    unread = turn(env, ("final_answer", {"answer": ""}))
    assert unread[0].startswith("status: FORMAT_ERR") and "No round is left" in unread[0]
    assert turn(env, ("final_answer", {"answer": "7"}))[0].startswith("status: OK")
    assert env.rollout.answer == "7" and env.rollout.rounds == 3


def test_the_policys_turns_count_in_the_call_budget_as_at_inference() -> None:
    """Each turn is a call of the run's budget, as each orchestrator turn is at inference; a round
    that spends the budget ends the trajectory without an answer, and later calls are not run."""
    env = fresh(budget=Budget(max_calls=4))
    texts = turn(env, ("cot", {"task": "a"}), ("cot", {"task": "b"}))  # 1 turn + 2 calls: 3 of 4
    assert [t.splitlines()[0] for t in texts] == ["status: OK", "status: OK"]
    assert not env.rollout.ended
    spent = turn(env, ("cot", {"task": "c"}), ("cot", {"task": "d"}))  # the turn is the 4th call
    assert [t.splitlines()[0] for t in spent] == ["status: BUDGET", "status: BUDGET"]
    assert "budget is spent" in spent[-1] and env.rollout.ended
    assert env.rollout.budget_error.startswith("call budget spent: 4 of 4")
    late = turn(env, ("final_answer", {"answer": "7"}))
    assert late[0].startswith("status: BUDGET") and not env.rollout.answer
    entries = env.rollout.calls.session.ledger.entries
    assert [e.role for e in entries] == ["orchestrator", "subagent", "subagent", "orchestrator"]
    figures = env.rollout.figures(trainer_calls=5, policy_tokens=0)
    assert not figures.answered and figures.statuses.count("BUDGET") == 3


def test_figures_and_rewards_from_the_environment_state() -> None:
    env = fresh()
    turn(env, ("cot", {"task": "Add."}), ("review", {"task": "Check."}))
    turn(env, ("final_answer", {"answer": "7"}))

    # TRL's completion: the assistant turns it parsed, with their tool calls, and the tool results.
    def calls(*names: str) -> list[dict[str, Any]]:
        return [{"function": {"name": n}} for n in names]

    completion = [
        {"role": "assistant", "tool_calls": calls("cot", "review")},
        {"role": "tool", "content": "..."},
        {"role": "assistant", "tool_calls": calls("final_answer", "x")},
        {"role": "tool", "content": "..."},
    ]
    rewards = RoundsRewards(RoundsRewardConfig(theta_tool=2))
    logged: dict[str, float] = {}
    parts = asyncio.run(
        rewards.parts([completion], [env], [[0] * 100], lambda k, v: logged.__setitem__(k, v))
    )
    f = env.rollout.figures_seen
    assert f is not None and f.undelivered == 1  # the unknown tool `x` never reached the environment
    assert f.calls_per_round == (2,) and f.tools == ("cot", "review") and f.answered
    assert f.tokens == 100 + env.rollout.subagent_tokens() and f.units == 2.0
    assert parts == [{"success": 1.0, "protocol": 0.75, "diversity": 1.0, "efficiency": 1.0}]
    funcs = rewards.reward_funcs()
    assert [fn.__name__ for fn in funcs] == ["success", "protocol", "diversity", "efficiency"]
    assert asyncio.run(funcs[1]([completion], environments=[env])) == [0.75]
    assert logged["rounds/answered"] == 1.0 and logged["rounds/calls"] == 2.0


def test_refused_calls_are_no_parallel_work_and_no_tool() -> None:
    env = fresh()
    # One call that runs and one with an unknown argument (FORMAT_ERR): one call of work, one tool.
    turn(env, ("cot", {"task": "Add."}), ("sc", {"tsak": "Add."}))
    turn(env, ("final_answer", {"answer": "7"}))
    asyncio.run(RoundsRewards(RoundsRewardConfig()).parts([[]], [env]))
    f = env.rollout.figures_seen
    assert f is not None and "FORMAT_ERR" in f.statuses
    assert f.calls_per_round == (1,) and f.tools == ("cot",)


def test_malformed_call_blocks_left_as_text_are_undelivered() -> None:
    env = fresh()
    turn(env, ("cot", {"task": "Add."}))
    # TRL could not parse the second turn: its text still holds the call block, and no tool_calls.
    completion = [
        {"role": "assistant", "tool_calls": [{"function": {"name": "cot"}}]},
        {"role": "tool", "content": "..."},
        {"role": "assistant", "content": '<tool_call>{"name": "final_answer", "arg</tool_call>'},
    ]
    parts = asyncio.run(RoundsRewards(RoundsRewardConfig()).parts([completion], [env]))
    f = env.rollout.figures_seen
    assert f is not None and f.undelivered == 1 and not f.answered
    assert parts[0]["protocol"] == pytest.approx(1 - 2 / 3)  # the undelivered call, no final answer


def test_a_wrong_or_missing_answer_earns_no_success() -> None:
    env = fresh()
    turn(env, ("final_answer", {"answer": "8"}))
    other = fresh()
    turn(other, ("cot", {"task": "Add."}))
    parts = asyncio.run(RoundsRewards(RoundsRewardConfig()).parts([[], []], [env, other]))
    assert parts[0]["success"] == 0.0 and parts[1]["success"] == 0.0
    assert parts[1]["protocol"] == pytest.approx(0.5)  # one good call, no final answer


def test_synthesis_is_refused_without_a_synthesis_model() -> None:
    env = fresh()
    text = turn(env, ("final_answer", {"synthesize": True}))[0]
    assert text.startswith("status: FORMAT_ERR") and "no synthesis model" in text
    assert json.loads(json.dumps(env.rollout.outcomes[0].to_dict()))["status"] == "FORMAT_ERR"


DOCS = [
    {"id": "acme", "title": "Acme Corporation", "text": "Acme Corporation was founded in 1990 by Jane Roe."},
    {"id": "lyon", "title": "Lyon", "text": "Lyon is a city in France on the Rhone river."},
]


def searcher(messages: Any, config: Any) -> str:
    """A search sub-agent: one query, then the answer it read in the evidence."""
    prompt = messages[-1].content
    if "QUERY:" in prompt:
        return "DONE" if "Jane Roe" in prompt else "QUERY: Acme Corporation founder"
    return "\\boxed{Jane Roe}" if "founded in 1990 by Jane Roe" in prompt else "\\boxed{unknown}"


def corpus_path_of_cache() -> Path:
    """Where the HotpotQA corpus lies in the cache (``MASORCH_CACHE``)."""
    from masorch.eval.datasets import data_dir

    return data_dir("hotpotqa") / "corpus.jsonl"


def rounds_config(tmp_path: Path, *sources: SourceConfig) -> RoundsTrainConfig:
    return RoundsTrainConfig(train=list(sources), output_dir=str(tmp_path / "run"), max_rounds=3)


def test_a_hotpotqa_source_offers_search_over_its_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASORCH_CACHE", str(tmp_path / "cache"))
    corpus = corpus_path_of_cache()
    corpus.parent.mkdir(parents=True)
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    hotpot = SourceConfig(kind="dataset", name="hotpotqa")
    s = rounds_setting(rounds_config(tmp_path, hotpot), subagent=ScriptedBackend(searcher, name="sub"))
    assert "search" in s.agents.catalogue() and s.retriever is not None
    env = environment_factory(s)()
    assert callable(getattr(env, "search", None))  # a tool the policy is offered
    env.reset(question="Who founded Acme Corporation?", ground_truth="Jane Roe", scorer="f1")
    text = turn(env, ("search", {"task": "Find who founded Acme Corporation."}))[0]
    assert text.startswith("status: OK") and "Jane Roe" in text
    out = env.rollout.outcomes[0].output
    assert out is not None and out.details["documents"] == ["acme"]  # the retriever's document


def test_without_a_hotpotqa_source_search_is_not_offered(tmp_path: Path) -> None:
    masbench = SourceConfig(kind="masbench_gen", axis="depth")
    s = rounds_setting(rounds_config(tmp_path, masbench), subagent=ScriptedBackend(subagent, name="sub"))
    assert "search" not in s.agents.catalogue() and s.retriever is None
    assert not hasattr(environment_factory(s)(), "search")


def synthesizing(synthesis: ScriptedBackend, **options: Any) -> RoundsEnvironment:
    s = setting(**options)
    env = environment_factory(RoundsSetting(s.agents, s.backends, s.options, synthesis=synthesis))()
    env.reset(question="What is 3 + 4?", ground_truth="7", scorer="exact", id="q1")
    return env


def test_a_synthesis_model_answers_from_the_trajectory_as_at_inference() -> None:
    from masorch.prompts import render

    synthesis = ScriptedBackend(["The results agree. \\boxed{7}"], name="synth")
    env = synthesizing(synthesis)
    turn(env, ("cot", {"task": "Add 3 and 4."}))
    text = turn(env, ("final_answer", {"synthesize": True}))[0]
    assert text.startswith("status: OK") and "synthesis model" in text
    rollout = env.rollout
    assert rollout.ended and not rollout.answer and not synthesis.calls  # it runs at the close
    late = turn(env, ("cot", {"task": "More?"}))
    assert late[0].startswith("status: REJECTED")
    asyncio.run(rollout.close())
    assert rollout.answer == "7" and rollout.synthesized and rollout.rounds == 1
    # It read the prompt, the round's call and result, and the inference path's synthesis request.
    ((messages, config),) = synthesis.calls
    roles = ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    assert [m.role for m in messages] == roles
    assert messages[0].content == rollout.calls.system_prompt() and "result:\n7" in messages[3].content
    assert messages[4].tool_calls[0].name == "final_answer" and not config.tools
    assert messages[5].tool_call_id == messages[4].tool_calls[0].id  # every call is answered
    request = render("rounds/synthesis.j2", question="What is 3 + 4?", max_rounds=3, requested=True)
    assert messages[-1].content == request
    # Its call is in the rollout's ledger, so its tokens count for the efficiency reward.
    entries = rollout.calls.session.ledger.entries
    assert [e.node for e in entries][-1] == "synthesis"
    figures = rollout.figures(trainer_calls=2, policy_tokens=0)
    assert figures.tokens == rollout.subagent_tokens() > sum(e.usage.total_tokens for e in entries[:-1])
    assert figures.answered and figures.statuses == ("OK", "REJECTED")


@pytest.mark.parametrize(
    ("reply", "options", "status"),
    [
        (BackendError("server down"), {}, "EXEC_ERR"),
        ("I cannot tell.\n```json\n{}\n```", {}, "EXEC_ERR"),
        ("\\boxed{7}", {"budget": Budget(max_calls=3)}, "BUDGET"),  # 2 turns + cot: none left
    ],
)
def test_a_failed_synthesis_ends_the_trajectory_with_its_status(
    reply: Any, options: dict[str, Any], status: str
) -> None:
    env = synthesizing(ScriptedBackend([reply], name="synth"), **options)
    turn(env, ("cot", {"task": "Add 3 and 4."}))
    turn(env, ("final_answer", {"synthesize": True}))
    rollout = env.rollout
    asyncio.run(rollout.close())
    assert rollout.ended and not rollout.answer and rollout.outcomes[-1].status == status
    assert rollout.synthesis_error and not rollout.synthesized
    assert rollout.figures(trainer_calls=2, policy_tokens=0).statuses[-1] == status


def test_a_synthesis_past_the_node_timeout_ends_timeout() -> None:
    env = synthesizing(ScriptedBackend(["\\boxed{7}"], name="slow", delay_s=5.0), node_timeout_s=0.05)
    turn(env, ("final_answer", {"synthesize": True}))
    asyncio.run(env.rollout.close())
    assert env.rollout.outcomes[-1].status == "TIMEOUT" and env.rollout.ended and not env.rollout.answer


def test_the_configured_synthesis_model_reaches_the_setting(tmp_path: Path) -> None:
    masbench = SourceConfig(kind="masbench_gen", axis="depth")
    sub = ScriptedBackend(subagent, name="sub")
    assert rounds_setting(rounds_config(tmp_path, masbench), subagent=sub).synthesis is None
    cfg = rounds_config(tmp_path, masbench).model_copy(update={"synthesis": "local:qwen2.5-coder-0.5b"})
    assert cfg.synthesis == cfg.subagent  # the same model: the sub-agents' backend answers
    assert rounds_setting(cfg, subagent=sub).synthesis is sub


def test_a_trajectory_at_the_round_cap_is_closed_by_the_synthesis_model(tmp_path: Path) -> None:
    """As inference ends a run at the round cap: the reward functions, run together as TRL runs
    them, close it once (one synthesis call, one log line) and it earns its success reward."""
    synthesis = ScriptedBackend(["They agree. \\boxed{7}"], name="synth")
    env = synthesizing(synthesis)
    for i in range(3):
        turn(env, ("cot", {"task": f"Add 3 and 4, try {i}."}))
    assert not env.rollout.answer and env.rollout.rounds == 3
    cot = [{"function": {"name": "cot"}}]
    completion = [{"role": "assistant", "content": f"Try {i}.", "tool_calls": cot} for i in range(3)]
    # a turn whose only call never reached the environment: its text belongs to no round
    completion.insert(
        1, {"role": "assistant", "content": "Lost.", "tool_calls": [{"function": {"name": "x"}}]}
    )
    rewards = RoundsRewards(RoundsRewardConfig(), log_path=tmp_path / "t.jsonl")

    async def trl() -> list[list[float | None]]:
        return list(
            await asyncio.gather(*(f([completion], environments=[env]) for f in rewards.reward_funcs()))
        )

    success, *_ = asyncio.run(trl())
    assert success == [1.0] and env.rollout.answer == "7" and env.rollout.synthesized
    ((messages, _config),) = synthesis.calls  # the turns' texts are in what it read
    assert [m.content for m in messages if m.role == "assistant"] == ["Try 0.", "Try 1.", "Try 2."]
    (logged,) = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert logged["synthesized"] is True and logged["answer"] == "7" and logged["synthesis_error"] == ""


def test_a_failed_synthesis_at_the_round_cap_is_kept_with_its_reason() -> None:
    env = synthesizing(ScriptedBackend([BackendError("server down")], name="synth"))
    for _ in range(3):
        turn(env, ("cot", {"task": "Add."}))
    asyncio.run(env.rollout.close())
    assert not env.rollout.answer and "server down" in env.rollout.synthesis_error


def test_a_trajectory_stopped_by_a_prose_turn_is_answered_by_the_synthesis(tmp_path: Path) -> None:
    """TRL stops at a turn without a call, where inference would remind the policy and end at the
    round cap in a synthesis: the synthesis answers here too, reading that turn, which counts as
    one undelivered call."""
    synthesis = ScriptedBackend(["\\boxed{7}"], name="synth")
    env = synthesizing(synthesis)
    turn(env, ("cot", {"task": "Add."}))
    cot = [{"function": {"name": "cot"}}]
    completion = [
        {"role": "assistant", "content": "First a sub-agent.", "tool_calls": cot},
        {"role": "tool", "content": "7"},
        {"role": "assistant", "content": "So 3 + 4 = \\boxed{7}."},
    ]
    (parts,) = asyncio.run(RoundsRewards(RoundsRewardConfig()).parts([completion], [env]))
    assert env.rollout.answer == "7" and env.rollout.synthesized and env.rollout.stopped_early
    ((messages, _config),) = synthesis.calls
    said = [m.content for m in messages if m.role == "assistant"]
    assert said == ["First a sub-agent.", "So 3 + 4 = \\boxed{7}."]
    f = env.rollout.figures_seen
    assert f is not None and f.undelivered == 1 and f.answered
    assert parts["success"] == 1.0 and parts["protocol"] == pytest.approx(1 - 1 / 3)


def test_a_first_turn_in_prose_gets_the_synthesis_and_half_the_protocol() -> None:
    synthesis = ScriptedBackend(["\\boxed{8}"], name="synth")
    env = synthesizing(synthesis)
    completion = [{"role": "assistant", "content": "It is \\boxed{8}."}]
    (parts,) = asyncio.run(RoundsRewards(RoundsRewardConfig()).parts([completion], [env]))
    assert env.rollout.answer == "8" and parts["success"] == 0.0
    assert parts["protocol"] == pytest.approx(0.5) and parts["diversity"] == 0.0


def test_an_unparsed_call_block_that_stopped_it_is_no_prose_turn() -> None:
    env = synthesizing(ScriptedBackend(["\\boxed{7}"], name="synth"))
    completion = [{"role": "assistant", "content": '<tool_call>{"name": "cot", "arg</tool_call>'}]
    (parts,) = asyncio.run(RoundsRewards(RoundsRewardConfig()).parts([completion], [env]))
    f = env.rollout.figures_seen
    assert f is not None and f.undelivered == 1 and env.rollout.answer == "7"  # the block, once
    assert not env.rollout.prose_end and parts["protocol"] == pytest.approx(0.5)


def test_an_answered_trajectory_or_one_without_a_synthesis_model_gets_no_synthesis() -> None:
    synthesis = ScriptedBackend(["\\boxed{7}"], name="synth")
    answered = synthesizing(synthesis)
    turn(answered, ("final_answer", {"answer": "8"}))
    alone = fresh()  # no synthesis model
    turn(alone, ("cot", {"task": "Add."}))
    for env in (answered, alone):
        asyncio.run(env.rollout.close([("Done.", [])]))
    assert not synthesis.calls
    assert (answered.rollout.answer, alone.rollout.answer) == ("8", "")


def test_a_synthesis_asked_for_mid_trajectory_reads_the_turns_texts(tmp_path: Path) -> None:
    """TRL hands the environment the calls only: the reward functions close the trajectory with
    the completions' texts, so the synthesis final_answer asked for reads every turn, its own too."""
    synthesis = ScriptedBackend(["\\boxed{7}"], name="synth")
    env = synthesizing(synthesis)
    turn(env, ("cot", {"task": "Add 3 and 4."}))
    turn(env, ("final_answer", {"synthesize": True}))
    turn(env, ("cot", {"task": "After the end."}))  # TRL's turn after final_answer: refused
    said = [("Add first.", "cot"), ("Now synthesize.", "final_answer"), ("Extra.", "cot")]
    completion = [
        {"role": "assistant", "content": t, "tool_calls": [{"function": {"name": n}}]} for t, n in said
    ]
    rewards = RoundsRewards(RoundsRewardConfig(), log_path=tmp_path / "t.jsonl")
    success = asyncio.run(rewards.reward_funcs()[0]([completion], environments=[env]))
    assert success == [1.0] and env.rollout.answer == "7" and env.rollout.synthesized
    ((messages, _config),) = synthesis.calls
    assert [m.content for m in messages if m.role == "assistant"] == ["Add first.", "Now synthesize."]
    assert messages[-1].role == "user"  # the synthesis request follows the final_answer turn
