"""`kvrescue-eval report`: tables, recovery, plots and (optionally) leaderboard submissions from lm-eval output."""

HELP = "Tables (Table 5/1/2 layouts), recovery, Figures 3, 5 and 6, and submissions from lm-eval output folders."


DEFAULT_FOLDER = "kvrescue-report"


def default_out(runs):
    """kvrescue-report/ beside the runs: inside the one folder given, or in the deepest folder holding them all."""
    import os
    from pathlib import Path

    folders = [Path(p) if Path(p).is_dir() else Path(p).parent for p in runs]
    return Path(os.path.commonpath([str(f.resolve()) for f in folders])) / DEFAULT_FOLDER


def _relative(path):
    from pathlib import Path

    try:
        return Path(path).resolve().relative_to(Path.cwd())
    except ValueError:
        return Path(path)


def add_arguments(parser):
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR",
                        help="lm-eval --output_path folders (searched recursively) or results_*.json files")
    parser.add_argument("--out", default=None,
                        help=f"output folder (default: {DEFAULT_FOLDER}/ beside the runs: in RUN_DIR, or in the "
                             "folder that holds all the RUN_DIRs)")
    parser.add_argument("--metric", default=None,
                        help="accuracy metric of the tasks, used by recovery and the Table 5 layout (default: each "
                             "task's primary metric: exact_match_boxed, the paper's 'boxed and correct', on the math "
                             "benchmarks; pass_at_1 on the kv_recall testbed)")
    parser.add_argument("--arms-any-scorer", action="store_true",
                        help="pair each rescue run with baseline arms whatever their scorer: a selector judged "
                             "against fixed baselines (the testbed gate's sabotaged selectors and vLLM rescue); by "
                             "default an arm that picks by a scorer (N > 1) must have the rescue's")
    parser.add_argument("--reference", choices=["paper"], default=None,
                        help="also print our values beside the KV-Rescue paper's (Table 5, recovery, Tables 1 and 2)")
    parser.add_argument("--no-plots", action="store_true", help="skip Figures 3, 5 and 6 (no matplotlib needed)")
    parser.add_argument("--submission", action="store_true",
                        help="also write one leaderboard submission per setting (needs --log_samples output)")
    parser.add_argument("--submissions-dir", default=None,
                        help="where submissions go (default: OUT/submissions; e.g. leaderboards/submissions)")


def _superseded_note(analysis):
    if not analysis.superseded:
        return []
    return ["Superseded results (an older result of the same setting and seed; the newest counts): "
            + "; ".join(item.describe() for item in analysis.superseded), ""]


def _not_pooled_note(analysis):
    if not analysis.not_pooled:
        return []
    return ["Settings that look alike but were run differently (separate rows, column `variant`): "
            + "; ".join(analysis.not_pooled), ""]


def _partial_runs_note(runs):
    partial = [run for run in runs if run.limit is not None]
    if not partial:
        return []
    return ["Partial runs (lm_eval --limit; not the whole test set, not comparable with published numbers): "
            + ", ".join(f"{run.path} (--limit {run.limit})" for run in partial), ""]


def run(args):
    import json
    import sys
    from pathlib import Path

    from kvrescue_eval.analysis.atomic import write_files
    from kvrescue_eval.analysis.candidate_histograms import (candidate_histograms, candidate_table,
                                                               histogram_data)
    from kvrescue_eval.analysis.comparisons import analyse
    from kvrescue_eval.analysis.errors import AnalysisInputError
    from kvrescue_eval.analysis.oracle import oracle_table
    from kvrescue_eval.analysis.runs import read_runs
    from kvrescue_eval.analysis.tables import all_tables

    out = Path(args.out) if args.out else _relative(default_out(args.runs))
    print(f"kvrescue-eval report: writing to {out}/" + ("" if args.out else " (beside the runs; --out DIR to change)"))
    try:
        runs = read_runs(args.runs, args.metric)
        analysis = analyse(runs, any_scorer=args.arms_any_scorer)
        histograms = candidate_histograms(runs)  # Fig. 3: runs whose samples hold base-candidate records
        tables = all_tables(analysis) + [oracle_table(analysis), candidate_table(histograms)]  # Fig. 1(a), Fig. 3
        if args.reference == "paper":
            from kvrescue_eval.analysis.paper_comparison import paper_tables
            tables += paper_tables(analysis)
        files = {}
        submissions = []
        if args.submission:
            from kvrescue_eval.analysis.submission import build_submissions, file_name
            target = Path(args.submissions_dir) if args.submissions_dir else out / "submissions"
            submissions = build_submissions(analysis)
            files.update({target / file_name(doc): json.dumps(doc, indent=2) + "\n" for doc in submissions})
    except AnalysisInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    markdown = "\n".join(["# kvrescue-eval report", "",
                          f"{len(runs)} run(s): " + ", ".join(str(r.path) for r in runs), "",
                          f"Accuracy metric: {analysis.metric}. ± is the population std (ddof 0) over seeds.", ""]
                         + _partial_runs_note(runs) + _superseded_note(analysis) + _not_pooled_note(analysis)
                         + [table.to_markdown() for table in tables if table.rows])
    files[out / "report.md"] = markdown
    files[out / "report.json"] = json.dumps(
        {"runs": [str(r.path) for r in runs], "metric": analysis.metric,
         "tables": {t.name: t.to_json() for t in tables}}, indent=2) + "\n"
    files.update({out / f"{table.name}.csv": table.to_csv() for table in tables})
    if histograms:
        files[out / "figure3.json"] = json.dumps(histogram_data(histograms)) + "\n"
    if not args.no_plots:
        from kvrescue_eval.analysis.plots import figure3, figure5, figure6
        figures = [("figure5", figure5(analysis)), ("figure6", figure6(analysis))]
        figures += [("figure3", figure3(histograms))] if histograms else []
        for name, rendered in figures:
            files.update({out / f"{name}.{fmt}": data for fmt, data in rendered.items()})
    written = write_files(files)
    print(markdown)
    unchanged = len(files) - len(written)
    print(f"written: {', '.join(sorted(str(p) for p in written)) or 'nothing'}"
          + (f" ({unchanged} file(s) unchanged)" if unchanged else ""), file=sys.stderr)
    return 0
