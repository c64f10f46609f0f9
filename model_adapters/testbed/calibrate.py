"""The testbed's calibration grid: `python -m kvrescue_eval.model_adapters.testbed.calibrate`.

Runs the plain `lm_eval --model kvrescue --model_args preset=recall-cpu,... --tasks kv_recall --log_samples`
command for every row of the grid: per N, full KV and the helper alone; per evictor and budget, evicted
best-of-N (bon), KV-Rescue (rescue, detector on, the preset's) and rescue with `detector=off` (the paper's
"+ interleaving" row). Each mode otherwise has its default detector (on for rescue only, as in the paper).

Per row: pass@1, step accuracy, committed steps, base and helper tokens per problem, helper share of
committed steps, degeneration rate, early-exit rate (aborted base candidates / base candidates). Per
(N, evictor, budget): recovery (A - A_bon) / (A_full - A_bon) of both rescue rows, and the paper's
Fig. 1(a) oracle: per problem right when the evicted run or the helper-alone run is right, its accuracy and
its share of the gap (oracle recovery). `--json` writes the rows (docs/results/testbed_grid.json);
`--render JSON` prints the tables of docs/testbed.md from such a file without running anything; `--keep
DIR` keeps the lm_eval output folders (for `kvrescue-eval report DIR`; `--reuse` then reads the runs already
there instead of running them again); `--report FILE` writes the report's
Table 5, 1 and 2 layouts, helper share and Fig. 1(a) oracle tables of the grid's runs (docs/results/testbed_report.md).
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
RESCUE_OFF = "rescue, detector off"


def grid(ns, evictors, budgets):
    """(label, mode, n, evictor, budget, extra model_args) of every row."""
    for n in ns:
        yield "full", "full", n, None, None, ""
        yield "helper", "helper", n, None, None, ""
        for evictor in evictors:
            for budget in budgets:
                yield "bon", "bon", n, evictor, budget, ""
                yield "rescue", "rescue", n, evictor, budget, ""
                yield RESCUE_OFF, "rescue", n, evictor, budget, ",detector=off"


def run_lm_eval(mode, n, evictor, budget, extra, *, limit, seed, out, reuse=False):
    """One row's lm_eval run into `out` (with `reuse`, a run already there is read, not run again)."""
    args = f"preset=recall-cpu,mode={mode},n={n},seed={seed}" + extra
    if budget is not None:
        args += f",evictor={evictor},budget={budget}"
    command = [sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args", args, "--tasks", TASK,
               "--device", "cpu", "--output_path", str(out), "--log_samples"]
    if limit:
        command += ["--limit", str(limit)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    if reuse and glob.glob(str(out / "**" / "results_*.json"), recursive=True):
        if problem := kept_run_mismatch(out, args, limit):
            raise ValueError(f"{problem}: run without --reuse, or --keep another folder")
    else:
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    (path,) = glob.glob(str(out / "**" / "results_*.json"), recursive=True)
    (samples,) = glob.glob(str(out / "**" / f"samples_{TASK}_*.jsonl"), recursive=True)
    rows = [json.loads(line) for line in Path(samples).read_text().splitlines()]
    right = {row["doc"]["id"]: row["pass_at_1"][0] for row in rows}
    return json.loads(Path(path).read_text()), right


def kept_run_mismatch(folder, model_args, limit):
    """Why the newest lm_eval run kept in `folder` is not the run of `model_args` ("k=v,...") on `limit` problems
    (None: it is; `.ci/recovery-gate` asks this too). Only the given model_args are compared: lm-eval adds others."""
    path = max(glob.glob(str(Path(folder) / "**" / "results_*.json"), recursive=True))
    config = json.loads(Path(path).read_text())["config"]
    wanted = dict(pair.split("=", 1) for pair in model_args.split(","))
    found = {key: str(config["model_args"].get(key)) for key in wanted}
    kept = None if config["limit"] is None else float(config["limit"])
    if kept != (None if limit is None else float(limit)) or found != wanted:
        return (f"{folder} holds a run with limit {config['limit']} and model_args {config['model_args']}, "
                f"not limit {limit} and {model_args}")
    return None


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


def recovery(accuracy, full, bon):
    return (accuracy - bon) / (full - bon) if full != bon else None


def add_comparisons(rows):
    """Recovery on rescue rows; the Fig. 1(a) oracle (bon or helper alone, per problem) on bon rows."""
    by = {(r["label"], r["n"], r["evictor"], r["budget"]): r for r in rows}
    for row in rows:
        full = by[("full", row["n"], None, None)]
        if row["mode"] == "rescue":
            bon = by[("bon", row["n"], row["evictor"], row["budget"])]
            row["recovery"] = recovery(row["pass_at_1"], full["pass_at_1"], bon["pass_at_1"])
        if row["label"] == "bon":
            helper = by[("helper", row["n"], None, None)]
            oracle = [max(row["right"][doc], helper["right"][doc]) for doc in row["right"]]
            row["oracle"] = sum(oracle) / len(oracle)
            row["oracle_recovery"] = recovery(row["oracle"], full["pass_at_1"], row["pass_at_1"])


COLUMNS = ("N", "evictor", "budget", "run", "pass@1", "step acc.", "recovery", "steps", "base tokens",
           "helper tokens", "helper share", "degeneration", "early exits")


def fmt(value, spec):
    return "" if value is None else format(value, spec)


def grid_table(rows):
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = (r["n"], r["evictor"] or "", r["budget"] or "full", r["label"], f"{r['pass_at_1']:.3f}",
                 f"{r['step_accuracy']:.3f}", fmt(r.get("recovery"), ".2f"), f"{r['steps']:.1f}",
                 f"{r['base_tokens']:.0f}", f"{r['helper_tokens']:.0f}", f"{r['helper_share']:.1%}",
                 f"{r['degeneration_rate']:.1%}", f"{r['early_exit_rate']:.1%}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def oracle_table(rows):
    """Fig. 1(a) beside KV-Rescue, per setting: the errors are complementary when the oracle recovers much."""
    by = {(r["label"], r["n"], r["evictor"], r["budget"]): r for r in rows}
    head = ("N", "evictor", "budget", "full", "helper alone", "bon", "oracle (bon or helper)", "oracle recovery",
            "rescue", "rescue recovery", "rescue helper share")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r["label"] != "bon":
            continue
        key = (r["n"], r["evictor"], r["budget"])
        full, helper, rescue = by[("full", r["n"], None, None)], by[("helper", r["n"], None, None)], by[("rescue", *key)]
        cells = (*key, f"{full['pass_at_1']:.3f}", f"{helper['pass_at_1']:.3f}", f"{r['pass_at_1']:.3f}",
                 f"{r['oracle']:.3f}", fmt(r["oracle_recovery"], ".2f"), f"{rescue['pass_at_1']:.3f}",
                 fmt(rescue["recovery"], ".2f"), f"{rescue['helper_share']:.1%}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


REPORT_TABLES = ("table5", "decode_cost", "table2", "helper_share", "oracle")  # of `kvrescue-eval report`


def report_tables(folder):
    """The `kvrescue-eval report` tables REPORT_TABLES of the lm_eval runs under `folder`, in Markdown."""
    from kvrescue_eval.analysis.comparisons import analyse
    from kvrescue_eval.analysis.oracle import oracle_table
    from kvrescue_eval.analysis.runs import read_runs
    from kvrescue_eval.analysis.tables import all_tables

    analysis = analyse(read_runs([str(folder)]))
    tables = {table.name: table for table in all_tables(analysis) + [oracle_table(analysis)]}
    return "\n".join(tables[name].to_markdown() for name in REPORT_TABLES)


def render(rows):
    return grid_table(rows) + "\n\n" + oracle_table(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--budget", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--evictor", nargs="+", default=["rkv", "snapkv"])
    parser.add_argument("--limit", type=int, default=None, help="first LIMIT problems only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--render", type=Path, help="print the tables of this --json file and stop")
    parser.add_argument("--jobs", type=int, default=1, help="lm_eval runs at once, one thread each")
    parser.add_argument("--keep", type=Path, help="keep the lm_eval output folders here (for kvrescue-eval report)")
    parser.add_argument("--report", type=Path, help="write the report's tables of the grid's runs here (Markdown)")
    parser.add_argument("--reuse", action="store_true", help="with --keep: read a row's run already kept there "
                        "instead of running it again (resumes a grid, or re-renders one)")
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text())["rows"]))
        return

    def row(setting, scratch):
        label, mode, n, evictor, budget, extra = setting
        name = f"{mode}-n{n}" + (f"-{evictor}-b{budget}" if budget else "") + extra.replace(",detector=", "-det")
        results, right = run_lm_eval(mode, n, evictor, budget, extra, limit=args.limit, seed=args.seed,
                                     out=Path(scratch) / name, reuse=args.reuse and args.keep is not None)
        done = {"label": label, "mode": mode, "n": n, "evictor": evictor, "budget": budget, **summarize(results),
                "right": right}
        print(f"{label} n={n} {evictor} budget={budget}: pass@1 {done['pass_at_1']:.3f}", file=sys.stderr, flush=True)
        return done

    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(args.jobs) as pool:
        folder = args.keep or scratch
        rows = list(pool.map(lambda setting: row(setting, folder), list(grid(args.n, args.evictor, args.budget))))
        if args.report:
            args.report.write_text(report_tables(folder))
    add_comparisons(rows)
    if args.json:
        args.json.write_text(json.dumps({"limit": args.limit, "seed": args.seed, "rows": rows}, indent=1) + "\n")
    print(render(rows))


if __name__ == "__main__":
    main()
