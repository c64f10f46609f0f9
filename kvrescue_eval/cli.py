"""The `kvrescue-eval` console script.

Each subcommand is a module in `kvrescue_eval/commands/` with `HELP` (one line),
`add_arguments(parser)` and `run(args) -> int` (the exit code). Command modules import their
frameworks inside `run`, so `kvrescue-eval --help` stays cheap. A new subcommand is one module
plus one line in COMMANDS.
"""

import argparse
import importlib
import sys

COMMANDS = {
    "info": "kvrescue_eval.commands.info",
    "report": "kvrescue_eval.commands.report",
    "check": "kvrescue_eval.commands.check",
    "cost": "kvrescue_eval.commands.cost",
    "leaderboard": "kvrescue_eval.commands.leaderboard",
    "evictors": "kvrescue_eval.commands.evictors",
    "sweep": "kvrescue_eval.commands.sweep",
    "serve": "kvrescue_eval.commands.serve",
}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kvrescue-eval",
        description="KV-Rescue for the lm-evaluation-harness: sweeps, analysis, CI gate, cost model, leaderboards.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args._run(args)


if __name__ == "__main__":
    sys.exit(main())
