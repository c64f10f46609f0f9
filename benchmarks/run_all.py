"""`make bench`: run every benchmark script, print one table, write benchmarks/results/latest.json.

Each script runs in its own process, one after the other (never two torch processes at once on
these 2-core machines), with the thread count given by --threads (default: all cores).
Exits non-zero when a script fails or a required figure is missing.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from records import format_table, machine

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    "bench_grading.py",
    "bench_eviction.py",
    "bench_engine.py",
    "bench_memory.py",
    "bench_prm_prefix.py",
    "bench_decode_cost.py",
    "bench_vllm.py",
]
REQUIRED = ["engine_overhead", "batching_speedup", "base_kv_growth", "prm_prefix_speedup_30",
            "eviction_crossover_tokens", "rescue_vs_bon_base_tokens", "vllm_helper_speedup", "prm_vllm_vs_hf",
            "overlap_gain", "prefix_cache_hit_rate"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--only", nargs="*", help="run only these scripts")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    if args.quick:
        env["KVRESCUE_BENCH_QUICK"] = "1"
    scripts = args.only or SCRIPTS
    failed = []
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as out:
        env["KVRESCUE_BENCH_OUT"] = out.name
        for script in scripts:
            print(f"== {script} (threads={args.threads})", flush=True)
            if subprocess.run([sys.executable, str(HERE / script)], env=env).returncode != 0:
                failed.append(script)
        records = [json.loads(line) for line in out.read().splitlines() if line.strip()]
    print(format_table(records))
    missing = [name for name in REQUIRED if name not in {r["name"] for r in records}] if not args.only else []
    (HERE / "results").mkdir(exist_ok=True)
    target = HERE / "results" / "latest.json"
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(records, indent=1) + "\n")
    tmp.replace(target)
    print(f"machine: {json.dumps(dict(machine(), torch_threads=args.threads))}")
    if failed or missing:
        print(f"FAILED scripts: {failed}; missing figures: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
