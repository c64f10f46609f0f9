"""`kvrescue-eval cost`: the decode cost model of the paper's appendix D."""

HELP = "KV memory, decode FLOPs, eviction crossover and helper fraction from model config.json files."


def add_arguments(parser):
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="the base model: config.json (file or folder), a bundled name (qwen2.5-math-1.5b, -7b, "
                             "-72b) or its hub id (e.g. Qwen/Qwen2.5-Math-7B-Instruct, as in the presets); or --base")
    parser.add_argument("--base", metavar="CONFIG", help="the base model, as MODEL (give one of them)")
    parser.add_argument("--helper", metavar="CONFIG", help="the helper's config, same forms as --base")
    parser.add_argument("--budget", type=int, required=True, metavar="B", help="eviction budget in slots")
    parser.add_argument("--buffer", type=int, default=128, help="slots allowed above B before compressing (%(default)s)")
    parser.add_argument("--n", type=int, default=8, help="candidates per step (%(default)s)")
    parser.add_argument("--context", type=int, default=4096, metavar="L", help="context length (%(default)s)")
    parser.add_argument("--alpha", type=float, default=None,
                        help="eviction overhead for the crossover (default: the paper's measured 2.9)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args):
    import json
    import sys

    from kvrescue_eval.analysis.cost import CostReport, load_shape
    from kvrescue_eval.analysis.errors import AnalysisInputError

    if (args.model is None) == (args.base is None):
        print("error: name the base model once: as MODEL (kvrescue-eval cost Qwen/Qwen2.5-Math-7B-Instruct ...) "
              "or as --base", file=sys.stderr)
        return 2
    args.base = args.base or args.model
    for name in ("budget", "n", "context"):
        if getattr(args, name) < 1:
            print(f"error: --{name} must be a positive integer, got {getattr(args, name)}", file=sys.stderr)
            return 2
    from kvrescue_eval.analysis.cost import PAPER_ALPHA

    alpha = PAPER_ALPHA if args.alpha is None else args.alpha
    if args.buffer < 0 or alpha < 0:
        print("error: --buffer and --alpha must be >= 0", file=sys.stderr)
        return 2
    try:
        base = load_shape(args.base)
        helper = load_shape(args.helper) if args.helper else None
    except AnalysisInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report = CostReport(base, helper, args.budget, args.buffer, args.n, args.context, alpha)
    rows = report.rows()
    if args.json:
        print(json.dumps([{"quantity": q, "value": v, "unit": u} for q, v, u in rows], indent=2))
        return 0
    print(f"alpha = {alpha}: " + ("the paper's measured eviction overhead (pass --alpha to change it)"
                                   if args.alpha is None else "given by --alpha"))
    width = max(len(q) for q, _, _ in rows)
    for quantity, value, unit in rows:
        text = f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"
        print(f"{quantity:<{width}}  {text:>12} {unit}")
    return 0
