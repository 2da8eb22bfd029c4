"""The rounds fields of System: serial variant, pool, synthesis, costs, caps and redaction."""

from __future__ import annotations

import pytest

from masorch.errors import UsageError
from masorch.run.environment import Environment, EnvSpec
from masorch.run.system import PoolModel, System


def test_rounds_defaults_and_the_serial_variant():
    rounds = System.parse("mas:rounds", model="local:m")
    assert (rounds.max_rounds, rounds.max_calls_per_round, rounds.label) == (12, 4, "mas:rounds")
    serial = System.parse("mas:rounds-serial", model="local:m")
    assert (serial.mode, serial.variant, serial.max_calls_per_round, serial.name) == (
        "rounds",
        "serial",
        1,
        "mas:rounds-serial",
    )
    assert System.from_dict(serial.to_dict()) == serial
    with pytest.raises(UsageError, match="one call per round"):
        System.parse("mas:rounds-serial", model="local:m", max_calls_per_round=2)
    with pytest.raises(UsageError, match="max_rounds"):
        System.parse("mas:rounds", model="local:m", max_rounds=13)
    with pytest.raises(UsageError, match="max_calls_per_round"):
        System.parse("mas:rounds", model="local:m", max_calls_per_round=5)
    for cost in (-5.0, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="tool costs must be finite"):
            System.parse("mas:rounds", model="local:m", tool_costs={"cot": cost})
    for name in ("timeout_s", "node_timeout_s", "max_units", "temperature"):
        for bad in (float("nan"), float("inf")):  # refused at parse, not by each sample's run
            with pytest.raises(UsageError, match=f"{name} must be a finite number"):
                System.parse("mas:rounds", model="local:m", **{name: bad})


def test_pool_synthesis_and_costs_from_yaml_shapes_with_keys_redacted():
    system = System.parse(
        "mas:rounds",
        model="local:m",
        pool={
            "big": "vllm:http://u:SECRET@127.0.0.1:8000/v1#Qwen: strong, slow",
            "small": {"model": "local:tiny", "description": "fast"},
        },
        synthesis="openai:gpt-4o",
        tool_costs={"sc": 3, "cot": 0.5},
        max_units=20,
    )
    assert system.pool["big"] == PoolModel(
        model="vllm:http://u:SECRET@127.0.0.1:8000/v1#Qwen", description="strong, slow"
    )
    assert system.tool_costs == {"sc": 3.0, "cot": 0.5} and system.max_units == 20
    assert system.model_strings() == ["local:m", system.pool["big"].model, "local:tiny", "openai:gpt-4o"]
    stored = system.to_dict()
    assert "SECRET" not in str(stored) and stored["pool"]["small"]["model"] == "local:tiny"
    with pytest.raises(UsageError, match="MODEL: description"):
        System.parse("mas:rounds", model="local:m", pool={"big": "local:tiny"})
    with pytest.raises(UsageError, match="bad pool model names"):
        System.parse("mas:rounds", model="local:m", pool={"a b": "local:tiny: x"})


def test_review_is_offered_only_to_the_rounds_mode():
    env = Environment(EnvSpec())
    assert "review" in env.offered_agents(retriever=False, history=True)
    assert "review" not in env.offered_agents(retriever=False)


def test_rounds_fields_on_another_system_are_refused_not_ignored():
    with pytest.raises(UsageError, match="mas:high: max_units, max_rounds apply only to the rounds systems"):
        System.parse("mas:high", model="local:m", max_rounds=3, max_units=5)
    with pytest.raises(UsageError, match="sas:cot: pool applies only to the rounds systems"):
        System.parse("sas:cot", model="local:m", pool={"big": "local:b: large"})
    high = System.parse("mas:high", model="local:m")
    assert System.from_dict(high.to_dict()) == high  # a logged system, every field written, reads back


def test_rounds_defaults_of_a_systems_file_go_to_the_rounds_systems_only(tmp_path):
    from masorch.eval.systems import systems_from_flags

    path = tmp_path / "systems.yaml"
    path.write_text("defaults: {model: local:m, max_rounds: 3}\nsystems: [sas:cot, mas:rounds, mas:high]\n")
    cot, rounds, high = systems_from_flags(None, path, {})
    assert (cot.max_rounds, rounds.max_rounds, high.max_rounds) == (12, 3, 12)
    path.write_text("systems: [{system: mas:high, model: local:m, max_rounds: 3}]\n")
    with pytest.raises(UsageError, match="max_rounds applies only to the rounds systems"):
        systems_from_flags(None, path, {})
