"""`kvrescue-eval check`: the CI gate on recovery. Exit 0 all settings pass, 1 some fall short, 2 unusable input."""

HELP = "CI gate: exit 0 if every rescue setting meets the recovery thresholds, 1 if not, 2 on unusable input."


def add_arguments(parser):
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR",
                        help="lm-eval --output_path folders (searched recursively) or results_*.json files")
    parser.add_argument("--min-recovery", type=float, required=True, metavar="R",
                        help="minimum recovery per setting and benchmark, as a fraction (0.8 = 80%%)")
    parser.add_argument("--baseline", metavar="FILE", help="report.json of an earlier `kvrescue-eval report`")
    parser.add_argument("--max-drop", type=float, default=None, metavar="D",
                        help="allowed recovery loss against --baseline, as a fraction (0.05 = 5 points)")
    parser.add_argument("--metric", default=None,
                        help="accuracy metric of the tasks (default: each task's primary metric: exact_match_boxed, "
                             "the paper's 'boxed and correct', on the math benchmarks; pass_at_1 on kv_recall)")


def run(args):
    import sys

    from kvrescue_eval.analysis.comparisons import analyse
    from kvrescue_eval.analysis.errors import AnalysisInputError
    from kvrescue_eval.analysis.gate import check, load_baseline
    from kvrescue_eval.analysis.runs import read_runs

    if (args.baseline is None) != (args.max_drop is None):
        print("error: --baseline and --max-drop go together", file=sys.stderr)
        return 2
    if args.max_drop is not None and args.max_drop < 0:
        print(f"error: --max-drop must be >= 0, got {args.max_drop}", file=sys.stderr)
        return 2
    try:
        analysis = analyse(read_runs(args.runs, args.metric))
        baseline = load_baseline(args.baseline) if args.baseline else None
    except AnalysisInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not analysis.comparisons:
        print("error: no rescue run among the inputs, nothing to check (modes found: "
              + ", ".join(sorted({c.setting.mode for c in analysis.cells})) + ")", file=sys.stderr)
        return 2
    table, passed = check(analysis, args.min_recovery, baseline, args.max_drop or 0.0)
    print(table.to_markdown())
    failed = [row for row in table.rows if row["verdict"] != "ok"]
    total = len(table.rows)
    if failed:
        table.title, table.rows = "Settings that fell short", failed
        print(table.to_markdown())
    print(f"{'PASS' if passed else 'FAIL'}: {total - len(failed)} of {total} settings pass")
    return 0 if passed else 1
