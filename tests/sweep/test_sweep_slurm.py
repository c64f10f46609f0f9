"""`kvrescue-eval sweep --launcher slurm`: the arms as jobs through submitit (docs/sweep.md, "On a Slurm cluster").

- Four arms on the kv_recall testbed as jobs of submitit's local executor (`--cluster local`: real subprocess jobs,
  two arms per job), one job killed (SIGKILL, as a scheduler's time limit kills) while its first arm has journaled
  a problem: `--status` meanwhile shows the arms running and pending with their progress, then the killed arm
  failed with its journal; the sweep run again resumes it and the report equals an uninterrupted sweep's.
- Before anything starts: without submitit, or with `--cluster slurm` where no Slurm client answers, the sweep
  stops naming what is missing and the way out; `--dry-run` prints the jobs and their sbatch options.
"""

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_subprocess_env import ENV

from kvrescue_eval.cli import main
from kvrescue_eval.sweep import state
from kvrescue_eval.sweep.arms import expand
from kvrescue_eval.sweep.spec import load

LIMIT = 2
# one problem in flight, so that a resumed arm batches as an uninterrupted one; 8 steps keep every arm short (no
# figure here depends on the answers)
SPEC = f"""
tasks: kv_recall
limit: {LIMIT}
lm_eval: {{device: cpu, log_samples: true}}
model_args: {{preset: recall-cpu, max_problems_in_flight: 1, max_steps: 8}}
recovery_arms: false
grid: {{mode: [rescue, bon], budget: [16, 32]}}
report: {{metric: pass_at_1, plots: false}}
slurm: {{arms_per_job: 2, time: 30}}
"""
SLURM = ("--launcher", "slurm", "--cluster", "local")


def command(spec, out, *extra):
    return [sys.executable, "-m", "kvrescue_eval.cli", "sweep", str(spec), "--out", str(out), "--no-progress", *extra]


def sweep(spec, out, *extra, env=ENV):
    return subprocess.run(command(spec, out, *extra), capture_output=True, text=True, env=env, cwd=spec.parent,
                          timeout=1200)


def report_of(out):
    tables = json.loads((out / "report" / "report.json").read_text())["tables"]
    markdown = re.sub(r"_\d{4}-\d{2}-\d{2}T[\d.-]+\.json", "_<date>.json",
                      (out / "report" / "report.md").read_text().replace(str(out), "OUT"))
    # the tables' padding follows their widest cell, which the folder's name changes: compare the cells
    markdown = [re.sub(r" {2,}", " ", re.sub(r"-{3,}", "---", line)) for line in markdown.splitlines()]
    return json.loads(json.dumps(tables).replace(str(out), "OUT")), markdown


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("slurm") / "recall.yaml"
    path.write_text(SPEC)
    return path


def status(spec, out):
    """`kvrescue-eval sweep SPEC --out OUT --status`, run in this process (quick): arm name -> its line."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["sweep", str(spec), "--out", str(out), "--status"]) == 0
    return arm_lines(printed.getvalue())


def arm_lines(text):
    return {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}


@pytest.mark.slow
@pytest.mark.timeout(2400)  # three sweeps of four arms, each job paying lm-eval's start-up
def test_a_job_killed_midway_resumes_to_the_uninterrupted_report(spec):
    uninterrupted = spec.parent / "uninterrupted"
    run = sweep(spec, uninterrupted, "--processes", "2")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]

    out = spec.parent / "killed"
    arms = expand(load(spec, output=out))
    first = arms[0]                                   # job 0 runs arms 0 and 1; job 1 arms 2 and 3
    process = subprocess.Popen(command(spec, out, *SLURM), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=ENV, cwd=spec.parent)
    deadline = time.monotonic() + 900
    while not re.search(r"running: 1/2 problems, \d+ steps", (during := status(spec, out)).get(first.name, "")):
        assert process.poll() is None, "the sweep ended before its first arm did a problem:\n" + process.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    job = state.record(first)["runner"]["pid"]        # the job's process (submitit's local executor)
    os.kill(job, signal.SIGKILL)                      # as a scheduler kills a job at its time limit
    assert job != process.pid
    assert during[arms[1].name].endswith("pending")   # job 0's second arm waits for its first
    assert all(re.search(r"\s(pending|running|complete)", during[arm.name]) for arm in arms[2:]), during
    deadline = time.monotonic() + 60
    while "failed: its run stopped (killed, out of time or preempted)" not in (killed := status(spec, out))[first.name]:
        assert time.monotonic() < deadline, killed
        time.sleep(0.2)
    assert killed[arms[1].name].endswith("pending")
    output, _ = process.communicate(timeout=1200)
    assert process.returncode == 1, output[-4000:]     # the killed job's arms failed, the other job's ran
    assert "FAILED" in arm_lines(output)[first.name] and "job " in arm_lines(output)[first.name], output[-4000:]

    status_now, journaled = state.status(first)
    assert status_now == "interrupted" and 1 <= journaled < LIMIT
    after = status(spec, out)
    assert f"{journaled} problem(s) in its journal, which a rerun resumes" in after[first.name], after
    assert after[arms[2].name].endswith("complete") and after[arms[3].name].endswith("complete")

    rerun = sweep(spec, out, *SLURM)
    assert rerun.returncode == 0, rerun.stdout[-4000:] + rerun.stderr[-4000:]
    lines = arm_lines(rerun.stdout)
    assert f"{journaled} problem(s) resumed from its journal" in lines[first.name]
    assert "skipped: complete" in lines[arms[2].name] and "skipped: complete" in lines[arms[3].name]
    assert report_of(out) == report_of(uninterrupted)
    assert all(line.endswith("complete") for line in status(spec, out).values())


def test_without_submitit_the_sweep_stops_before_starting_anything(spec, tmp_path):
    out = tmp_path / "out"
    blocked = ("import sys; sys.modules['submitit'] = None; from kvrescue_eval.cli import main; "
               "sys.exit(main(sys.argv[1:]))")   # an import of submitit now fails, as where it is not installed
    run = subprocess.run([sys.executable, "-c", blocked, *command(spec, out, *SLURM)[3:]], capture_output=True,
                         text=True, env=ENV, cwd=spec.parent, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "needs submitit" in run.stderr and "pip install submitit" in run.stderr and "--launcher local" in run.stderr
    assert not (out / "arms").exists()


def test_without_a_slurm_client_the_sweep_names_it_and_the_way_out(spec, tmp_path):
    out = tmp_path / "out"
    run = sweep(spec, out, "--launcher", "slurm", env={**ENV, "PATH": str(Path(sys.executable).parent)})
    assert run.returncode == 2, run.stdout + run.stderr
    assert "no Slurm client" in run.stderr and "sbatch" in run.stderr and "--cluster local" in run.stderr
    assert not (out / "arms").exists()


def test_dry_run_prints_the_jobs_and_their_sbatch_options(spec, tmp_path):
    run = sweep(spec, tmp_path / "out", "--launcher", "slurm", "--dry-run", "--partition", "gpu", "--gpus-per-arm",
                "1", "--array-parallelism", "8", "--sbatch", "account=proj", "--sbatch", "qos=high")
    assert run.returncode == 0, run.stderr
    assert "# 2 job(s) of at most 2 arm(s), through sbatch" in run.stdout
    assert ("#SBATCH --job-name=kvrescue-sweep --time=30 --array=0-1%8 --partition=gpu --gpus-per-node=1 "
            "--account=proj --qos=high") in run.stdout
    arms = [arm.name for arm in expand(load(spec, output=tmp_path / "out"))]
    assert f"# job 0: {arms[0]}, {arms[1]}" in run.stdout and f"# job 1: {arms[2]}, {arms[3]}" in run.stdout
    assert sum(line.startswith("lm_eval ") for line in run.stdout.splitlines()) == 4
