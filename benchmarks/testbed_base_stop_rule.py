"""Where the testbed base's training stops matters: its checkpoints past the stop rule, and what each does.

Trains the base of `model_adapters/testbed/specs.py` as `train.py` does (same examples, seeds and held-out
score; run it with train.PINNED_KERNELS set, as train.py restarts itself) but without stopping, records the
held-out mean p(right answer) the stop rule reads and the teacher-forced argmax accuracy at every evaluation,
and saves a checkpoint at every evaluation from `--first` on. With `--evaluate`, each saved checkpoint then
runs as the base of the preset recall-cpu (N 4; R-KV at budget 80, the preset's budget while the recipe was
settled, for bon and rescue) on all 200 test
problems through `lm_eval`: full KV, evicted best-of-N and KV-Rescue, the helper and PRM given by `--helper`
and `--prm` (default: the shipped ones). Writes one JSON. docs/results/testbed_base_stop_rule.json was written
with the training code of 2026-12-06, whose pinned kernels were `ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE`;
today's:

    ATEN_CPU_CAPABILITY=default OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
        python benchmarks/testbed_base_stop_rule.py --steps 1050 --first 650 --out /tmp/ck --evaluate 700,750,800,850,900 \
        --helper DIR/helper --prm DIR/prm --json docs/results/testbed_base_stop_rule.json
"""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from kvrescue_eval.model_adapters.testbed import train
from kvrescue_eval.model_adapters.testbed.specs import SPECS
from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer, save_tokenizer

ARMS = {"full": "mode=full", "bon": "mode=bon,evictor=rkv,budget=80", "rescue": "mode=rescue,evictor=rkv,budget=80"}
METRICS = ("pass_at_1", "degenerated", "base_tokens")


def trajectory(steps: int, first: int, out: Path) -> list[dict]:
    """The base's held-out scores at every evaluation (on train.py's 100 problems and on all 200), trained by
    train.train_lm itself with the stop rule out of reach."""
    torch.use_deterministic_algorithms(True)
    tokenizer = build_tokenizer()
    spec = dataclasses.replace(SPECS["base"], stop_at=2.0, steps=steps)
    torch.set_num_threads(spec.threads)
    rows = []

    def observe(model, held_out, word_ids):
        argmax_100, p_100 = train.lm_answer_scores(model, held_out[:100], word_ids)
        argmax_200, p_200 = train.lm_answer_scores(model, held_out, word_ids)
        step = spec.eval_every * (len(rows) + 1)
        rows.append({"step": step, "held_out": p_100, "argmax": argmax_100, "held_out_200": p_200,
                     "argmax_200": argmax_200})
        if step >= first:
            model.save_pretrained(out / f"base-{step}")
            save_tokenizer(tokenizer, out / f"base-{step}")

    train.train_lm("base", tokenizer, *train.training_problems(), out, print, spec=spec, observe=observe)
    return rows


def run_arm(checkpoint: Path, model_args: str, output: Path) -> dict:
    """One lm_eval run of the checkpoint as the base of recall-cpu, N 4: its aggregate METRICS."""
    subprocess.run([sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args",
                    f"preset=recall-cpu,seed=0,n=4,{model_args},base={checkpoint}", "--tasks", "kv_recall",
                    "--device", "cpu", "--output_path", str(output)], check=True, capture_output=True)
    results = max(output.rglob("results_*.json"), key=lambda path: path.stat().st_mtime)  # this run's, on a rerun
    measured = json.loads(results.read_text())["results"]["kv_recall"]
    return {name: measured[f"{name},none"] for name in METRICS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--first", type=int, default=650, help="first step whose checkpoint is saved")
    parser.add_argument("--out", type=Path, required=True, help="folder of the checkpoints")
    parser.add_argument("--evaluate", default="", help="comma-separated steps whose checkpoints lm_eval runs")
    parser.add_argument("--helper", default="testbed:helper")
    parser.add_argument("--prm", default="testbed:prm")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    pinned = " ".join(f"{name}={value}" for name, value in train.PINNED_KERNELS.items())
    if any(os.environ.get(name) != value for name, value in train.PINNED_KERNELS.items()):
        parser.error(f"run it with {pinned} set, the kernels train.py restarts itself with (else its checkpoints "
                     "are not the ones train.py would stop at)")
    every = SPECS["base"].eval_every
    saved = range(-(-args.first // every) * every, args.steps + 1, every)
    evaluated = [step for step in args.evaluate.split(",") if step]
    wrong = [step for step in evaluated if not step.isdigit() or int(step) not in saved]
    if wrong:
        parser.error(f"--evaluate {','.join(wrong)}: no such checkpoint; saved are the steps {saved.start} to "
                     f"{saved[-1] if saved else saved.start} in steps of {every} (--first {args.first}, --steps {args.steps})")
    report = {"what": __doc__.splitlines()[0], "command": " ".join(sys.argv), "stop_at": SPECS["base"].stop_at,
              "trajectory": trajectory(args.steps, args.first, args.out), "checkpoints": {}}
    roles = f"helper={args.helper},prm={args.prm}"
    for step in evaluated:
        report["checkpoints"][step] = {arm: run_arm(args.out / f"base-{step}", f"{model_args},{roles}",
                                                    args.out / "runs" / f"{step}-{arm}") for arm, model_args in ARMS.items()}
    args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
