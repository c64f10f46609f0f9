"""Does the kvrescue model recover as much with the base (and the helper) on vLLM as with today's transformers
base? The Done-when figure of the vLLM evicted base, on the kv_recall testbed.

    OMP_NUM_THREADS=1 python benchmarks/bench_vllm_evicted_recovery.py [--limit 200]
    # writes benchmarks/results/vllm_evicted_recovery.json

Runs `lm_eval --model kvrescue --tasks kv_recall --device cpu --limit LIMIT` four times (preset recall-cpu,
its sampling, seed 0): mode rescue with every role on transformers, mode rescue with every role on vLLM
(base_backend=vllm,helper_backend=vllm,prm_backend=vllm: the evicted base, the helper and the testbed PRM), and
the two baselines on transformers, bon (the evicted base alone) and full (the base with its full KV cache).
recovery = (rescue - bon) / (full - bon) in pass_at_1, for each rescue run against the same baselines;
vllm_recovery_gap = recovery on vLLM - recovery on transformers (Done when: |gap| <= 0.05).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvrescue_eval.analysis.recovery import recovery as recovery_of

RESULTS = Path(__file__).resolve().parent / "results" / "vllm_evicted_recovery.json"
RUNS = {
    "rescue_hf": "preset=recall-cpu",
    "rescue_vllm": "preset=recall-cpu,base_backend=vllm,helper_backend=vllm,prm_backend=vllm",
    "bon_hf": "preset=recall-cpu,mode=bon",
    "full_hf": "preset=recall-cpu,mode=full",
}


def run(model_args: str, limit: int, folder: Path) -> tuple[dict, float]:
    command = [sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args", model_args, "--tasks",
               "kv_recall", "--device", "cpu", "--limit", str(limit), "--output_path", str(folder)]
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    begin = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - begin
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result = json.loads(sorted(folder.rglob("results_*.json"))[-1].read_text())
    return result, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=200, help="first LIMIT test problems (all 200 by default)")
    args = parser.parse_args()
    measured = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, model_args in RUNS.items():
            result, seconds = run(model_args, args.limit, Path(tmp) / name)
            metrics = result["results"]["kv_recall"]
            measured[name] = {"model_args": model_args, "seconds": round(seconds, 1),
                              "pass_at_1": metrics["pass_at_1,none"],
                              "backends": result["config"].get("kvrescue", {}).get("backends")}
            print(name, measured[name], flush=True)
    bon, full = measured["bon_hf"]["pass_at_1"], measured["full_hf"]["pass_at_1"]
    recovery = {name: recovery_of(rescue=measured[name]["pass_at_1"], bon=bon, full=full)
                for name in ("rescue_hf", "rescue_vllm")}
    gap = None if None in recovery.values() else recovery["rescue_vllm"] - recovery["rescue_hf"]
    out = {"what": f"python benchmarks/bench_vllm_evicted_recovery.py --limit {args.limit} (OMP_NUM_THREADS="
                   f"{os.environ.get('OMP_NUM_THREADS')})", "date": time.strftime("%Y-%m-%d"), "limit": args.limit,
           "testbed": "kv_recall (tasks/kv_recall, model_adapters/testbed) as on main at the run's date",
           "runs": measured, "recovery": recovery, "vllm_recovery_gap": gap,
           "pass_at_1_gap": measured["rescue_vllm"]["pass_at_1"] - measured["rescue_hf"]["pass_at_1"]}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("recovery", "vllm_recovery_gap", "pass_at_1_gap")}))


if __name__ == "__main__":
    main()
