"""The Slurm launcher (`kvrescue-eval sweep --launcher slurm`): the sweep's arms as jobs, through submitit.

- One job per arm, or `arms_per_job` arms run one after the other in one job (one serving worker, so lm-eval's
  start-up is paid once per job); the jobs are one job array (at most `array_parallelism` at once).
- `--cluster slurm` (the default) submits with sbatch; `--cluster local` runs the same jobs on this machine through
  submitit's local executor (real subprocesses: one machine without Slurm, and the tests).
- The options (partition, GPUs per arm, time limit in minutes, array parallelism, arms per job, extra sbatch
  options) come from the spec's `slurm:` block, then the command line.
- The folder OUT is shared with the jobs (a cluster's shared filesystem): each job writes its arms' records,
  journals and logs there as the local launcher does, so a job killed by the scheduler (time limit, preemption)
  leaves an interrupted arm that resumes from its journal when the sweep is run again.
Nothing is submitted unless submitit imports and, for `--cluster slurm`, a Slurm client answers (`require`).
"""

import shutil
import subprocess
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from . import state
from .runner import Outcome, prepare, serve_arms
from .slots import Slot
from .view import SweepView

CLUSTERS = ("slurm", "local")


class LauncherError(RuntimeError):
    """What the launcher lacks and the way out; the sweep stops before starting anything."""


@dataclass(frozen=True)
class SlurmOptions:
    cluster: str = "slurm"
    partition: str | None = None
    gpus_per_arm: int = 0
    time: int = 240                  # minutes, Slurm's --time
    array_parallelism: int = 256     # jobs of the array at once
    arms_per_job: int = 1
    sbatch: dict = field(default_factory=dict)  # other sbatch options: {"account": "x"} is --account=x

    def __post_init__(self):
        if self.cluster not in CLUSTERS:
            raise ValueError(f"--cluster {self.cluster!r} is invalid; valid: {', '.join(CLUSTERS)}")
        for name in ("time", "array_parallelism", "arms_per_job"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"slurm {name}={getattr(self, name)!r} is invalid; valid: an integer >= 1")
        if not isinstance(self.gpus_per_arm, int) or self.gpus_per_arm < 0:
            raise ValueError(f"slurm gpus_per_arm={self.gpus_per_arm!r} is invalid; valid: an integer >= 0")

    def sbatch_options(self, jobs):
        """The job array's sbatch options, as sbatch reads them."""
        found = {"job-name": "kvrescue-sweep", "time": self.time, "array": f"0-{jobs - 1}%{self.array_parallelism}"}
        if self.partition:
            found["partition"] = self.partition
        if self.gpus_per_arm:
            found["gpus-per-node"] = self.gpus_per_arm
        return {**found, **self.sbatch}


def options(spec_block, **given):
    """The spec's `slurm:` block with the command line's options (those given, not None) over it."""
    names = {f.name for f in fields(SlurmOptions)}
    merged = {**(spec_block or {}), **{k: v for k, v in given.items() if v is not None and v != {}}}
    if "sbatch" in merged:
        merged["sbatch"] = {**(spec_block or {}).get("sbatch", {}), **given.get("sbatch", {})}
    unknown = sorted(set(merged) - names)
    if unknown:
        raise ValueError(f"unknown slurm option(s) {unknown}; valid: {', '.join(sorted(names))}")
    return SlurmOptions(**merged)


def require(cluster):
    """LauncherError unless the jobs can be started: submitit importable, and a Slurm client answering."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise LauncherError("--launcher slurm needs submitit, which is not installed: pip install submitit "
                            "(or pip install 'kvrescue-eval[slurm]'), or run the sweep with --launcher local") from None
    if cluster != "slurm":
        return
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        raise LauncherError("--cluster slurm: no Slurm client here (sbatch and squeue not on PATH): run the sweep on "
                            "a Slurm login node, or --cluster local to run the same jobs on this machine through "
                            "submitit's local executor")
    try:
        answer = subprocess.run(["squeue", "--noheader", "--me"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LauncherError(f"--cluster slurm: squeue did not answer ({error}): check the Slurm controller, "
                            "or --cluster local") from None
    if answer.returncode != 0:
        last = (answer.stderr.strip().splitlines() or ["no message"])[-1]
        raise LauncherError(f"--cluster slurm: squeue failed ({last}): check the Slurm controller, or --cluster local")


def packs(arms, per_job):
    return [arms[i:i + per_job] for i in range(0, len(arms), per_job)]


def run_job(arms, logs, fresh_process):
    """One job: its arms one after the other (a complete one, from an earlier attempt, is skipped)."""
    outcomes = []
    pending = iter([arm for arm in arms if state.status(arm)[0] != "complete"])
    serve_arms(Slot("job"), lambda: next(pending, None), Path(logs), fresh_process,
               lambda kind, arm, payload: outcomes.append(payload) if kind == "end" else None)
    return outcomes


def executor(folder, opts, jobs):
    import submitit

    chosen = submitit.AutoExecutor(folder=folder, cluster=opts.cluster)
    sbatch = opts.sbatch_options(jobs)
    chosen.update_parameters(name=sbatch.pop("job-name"), timeout_min=sbatch.pop("time"),
                             slurm_array_parallelism=opts.array_parallelism,
                             **({"gpus_per_node": opts.gpus_per_arm} if opts.gpus_per_arm else {}),
                             **({"slurm_partition": opts.partition} if opts.partition else {}),
                             slurm_additional_parameters={k.replace("-", "_"): v for k, v in opts.sbatch.items()})
    return chosen


def run(arms, output, opts, *, fresh_process=False, show_progress=True):
    """Submit the arms that are not complete, wait for their jobs, and return one Outcome per arm."""
    logs = Path(output) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pending, outcomes, notes = prepare(arms, output)
    groups = packs(pending, opts.arms_per_job)
    jobs = []
    if groups:
        chosen = executor(Path(output) / "slurm" / "%j", opts, len(groups))
        with chosen.batch():
            jobs = [chosen.submit(run_job, group, str(logs), fresh_process) for group in groups]
    view = SweepView(len(arms), len(outcomes), [f"job {job.job_id}" for job in jobs], disable=not show_progress)
    for line in notes:
        view.note(line)
    for job, group in zip(jobs, groups):
        view.note(f"job {job.job_id}: {', '.join(arm.name for arm in group)}")
    waiting = dict(zip((job.job_id for job in jobs), zip(jobs, groups)))
    shown = {}
    try:
        while waiting:
            for job_id, (job, group) in list(waiting.items()):
                label = f"job {job_id}"
                current = _running_arm(group)
                if current is not None and shown.get(label) != current.name:
                    shown[label] = current.name
                    view.started(label, current.name, logs / f"{current.name}.progress.jsonl")
                if job.done():
                    del waiting[job_id]
                    for outcome in _job_outcomes(job, group, logs):
                        outcomes[outcome.arm.name] = outcome
                        view.ended(label, f"{outcome.arm.name} [{label}]: {outcome.describe()}",
                                   "failed" if outcome.status == "failed" else "ran")
            view.poll()
            time.sleep(0.5)
    except KeyboardInterrupt:
        view.note("interrupted: the submitted jobs go on (cancel them with scancel); rerun the same sweep to "
                  "collect or resume them")
        raise
    finally:
        view.close()
    return [outcomes[arm.name] for arm in arms if arm.name in outcomes]


def _running_arm(group):
    for arm in group:
        found = state.record(arm)
        if found and not found.get("finished") and not found.get("failed"):
            return arm
    return None


def _job_outcomes(job, group, logs):
    """The job's outcomes; arms it did not finish (killed, out of time) are failed, their journals kept."""
    try:
        done = {outcome.arm.name: outcome for outcome in job.result()}
        why = ""
    except Exception as error:  # noqa: BLE001 - submitit's UncompletedJobError, FailedJobError, ...
        done, why = {}, str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    found = []
    for arm in group:
        if arm.name in done:
            found.append(done[arm.name])
        elif state.status(arm)[0] == "complete":
            found.append(Outcome(arm, "ran", note=f"job {job.job_id}"))
        else:
            found.append(Outcome(arm, "failed", 1, log=logs / f"{arm.name}.log",
                                 note=f"job {job.job_id} ended before the arm: {job.state}; {why}".rstrip("; ")))
    return found
