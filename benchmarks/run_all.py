"""`make bench`: run every benchmark script, print one table, write the run's results file.

Each script runs in its own process, one after the other (never two torch processes at once on
these 2-core machines), with the thread count given by --threads (default: all cores).
A full run writes benchmarks/results/bench.json, the file the docs quote (commit it); a smoke run (--quick) or
a partial one (--only) writes benchmarks/results/latest.json (ignored by git), so it never replaces the quoted
figures. The file holds one run: {"run": when, where and how it ran, "records": the figures}.
Exits non-zero when a script fails or a required figure is missing.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from records import cpu_model, format_table, versions

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
QUOTED = RESULTS / "bench.json"      # the full run the README and docs quote (tests/test_bench_figures.py)
SCRATCH = RESULTS / "latest.json"    # smoke and partial runs
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--only", nargs="*", help="run only these scripts")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    parser.add_argument("--out", type=Path, help=f"results file (default: {QUOTED.relative_to(HERE.parent)} for a "
                        f"full run, else {SCRATCH.relative_to(HERE.parent)})")
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    if args.quick:
        env["KVRESCUE_BENCH_QUICK"] = "1"
    scripts = args.only or SCRIPTS
    run = describe_run(args)
    start, failed = time.perf_counter(), []
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as out:
        env["KVRESCUE_BENCH_OUT"] = out.name
        for script in scripts:
            print(f"== {script} (threads={args.threads})", flush=True)
            if subprocess.run([sys.executable, str(HERE / script)], env=env).returncode != 0:
                failed.append(script)
        records = [json.loads(line) for line in out.read().splitlines() if line.strip()]
    run.update(wall_seconds=round(time.perf_counter() - start, 1), load_average_after=load_average(),
               failed_scripts=failed)
    print(format_table(records))
    missing = [name for name in REQUIRED if name not in {r["name"] for r in records}] if not args.only else []
    target = args.out or (SCRATCH if args.quick or args.only else QUOTED)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run": run, "records": records}, indent=1) + "\n")
    tmp.replace(target)
    print(f"run: {json.dumps(run)}\nwritten: {target}")
    if failed or missing:
        print(f"FAILED scripts: {failed}; missing figures: {missing}", file=sys.stderr)
        return 1
    return 0


def describe_run(args) -> dict:
    """When, where and how this run ran: what a reader needs to weigh its figures (they move with the load)."""
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python", "benchmarks/run_all.py", *sys.argv[1:]]),
            "threads": args.threads, "quick": args.quick, "scripts": args.only or SCRIPTS,
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
                        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
            "versions": versions(), "commit": git("rev-parse", "HEAD"),
            "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
            "load_average_before": load_average()}


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages (runnable processes; on a 2-core machine, 2 means both busy)."""
    return [round(value, 2) for value in os.getloadavg()]


def git(*command) -> str | None:
    try:
        return subprocess.run(["git", *command], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


if __name__ == "__main__":
    sys.exit(main())
