"""Two GRPO steps over multi-round trajectories through TRL's environment_factory, on a tiny random
model whose turns are scripted: the tool results carry no loss, the rewards reach the log.

The policy's generation is replaced by a script (the model is random; its turns must be tool
calls), everything else is TRL's: parsing the tool calls from the Qwen2.5 chat template, calling
the environment's tools, appending the results, masking them, computing the loss.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import tiny_models
from masorch.backends.chat import tools_payload
from masorch.backends.scripted import ScriptedBackend
from masorch.train.config import SourceConfig
from masorch.train.rounds_config import RoundsTrainConfig
from masorch.train.rounds_grpo import (
    TRAJECTORIES_FILE,
    policy_tokenizer,
    rounds_rows,
    rounds_setting,
    train_rounds,
)

TURNS = [
    '<tool_call>\n{"name": "cot", "arguments": {"task": "Solve the question."}}\n</tool_call>\n'
    '<tool_call>\n{"name": "review", "arguments": {"task": "Check the reasoning."}}\n</tool_call><|im_end|>',
    '<tool_call>\n{"name": "final_answer", "arguments": {"answer": "1"}}\n</tool_call><|im_end|>',
    "Done.<|im_end|>",
]


def byte_tokenizer() -> Any:
    """A byte-level tokenizer (one token a byte, decoding exact) with Qwen's special tokens."""
    special = {
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "additional_special_tokens": ["<|im_start|>"],
    }
    return policy_tokenizer(tiny_models.byte_tokenizer(special), "qwen2_5")


def tiny_policy() -> tuple[Any, Any]:
    tokenizer = byte_tokenizer()
    return tiny_models.tiny_qwen2(tokenizer, max_position_embeddings=32_768), tokenizer


def script_turns(
    monkeypatch, tokenizer: Any, prompts: list[str] | None = None, caps: list[int] | None = None
) -> None:
    """The policy's turns come from TURNS, by how many turns the prompt already holds; the text of
    every prompt the policy is given is added to ``prompts``, and the token cap the trainer would
    generate each turn under to ``caps``."""
    import trl

    def scripted(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        out = []
        for ids in prompt_ids:
            if caps is not None:
                caps.append(self.generation_config.max_new_tokens)
            if prompts is not None:
                prompts.append(tokenizer.decode(ids))
            turn = tokenizer.decode(ids).count("<|im_start|>assistant") - 1
            out.append(tokenizer.encode(TURNS[min(turn, len(TURNS) - 1)], add_special_tokens=False))
        return out, None

    monkeypatch.setattr(trl.GRPOTrainer, "_generate_single_turn", scripted)


def tiny_config(out: Path, **fields: Any) -> RoundsTrainConfig:
    base: dict[str, Any] = {
        "train": [SourceConfig(kind="masbench_gen", axis="depth", values="2", count=2)],
        "num_generations": 2,
        "batch_size": 2,
        "max_steps": 2,
        "max_rounds": 3,
        "max_completion_length": 4096,
        "plan_tokens": 256,
        "lora": False,
        "precision": "fp32",
        "gradient_checkpointing": False,
        "output_dir": str(out),
    }
    return RoundsTrainConfig(**(base | fields))


def boxed_one() -> ScriptedBackend:
    return ScriptedBackend(lambda m, c: "\\boxed{1}")


@pytest.mark.timeout(600)
def test_two_steps_over_trajectories_mask_the_tool_results(tmp_path: Path, monkeypatch) -> None:
    import trl

    model, tokenizer = tiny_policy()
    prompts: list[str] = []
    caps: list[int] = []
    script_turns(monkeypatch, tokenizer, prompts, caps)
    seen: list[dict[str, Any]] = []
    original = trl.GRPOTrainer._compute_loss

    def spy(self, model, inputs):
        seen.append({k: inputs[k].tolist() for k in ("completion_ids", "completion_mask", "tool_mask")})
        return original(self, model, inputs)

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", spy)
    cfg = tiny_config(tmp_path / "run")
    report = train_rounds(cfg, subagent=boxed_one(), policy=(model, tokenizer))
    # The first turn's prompt is the one inference renders: the rounds system prompt and the
    # question, with the tools block of the schemas collection and evaluation offer (bounds and
    # defaults included), not those transformers derives from the environment's methods.
    setting = rounds_setting(cfg, subagent=boxed_one())
    offered = tools_payload(setting.tool_calls().tools)
    sc_n = next(t for t in offered if t["function"]["name"] == "sc")["function"]["parameters"]["properties"][
        "n"
    ]
    assert (sc_n["minimum"], sc_n["maximum"], sc_n["default"]) == (1, 16, 5)  # the check has teeth
    inference = {
        byte_tokenizer().apply_chat_template(
            row["prompt"], tools=offered, add_generation_prompt=True, tokenize=False
        )
        for row in rounds_rows(cfg, setting.agents)
    }
    firsts = [p for p in prompts if p.count("<|im_start|>assistant") == 1]
    assert firsts and set(firsts) <= inference
    # Every turn, the first and those after tool results, is generated under the turn cap.
    assert len(caps) == len(prompts) > len(firsts) and set(caps) == {cfg.plan_tokens}
    assert report.steps == 2
    lines = [line for line in report.logs if "loss" in line]
    assert len(lines) == 2
    for line in lines:
        for name in ("success", "protocol", "diversity", "efficiency"):
            assert f"rewards/{name}/mean" in line
        assert line["rewards/protocol/mean"] == 1.0 and line["rounds/rounds"] == 1.0
        assert line["rounds/calls"] == 2.0 and line["rounds/answered"] == 1.0
    # The loss sees the policy's turns and nothing of the tool results.
    assert seen
    for batch in seen:
        for ids, keep, tool in zip(
            batch["completion_ids"], batch["completion_mask"], batch["tool_mask"], strict=True
        ):
            trained = tokenizer.decode([t for t, k, m in zip(ids, keep, tool, strict=True) if k and m])
            masked = tokenizer.decode([t for t, k, m in zip(ids, keep, tool, strict=True) if k and not m])
            assert trained == "".join(TURNS)  # every turn, exactly, and only them
            assert masked.count("status: OK") == 3 and "final answer recorded: 1" in masked  # 2 calls, final
            assert "<tool_response>" in masked and "<tool_call>" not in masked
    records = [json.loads(x) for x in (tmp_path / "run" / TRAJECTORIES_FILE).read_text().splitlines()]
    assert len(records) == 4  # 2 steps x 2 trajectories
    assert all(r["statuses"] == ["OK", "OK"] and r["answer"] == "1" for r in records)
    assert (tmp_path / "run" / "final" / "config.json").is_file()


@pytest.mark.timeout(600)
def test_a_stopped_run_resumes_from_its_checkpoint_and_keeps_one_record_per_trajectory(
    tmp_path: Path, monkeypatch
) -> None:
    """A run stopped after step 1 (its checkpoint saved) and killed during step 2 (a line of step 2's
    trajectories already written) goes on from checkpoint-1: step 2 is trained once, its torn
    record is dropped, step 1's records are kept. LoRA, as in the registered runs (docs/train.md):
    the checkpoint holds the adapter, the base is loaded again (seeded here, a file there). Every
    trajectory gets the same reward, so the loss and its gradient are 0 and no step moves a
    weight: the final model differs from the base only if the adapter saved at step 1 (set to a
    known value below) was loaded."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    out = tmp_path / "run"

    def sitting(max_steps: int) -> Any:
        torch.manual_seed(0)  # the same base weights each sitting
        model, tokenizer = tiny_policy()
        script_turns(monkeypatch, tokenizer)
        cfg = tiny_config(out, max_steps=max_steps, save_steps=1, resume=True, lora=True)
        return train_rounds(cfg, subagent=boxed_one(), policy=(model, tokenizer))

    first = sitting(1)
    assert first.steps == 1 and (out / "checkpoint-1").is_dir()
    with (out / TRAJECTORIES_FILE).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"step": 1, "id": "killed mid-step"}) + "\n")
    adapter = out / "checkpoint-1" / "adapter_model.safetensors"
    weights = load_file(adapter)
    assert any("lora_B" in k for k in weights)
    save_file({k: torch.full_like(v, 0.01) if "lora_B" in k else v for k, v in weights.items()}, adapter)

    second = sitting(2)
    assert second.steps == 2
    assert [line["step"] for line in second.logs if "loss" in line] == [1, 2]  # the run's steps
    assert second.logs[: len(first.logs)] == first.logs  # step 1 kept, not trained again
    records = [json.loads(x) for x in (out / TRAJECTORIES_FILE).read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 0, 1, 1]
    assert "killed mid-step" not in {r["id"] for r in records}
    assert (out / "checkpoint-2").is_dir() and (out / "final" / "config.json").is_file()
    torch.manual_seed(0)
    base, _ = tiny_policy()
    final = AutoModelForCausalLM.from_pretrained(out / "final")
    q_proj = "model.layers.0.self_attn.q_proj.weight"
    moved = final.state_dict()[q_proj] - base.state_dict()[q_proj]
    assert moved.abs().max() > 1e-4  # the loaded adapter, merged; a fresh one (B = 0) adds nothing


@pytest.mark.timeout(600)
def test_a_finished_run_started_again_trains_no_more_steps(tmp_path: Path, monkeypatch) -> None:
    """The same command after the last step saves the final model again and trains nothing more:
    no further step, checkpoint or trajectory record."""
    import torch

    out = tmp_path / "run"

    def sitting() -> Any:
        torch.manual_seed(0)
        model, tokenizer = tiny_policy()
        script_turns(monkeypatch, tokenizer)
        cfg = tiny_config(out, max_steps=1, save_steps=1, resume=True, lora=True)
        return train_rounds(cfg, subagent=boxed_one(), policy=(model, tokenizer))

    first = sitting()
    assert first.steps == 1
    records, log = (out / TRAJECTORIES_FILE).read_text(), (out / "log.jsonl").read_text()
    again = sitting()
    assert again.steps == 1 and (out / "log.jsonl").read_text() == log  # no step trained again
    assert again.logs == first.logs  # the report still holds the run's steps
    assert json.loads((out / "report.json").read_text())["logs"] == first.logs
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]
    assert (out / TRAJECTORIES_FILE).read_text() == records
    assert (out / "final" / "config.json").is_file()
