"""`kvrescue-eval check`: the CI gate. Exit 0 all settings pass, 1 some fall short, 2 unusable input.

The criteria (analysis/gate.py): recovery, rescue above both parents by a margin, the helper share of
committed steps within a band, the base-token ratio rescue / bon. `--gate NAME` takes a named set of
thresholds (GATES: `testbed`, the kv_recall testbed's); a criterion's own option overrides it.
"""

HELP = ("CI gate: exit 0 if every rescue setting meets the gate's criteria (recovery, margin over both parents, "
        "helper share, base-token ratio), 1 if not, 2 on unusable input.")


def add_arguments(parser):
    from kvrescue_eval.analysis.gate import GATES

    parser.add_argument("runs", nargs="+", metavar="RUN_DIR",
                        help="lm-eval --output_path folders (searched recursively) or results_*.json files")
    gates = "; ".join(f"{name}: {spec.describe()}" for name, spec in GATES.items())
    parser.add_argument("--gate", choices=sorted(GATES), default=None,  # argparse %-formats help: escape %
                        help="a named set of thresholds: " + gates.replace("%", "%%"))
    parser.add_argument("--min-recovery", type=float, default=None, metavar="R",
                        help="minimum recovery per setting and benchmark, as a fraction (0.8 = 80%%)")
    parser.add_argument("--min-margin", type=float, default=None, metavar="M",
                        help="rescue must reach max(helper alone, bon) + M (needs the helper-alone run at the same N)")
    parser.add_argument("--helper-share", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                        help="bounds of the helper's share of rescue's committed steps, as fractions")
    parser.add_argument("--max-base-token-ratio", type=float, default=None, metavar="X",
                        help="maximum of rescue's mean base tokens per problem over bon's")
    parser.add_argument("--baseline", metavar="FILE", help="report.json of an earlier `kvrescue-eval report`")
    parser.add_argument("--max-drop", type=float, default=None, metavar="D",
                        help="allowed recovery loss against --baseline, as a fraction (0.05 = 5 points)")
    parser.add_argument("--json", default=None, metavar="FILE",
                        help="also write the gate's table, criteria and verdict to FILE (JSON)")
    parser.add_argument("--arms-any-scorer", action="store_true",
                        help="pair each rescue run with baseline arms whatever their scorer: a selector judged "
                             "against fixed baselines (the testbed gate's sabotaged selectors and vLLM rescue); by "
                             "default an arm that picks by a scorer (N > 1) must have the rescue's")
    parser.add_argument("--metric", default=None,
                        help="accuracy metric of the tasks (default: each task's primary metric: exact_match_boxed, "
                             "the paper's 'boxed and correct', on the math benchmarks; pass_at_1 on kv_recall)")


def run(args):
    import sys

    from kvrescue_eval.analysis.comparisons import analyse
    from kvrescue_eval.analysis.errors import AnalysisInputError
    from kvrescue_eval.analysis.gate import check, gate_spec, load_baseline
    from kvrescue_eval.analysis.runs import read_runs

    if (args.baseline is None) != (args.max_drop is None):
        print("error: --baseline and --max-drop go together", file=sys.stderr)
        return 2
    if args.max_drop is not None and args.max_drop < 0:
        print(f"error: --max-drop must be >= 0, got {args.max_drop}", file=sys.stderr)
        return 2
    try:
        spec = gate_spec(args.gate, min_recovery=args.min_recovery, min_margin=args.min_margin,
                         helper_share=tuple(args.helper_share) if args.helper_share else None,
                         max_base_token_ratio=args.max_base_token_ratio)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if spec.min_recovery is None:
        print("error: no minimum recovery: give --min-recovery R or --gate NAME", file=sys.stderr)
        return 2
    try:
        analysis = analyse(read_runs(args.runs, args.metric), any_scorer=args.arms_any_scorer)
        baseline = load_baseline(args.baseline) if args.baseline else None
    except AnalysisInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not analysis.comparisons:
        print("error: no rescue run among the inputs, nothing to check (modes found: "
              + ", ".join(sorted({c.setting.mode for c in analysis.cells})) + ")", file=sys.stderr)
        return 2
    table, passed = check(analysis, spec, baseline, args.max_drop or 0.0)
    rows = table.rows
    print(table.to_markdown())
    failed = [row for row in rows if row["verdict"] != "ok"]
    if failed:
        table.title, table.rows = "Settings that fell short", failed
        print(table.to_markdown())
    print(f"{'PASS' if passed else 'FAIL'}: {len(rows) - len(failed)} of {len(rows)} settings pass ({spec.describe()})")
    if args.json:
        import dataclasses
        import json
        from pathlib import Path

        from kvrescue_eval.analysis.atomic import write_files

        document = {"runs": [str(path) for path in args.runs], "metric": analysis.metric,
                    "criteria": dataclasses.asdict(spec), "passed": passed, "rows": rows}
        write_files({Path(args.json): json.dumps(document, indent=2) + "\n"})
    return 0 if passed else 1
