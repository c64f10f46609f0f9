"""`kvrescue-eval evictors`: every registered evictor with its options, their defaults and its reference."""

import json

HELP = "List the eviction methods (evictor=NAME in --model_args), their options with defaults, and references."


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="print one JSON object per evictor instead of text")


def describe(name: str, evictor_class: type) -> dict:
    """What `evictors` says about one evictor: its options (model_args) and defaults, its reference (the
    docstring's first paragraph), and what it needs from the cache."""
    from kvrescue_eval.eviction import evictor_options

    doc = (evictor_class.__doc__ or "").strip()
    needs = [label for attribute, label in (("observe", "per-slot state"), ("layer_budget", "layer budgets"),
                                            ("head_width", "head budgets")) if hasattr(evictor_class, attribute)]
    needs += [label for flag, label in (("NEEDS_VALUES", "values and the output projection"),
                                        ("NEEDS_PROMPT", "prompt slots")) if getattr(evictor_class, flag, False)]
    return {"name": name, "class": evictor_class.__name__, "options": evictor_options(evictor_class),
            "reference": " ".join(doc.split("\n\n")[0].split()), "needs": needs}


def run(args):
    from kvrescue_eval.eviction import EVICTORS

    rows = [describe(name, cls) for name, cls in EVICTORS.items()]
    for row in rows:
        if args.json:
            print(json.dumps(row))
            continue
        options = ", ".join(f"{key}={value!r}" for key, value in row["options"].items()) or "(no options)"
        needs = f"  [{', '.join(row['needs'])}]" if row["needs"] else ""
        print(f"{row['name']:<13} {options}{needs}\n{'':<13} {row['reference']}")
    if not args.json:
        print(f"\n{len(rows)} evictors; use one as --model_args evictor=NAME (its options are model_args too)")
    return 0
