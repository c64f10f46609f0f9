"""`kvrescue-eval leaderboard validate FILE_OR_DIR...`, `kvrescue-eval leaderboard build` (the page index.html, the
Markdown table and the plot) and
`kvrescue-eval leaderboard paper` (writes the paper's Table 5 rows as reference submissions)."""

HELP = "Validate leaderboard submissions against the schema, build the leaderboard, or write the paper's rows."


def add_arguments(parser):
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    validate = actions.add_parser("validate", help="check submission files against the schema (exit 1 if not)")
    validate.add_argument("files", nargs="+", metavar="FILE",
                          help="submission files, or folders (every *.json in them and below, as `report` reads folders)")
    build = actions.add_parser("build", help="write index.html (the page), LEADERBOARD.md and leaderboard.png/.svg "
                                             "from the submissions")
    build.add_argument("--dir", default="leaderboards",
                       help="leaderboard folder holding submissions/ (default: %(default)s)")
    build.add_argument("--no-plots", action="store_true", help="skip the plot (no matplotlib needed)")
    references = actions.add_parser("paper", help="write the KV-Rescue paper's Table 5 rows (reported by the paper, "
                                    "not reproduced here) as reference submissions into DIR/submissions")
    references.add_argument("--dir", default="leaderboards", help="leaderboard folder (default: %(default)s)")


def run(args):
    import sys
    from pathlib import Path

    from kvrescue_eval.analysis.errors import AnalysisInputError
    from kvrescue_eval.analysis.submission import load

    if args.action == "validate":
        failures = 0
        paths = []
        for given in map(Path, args.files):
            found = sorted(given.rglob("*.json")) if given.is_dir() else [given]
            if given.is_dir() and not found:
                failures += 1
                print(f"invalid: {given}: no submission (*.json) in this folder or below it", file=sys.stderr)
            paths += found
        for path in paths:
            try:
                document = load(path)
                print(f"ok: {path} ({document['name']}, {document['source']['kind']})")
            except AnalysisInputError as error:
                failures += 1
                print(f"invalid: {error}", file=sys.stderr)
        return 1 if failures else 0

    from kvrescue_eval.analysis.atomic import write_files
    from kvrescue_eval.analysis.plots import leaderboard_plot
    from kvrescue_eval.analysis.submission import leaderboard_markdown

    folder = Path(args.dir)
    if args.action == "paper":
        import json

        from kvrescue_eval.analysis.paper import reference_submissions
        from kvrescue_eval.analysis.submission import file_name, validate

        documents = reference_submissions()
        for document in documents:
            validate(document, document["name"])
        write_files({folder / "submissions" / file_name(d): json.dumps(d, indent=2) + "\n" for d in documents})
        print(f"wrote {len(documents)} reference submissions (Table 5, reported by the paper, not reproduced here) "
              f"to {folder / 'submissions'}")
        return 0
    paths = sorted((folder / "submissions").glob("*.json"))
    if not paths:
        print(f"error: no submissions in {folder / 'submissions'}", file=sys.stderr)
        return 2
    try:
        documents = [load(path) for path in paths]
    except AnalysisInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    names = [d["name"] for d in documents]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        print(f"error: duplicate submission names: {', '.join(duplicates)}", file=sys.stderr)
        return 2
    from kvrescue_eval.analysis.leaderboard_page import leaderboard_html

    files = {folder / "LEADERBOARD.md": leaderboard_markdown(documents), folder / "index.html": leaderboard_html(documents)}
    if not args.no_plots:
        files.update({folder / f"leaderboard.{fmt}": data for fmt, data in leaderboard_plot(documents).items()})
    written = write_files(files)
    print(files[folder / "LEADERBOARD.md"])
    print(f"{folder}: " + (f"wrote {', '.join(sorted(p.name for p in written))}" if written else "nothing changed"),
          file=sys.stderr)
    return 0
