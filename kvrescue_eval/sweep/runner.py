"""Runs a sweep's arms over its slots: complete arms skipped, stale ones set aside, the others run (an interrupted
one resumes from its journal), each slot taking the next arm when its arm ends. A failed arm is recorded and the
others go on. Returns one Outcome per arm, in the sweep's order.
"""

import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import state
from .view import SweepView
from .workers import Worker, run_alone


@dataclass
class Outcome:
    arm: object
    status: str                  # "skipped" (complete before), "ran", "failed"
    code: int = 0
    seconds: float = 0.0
    resumed: int | None = None   # problems taken from the journal by this run
    generated: int | None = None
    log: Path | None = None
    note: str = ""

    def describe(self):
        if self.status == "skipped":
            return "skipped: complete" + (f" ({self.note})" if self.note else "")
        if self.status == "failed":
            return f"FAILED (exit {self.code}{'; ' + self.note if self.note else ''}; log {self.log})"
        done = f"ran in {self.seconds:.0f} s"
        if self.resumed:
            done += f", {self.resumed} problem(s) resumed from its journal and {self.generated} generated"
        return done + (f" ({self.note})" if self.note else "")


def plan(arms):
    """(arm, status, journaled problems) of every arm, as the sweep finds their folders."""
    return [(arm, *state.status(arm)) for arm in arms]


def prepare(arms, output):
    """(arms to run, outcomes of the complete ones, notes): complete arms are skipped and a stale arm's folder is
    set aside, whichever launcher then runs the others."""
    todo, skipped, notes = [], {}, []
    for arm, status, _ in plan(arms):
        if status == "complete":
            skipped[arm.name] = Outcome(arm, "skipped")
            continue
        if status == "stale":
            notes.append(f"{arm.name}: its folder held another arm's run (the spec changed); moved to "
                         f"{state.set_aside(arm, output)}")
        todo.append(arm)
    return todo, skipped, notes


def run(arms, slots, output, *, fresh_process=False, show_progress=True):
    logs = Path(output) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pending, outcomes, notes = prepare(arms, output)
    todo = queue.Queue()
    for arm in pending:
        todo.put(arm)
    used = slots[:max(1, min(len(slots), todo.qsize()))]
    view = SweepView(len(arms), len(outcomes), [slot.label for slot in used], disable=not show_progress)
    for line in notes:
        view.note(line)
    events = queue.Queue()
    stop = threading.Event()

    def slot_thread(slot):
        serve_arms(slot, lambda: None if stop.is_set() else _next(todo), logs, fresh_process,
                   lambda kind, arm, payload: events.put((kind, slot, arm, payload)), stop)

    threads = [threading.Thread(target=slot_thread, args=(slot,), daemon=True) for slot in used]
    for thread in threads:
        thread.start()
    try:
        while any(thread.is_alive() for thread in threads) or not events.empty():
            _drain(events, view, outcomes)
            view.poll()
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop.set()
        view.note("interrupted: stopping the running arms (rerun the same sweep to resume them)")
        raise
    finally:
        view.close()
    return [outcomes[arm.name] for arm in arms if arm.name in outcomes]


def _next(todo):
    try:
        return todo.get_nowait()
    except queue.Empty:
        return None


def _drain(events, view, outcomes):
    while True:
        try:
            kind, slot, arm, payload = events.get_nowait()
        except queue.Empty:
            return
        if kind == "start":
            view.started(slot.label, arm.name, payload)
            continue
        outcomes[arm.name] = payload
        view.ended(slot.label, f"{arm.name} [{slot.label}]: {payload.describe()}",
                   "failed" if payload.status == "failed" else "ran")


def serve_arms(slot, next_arm, logs, fresh_process, report, stop=None):
    """Run arm after arm (`next_arm()` until None) on one slot: in one serving worker, a new one after a worker
    retires, or a process per arm; report("start", arm, progress file) and report("end", arm, Outcome)."""
    worker = None
    try:
        while (arm := next_arm()) is not None:
            log, progress = logs / f"{arm.name}.log", logs / f"{arm.name}.progress.jsonl"
            progress.unlink(missing_ok=True)
            report("start", arm, progress)
            started = state.mark_started(arm)
            if fresh_process or slot.processes > 1:
                code = run_alone(slot, arm, log, progress)
            else:
                worker = worker or Worker(slot, logs / f"worker-{slot.label.replace(' ', '-')}.log")
                code, gone = worker.run(arm, log, progress)
                worker = None if gone else worker
            report("end", arm, _outcome(arm, code, started, log))
    finally:
        if worker is not None:
            if stop is not None and stop.is_set():
                worker.kill()
            else:
                worker.close()


def _outcome(arm, code, started, log):
    seconds = time.time() - started
    results = state.mark_finished(arm, started, code)
    if results is None:
        return Outcome(arm, "failed", code or 1, seconds, log=log,
                       note="" if code else "lm-eval wrote no results file")
    resumed, generated = state.run_counts(results)
    return Outcome(arm, "ran", 0, seconds, resumed, generated, log)
