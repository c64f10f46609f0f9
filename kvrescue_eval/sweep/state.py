"""Where an arm stands, from its folder: complete, interrupted (its journal holds finished problems), stale, new.

The sweep writes `OUT/arms/NAME/sweep-arm.json` when it starts an arm ({"arm": what it runs, "started"}) and
completes it when lm-eval has written the arm's results ({"finished", "results": file name}). So:
- complete: the record names this very arm (its model_args, tasks and options) and its results file exists;
  the sweep skips it;
- interrupted: the record names this arm but it never finished; rerunning the same command resumes it from
  its journal (`NAME/kvrescue-journals/`, docs/resume.md), whose finished problems are counted here;
- stale: the record names another arm (the spec changed its fixed settings): the folder is moved, whole, to
  OUT/superseded/NAME-<its start>/ (nothing is deleted), so that the report does not mix the two;
- new: no record (an empty folder, or files the sweep did not write, which stay).
"""

import json
import os
import shutil
import socket
import time
from pathlib import Path

from kvrescue_eval.analysis.atomic import write_files

RECORD = "sweep-arm.json"
RESULTS_GLOB = "{name}_*.json"


def identity(arm):
    """What makes an arm this arm: everything in its command but where it writes."""
    return {"model_args": [list(pair) for pair in arm.model_args], "tasks": arm.tasks, "options": list(arm.options)}


def _record(arm):
    path = arm.folder / RECORD
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def status(arm):
    """("complete" | "interrupted" | "stale" | "new", finished problems in its journals)."""
    record = _record(arm)
    if record is None:
        return "new", journaled_problems(arm)
    if record.get("arm") != identity(arm):
        return "stale", 0
    results = record.get("results")
    if record.get("finished") and results and (arm.folder / results).is_file():
        return "complete", journaled_problems(arm)
    return "interrupted", journaled_problems(arm)


def journaled_problems(arm):
    """Finished problems in the arm's journals (data-parallel ranks keep one journal each)."""
    count = 0
    for journal in sorted((arm.folder / "kvrescue-journals").glob("*.jsonl")):
        with open(journal, "rb") as handle:
            count += sum(1 for line in handle if line.startswith(b'{"key"'))
    return count


def set_aside(arm, output):
    """Move a stale arm's folder out of the arms (to OUT/superseded/); returns where it went."""
    record = _record(arm) or {}
    stamp = str(record.get("started", "unknown")).replace(":", "-")
    target = Path(output) / "superseded" / f"{arm.name}-{stamp}"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(arm.folder), str(target))
    return target


def runner():
    """Who runs an arm, for `--status`: this process on this host, and the Slurm job when under Slurm."""
    found = {"host": socket.gethostname(), "pid": os.getpid()}
    if os.environ.get("SLURM_JOB_ID"):
        found["slurm_job"] = os.environ.get("SLURM_ARRAY_JOB_ID", os.environ["SLURM_JOB_ID"]) + (
            f"_{os.environ['SLURM_ARRAY_TASK_ID']}" if os.environ.get("SLURM_ARRAY_TASK_ID") else "")
    return found


def mark_started(arm):
    arm.folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    write_files({arm.folder / RECORD: json.dumps({"arm": identity(arm), "command": arm.command(),
                                                 "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                                 "runner": runner()}, indent=1) + "\n"})
    return started


def mark_finished(arm, started, code=0):
    """Record the results file lm-eval wrote for this run of the arm (the newest since it started); None when
    it wrote none or the run failed (then the arm did not complete, and the record keeps the exit code)."""
    written = [p for p in arm.folder.glob(RESULTS_GLOB.format(name=arm.name)) if p.stat().st_mtime >= started - 1]
    record = _record(arm) or {"arm": identity(arm)}
    if code != 0 or not written:
        record.update(failed=time.strftime("%Y-%m-%dT%H:%M:%S"), exit=code or 1)
        write_files({arm.folder / RECORD: json.dumps(record, indent=1) + "\n"})
        return None
    results = max(written, key=lambda p: p.stat().st_mtime)
    record.update(finished=time.strftime("%Y-%m-%dT%H:%M:%S"), results=results.name)
    write_files({arm.folder / RECORD: json.dumps(record, indent=1) + "\n"})
    return results


def record(arm):
    """The arm's record as the sweep wrote it (None: never started)."""
    return _record(arm)


def run_counts(results_path):
    """(problems resumed from the journal, problems generated) as the run's results record them."""
    try:
        run = json.loads(Path(results_path).read_text(encoding="utf-8"))["config"]["kvrescue"]["run"]
        return int(run["resumed"]), int(run["generated"])
    except (OSError, KeyError, TypeError, ValueError):
        return None, None
