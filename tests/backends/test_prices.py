"""Prices: flags, files, the built-in table, and the backend that fills Usage.cost."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from masorch.backends.base import Completion, GenerateConfig, Message, Usage
from masorch.backends.prices import (
    BUILTIN_PRICES,
    PricedBackend,
    PricedFactory,
    PriceTable,
    Pricing,
    parse_price,
    price_table,
    read_prices_file,
)
from masorch.backends.scripted import ScriptedBackend
from masorch.errors import UsageError

ASK = [Message("user", "hi")]


@pytest.mark.parametrize(
    "flag", ["gpt-4o", "gpt-4o=1", "=1,2", "m=1,2,3,4", "m=a,b", "m=-1,2", "m=nan,1", "m=inf,1"]
)
def test_bad_price_flags_are_usage_errors(flag: str) -> None:
    with pytest.raises(UsageError):
        parse_price(flag)


def test_a_model_string_with_equals_signs_keeps_them() -> None:
    model, pricing = parse_price("vllm:http://h:8000/v1?a=b#m=1,2")
    assert model == "vllm:http://h:8000/v1?a=b#m" and pricing == Pricing(1.0, 2.0)


def test_lookup_prefers_the_exact_string_then_the_bare_name_then_the_builtin_table() -> None:
    table = PriceTable({"gpt-4o-mini": Pricing(9, 9), "openai:gpt-4o-mini": Pricing(1, 2)})
    assert table.lookup("openai:gpt-4o-mini") == Pricing(1, 2)
    assert table.lookup("vllm:http://h/v1#gpt-4o-mini") == Pricing(9, 9)  # bare name, set by the user
    assert table.lookup("openai:gpt-4o") == BUILTIN_PRICES["gpt-4o"]
    # Local and self-hosted models cost nothing unless priced; the built-in table is for hosted APIs.
    assert table.lookup("local:smollm2-135m") is None and table.lookup("vllm:http://h/v1#gpt-4o") is None
    assert PriceTable(builtin=False).lookup("openai:gpt-4o") is None


def test_yaml_and_toml_files_and_their_errors(tmp_path: Path) -> None:
    yaml = tmp_path / "p.yaml"
    yaml.write_text(
        "prices:\n  local:smollm2-135m: {input: 0.1, output: 0.2}\n"
        "  gpt-4o: {input: 3, output: 12, cached_input: 1}\n"
    )
    toml = tmp_path / "p.toml"
    toml.write_text('[prices."local:smollm2-135m"]\ninput = 0.5\noutput = 1\n')
    assert read_prices_file(yaml) == {"local:smollm2-135m": Pricing(0.1, 0.2), "gpt-4o": Pricing(3, 12, 1)}
    table = price_table(files=[yaml, toml], flags=["gpt-4o=4,16"])  # later sources win
    assert table.lookup("local:smollm2-135m") == Pricing(0.5, 1.0)
    assert table.lookup("openai:gpt-4o") == Pricing(4, 16)
    for text, message in [
        ("other: 1\n", "no `prices:` section"),
        ("prices: [1, 2]\n", "not a mapping"),
        ("prices:\n  m: {input: 1}\n", "no output"),
        ("prices:\n  m: {input: 1, output: 2, batch: 3}\n", "unknown keys batch"),
        ("prices:\n  m: {input: '1', output: 2}\n", "must be numbers"),
        ("prices:\n  m: {input: -1, output: 2}\n", ">= 0"),
    ]:
        yaml.write_text(text)
        with pytest.raises(UsageError, match=message):
            read_prices_file(yaml)
    toml.write_text("[prices\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        read_prices_file(toml)
    with pytest.raises(UsageError, match="no such file"):
        read_prices_file(tmp_path / "missing.yaml")
    # An eval config without a prices: section simply has none.
    yaml.write_text("systems: [sas:cot]\n")
    assert price_table(config=yaml).prices == {}


async def test_the_priced_backend_bills_cached_prompt_tokens_lower_and_cache_hits_nothing() -> None:
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=100_000, calls=1, cached_prompt_tokens=400_000)
    inner = ScriptedBackend([Completion("a", usage=usage), Completion("b", usage=usage, cached=True)])
    backend = PricedBackend(inner, Pricing(1.0, 10.0, cached_prompt_per_m=0.1))
    first = await backend.complete(ASK, GenerateConfig())
    assert first.usage.cost == pytest.approx(0.6 + 0.04 + 1.0)
    assert (await backend.complete(ASK, GenerateConfig())).usage.cost == 0.0  # no request was sent
    assert backend.model_id == inner.model_id


def test_the_priced_factory_leaves_unpriced_models_unwrapped() -> None:
    factory = PricedFactory(lambda spec: ScriptedBackend(["x"], name=spec), PriceTable({"a": Pricing(1, 1)}))
    assert isinstance(factory("scripted:a"), PricedBackend)
    assert isinstance(factory("scripted:b"), ScriptedBackend)


def test_the_documented_table_and_files_match_the_code(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "backends.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Prices") : doc.index("## Record/replay cache")]
    rows = re.findall(r"^\| `([\w.-]+)` \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", section, flags=re.M)
    documented = {name: Pricing(float(i), float(o), float(c)) for name, i, c, o in rows}
    assert documented == dict(BUILTIN_PRICES)
    for lang, suffix in (("yaml", ".yaml"), ("toml", ".toml")):
        (block,) = re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)
        path = tmp_path / f"prices{suffix}"
        path.write_text(block, encoding="utf-8")
        assert read_prices_file(path)["openai:gpt-4o-mini"] == Pricing(0.15, 0.60, 0.075)
