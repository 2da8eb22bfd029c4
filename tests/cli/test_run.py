"""``masorch run`` through typer's CliRunner, with scripted backends injected by factory."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from masorch.agents.base import AgentRegistry, NodeOutput
from masorch.agents.cot import CotAgent
from masorch.agents.sc import SelfConsistencyAgent
from masorch.backends.base import Completion, Usage
from masorch.backends.openai_compat import OpenAIBackend
from masorch.backends.scripted import ScriptedBackend
from masorch.cli import run as run_cli
from masorch.errors import UsageError
from masorch.trace.writer import read_trace

PLAN = """create_agent(id="a", kind="cot", task="Add 2 and 3.")
create_agent(id="b", kind="sc", task="Double ${a}.", n=3)
create_flow("a", "b")"""


def make_app(orchestrator_replies, made: dict | None = None) -> typer.Typer:
    made = {} if made is None else made

    def factory(spec: str):
        if spec == "scripted:orch":
            backend = ScriptedBackend(orchestrator_replies, name="orch")
        elif spec == "scripted:sub":
            backend = ScriptedBackend(
                lambda m, c: "\\boxed{5}" if "Add 2 and 3" in m[-1].content else "\\boxed{10}", name="sub"
            )
        elif spec in ("scripted:big", "scripted:synth"):
            backend = ScriptedBackend(lambda m, c: "\\boxed{5}", name=spec.partition(":")[2])
        elif spec.startswith("dead:"):
            # A real OpenAI client against a port nothing listens on.
            backend = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1.0)
            backend.retry = type(backend.retry)(max_attempts=1)
        else:
            raise UsageError(f"unknown test model {spec}")
        made[spec] = backend
        return backend

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test root."""

    run_cli.register(
        app,
        backend_factory=factory,
        agents_factory=lambda max_tokens: AgentRegistry(
            [CotAgent(max_tokens=max_tokens), SelfConsistencyAgent(max_tokens=max_tokens)]
        ),
    )
    return app


ARGS = ["run", "What is double 2+3?", "--orchestrator", "scripted:orch", "--subagent", "scripted:sub"]


def test_json_output_has_exactly_the_documented_keys(tmp_path):
    trace = tmp_path / "trace.jsonl"
    result = CliRunner().invoke(make_app([PLAN]), [*ARGS, "--json", "--trace", str(trace)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out) == {"answer", "status", "error", "plan", "diagnostics", "usage", "wall_s", "rounds"}
    assert out["rounds"] is None
    assert (out["answer"], out["status"]) == ("10", "ok")
    assert set(out["usage"]) == {"calls", "prompt_tokens", "completion_tokens", "cost"}
    assert out["usage"]["calls"] == 1 + 1 + 3
    assert [a["id"] for a in out["plan"]["agents"]] == ["a", "b"]
    events = read_trace(trace)
    assert events[0].type == "run_started" and events[-1].type == "run_finished"
    assert events[0].models == {"orchestrator": "scripted:orch", "subagent": "scripted:sub"}


def test_invalid_plan_json_carries_diagnostics_and_exit_1():
    result = CliRunner().invoke(make_app(['create_agent(id="a", kind="nope", task="x")']), [*ARGS, "--json"])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["status"] == "invalid_plan" and out["answer"] == ""
    assert any(d["code"] == "unknown_kind" for d in out["diagnostics"])


def test_repair_flag_and_budget_flags():
    app = make_app(['create_agent(id="a", kind="nope", task="x")', PLAN])
    ok = CliRunner().invoke(app, [*ARGS, "--json", "--repair", "1"])
    assert json.loads(ok.stdout)["status"] == "ok"
    app = make_app([PLAN])
    spent = CliRunner().invoke(app, [*ARGS, "--json", "--budget-calls", "3"])
    out = json.loads(spent.stdout)
    assert (out["status"], out["usage"]["calls"], spent.exit_code) == ("budget", 3, 1)


def test_rich_output_shows_the_plan_tree_nodes_and_answer():
    result = CliRunner().invoke(make_app([PLAN]), ARGS)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "answer: 10" in out
    assert "b sc Double ${a}." in out and "a cot Add 2 and 3." in out  # the plan tree
    assert "5 calls" in out


def test_the_plan_tree_shows_brackets_in_tasks_as_text_not_markup():
    # "[train]" would vanish as a style tag and "[/x]" would end the output with a markup error.
    plan = PLAN.replace("Add 2 and 3.", "Add 2 and 3 [train] [/x].")
    result = CliRunner().invoke(make_app([plan]), ARGS)
    assert result.exit_code == 0, result.output
    assert "a cot Add 2 and 3 [train] [/x]." in result.stdout


def test_low_dom_direct_answer():
    result = CliRunner().invoke(make_app(['final_answer("10")']), [*ARGS, "--dom", "low", "--json"])
    out = json.loads(result.stdout)
    assert (out["status"], out["answer"], out["usage"]["calls"]) == ("ok", "10", 1)


def test_a_dead_endpoint_is_a_clean_error_without_traceback():
    made: dict = {}
    result = CliRunner().invoke(
        make_app([], made), ["run", "Q?", "--orchestrator", "dead:x", "--subagent", "scripted:sub"]
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "error: orchestrator:" in result.stdout and "127.0.0.1:9" in result.stdout


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dom", "mid"], "--dom must be low or high"),
        (["--dialect", "yaml"], "dialect must be 'calls', 'json' or 'xml'"),
    ],
)
def test_bad_flags_are_usage_errors(flags, message):
    result = CliRunner().invoke(make_app([PLAN]), [*ARGS, *flags])
    assert isinstance(result.exception, UsageError)
    assert message in str(result.exception)


def test_main_reports_usage_errors_in_one_line(capsys):
    from masorch.cli.main import main

    assert main(["run", "Q", "--dom", "mid"]) == 2
    err = capsys.readouterr().err
    assert "--dom must be low or high" in err and "Traceback" not in err


def test_rounds_mode():
    from masorch.backends.base import Completion, ToolCall

    script = [
        Completion(text="", tool_calls=(ToolCall("cot", '{"task": "Add 2 and 3."}'),)),
        Completion(text="", tool_calls=(ToolCall("final_answer", '{"answer": "5"}'),)),
    ]
    result = CliRunner().invoke(make_app(script), [*ARGS, "--mode", "rounds", "--json"])
    out = json.loads(result.stdout)
    assert (out["status"], out["answer"], out["usage"]["calls"]) == ("ok", "5", 3)
    assert [a["id"] for a in out["plan"]["agents"]] == ["r1c1"]
    assert out["rounds"]["statuses"] == {"OK": 1} and out["rounds"]["ended_by"] == "final_answer"
    shown = CliRunner().invoke(make_app(script), [*ARGS, "--mode", "rounds"])
    assert "answer: 5" in shown.stdout and "r1c1" in shown.stdout
    assert "1 rounds (1 OK), 1 units, ended by final_answer" in shown.stdout


@pytest.mark.parametrize(
    ("mode", "flags", "named"),
    [
        ("rounds", ["--dom", "low"], "--dom"),
        ("rounds", ["--dialect", "json", "--repair", "1"], "--dialect, --repair"),
        ("rounds-serial", ["--prune"], "--prune/--no-prune"),
        ("plan", ["--max-rounds", "3"], "--max-rounds"),
        ("plan", ["--pool", "big=scripted:big: a big one", "--max-units", "5"], "--pool, --max-units"),
    ],
)
def test_flags_that_do_not_apply_to_the_mode_are_refused(mode, flags, named):
    result = CliRunner().invoke(make_app([PLAN]), [*ARGS, "--mode", mode, *flags])
    assert isinstance(result.exception, UsageError)
    assert f"{named} do" in str(result.exception) and f"apply to --mode {mode}" in str(result.exception)


def test_rounds_flags_reach_the_run_and_the_trajectory_is_written(tmp_path):
    from masorch.backends.base import Completion, ToolCall

    script = [
        Completion(text="", tool_calls=(ToolCall("cot", '{"task": "Add 2 and 3.", "model": "big"}', "a"),)),
        Completion(text="", tool_calls=(ToolCall("cot", '{"task": "Again."}', "b"),)),
    ]
    made: dict = {}
    chat = tmp_path / "chat.json"
    argv = ["--mode", "rounds", "--max-rounds", "2", "--pool", "big=scripted:big: the big one", "--json"]
    argv += ["--synthesis", "scripted:synth", "--tool-cost", "cot=2.5", "--chat-out", str(chat)]
    result = CliRunner().invoke(make_app(script, made), [*ARGS, *argv])
    out = json.loads(result.stdout)
    assert out["rounds"]["units"] == 5.0 and out["rounds"]["ended_by"] == "synthesis"
    assert [c["model"] for c in out["rounds"]["calls"]] == ["scripted:big", "scripted:sub"]
    assert len(made["scripted:synth"].calls) == 1
    record = json.loads(chat.read_text())
    assert [m["role"] for m in record["messages"]].count("tool") == 2
    bad = CliRunner().invoke(make_app(script), [*ARGS, "--mode", "rounds", "--pool", "big=scripted:big"])
    assert isinstance(bad.exception, UsageError) and "not 'MODEL: description'" in str(bad.exception)


@pytest.mark.parametrize(
    ("flag", "first", "second"),
    [
        ("--pool", "big=scripted:a: one", "big=scripted:b: two"),
        ("--tool-cost", "cot=2", "cot=3"),
        ("--agent-model", "sc=scripted:a", "sc=scripted:b"),
    ],
)
def test_a_name_given_twice_to_a_repeatable_flag_is_refused(flag, first, second):
    result = CliRunner().invoke(make_app([PLAN]), [*ARGS, "--mode", "rounds", flag, first, flag, second])
    assert isinstance(result.exception, UsageError), result.output
    name = first.partition("=")[0]
    assert str(result.exception) == f"{flag} names {name!r} twice (hint: give each {flag} name once)"


def test_an_unwritable_chat_out_is_refused_before_the_run(tmp_path):
    made: dict = {}
    argv = [*ARGS, "--mode", "rounds", "--chat-out", str(tmp_path)]  # a directory
    result = CliRunner().invoke(make_app([PLAN], made), argv)
    assert isinstance(result.exception, UsageError)
    assert f"cannot open chat record {tmp_path}: Is a directory" in str(result.exception)
    assert result.exception.hint == "pass a writable --chat-out path"
    assert made == {}  # refused before any model was built or called, as --trace is
    new = tmp_path / "sub" / "chat.json"
    CliRunner().invoke(make_app([PLAN], made), [*ARGS, "--mode", "rounds", "--chat-out", str(new)])
    assert "scripted:orch" in made  # a writable path is not refused


def test_max_tokens_caps_sub_agent_calls_and_plan_tokens_the_plan():
    made: dict = {}
    argv = [*ARGS, "--json", "--max-tokens", "32", "--plan-tokens", "640"]
    result = CliRunner().invoke(make_app([PLAN], made), argv)
    assert json.loads(result.stdout)["status"] == "ok"
    assert [c.max_tokens for _, c in made["scripted:orch"].calls] == [640]
    sub = [c.max_tokens for _, c in made["scripted:sub"].calls]
    assert len(sub) == 4 and set(sub) == {32}
    # Unset, the plan keeps its own default, whatever the sub-agents' cap.
    made = {}
    CliRunner().invoke(make_app([PLAN], made), [*ARGS, "--json", "--max-tokens", "32"])
    assert [c.max_tokens for _, c in made["scripted:orch"].calls] == [1024]


def test_default_model_not_pulled_is_a_usage_error_naming_the_pull_command(tmp_path, monkeypatch, capsys):
    from masorch.cli.main import main

    monkeypatch.setenv("MASORCH_CACHE", str(tmp_path))  # an empty model cache
    assert main(["run", "What is 2+3?"]) == 2
    err = capsys.readouterr().err
    assert f"masorch models pull {run_cli.DEFAULT_MODEL.split(':', 1)[1]}" in err
    assert "Traceback" not in err


def test_a_model_that_cannot_be_built_stops_the_run_before_its_table_and_trace(monkeypatch, capsys, tmp_path):
    from masorch.backends.openai_compat import API_KEY_ENV, BASE_URL_ENV
    from masorch.cli.main import main

    for name in (*API_KEY_ENV, *BASE_URL_ENV):
        monkeypatch.delenv(name, raising=False)
    trace = tmp_path / "t.jsonl"
    assert main(["run", "What is 2+3?", "--subagent", "openai:gpt-4o-mini", "--trace", str(trace)]) == 2
    captured = capsys.readouterr()
    assert "answer / error" not in captured.out  # no progress table was drawn
    assert captured.err.startswith("error: no API key for openai:gpt-4o-mini")
    assert not trace.exists()
    argv = ["run", "Q?", "--mode", "rounds", "--subagent", "local:qwen2.5-coder-0.5b", "--trace", str(trace)]
    assert main([*argv, "--tool-cost", "pyhton=3", "--synthesis", "local:nonexistent"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: system 'mas:rounds': tool_costs names unknown tools: pyhton"), err
    assert main([*argv, "--synthesis", "foo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: system 'mas:rounds' synthesis: a model string is not provider:model"), err
    assert not trace.exists()


def test_search_is_offered_only_with_a_corpus(tmp_path):
    from masorch.agents.signatures import SEARCH

    class FakeSearch:
        signature = SEARCH

        async def run(self, node, ctx):
            docs = ctx.retriever.search(node.task, 1)
            return NodeOutput(answer=docs[0]["text"])

    class Docs:
        def search(self, query, k):
            return [{"title": "t", "text": "from the corpus"}]

    plan = 'create_agent(id="s", kind="search", task="find it")'
    seen: list[str] = []

    def factory(spec):
        def reply(messages, config):
            seen.append(messages[0].content)
            return plan

        return ScriptedBackend(reply, name=spec.split(":")[1])

    def app_with():
        app = typer.Typer()

        @app.callback()
        def _root() -> None:
            """Test root."""

        run_cli.register(
            app,
            backend_factory=factory,
            agents_factory=lambda n: AgentRegistry([CotAgent(max_tokens=n), FakeSearch()]),
            retriever_factory=lambda path: Docs(),
        )
        return app

    without = CliRunner().invoke(app_with(), [*ARGS, "--json"])
    assert json.loads(without.stdout)["status"] == "invalid_plan"  # search is not in the catalogue
    assert 'kind "search"' not in seen[-1]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"title": "t", "text": "x"}\n')
    with_corpus = CliRunner().invoke(app_with(), [*ARGS, "--json", "--corpus", str(corpus)])
    out = json.loads(with_corpus.stdout)
    assert (out["status"], out["answer"]) == ("ok", "from the corpus")
    assert 'kind "search"' in seen[-1]


@pytest.mark.parametrize(("flag", "constrained"), [([], True), (["--no-constrain"], False)])
def test_the_plan_is_constrained_unless_no_constrain(flag, constrained):
    made: dict = {}
    result = CliRunner().invoke(make_app([PLAN], made), [*ARGS, "--json", *flag])
    assert result.exit_code == 0, result.output
    config = made["scripted:orch"].calls[0][1]
    assert (config.grammar is not None) == constrained
    if constrained:  # the grammar offers the registry's kinds only
        assert "(head-cot | head-sc)" in config.grammar and "debate" not in config.grammar


def _thousand_token_app(plan: str) -> typer.Typer:
    """Every call (orchestrator or sub-agent) reports 1,000 prompt tokens and no completion tokens."""

    def reply(text: str):
        return lambda m, c: Completion(text, usage=Usage(prompt_tokens=1000, calls=1))

    def factory(spec: str):
        text = plan if spec == "scripted:orch" else "\\boxed{5}"
        return ScriptedBackend(reply(text), name=spec.partition(":")[2])

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test root."""

    run_cli.register(
        app, backend_factory=factory, agents_factory=lambda n: AgentRegistry([CotAgent(max_tokens=n)])
    )
    return app


CHAIN = """create_agent(id="a", kind="cot", task="Add 2 and 3.")
create_agent(id="b", kind="cot", task="Double ${a}.")
create_agent(id="c", kind="cot", task="Halve ${b}.")"""


def test_a_cost_budget_stops_the_run_at_the_call_that_would_exceed_it(tmp_path):
    # $10 per 1M input tokens: each call costs $0.01. With a $0.025 budget the orchestrator and two
    # sub-agents run ($0.03 spent); the third sub-agent's call is refused before it is made.
    prices = tmp_path / "prices.yaml"
    prices.write_text("prices:\n  scripted:orch: {input: 10, output: 0}\n")
    args = [
        *ARGS,
        "--json",
        "--prices",
        str(prices),
        "--price",
        "scripted:sub=10,0",
        "--budget-cost",
        "0.025",
    ]
    result = CliRunner().invoke(_thousand_token_app(CHAIN), args)
    out = json.loads(result.stdout)
    assert (out["status"], out["usage"]["calls"], result.exit_code) == ("budget", 3, 1)
    assert out["usage"]["cost"] == pytest.approx(0.03)
    # Unpriced (a scripted or local model), every call costs nothing and the budget could never trip:
    # refused before anything runs, naming the fix.
    free = CliRunner().invoke(_thousand_token_app(CHAIN), [*ARGS, "--json", "--budget-cost", "0.025"])
    assert isinstance(free.exception, UsageError) and "none of its models has a price" in str(free.exception)
    assert "--price" in free.exception.hint
    # One model priced: the budget counts its calls.
    half = [*ARGS, "--json", "--price", "scripted:sub=10,0", "--budget-cost", "0.015"]
    out = json.loads(CliRunner().invoke(_thousand_token_app(CHAIN), half).stdout)
    assert out["status"] == "budget"


def test_a_bad_price_flag_is_a_usage_error():
    result = CliRunner().invoke(_thousand_token_app(CHAIN), [*ARGS, "--price", "scripted:sub=cheap"])
    assert isinstance(result.exception, UsageError) and "MODEL=IN,OUT" in str(result.exception)


def test_a_refused_flag_exits_2_with_the_error_and_hint(capsys):
    from masorch.cli.main import main

    assert main(["run", "What is 2+3?", "--mode", "rounds", "--dom", "low"]) == 2
    err = capsys.readouterr().err
    assert "--dom does not apply to --mode rounds" in err and "hint: drop it, or use --mode plan" in err


def test_cache_records_a_run_and_replay_answers_it_without_a_model(tmp_path):
    cache = str(tmp_path / "cache.sqlite")
    first = CliRunner().invoke(make_app([PLAN]), [*ARGS, "--json", "--cache", cache])
    assert first.exit_code == 0, first.output
    # The replay's orchestrator has no plan left to give: every answer must come from the cache.
    again = CliRunner().invoke(make_app([]), [*ARGS, "--json", "--cache", cache, "--replay"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["answer"] == json.loads(first.stdout)["answer"]
    other = CliRunner().invoke(
        make_app([]), ["run", "Another question?", *ARGS[2:], "--json", "--cache", cache, "--replay"]
    )
    out = json.loads(other.stdout)
    assert (
        other.exit_code == 1 and out["status"] == "error" and "replay cache has no completion" in out["error"]
    )
    refused = CliRunner().invoke(make_app([PLAN]), [*ARGS, "--replay"])
    assert isinstance(refused.exception, UsageError) and "--replay needs --cache" in str(refused.exception)


DEBATE_NO_ROLES = """<thinking>Two views help.</thinking>
<agent><agent_name>DebateAgent</agent_name><agent_description>d</agent_description>
<required_arguments><agent_input></agent_input></required_arguments></agent>
<answer>verdict</answer>"""


def test_the_official_prompt_sends_three_messages_and_runs_the_paper_agents():
    made: dict = {}
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test root."""

    def factory(spec: str):
        replies = [DEBATE_NO_ROLES] if spec == "scripted:orch" else (lambda m, c: "\\boxed{5}")
        made[spec] = ScriptedBackend(replies, name=spec, cycle=spec == "scripted:orch")
        return made[spec]

    run_cli.register(app, backend_factory=factory)  # the built-in agents, so profiles apply
    argv = [*ARGS, "--json", "--dom", "low", "--prompt", "official"]
    paper = CliRunner().invoke(app, argv)
    out = json.loads(paper.stdout)
    # The paper profile asks for debate roles, as the official agents do; the plan is refused.
    assert out["status"] == "invalid_plan" and [d["code"] for d in out["diagnostics"]] == ["missing_param"]
    messages, config = made["scripted:orch"].calls[0]
    assert [m.role for m in messages] == ["system", "user", "user"] and config.max_tokens == 8192
    assert config.grammar is None  # free decoding, as trained
    own = CliRunner().invoke(app, [*argv, "--agents", "default", "--plan-tokens", "2000"])
    out = json.loads(own.stdout)
    assert (out["status"], out["answer"]) == ("ok", "5")  # masorch's agents have default roles
    assert made["scripted:orch"].calls[-1][1].max_tokens == 2000
    bad = CliRunner().invoke(app, [*argv, "--dialect", "json"])
    assert isinstance(bad.exception, UsageError) and "xml dialect" in str(bad.exception)
    family = CliRunner().invoke(app, [*argv, "--prompt-family", "masbench"])
    assert isinstance(family.exception, UsageError) and "mas:high" in str(family.exception)
    rounds = CliRunner().invoke(app, [*ARGS, "--mode", "rounds", "--prompt", "official"])
    assert isinstance(rounds.exception, UsageError)
