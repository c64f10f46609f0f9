"""The testbed's calibration table: `python -m kvrescue_eval.model_adapters.testbed.calibrate`.

Runs the plain `lm_eval --model kvrescue --model_args preset=recall-cpu,...` command for every mode,
N and budget of the grid on task kv_recall, then prints pass@1, recovery, helper share of committed
steps, early-exit rate and base tokens per problem as a Markdown table. `--evictor snapkv` (or any
name of `kvrescue_eval.eviction.EVICTORS`) measures another evictor on the same grid.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TASK = "kv_recall"


def grid(ns, budgets):
    for n in ns:
        yield "full", n, None
        yield "helper", n, None
        for budget in budgets:
            yield "bon", n, budget
            yield "rescue", n, budget


def run_lm_eval(mode, n, budget, *, evictor, limit, seed, out):
    args = f"preset=recall-cpu,mode={mode},n={n},evictor={evictor},seed={seed}"
    if budget is not None:
        args += f",budget={budget}"
    command = [sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args", args, "--tasks", TASK,
               "--device", "cpu", "--output_path", str(out)]
    if limit:
        command += ["--limit", str(limit)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    (path,) = glob.glob(str(out / "**" / "results_*.json"), recursive=True)
    return json.loads(Path(path).read_text())


def summarize(results):
    metrics = results["results"][TASK]
    totals = results["config"]["kvrescue"]["totals"]
    steps = max(totals["steps"], 1)
    return {
        "pass_at_1": metrics["pass_at_1,none"],
        "step_accuracy": metrics["step_accuracy,none"],
        "helper_share": totals["helper_steps"] / steps,
        "early_exits_per_problem": totals["early_exits"] / totals["problems"],
        "base_tokens_per_problem": totals["base_tokens"] / totals["problems"],
    }


def table(rows):
    lines = ["| N | budget | mode | pass@1 | step acc. | recovery | helper share | early exits/problem | base tokens/problem |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        recovery = "" if row.get("recovery") is None else f"{row['recovery']:.2f}"
        lines.append(f"| {row['n']} | {row['budget'] or 'full'} | {row['mode']} | {row['pass_at_1']:.3f} | "
                     f"{row['step_accuracy']:.3f} | {recovery} | {row['helper_share']:.2f} | "
                     f"{row['early_exits_per_problem']:.2f} | {row['base_tokens_per_problem']:.1f} |")
    return "\n".join(lines)


def add_recovery(rows):
    """(A_rescue - A_bon) / (A_full - A_bon) for every (N, budget), on rescue rows."""
    accuracy = {(r["mode"], r["n"], r["budget"]): r["pass_at_1"] for r in rows}
    for row in rows:
        if row["mode"] == "rescue":
            full, bon = accuracy[("full", row["n"], None)], accuracy[("bon", row["n"], row["budget"])]
            row["recovery"] = (row["pass_at_1"] - bon) / (full - bon) if full != bon else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--budget", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--evictor", default="rkv")
    parser.add_argument("--limit", type=int, default=None, help="first LIMIT problems only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--jobs", type=int, default=1, help="lm_eval runs at once, one thread each")
    args = parser.parse_args(argv)

    def row(i, mode, n, budget, scratch):
        results = run_lm_eval(mode, n, budget, evictor=args.evictor, limit=args.limit, seed=args.seed,
                              out=Path(scratch) / str(i))
        done = {"mode": mode, "n": n, "budget": budget, **summarize(results)}
        print(f"{mode} n={n} budget={budget}: pass@1 {done['pass_at_1']:.3f}", file=sys.stderr, flush=True)
        return done

    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda job: row(*job, scratch),
                             [(i, *setting) for i, setting in enumerate(grid(args.n, args.budget))]))
    add_recovery(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
