"""verl's entry points: compute_score / compute_score_batch over a real (loopback) sub-agent server.

These need no verl; the tests of verl itself (reward manager, Ray) run where verl imports.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from masorch.backends.loopback import LoopbackServer
from masorch.errors import UsageError
from masorch.train.verl_data import write_parquet
from masorch.train.verl_reward import compute_score, compute_score_batch

GOOD = 'create_agent(id="a", kind="cot", task="Solve it carefully.")'
BAD = 'create_agent(id="a", kind="cot", task="Solve it.")'


def responder(messages: list[dict[str, Any]]) -> str:
    text = " ".join(str(m["content"]) for m in messages)
    return "\\boxed{17}" if "carefully" in text else "\\boxed{4}"


@pytest.fixture
def server() -> Any:
    with LoopbackServer(responder) as s:
        yield s


def write_config(tmp_path: Path, base_url: str, extra: str = "") -> str:
    path = tmp_path / "train.yaml"
    path.write_text(
        f"""
model: local:smollm2-135m
train: [{{kind: masbench_gen, count: 2}}]
subagent: "vllm:{base_url}#scripted"
cache_path: {tmp_path / "cache.sqlite"}
output_dir: {tmp_path / "out"}
{extra}
""",
        encoding="utf-8",
    )
    return str(path)


def info(dom: str = "low") -> dict[str, str]:
    return {"question": "What is x?", "dom": dom, "scorer": "masbench"}


def test_compute_score_single_row(tmp_path: Path, server: LoopbackServer) -> None:
    cfg = write_config(tmp_path, server.base_url)
    out = compute_score("masbench/depth", GOOD, "17", info(), config=cfg)
    assert out["score"] == 1.0 and out["correctness"] == 1.0 and out["valid"] == 1.0
    assert out["calls"] == 1.0 and out["n_agents"] == 1.0
    bad = compute_score("masbench/depth", "no plan", "17", info(), config=cfg)
    assert bad["score"] == 0.0 and bad["valid"] == 0.0 and math.isnan(bad["dom"])


def test_compute_score_batch_executes_the_group_once(tmp_path: Path, server: LoopbackServer) -> None:
    cfg = write_config(tmp_path, server.base_url, "reward_weights: {correctness: 1.0, validity: 0.5}")
    group = [GOOD, BAD, GOOD, "prose only"]
    outs = compute_score_batch(["masbench/depth"] * 4, group, ["17"] * 4, [info()] * 4, config=cfg)
    assert [o["score"] for o in outs] == [1.5, 0.5, 1.5, 0.0]
    assert server.request_count == 2  # GOOD ran once for both copies, BAD once
    again = compute_score_batch(["masbench/depth"], [BAD], ["17"], [info()], config=cfg)
    assert again[0]["correctness"] == 0.0
    assert server.request_count == 2  # cached outcome, or the record/replay cache


def test_missing_config_or_columns_are_usage_errors(tmp_path: Path, server: LoopbackServer) -> None:
    with pytest.raises(UsageError, match="training config"):
        compute_score("masbench/depth", GOOD, "17", info())
    cfg = write_config(tmp_path, server.base_url)
    with pytest.raises(UsageError, match="extra_info"):
        compute_score("masbench/depth", GOOD, "17", {"question": "q"}, config=cfg)


def test_verl_parquet_layout(tmp_path: Path) -> None:
    row = {
        "prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
        "question": "Q",
        "dom": "low",
        "ground_truth": "3<<horizon>>4",
        "scorer": "masbench",
        "data_source": "masbench/horizon",
        "id": "r0",
    }
    n = write_parquet([row, row], tmp_path / "train.parquet", "train")
    table = pq.read_table(tmp_path / "train.parquet").to_pylist()
    assert n == 2 and table[1]["extra_info"]["index"] == 1
    assert table[0]["prompt"][1] == {"role": "user", "content": "Q"}
    assert table[0]["reward_model"] == {"style": "rule", "ground_truth": "3<<horizon>>4"}


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")
def test_verl_batch_reward_manager_takes_our_function(tmp_path: Path, server: LoopbackServer) -> None:
    from verl.workers.reward_manager import get_reward_manager_cls  # type: ignore[import-not-found]

    cls = get_reward_manager_cls("batch")
    cfg = write_config(tmp_path, server.base_url)
    manager = cls(tokenizer=None, num_examine=0, compute_score=compute_score_batch, config=cfg)
    assert manager is not None
