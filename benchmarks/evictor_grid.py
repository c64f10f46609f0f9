"""docs/eviction.md's table of every evictor on the testbed, from its committed results file (docs/results/evictor_grid.json).

The grid itself is the sweep spec `evictor-grid` (kvrescue_eval/sweep/evictor-grid.yaml): `kvrescue-eval sweep
evictor-grid` runs it, and its report's `by_evictor` table holds every figure of the table below (bon and rescue
pass@1, recovery, step accuracy, step recovery, base tokens per problem). The results file was written by the
grid's earlier runner (the same lm_eval runs); this renders it until the grid is rerun through the sweep:

    python benchmarks/evictor_grid.py docs/results/evictor_grid.json
"""

import argparse
import json
import sys
from pathlib import Path

from kvrescue_eval.analysis.markdown import markdown_table
from kvrescue_eval.analysis.recovery import recovery

COLUMNS = ("evictor", "budget", "bon pass@1", "rescue pass@1", "recovery", "bon step acc.", "rescue step acc.",
           "step recovery", "bon base tokens", "rescue base tokens")


def table(doc) -> str:
    rows = {(r["mode"], r["evictor"], r["budget"]): r for r in doc["rows"]}
    full = rows[("full", None, None)]
    lines = [f"N={doc['n']}, {doc['problems']} kv_recall problems per run, full-KV base: pass@1 "
             f"{full['pass_at_1']:.3f}, step accuracy {full['step_accuracy']:.3f}; helper alone: pass@1 "
             f"{rows[('helper', None, None)]['pass_at_1']:.3f}. {doc['machine']}", ""]
    cells = []
    for (mode, evictor, budget), bon in rows.items():
        if mode != "bon":
            continue
        rescue = rows[("rescue", evictor, budget)]
        rec = recovery(rescue=rescue["pass_at_1"], bon=bon["pass_at_1"], full=full["pass_at_1"])
        step = recovery(rescue=rescue["step_accuracy"], bon=bon["step_accuracy"], full=full["step_accuracy"])
        row = (evictor, budget, f"{bon['pass_at_1']:.3f}", f"{rescue['pass_at_1']:.3f}",
                 "undefined" if rec is None else f"{rec:.2f}", f"{bon['step_accuracy']:.3f}",
                 f"{rescue['step_accuracy']:.3f}", "undefined" if step is None else f"{step:.2f}",
                 f"{bon['base_tokens']:.0f}", f"{rescue['base_tokens']:.0f}")
        cells.append(row)
    return "\n".join(lines + [markdown_table(COLUMNS, cells)])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a results file of the grid (docs/results/evictor_grid.json)")
    print(table(json.loads(parser.parse_args(argv).results.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
