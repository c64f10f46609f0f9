"""The process that runs a sweep's arms (`kvrescue-eval sweep`, kvrescue_eval/sweep/workers.py starts it).

    python -m kvrescue_eval.model_adapters.lm_eval.sweep_worker            # serve arms read from stdin
    python -m kvrescue_eval.model_adapters.lm_eval.sweep_worker --arm ARM  # run one arm (JSON), exit with its code

Serving: each stdin line is an arm, {"argv": [...lm_eval arguments], "log": PATH, "progress": PATH}; the arm
runs in this process (arm.run_arm) with its output (fds 1 and 2) sent to its log file and its progress to
KVRESCUE_PROGRESS_FILE, and one line answers on the original stdout: {"exit": CODE, "retire": BOOL}. The worker
retires (exits after answering) when the arm used a backend that must not run another arm in its process (vLLM,
whose engines keep memory inside a process: model_adapters/backends `must_retire`).
One arm (`--arm`) is the form for data parallel arms (every rank of a torchrun runs it) and for a fresh
process per arm; its output goes wherever the caller sent this process's.
"""

import argparse
import json
import os
import sys

from ..backends import must_retire
from .progress import PROGRESS_VARIABLE
from .arm import run_arm


def serve(commands, replies) -> None:
    for line in commands:
        if not line.strip():
            continue
        arm = json.loads(line)
        os.environ[PROGRESS_VARIABLE] = arm["progress"]
        with open(arm["log"], "ab") as log:
            code = _with_output_to(log.fileno(), lambda: run_arm(arm["argv"]))
        retire = must_retire()
        replies.write(json.dumps({"exit": code, "retire": retire}) + "\n")
        replies.flush()
        if retire:
            return


def _with_output_to(fd, call):
    """call() with this process's fds 1 and 2 pointing at fd (what lm-eval, tqdm and torch print)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        return call()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", help="one arm as JSON: {\"argv\": [...], \"progress\": PATH}")
    args = parser.parse_args(argv)
    if args.arm:
        arm = json.loads(args.arm)
        os.environ[PROGRESS_VARIABLE] = arm["progress"]
        return run_arm(arm["argv"])
    replies = os.fdopen(os.dup(1), "w")  # the answers keep the original stdout; the arms' output goes to logs,
    os.dup2(2, 1)                          # and anything printed between arms to stderr
    serve(sys.stdin, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
