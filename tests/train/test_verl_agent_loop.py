"""The rounds agent loop on verl 0.9.1's real ``AgentLoopBase``: a scripted server manager, a real tokenizer.

Skipped where verl does not import (the main environment; CI runs it in ``.venv-verl``). The loop is
built as verl's ``AgentLoopWorker`` builds it: ``hydra.utils.instantiate`` of the entry of an
agent-loop config file, with the keywords verl passes, inside the running event loop. The policy's
turns come from a scripted server manager (token ids of fixed assistant texts, as verl's
``LLMServerClient.generate`` returns them in a ``TokenOutput``); the sub-agents are a scripted
responder behind a loopback OpenAI server, configured by the rounds YAML like any deployment.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from masorch.backends.loopback import LoopbackServer
from masorch.errors import UsageError
from masorch.train.rounds_config import load_rounds_config
from masorch.train.rounds_rewards import TrajectoryFigures, components, trajectory_reward
from masorch.train.verl_reward import ROUNDS_KEY, compute_rounds_score

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed"),
    pytest.mark.timeout(300),
]

QUESTION = "What is 3 + 4?"
END = "<|im_end|>"


def call(name: str, **arguments: Any) -> str:
    """A tool call as the policy writes it in the hermes format."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def subagent(messages: list[dict[str, Any]]) -> str:
    return "3 + 4 = 7. \\boxed{7}"


@pytest.fixture(scope="module")
def tokenizer(smollm2: str) -> Any:
    from transformers import AutoTokenizer

    from masorch.train.gguf import resolve_model

    src = resolve_model(smollm2)
    tok = AutoTokenizer.from_pretrained(src.location, **({"gguf_file": src.gguf_file} if src.is_gguf else {}))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


@pytest.fixture
def server() -> Any:
    with LoopbackServer(subagent) as s:
        yield s


class ScriptedServerManager:
    """verl's server manager as the loop sees it: ``generate`` returns the next scripted turn's ids."""

    def __init__(self, tokenizer: Any, turns: list[str]) -> None:
        self.turns = [tokenizer.encode(t, add_special_tokens=False) for t in turns]
        self.requests: list[dict[str, Any]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append(
            {"id": request_id, "prompt_ids": list(prompt_ids), "params": dict(sampling_params)}
        )
        ids = self.turns[len(self.requests) - 1]
        logprobs = [-0.5] * len(ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed")


def rounds_yaml(tmp_path: Path, base_url: str, extra: str = "") -> str:
    path = tmp_path / "rounds.yaml"
    path.write_text(
        f"""
model: local:smollm2-135m
train: [{{kind: masbench_gen, count: 2}}]
subagent: "vllm:{base_url}#scripted"
cache_mode: "off"
output_dir: {tmp_path / "out"}
max_rounds: 2
node_timeout_s: 30
{extra}
""",
        encoding="utf-8",
    )
    return str(path)


def trainer_config(response_length: int = 1024) -> Any:
    """verl's own default trainer config (the generated ppo_trainer.yaml), lengths set."""
    import verl
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml")
    cfg.data.max_prompt_length = 4096
    cfg.data.max_response_length = response_length
    return cfg


@dataclass
class Played:
    """One sample played: the loop's ``AgentLoopOutput``, the server manager, the prompt, and where
    asked, the batch verl's worker makes of the output (``DataProto``)."""

    out: Any
    manager: ScriptedServerManager
    prompt: list[dict[str, str]]
    batch: Any = None


def play(
    tokenizer: Any,
    config: str | None,
    turns: list[str],
    tmp_path: Path,
    response_length: int = 1024,
    score_in_loop: bool = False,
    reward_loop: bool = False,
    logprobs: bool = False,
) -> Played:
    """Build the loop from an agent-loop config file as verl's worker does and play one sample;
    with ``reward_loop``, also pass the output through the worker's post-processing, whose reward
    step runs verl's ``naive`` reward manager with :func:`compute_rounds_score`."""
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from masorch.train.verl_agent_loop import SERVICE

    entry: dict[str, Any] = {
        "name": "masorch_rounds",
        "_target_": "masorch.train.verl_agent_loop.RoundsAgentLoop",
        "score_in_loop": score_in_loop,
    }
    if config is not None:
        entry["config"] = config
    (tmp_path / "agent_loops.yaml").write_text(OmegaConf.to_yaml([entry]), encoding="utf-8")
    loop_config = OmegaConf.load(tmp_path / "agent_loops.yaml")[0]
    cfg = trainer_config(response_length)
    manager = ScriptedServerManager(tokenizer, turns)
    prompt: list[dict[str, str]] = []

    async def go() -> Any:
        loop = hydra.utils.instantiate(
            config=loop_config,
            trainer_config=DictConfigWrap(config=cfg),
            server_manager=manager,
            tokenizer=tokenizer,
            processor=None,
            hf_model_type="llama",
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(cfg.data),
            tools=ToolListWrap([]),
        )
        # The dataset's prompt, as `masorch train data` writes it: the rounds system prompt, the question.
        prompt.extend(SERVICE.get(config)[1].prompt(QUESTION))
        sample = {
            "raw_prompt": prompt,
            "extra_info": {"question": QUESTION, "scorer": "exact", "id": "q1", "index": 0},
            "reward_model": {"ground_truth": "7"},
            "data_source": "test",
            "agent_name": "masorch_rounds",
        }
        out = await loop.run({"temperature": 1.0, "top_p": 1.0, "logprobs": logprobs}, **sample)
        batch = await worker_batch(cfg, tokenizer, out, sample) if reward_loop else None
        return Played(out, manager, prompt, batch)

    played: Played = asyncio.run(go())
    return played


async def worker_batch(cfg: Any, tokenizer: Any, out: Any, sample: dict[str, Any]) -> Any:
    """verl's ``AgentLoopWorker`` post-processing of one output (padding, masks, the reward step,
    the batch), its reward-loop worker stood in by verl's ``naive`` reward manager in-process."""
    from types import SimpleNamespace

    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    rewards = NaiveRewardManager(cfg, tokenizer, compute_rounds_score)
    worker = AgentLoopWorker.__new__(AgentLoopWorker)  # its __init__ starts Ray-side services
    worker.rollout_config = cfg.actor_rollout_ref.rollout
    worker.tokenizer, worker.processor, worker.mm_processor_kwargs = tokenizer, None, {}
    worker.distillation_enabled = False
    worker.reward_loop_worker_handles = [
        SimpleNamespace(compute_score=SimpleNamespace(remote=rewards.run_single))
    ]
    internal = await worker._agent_loop_postprocess(out, False, **sample)
    return worker._postprocess([internal])


def spans(mask: list[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of each run of equal values."""
    out: list[tuple[int, int, int]] = []
    for i, m in enumerate(mask):
        if out and out[-1][0] == m:
            out[-1] = (m, out[-1][1], i + 1)
        else:
            out.append((m, i, i + 1))
    return out


def test_a_round_then_the_answer_masks_exactly_the_tool_tokens(
    tokenizer: Any, server: LoopbackServer, tmp_path: Path
) -> None:
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    first = call("cot", task="Add 3 and 4.") + END
    second = call("final_answer", answer="7") + END
    config = rounds_yaml(tmp_path, server.base_url)
    played = play(tokenizer, config, [first, second], tmp_path, reward_loop=True, logprobs=True)
    out, manager, prompt = played.out, played.manager, played.prompt

    # @register ran on verl's registry, with a target hydra can locate
    assert _agent_loop_registry["masorch_rounds"] == {
        "_target_": "masorch.train.verl_agent_loop.RoundsAgentLoop"
    }
    tools = manager.requests[0]["prompt_ids"]
    assert (
        out.prompt_ids
        == tools
        == tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True, return_dict=False)
    )
    # The mask: the first turn (1), the tool message rendered by the chat template (0), the second turn (1).
    ids, mask = out.response_ids, out.response_mask
    assert len(ids) == len(mask) and out.num_turns == 4  # prompt, turn, tool message, turn
    (one, a, b), (zero, c, d), (one_again, e, f) = spans(mask)
    assert (one, zero, one_again) == (1, 0, 1) and f == len(ids)
    assert ids[a:b] == manager.turns[0] and ids[e:f] == manager.turns[1]
    # verl's default calculate_log_probs: the policy's log-probs where the mask is 1, 0 elsewhere
    assert out.response_logprobs == [-0.5 if m else 0.0 for m in mask]
    tool_text = tokenizer.decode(ids[c:d])
    assert tool_text.startswith("<|im_start|>tool\nstatus: OK") and "7" in tool_text
    assert tool_text.endswith("<|im_start|>assistant\n")  # the next turn's generation prompt: no loss
    # One continuous stream: the second generation saw the prompt, the first turn and the tool message.
    assert manager.requests[1]["prompt_ids"] == out.prompt_ids + ids[:d]
    assert manager.requests[0]["id"] == manager.requests[1]["id"]
    assert manager.requests[1]["params"]["max_tokens"] == 1024 - d

    # The call ran through the round code: one round, one OK call on the sub-agent server.
    record = out.extra_fields[ROUNDS_KEY]
    assert server.request_count == 1
    assert record["status"] == "answered" and record["answer"] == "7"
    assert record["rounds"] == 1 and record["statuses"] == ["OK"] and record["tools"] == ["cot"]
    assert record["units"] == 1.0 and record["tokens"] > len(ids)  # the sub-agent's tokens count too

    # The components are rounds_rewards' on the same trajectory; the reward function reads them.
    cfg = load_rounds_config(config)
    figures = TrajectoryFigures(
        calls_per_round=(1,),
        statuses=("OK",),
        tools=("cot",),
        answered=True,
        tokens=record["tokens"],
        units=1.0,
    )
    expected = components(figures, 1.0, **cfg.rewards.thresholds())
    assert record["components"] == expected
    assert record["reward"] == trajectory_reward(expected, cfg.rewards.weights())
    scored = compute_rounds_score("test", tokenizer.decode(ids), "7", extra_info=dict(out.extra_fields))
    assert scored["score"] == record["reward"] and scored["success"] == 1.0 and scored["protocol"] == 1.0
    # verl's worker: its reward step ran the naive reward manager with compute_rounds_score, which
    # read the record from extra_info; the batch carries the padded mask and the reward on the last token.
    assert out.reward_score == record["reward"]
    batch = played.batch
    assert batch.batch["response_mask"][0].tolist() == mask + [0] * (1024 - len(mask))
    assert batch.batch["rm_scores"][0, len(ids) - 1].item() == pytest.approx(record["reward"])
    assert batch.batch["rm_scores"][0].sum().item() == pytest.approx(record["reward"])
    assert {"score", *expected, "rounds", "answered"} <= set(batch.meta_info["reward_extra_keys"])
    assert batch.non_tensor_batch["success"][0] == 1.0 and batch.non_tensor_batch["rounds"][0] == 1.0


def test_malformed_calls_are_protocol_penalties_not_crashes(
    tokenizer: Any, server: LoopbackServer, tmp_path: Path
) -> None:
    config = rounds_yaml(tmp_path, server.base_url)
    broken = '<tool_call>\n{"name": "cot", "arguments": {"task": "Add."}\n</tool_call>'  # one brace short
    # A turn of a broken call beside a good one: the good one plays, the broken one is undelivered.
    played = play(
        tokenizer,
        config,
        [broken + call("cot", task="Add 3 and 4.") + END, call("final_answer", answer="7") + END],
        tmp_path,
        score_in_loop=True,
        reward_loop=True,
    )
    out = played.out
    record = out.extra_fields[ROUNDS_KEY]
    assert record["status"] == "answered" and record["statuses"] == ["OK"] and record["undelivered"] == 1
    assert record["components"]["protocol"] == pytest.approx(2 / 3)  # 2 calls + final_answer, 1 bad
    assert out.reward_score == record["reward"]  # score_in_loop: verl needs no reward function
    assert out.extra_fields["reward_extra_info"]["protocol"] == pytest.approx(2 / 3)
    assert played.batch.non_tensor_batch["protocol"][0] == pytest.approx(2 / 3)
    assert played.batch.batch["rm_scores"][0].sum().item() == pytest.approx(record["reward"])

    # A turn of broken calls only ends the trajectory (as TRL does): no round, protocol 0.
    played = play(tokenizer, config, [broken + END], tmp_path)
    out, manager = played.out, played.manager
    record = out.extra_fields[ROUNDS_KEY]
    assert len(manager.requests) == 1 and set(out.response_mask) == {1}
    assert record["status"] == "unreadable_calls" and record["rounds"] == 0 and record["undelivered"] == 1
    assert record["components"]["protocol"] == 0.0 and record["components"]["success"] == 0.0
    # A well-formed call with a bad argument reaches the round code and comes back FORMAT_ERR.
    out = play(
        tokenizer,
        config,
        [call("sc", task="Vote.", n=99) + END, call("final_answer", answer="7") + END],
        tmp_path,
    ).out
    record = out.extra_fields[ROUNDS_KEY]
    assert record["statuses"] == ["FORMAT_ERR"] and record["components"]["protocol"] == 0.5


def test_the_response_length_and_the_round_cap_end_a_trajectory(
    tokenizer: Any, server: LoopbackServer, tmp_path: Path
) -> None:
    config = rounds_yaml(tmp_path, server.base_url)
    turn = call("cot", task="Add 3 and 4.") + END
    n = len(tokenizer.encode(turn, add_special_tokens=False))
    # Room for the first turn only: the tool message would pass the limit, so it is not appended.
    played = play(tokenizer, config, [turn, turn], tmp_path, response_length=n + 5)
    out, manager = played.out, played.manager
    record = out.extra_fields[ROUNDS_KEY]
    assert record["status"] == "length" and len(manager.requests) == 1 and out.response_mask == [1] * n
    assert record["rounds"] == 1  # the round was played before its message overflowed
    # A final answer that fills the response to the last token still counts; a round there does not run.
    answer = call("final_answer", answer="7") + END
    size = len(tokenizer.encode(answer, add_special_tokens=False))
    record = play(tokenizer, config, [answer], tmp_path, response_length=size).out.extra_fields[ROUNDS_KEY]
    assert record["status"] == "answered" and record["answer"] == "7"
    requests = server.request_count
    record = play(tokenizer, config, [turn], tmp_path, response_length=n).out.extra_fields[ROUNDS_KEY]
    assert record["status"] == "length" and record["rounds"] == 0 and server.request_count == requests
    # max_rounds 2: two rounds, then the last turn (max_rounds + 1) may only answer.
    played = play(tokenizer, config, [turn, turn, turn], tmp_path)
    out, manager = played.out, played.manager
    record = out.extra_fields[ROUNDS_KEY]
    assert len(manager.requests) == 3 and record["status"] == "turns" and record["rounds"] == 2
    assert record["statuses"] == ["OK", "OK", "REJECTED"] and not record["answered"]


def test_bad_configs_and_a_dead_subagent_endpoint_fail_clearly(tokenizer: Any, tmp_path: Path) -> None:
    from hydra.errors import InstantiationException

    # verl's worker builds the loop through hydra, which wraps the loop's error: the cause is ours.
    with pytest.raises(InstantiationException) as missing:
        play(tokenizer, None, [], tmp_path)
    assert isinstance(missing.value.__cause__, UsageError) and "agent_loop_config_path" in str(
        missing.value.__cause__
    )
    bad = tmp_path / "bad"
    bad.mkdir()
    with pytest.raises(InstantiationException) as typo:
        play(tokenizer, rounds_yaml(bad, "http://127.0.0.1:9/v1", "max_round: 3"), [], bad)
    assert isinstance(typo.value.__cause__, UsageError) and "max_rounds" in str(typo.value.__cause__)
    # Nothing listens on port 9: the call ends EXEC_ERR in the trajectory; the loop goes on.
    dead = rounds_yaml(tmp_path, "http://127.0.0.1:9/v1")
    out = play(
        tokenizer,
        dead,
        [call("cot", task="Add 3 and 4.") + END, call("final_answer", answer="7") + END],
        tmp_path,
    ).out
    record = out.extra_fields[ROUNDS_KEY]
    assert record["statuses"] == ["EXEC_ERR"] and record["status"] == "answered"
