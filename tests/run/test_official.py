"""The official prompt profile: the checkpoints' message layout, its agent set, and a user's own templates."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.errors import UsageError
from masorch.plan import DoM
from masorch.run.official import AGENT_PLACEHOLDERS, load_prompt_file, official_catalogue
from masorch.run.orchestrate import OrchestrateOptions, orchestrator_messages
from masorch.run.system import System

SNAPSHOTS = Path(__file__).parent / "snapshots"


def messages(dom: DoM, **fields):
    system = System.parse(f"mas:{dom.value}", model="vllm:http://127.0.0.1:8000/v1#gpt-oss-120b", **fields)
    return orchestrator_messages("What is 17 cubed?", builtin_catalogue(), OrchestrateOptions.of(system))


@pytest.mark.parametrize(
    ("dom", "family"),
    [(DoM.LOW, "general"), (DoM.HIGH, "general"), (DoM.LOW, "choice"), (DoM.HIGH, "masbench")],
)
def test_official_prompt_snapshots(dom, family):
    got = messages(dom, prompt="official", prompt_family=family)
    assert [m.role for m in got] == ["system", "user", "user"]  # the developer block last, as trained
    text = "\n\n".join(f"=== {m.role}\n{m.content}" for m in got)
    suffix = "" if family == "general" else f"_{family}"
    path = SNAPSHOTS / f"orchestrator_official_{dom.value}{suffix}.txt"
    if os.environ.get("MASORCH_UPDATE_SNAPSHOTS"):
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text()
    assert got[1].content.endswith("What is 17 cubed?") and "gpt-oss-120b" in got[0].content
    assert "127.0.0.1" not in text  # a model string's URL never reaches the prompt


@pytest.mark.parametrize("dom", [DoM.LOW, DoM.HIGH])
def test_the_developer_block_lists_the_checkpoints_agents_as_json(dom):
    developer = messages(dom, prompt="official")[2].content
    listed = {}
    for line in developer.splitlines():
        name, sep, rest = line.partition(": {")
        if sep and name.endswith("Agent"):
            listed[name] = json.loads("{" + rest)
    expected = ["CoTAgent", "SCAgent", "DebateAgent", "ReflexionAgent"] + (
        ["WebSearchAgent"] * (dom is DoM.HIGH)
    )
    assert list(listed) == expected  # no PythonAgent: the checkpoints never saw one
    assert set(listed["DebateAgent"]["required_arguments"]) == {"agent_input", "debate_roles"}
    assert all(set(a["required_arguments"]) <= {"agent_input", "debate_roles"} for a in listed.values())
    assert listed["SCAgent"]["fixed_settings"]["n"] == 5


def test_the_task_families_change_the_examples_and_the_agents():
    choice = messages(DoM.LOW, prompt="official", prompt_family="choice")
    assert (
        "<answer>B</answer>" in choice[1].content
        and "<answer>B</answer>" not in messages(DoM.LOW, prompt="official")[1].content
    )
    masbench = messages(DoM.HIGH, prompt="official", prompt_family="masbench")
    names = {line.strip() for line in masbench[1].content.splitlines() if "<agent_name>" in line}
    assert names == {"<agent_name>CoTAgent</agent_name>"}  # the MASBench prompts offer CoT only
    assert "SCAgent:" not in masbench[2].content and "CoTAgent:" in masbench[2].content
    assert list(official_catalogue(builtin_catalogue(), DoM.HIGH, "masbench")) == ["cot"]
    for dom, family in ((DoM.HIGH, "choice"), (DoM.LOW, "masbench")):
        with pytest.raises(UsageError, match="prompt_family"):
            messages(dom, prompt="official", prompt_family=family)
    with pytest.raises(UsageError, match="prompt_family"):
        messages(DoM.LOW, prompt_family="choice")  # a family of the default prompt


def test_the_official_catalogue_offers_only_the_checkpoints_kinds():
    assert list(official_catalogue(builtin_catalogue(), DoM.LOW)) == ["cot", "sc", "debate", "reflexion"]
    high = official_catalogue(builtin_catalogue(), DoM.HIGH)
    assert list(high) == ["cot", "sc", "debate", "reflexion", "search"]
    assert high["sc"] == builtin_catalogue()["sc"]  # signatures stay whole: <n_samples> is still read
    no_search = {k: v for k, v in builtin_catalogue().items() if k != "search"}
    assert "search" not in official_catalogue(no_search, DoM.HIGH)


def test_the_system_defaults_of_the_official_prompt():
    official = System.parse("mas:high", model="m:m", prompt="official")
    assert (official.dialect, official.constrain, official.plan_tokens) == ("xml", False, 8192)
    assert System.parse("mas:high", model="m:m").plan_tokens == 1024
    own = System.parse("mas:low", model="m:m", prompt="official", plan_tokens=3000, constrain=True)
    assert (own.plan_tokens, own.constrain) == (3000, True)
    with pytest.raises(UsageError, match="xml dialect"):
        System.parse("mas:high", model="m:m", prompt="official", dialect="calls")
    with pytest.raises(UsageError, match="needs prompt official"):
        System.parse("mas:high", model="m:m", prompt="default", prompt_file="p.yaml")
    assert System.parse("mas:high", model="m:m", prompt_file="p.yaml").prompt == "official"
    # sas and rounds systems ignore it, so eval defaults may set it for every system.
    assert System.parse("sas:cot", model="m:m", prompt="official").plan_tokens == 1024
    again = System.from_dict(official.to_dict())
    assert again == official


PROMPT_FILE = """\
low:
  system: "Level minimal. Model: [MODEL]"
  user: "Rules and examples.\\n\\nQuestion: [QUESTION]"
  developer: "Agents:\\nCoTAgent: [COT]\\nDebateAgent: [Debate]\\nWebSearchAgent: [Websearch]"
high:
  system: "Level medium. Model: [MODEL]"
  user: "Graph rules.\\n\\n[QUESTION]"
  developer: "SCAgent: [COT_SC]"
"""


def test_a_prompt_file_fills_the_official_placeholders(tmp_path):
    path = tmp_path / "official.yaml"
    path.write_text(PROMPT_FILE)
    low = messages(DoM.LOW, prompt_file=str(path))
    assert [m.role for m in low] == ["system", "user", "user"]
    assert low[0].content == "Level minimal. Model: gpt-oss-120b"
    assert low[1].content == "Rules and examples.\n\nQuestion: What is 17 cubed?"
    lines = low[2].content.splitlines()
    assert json.loads(lines[1].removeprefix("CoTAgent: "))["name"].endswith("(CoTAgent)")
    assert "debate_roles" in json.loads(lines[2].removeprefix("DebateAgent: "))["required_arguments"]
    assert lines[3] == "WebSearchAgent: (not available in this run)"  # low DoM offers no search
    high = messages(DoM.HIGH, prompt_file=str(path))
    assert high[1].content.endswith("What is 17 cubed?") and "[COT_SC]" not in high[2].content
    assert set(AGENT_PLACEHOLDERS) == {"[COT]", "[COT_SC]", "[Debate]", "[Reflexion]", "[Websearch]"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("system: a\nuser: b [QUESTION]\n", "lacks the texts: developer"),
        ("system: a\nuser: b\ndeveloper: c\n", r"has no \[QUESTION\]"),
        ("system: a\nuser: '[QUESTION]'\ndeveloper: c\nextra: d\n", "unknown keys: extra"),
        ("- a list\n", "not a mapping"),
    ],
)
def test_a_bad_prompt_file_is_a_usage_error(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_prompt_file(path, DoM.LOW)
    with pytest.raises(UsageError):
        load_prompt_file(tmp_path / "missing.yaml", DoM.LOW)


@pytest.mark.parametrize("dom", [DoM.LOW, DoM.HIGH])
def test_prompt_examples_replace_the_default_prompts_worked_examples(dom: DoM) -> None:
    default = messages(dom)[0].content
    none = messages(dom, prompt_examples="")[0].content
    mine = messages(dom, prompt_examples='Example:\n\ncreate_agent(id="a1", kind="cot", task="")')[0].content
    assert "Example, for" in default and "Example" not in none
    assert (
        mine.endswith('\n\nExample:\n\ncreate_agent(id="a1", kind="cot", task="")')
        and "Example, for" not in mine
    )
    head = default.split("# How to write the plan")[0]
    assert none.split("# How to write the plan")[0] == mine.split("# How to write the plan")[0] == head
    assert "create_agent(id=" in none  # the syntax stays
    for bad in ({"dialect": "xml"}, {"prompt": "official"}):
        with pytest.raises(UsageError, match="prompt_examples"):
            messages(dom, prompt_examples="", **bad)
