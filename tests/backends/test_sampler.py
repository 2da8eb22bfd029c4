"""The sampler's cut (top_p, top_k, min_p): from a system to the orchestrator's request, per engine."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from masorch.agents.registry import default_registry
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.cache import cache_key
from masorch.backends.loopback import LoopbackServer
from masorch.backends.openai_compat import OpenAIBackend
from masorch.run.orchestrate import OrchestrateOptions, plan_generate_config
from masorch.run.round_exec import RoundsOptions
from masorch.run.system import System

pytestmark = pytest.mark.timeout(60)

ASK = [Message("user", "plan")]


async def test_a_cut_is_sent_only_when_set() -> None:
    with LoopbackServer() as server:
        b = OpenAIBackend("m", base_url=server.base_url)
        await b.complete(ASK, GenerateConfig(temperature=1.0, top_k=40, min_p=0.05))
        await b.complete(ASK, GenerateConfig(temperature=1.0, top_k=0))
        await b.complete(ASK, GenerateConfig(temperature=1.0))
        await b.aclose()
    cut, no_cut, engine_default = server.bodies
    assert (cut["top_k"], cut["min_p"]) == (40, 0.05)
    assert no_cut["top_k"] == 0 and "min_p" not in no_cut
    assert "top_k" not in engine_default and "min_p" not in engine_default  # OpenAI's API has neither


def test_the_cut_is_in_the_cache_key_only_when_set() -> None:
    plain = GenerateConfig(temperature=1.0)
    assert "top_k" not in plain.cache_key_fields() and "min_p" not in plain.cache_key_fields()
    keys = {
        cache_key("m", ASK, c)
        for c in (
            plain,
            GenerateConfig(temperature=1.0, top_k=40),
            GenerateConfig(temperature=1.0, min_p=0.1),
        )
    }
    assert len(keys) == 3


def test_a_systems_sampler_reaches_the_plan_call_and_the_rounds_turns() -> None:
    system = System.parse("mas:low", model="m:x", temperature=1.0, top_p=0.9, top_k=40, min_p=0.05)
    config = plan_generate_config(default_registry().catalogue(), OrchestrateOptions.of(system))
    assert (config.temperature, config.top_p, config.top_k, config.min_p) == (1.0, 0.9, 40, 0.05)
    rounds = RoundsOptions.of(System.parse("mas:rounds", model="m:x", top_k=0))
    assert (rounds.top_p, rounds.top_k, rounds.min_p) == (1.0, 0, None)
    greedy = plan_generate_config(
        default_registry().catalogue(), OrchestrateOptions.of(System.parse("mas:low", model="m:x"))
    )
    assert (greedy.top_k, greedy.min_p) == (None, None)


@pytest.mark.parametrize(("field", "value"), [("top_k", -1), ("min_p", 1.5), ("top_p", 0.0)])
def test_a_cut_out_of_range_names_the_field(field: str, value: float) -> None:
    from masorch.errors import UsageError

    with pytest.raises(UsageError, match=field):
        System.parse("mas:low", model="m:x", **{field: value})


class _Recorder:
    """A stand-in causal LM: records generate's keyword arguments, answers one token."""

    device = "cpu"

    def __init__(self) -> None:
        self.kwargs: list[dict[str, Any]] = []

    def generate(self, input_ids: Any, **kwargs: Any) -> Any:
        import torch

        self.kwargs.append(kwargs)
        return torch.cat([input_ids, torch.zeros((1, 1), dtype=input_ids.dtype)], dim=1)


def test_the_hf_backend_passes_a_set_cut_and_leaves_the_rest_to_the_models_defaults() -> None:
    pytest.importorskip("torch")
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    from masorch.backends.hf import HFBackend

    raw = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "[PAD]": 1}, unk_token="[UNK]"))
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw,
        pad_token="[PAD]",
        chat_template="{% for m in messages %}{{ m.content }}{% endfor %}",
    )
    model = _Recorder()
    backend = HFBackend(model, tokenizer)
    for config in (
        GenerateConfig(temperature=1.0, top_k=0, min_p=0.05),
        GenerateConfig(temperature=1.0),
        GenerateConfig(top_k=40),
    ):
        asyncio.run(backend.complete(ASK, config))
    cut, defaults, greedy = model.kwargs
    assert (cut["do_sample"], cut["top_k"], cut["min_p"]) == (True, 0, 0.05)
    assert "top_k" not in defaults and "min_p" not in defaults
    assert greedy["do_sample"] is False and "top_k" not in greedy
