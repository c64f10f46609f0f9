"""A whole `lm_eval --model kvrescue` run of tiny local Qwen3 models in thinking mode to a trajectory past 8K tokens.

    OMP_NUM_THREADS=1 python benchmarks/thinking_long_trace.py      # about 3 minutes on 2 CPU cores;
                                                                     # writes docs/results/thinking_long_trace.json

Base and helper are random 2-layer Qwen3 models (head_dim 32, one KV head) with the Qwen3 chat template written in
tests/adapters/thinking_models.py (enable_thinking), whose EOS never wins, so the trajectory runs to the context
cap; the PRM is a random checkpoint in the Qwen2.5-Math-PRM layout. The run: mode rescue, R-KV at budget 64 and
buffer 64, one base and one helper candidate per step, steps of at most 256 tokens, max_context 8,704 tokens (the
task's max_gen_toks raised to match), the PRM windowed at 1,024 tokens, one MATH-500 problem. What it shows, read
from lm-eval's own results file: the run was in thinking mode, the trajectory passed 8,192 tokens, the base's cache
never held more than budget + buffer slots per KV head while the helper's grew with the trajectory, and the PRM
scored windows of the trajectory.
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "adapters"))  # the tests' tiny thinking models

BUDGET, BUFFER, CONTEXT, STEP, WINDOW = 64, 64, 8704, 256, 1024
RESULTS = REPO / "docs" / "results" / "thinking_long_trace.json"


def build(folder: Path) -> dict:
    from thinking_models import save_prm, save_qwen3_lm, thinking_tokenizer

    tokenizer = thinking_tokenizer("qwen3")
    roles = {"base": 0, "helper": 1}
    paths = {role: save_qwen3_lm(folder / role, tokenizer, seed=seed) for role, seed in roles.items()}
    return {**paths, "prm": save_prm(folder / "prm", tokenizer)}


def anonymous(argument: str, folder: Path) -> str:
    """An argument with the temporary folder written as TMP."""
    return argument.replace(str(folder), "TMP")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        models = build(folder)
        model_args = (f"base={models['base']},helper={models['helper']},prm={models['prm']},thinking=on,"
                      f"budget={BUDGET},buffer={BUFFER},n=1,max_step_tokens={STEP},max_context={CONTEXT},"
                      f"prm_window={WINDOW},dtype=float32")
        command = [sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args", model_args,
                   "--tasks", "math500", "--limit", "1", "--device", "cpu", "--gen_kwargs", f"max_gen_toks={CONTEXT}",
                   "--output_path", str(folder / "out")]
        begin = time.perf_counter()
        subprocess.run(command, check=True, cwd=folder)
        seconds = time.perf_counter() - begin
        results = json.loads(next((folder / "out").rglob("results_*.json")).read_text())
    record = results["config"]["kvrescue"]
    math500 = results["results"]["math500"]
    figures = {"thinking": record["thinking"], "output_tokens": math500["output_tokens,none"],
               "steps": math500["steps,none"], "budget_plus_buffer": BUDGET + BUFFER,
               "max_cache_slots": record["max_cache_slots"], "scorer_statistics": record["scorer_statistics"],
               "unfinished_thinking": math500["unfinished_thinking,none"], "seconds": round(seconds, 1),
               "lm_eval_arguments": [anonymous(argument, folder) for argument in command[3:]]}
    print(json.dumps(figures, indent=2))
    checks = {"thinking mode": figures["thinking"] == "on",
              "trajectory past 8K tokens": figures["output_tokens"] > 8192,
              "base cache within budget + buffer": 0 < record["max_cache_slots"]["base"] <= BUDGET + BUFFER,
              "helper cache grew with the trajectory": record["max_cache_slots"]["helper"] > 8192,
              "PRM windowed": record["scorer_statistics"]["windowed_scorings"] > 0}
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        sys.exit(f"not shown: {', '.join(failed)}")
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
