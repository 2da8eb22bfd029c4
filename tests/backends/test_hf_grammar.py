"""An ``hf:`` policy decodes under the call's grammar or JSON schema, as the llama.cpp engine does:
a random tiny model, which writes noise when free, writes plans the validator accepts and turns the
round accepts when constrained, and stops where the grammar ends."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("llguidance")

import tiny_models
from masorch.agents.signatures import builtin_catalogue
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.chat import hermes_calls
from masorch.backends.hf import HFBackend
from masorch.plan import DoM, check
from masorch.plan.grammar import plan_grammar, tool_turn_grammar
from masorch.run.round_calls import FINAL_TOOL, check_calls, tool_specs
from masorch.run.trajectory import CallOutcome


@pytest.fixture(scope="module")
def backend() -> HFBackend:
    """A random one-layer Qwen2 model over a byte-level tokenizer whose added tokens include the
    Hermes call tags, as Qwen's do."""
    import torch

    special = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    tok = tiny_models.byte_tokenizer(
        special, added=["<tool_call>", "</tool_call>"], chat_template=tiny_models.CHATML
    )
    torch.manual_seed(0)
    model = tiny_models.tiny_qwen2(tok).eval()
    model.generation_config.eos_token_id = [tok.eos_token_id]
    return HFBackend(model, tok, name="tiny")


def _complete(backend: HFBackend, **config: Any) -> Any:
    settings = GenerateConfig(max_tokens=config.pop("max_tokens", 1500), **config)
    return asyncio.run(backend.complete([Message("user", "What is 2 + 2?")], settings))


def test_free_decoding_of_the_random_model_is_noise(backend: HFBackend) -> None:
    out = _complete(backend, max_tokens=64)
    assert not check(out.text, DoM.LOW, builtin_catalogue(), "calls").valid, out.text


@pytest.mark.parametrize("dom", [DoM.LOW, DoM.HIGH])
def test_constrained_plans_read_and_validate(backend: HFBackend, dom: DoM) -> None:
    grammar = plan_grammar("calls", builtin_catalogue(), dom)
    for seed in range(2):
        out = _complete(backend, grammar=grammar, temperature=1.0, seed=seed)
        assert out.finish == "stop", out.text  # ended by the grammar, not the cap
        assert check(out.text, dom, builtin_catalogue(), "calls").valid, out.text


def test_constrained_turns_are_calls_the_round_accepts(backend: HFBackend) -> None:
    grammar = tool_turn_grammar(builtin_catalogue(), max_calls=4)
    for seed in range(2):
        out = _complete(backend, grammar=grammar, temperature=1.0, seed=seed)
        assert out.finish == "stop", out.text
        read = hermes_calls(out.text)
        assert read is not None, out.text
        calls = read[1]
        if calls[0].name == FINAL_TOOL:
            continue
        checked = check_calls(calls, round_no=1, catalogue=builtin_catalogue(), pool=(), max_calls=4)
        assert not [c for c in checked if isinstance(c, CallOutcome)], out.text


def test_a_json_schema_constrains_the_output(backend: HFBackend) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    out = _complete(backend, json_schema=schema, temperature=1.0, seed=1, max_tokens=200)
    assert out.finish == "stop", out.text
    assert isinstance(json.loads(out.text)["answer"], int)


def test_greedy_constrained_decoding_is_repeatable(backend: HFBackend) -> None:
    grammar = 'root ::= "yes" | "no" | "maybe " [0-9]{1,3}\n'
    first, again = (_complete(backend, grammar=grammar) for _ in range(2))
    assert first.text == again.text and first.finish == "stop"
    assert first.text in ("yes", "no") or first.text.startswith("maybe ")


@pytest.mark.model
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["smollm2-135m", "qwen2.5-coder-0.5b"])
def test_a_real_policy_writes_plans_and_turns_under_the_grammar(name: str) -> None:
    """The embedded models as ``hf:`` policies (real vocabularies: merges, added tokens such as
    Qwen's ``<tool_call>``), greedy: the plan validates and the turn is calls the round accepts."""
    from masorch.backends.hf import load_policy
    from masorch.backends.models import ModelStore
    from masorch.errors import UsageError

    try:
        ModelStore().path(name)
    except UsageError:
        pytest.skip(f"masorch models pull {name}")
    model, tok = load_policy(f"local:{name}")
    policy = HFBackend(model.eval(), tok, name=name)
    plan = _complete(policy, grammar=plan_grammar("calls", builtin_catalogue(), DoM.LOW), max_tokens=600)
    assert plan.finish == "stop" and check(plan.text, DoM.LOW, builtin_catalogue(), "calls").valid, plan.text
    turn = _complete(
        policy,
        grammar=tool_turn_grammar(builtin_catalogue(), max_calls=1),
        tools=tool_specs(builtin_catalogue()),
        max_tokens=600,
    )
    assert turn.finish == "stop", turn.text
    read = hermes_calls(turn.text)
    assert read is not None and len(read[1]) == 1, turn.text
