"""The tables of docs/testbed.md's calibration grid from its committed results file (docs/results/testbed_grid.json).

The grid itself is the sweep spec `testbed-grid` (kvrescue_eval/sweep/testbed-grid.yaml): `kvrescue-eval sweep
testbed-grid` runs it, and its report's tables (`ablation`: every run's pass@1, step accuracy, steps, base and helper
tokens, helper share, degeneration and early-exit rates, a rescue run's recovery; `oracle`: Fig. 1(a)) hold every
figure of the tables below. The results file was written by the grid's earlier runner (the same lm_eval runs); this
renders it until the grid is rerun through the sweep (hours on a CPU):

    python -m kvrescue_eval.model_adapters.testbed.calibrate docs/results/testbed_grid.json
"""

import argparse
import json
from pathlib import Path

from kvrescue_eval.analysis.markdown import markdown_table


COLUMNS = ("N", "evictor", "budget", "run", "pass@1", "step acc.", "recovery", "steps", "base tokens",
           "helper tokens", "helper share", "degeneration", "early exits")


def fmt(value, spec):
    return "" if value is None else format(value, spec)


def grid_table(rows):
    lines = []
    for r in rows:
        cells = (r["n"], r["evictor"] or "", r["budget"] or "full", r["label"], f"{r['pass_at_1']:.3f}",
                 f"{r['step_accuracy']:.3f}", fmt(r.get("recovery"), ".2f"), f"{r['steps']:.1f}",
                 f"{r['base_tokens']:.0f}", f"{r['helper_tokens']:.0f}", f"{r['helper_share']:.1%}",
                 f"{r['degeneration_rate']:.1%}", f"{r['early_exit_rate']:.1%}")
        lines.append(cells)
    return markdown_table(COLUMNS, lines)


def oracle_table(rows):
    """Fig. 1(a) beside KV-Rescue, per setting: the errors are complementary when the oracle recovers much."""
    by = {(r["label"], r["n"], r["evictor"], r["budget"]): r for r in rows}
    head = ("N", "evictor", "budget", "full", "helper alone", "bon", "oracle (bon or helper)", "oracle recovery",
            "rescue", "rescue recovery", "rescue helper share")
    lines = []
    for r in rows:
        if r["label"] != "bon":
            continue
        key = (r["n"], r["evictor"], r["budget"])
        full, helper, rescue = by[("full", r["n"], None, None)], by[("helper", r["n"], None, None)], by[("rescue", *key)]
        cells = (*key, f"{full['pass_at_1']:.3f}", f"{helper['pass_at_1']:.3f}", f"{r['pass_at_1']:.3f}",
                 f"{r['oracle']:.3f}", fmt(r["oracle_recovery"], ".2f"), f"{rescue['pass_at_1']:.3f}",
                 fmt(rescue["recovery"], ".2f"), f"{rescue['helper_share']:.1%}")
        lines.append(cells)
    return markdown_table(head, lines)


def render(rows):
    return grid_table(rows) + "\n\n" + oracle_table(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a results file of the grid (docs/results/testbed_grid.json)")
    print(render(json.loads(parser.parse_args(argv).results.read_text())["rows"]))


if __name__ == "__main__":
    main()
