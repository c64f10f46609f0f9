"""`kvrescue-eval sweep SPEC --status`: where every arm of a sweep stands, read from its folders (the local and the
Slurm launcher write the same records, so it works for both, from any machine that sees OUT).

- pending: never started (or its folder holds another arm's run, which a rerun sets aside);
- running: started, not ended, and its runner alive (its Slurm job in squeue, or its process on this host), with
  its progress (problems done of its problems, committed steps, tokens per second);
- complete: its results are written;
- failed: it ended without results (an exit code), or its runner is gone (killed, out of time, preempted): the
  problems in its journal, which a rerun resumes, and the last lines of its log.
"""

import os
import shutil
import socket
import subprocess
from pathlib import Path

from . import state
from .view import ArmProgress

LOG_LINES = 5


def arm_status(arm, logs):
    """(state, detail lines)."""
    status, journaled = state.status(arm)
    if status == "complete":
        return "complete", []
    if status in ("new", "stale"):
        return "pending", [f"its folder holds another arm's run (a rerun sets it aside)"] if status == "stale" else []
    found = state.record(arm)
    if not found.get("failed") and _alive(found.get("runner") or {}):
        return "running", [_progress(logs / f"{arm.name}.progress.jsonl", journaled)]
    why = f"exit {found['exit']}" if found.get("failed") else "its run stopped (killed, out of time or preempted)"
    return "failed", [f"{why}; {journaled} problem(s) in its journal, which a rerun resumes",
                      *_tail(logs / f"{arm.name}.log")]


def render(arms, output):
    logs = output / "logs"
    found = [(arm, *arm_status(arm, logs)) for arm in arms]
    counts = {kind: sum(status == kind for _, status, _ in found) for kind in ("pending", "running", "complete", "failed")}
    width = max(len(arm.name) for arm in arms)
    lines = [f"sweep status ({output}/): " + ", ".join(f"{count} {kind}" for kind, count in counts.items())
             + f", of {len(arms)} arms"]
    for arm, status, details in found:
        lines.append(f"  {arm.name:<{width}}  {status}" + (f": {details[0]}" if details else ""))
        lines += [f"  {'':<{width}}    | {line}" for line in details[1:]]
    return "\n".join(lines)


def _alive(runner):
    job = runner.get("slurm_job")
    if job and shutil.which("squeue"):
        try:
            answer = subprocess.run(["squeue", "--noheader", "-j", job, "-o", "%T"], capture_output=True, text=True,
                                    timeout=60)
            return answer.returncode == 0 and bool(answer.stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            return True  # cannot tell: not called dead
    if runner.get("host") != socket.gethostname() or "pid" not in runner:
        return True  # another host's process: cannot tell from here
    try:
        os.kill(int(runner["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(int(runner["pid"]))


def _zombie(pid):
    """A killed process that its parent has not reaped yet still answers signal 0 (Linux: state Z)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _progress(path, journaled):
    progress = ArmProgress(path)
    progress.read()
    if not progress.ranks:
        return f"starting ({journaled} problem(s) in its journal)" if journaled else "starting"
    totals = progress.totals()
    return (f"{totals['done']}/{totals['problems']} problems, {totals['steps']} steps, "
            f"{totals['tok/s']:.1f} tok/s")


def _tail(path):
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return [f"(no log at {path})"]
    return [line for line in lines if line.strip()][-LOG_LINES:]
