"""The testbed's calibration grid for every evictor: how much of each eviction method's loss KV-Rescue wins back.

Runs the plain `lm_eval --model kvrescue --model_args preset=recall-cpu,...` command (through the testbed's
`calibrate.run_lm_eval`) on task kv_recall: the full-KV base and the helper alone once, then for every evictor
of `kvrescue_eval.eviction.EVICTORS` evicted best-of-N (`bon`) and `rescue` at each budget, all at one N.
Writes the rows with the machine to a JSON file and prints the Markdown table of docs/eviction.md
(accuracy, recovery, base tokens per evictor); `--table FILE` prints the table again from a written file.

    OMP_NUM_THREADS=1 python benchmarks/evictor_grid.py --jobs 2 --keep runs --out docs/results/evictor_grid.json
    python benchmarks/evictor_grid.py --table docs/results/evictor_grid.json
"""

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from records import machine

from kvrescue_eval.eviction import EVICTORS
from kvrescue_eval.model_adapters.testbed.calibrate import run_lm_eval, summarize

COLUMNS = ("evictor", "budget", "bon pass@1", "rescue pass@1", "recovery", "bon step acc.", "rescue step acc.",
           "step recovery", "bon base tokens", "rescue base tokens")


def settings(evictors, budgets):
    yield "full", None, None
    yield "helper", None, None
    for evictor in evictors:
        for budget in budgets:
            yield "bon", evictor, budget
            yield "rescue", evictor, budget


def recovery(rescue, bon, full):
    return None if full == bon else (rescue - bon) / (full - bon)


def table(doc) -> str:
    rows = {(r["mode"], r["evictor"], r["budget"]): r for r in doc["rows"]}
    full = rows[("full", None, None)]
    lines = [f"N={doc['n']}, {doc['problems']} kv_recall problems per run, full-KV base: pass@1 "
             f"{full['pass_at_1']:.3f}, step accuracy {full['step_accuracy']:.3f}; helper alone: pass@1 "
             f"{rows[('helper', None, None)]['pass_at_1']:.3f}. {doc['machine']}", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for (mode, evictor, budget), bon in rows.items():
        if mode != "bon":
            continue
        rescue = rows[("rescue", evictor, budget)]
        rec = recovery(rescue["pass_at_1"], bon["pass_at_1"], full["pass_at_1"])
        step = recovery(rescue["step_accuracy"], bon["step_accuracy"], full["step_accuracy"])
        cells = (evictor, budget, f"{bon['pass_at_1']:.3f}", f"{rescue['pass_at_1']:.3f}",
                 "undefined" if rec is None else f"{rec:.2f}", f"{bon['step_accuracy']:.3f}",
                 f"{rescue['step_accuracy']:.3f}", "undefined" if step is None else f"{step:.2f}",
                 f"{bon['base_tokens']:.0f}", f"{rescue['base_tokens']:.0f}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evictors", nargs="+", default=list(EVICTORS), choices=list(EVICTORS))
    parser.add_argument("--budget", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--limit", type=int, default=None, help="first LIMIT problems only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="lm_eval runs at once, one thread each")
    parser.add_argument("--out", type=Path, help="write the rows here (JSON)")
    parser.add_argument("--table", type=Path, help="only print the table of a file written by --out")
    parser.add_argument("--keep", type=Path, help="keep the lm_eval output folders here")
    parser.add_argument("--reuse", action="store_true", help="with --keep: read a run already kept there instead "
                        "of running it again (resumes an interrupted grid)")
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0

    def row(setting, scratch):
        mode, evictor, budget = setting
        results, _ = run_lm_eval(mode, args.n, evictor, budget, "", limit=args.limit, seed=args.seed,
                                 out=Path(scratch) / f"{mode}-{evictor}-{budget}", reuse=args.reuse and bool(args.keep))
        done = {"mode": mode, "evictor": evictor, "budget": budget, **summarize(results),
                "seconds": round(float(results["total_evaluation_time_seconds"]), 1)}  # lm_eval's own, also of a reused run
        print(f"{mode} {evictor} {budget}: pass@1 {done['pass_at_1']:.3f}", file=sys.stderr, flush=True)
        return done

    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(args.jobs) as pool:
        folder = args.keep or scratch
        rows = list(pool.map(lambda s: row(s, folder), settings(args.evictors, args.budget)))
    doc = {"machine": machine(), "n": args.n, "problems": args.limit or "all", "seed": args.seed, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1))
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
