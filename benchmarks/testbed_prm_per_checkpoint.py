"""Which testbed figures belong to the PRM: each PRM as the scorer of recall-cpu over saved base checkpoints.

Rescue's accuracy moved from 0.670 to 0.895 across base checkpoints 50 steps apart with one PRM
(docs/results/testbed_base_stop_rule.json). This runs the arms of `testbed_base_stop_rule.py` (N 4; R-KV at
budget 80, the preset's budget then, for bon and rescue; all 200 test problems through `lm_eval`) for every pair of a base checkpoint
(`base-STEP` folders that script saves) and a PRM, with one helper, and writes one JSON:
{"prms": {name: folder}, "runs": {prm name: {step: {arm: metrics}}}}.

    python benchmarks/testbed_prm_per_checkpoint.py --checkpoints /tmp/ck --helper DIR/helper \
        --prm pinned=DIR/prm --prm edits=DIR2/prm --rescue 700,750,800,900,1000 --all-arms 850 --json OUT.json
"""

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from testbed_base_stop_rule import ARMS, run_arm


def steps_of(text: str) -> list[int]:
    return [int(step) for step in text.split(",") if step]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=Path, required=True, help="folder of base-STEP checkpoints")
    parser.add_argument("--helper", default="testbed:helper")
    parser.add_argument("--prm", action="append", required=True, help="NAME=FOLDER (repeatable)")
    parser.add_argument("--rescue", default="", help="comma-separated steps run in rescue only")
    parser.add_argument("--all-arms", default="", help="comma-separated steps run in full, bon and rescue")
    parser.add_argument("--processes", type=int, default=1, help="lm_eval runs at a time")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    prms = dict(item.split("=", 1) for item in args.prm)
    plan = {step: ["rescue"] for step in steps_of(args.rescue)} | {step: list(ARMS) for step in steps_of(args.all_arms)}
    missing = [str(args.checkpoints / f"base-{step}") for step in plan if not (args.checkpoints / f"base-{step}").is_dir()]
    if missing or not plan:
        parser.error(f"no checkpoint folder {', '.join(missing)}" if missing else "give --rescue or --all-arms steps")
    report = {"what": __doc__.splitlines()[0], "command": " ".join(sys.argv), "prms": prms, "runs": {}}
    runs = [(name, step, arm) for name in prms for step, arms in sorted(plan.items()) for arm in arms]
    with ThreadPoolExecutor(args.processes) as pool:
        running = {pool.submit(run_arm, args.checkpoints / f"base-{step}",
                               f"{ARMS[arm]},helper={args.helper},prm={prms[name]}",
                               args.checkpoints / "runs" / f"{name}-{step}-{arm}"): (name, step, arm)
                   for name, step, arm in runs}
        for done in as_completed(running):
            name, step, arm = running[done]
            report["runs"].setdefault(name, {}).setdefault(str(step), {})[arm] = done.result()
            args.json.write_text(json.dumps(report, indent=1) + "\n")  # every finished arm is kept


if __name__ == "__main__":
    main()
