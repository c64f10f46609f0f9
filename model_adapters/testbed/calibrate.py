"""The testbed's calibration table: `python -m kvrescue_eval.model_adapters.testbed.calibrate`.

Runs the plain `lm_eval --model kvrescue --model_args preset=recall-cpu,...` command for every mode,
N and budget of the grid on task kv_recall (each mode with its default detector: on for rescue only),
then prints per row pass@1, recovery, committed steps, base and helper tokens per problem, helper
share of committed steps, degeneration rate and early-exit rate (early exits / base candidates) as a
Markdown table. `--evictor snapkv` (or any name of `kvrescue_eval.eviction.EVICTORS`) measures another
evictor on the same grid; `--keep DIR` keeps the lm_eval output folders, for `kvrescue-eval report DIR
--metric pass_at_1` (Table 1 and Table 2 layouts).
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
    info = results["config"]["kvrescue"]
    totals = info["totals"]
    problems, steps = totals["problems"], max(totals["steps"], 1)
    base_candidates = steps * info["n_base"]
    return {
        "pass_at_1": metrics["pass_at_1,none"],
        "step_accuracy": metrics["step_accuracy,none"],
        "steps": totals["steps"] / problems,
        "base_tokens": totals["base_tokens"] / problems,
        "helper_tokens": totals["helper_tokens"] / problems,
        "helper_share": totals["helper_steps"] / steps,
        "degeneration_rate": metrics["degenerated,none"],
        "early_exit_rate": totals["early_exits"] / base_candidates if base_candidates else 0.0,
    }


COLUMNS = ("N", "budget", "mode", "pass@1", "step acc.", "recovery", "steps", "base tokens", "helper tokens",
           "helper share", "degeneration", "early exits")


def table(rows):
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        recovery = "" if row.get("recovery") is None else f"{row['recovery']:.2f}"
        cells = (row["n"], row["budget"] or "full", row["mode"], f"{row['pass_at_1']:.3f}",
                 f"{row['step_accuracy']:.3f}", recovery, f"{row['steps']:.1f}", f"{row['base_tokens']:.0f}",
                 f"{row['helper_tokens']:.0f}", f"{row['helper_share']:.2f}", f"{row['degeneration_rate']:.1%}",
                 f"{row['early_exit_rate']:.1%}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
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
    parser.add_argument("--keep", type=Path, help="keep the lm_eval output folders here (for kvrescue-eval report)")
    args = parser.parse_args(argv)

    def row(i, mode, n, budget, scratch):
        name = f"{mode}-n{n}" + (f"-{args.evictor}-b{budget}" if budget else "")
        results = run_lm_eval(mode, n, budget, evictor=args.evictor, limit=args.limit, seed=args.seed,
                              out=Path(scratch) / name)
        done = {"mode": mode, "n": n, "budget": budget, **summarize(results)}
        print(f"{mode} n={n} budget={budget}: pass@1 {done['pass_at_1']:.3f}", file=sys.stderr, flush=True)
        return done

    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(args.jobs) as pool:
        folder = args.keep or scratch
        rows = list(pool.map(lambda job: row(*job, folder),
                             [(i, *setting) for i, setting in enumerate(grid(args.n, args.budget))]))
    add_recovery(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
