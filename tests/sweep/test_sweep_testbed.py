"""`kvrescue-eval sweep` over the kv_recall testbed, as a user runs it (the console script, in subprocesses).

Two modes x two budgets x two seeds (the sweep adds the full-KV arms that recovery needs), a few problems each:
- killed (the whole process group, SIGKILL) while its second arm has journaled a problem but not finished, then
  rerun: the first arm is skipped, the second resumes from its journal, and the report equals the report of an
  uninterrupted sweep (run on two processes at once) table for table and figure for figure;
- the recovery table is complete (every rescue setting has its bon and full arms);
- `--dry-run` prints one `lm_eval` line per arm; run as a plain command, a printed line gives the samples the
  sweep's arm gave; run again after it finished (a second results file beside the first), the report of its
  folder prints the tables, the older result superseded, no "duplicate run".
Nothing here depends on the testbed's accuracy figures (issue 20 may replace the testbed).
"""

import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_subprocess_env import ENV

from kvrescue_eval.sweep import state
from kvrescue_eval.sweep.arms import expand
from kvrescue_eval.sweep.spec import load

pytestmark = pytest.mark.slow
LIMIT = 2
# one problem in flight: an interrupted arm batches as an uninterrupted one does, so they agree to the bit;
# 24 steps: an evicted best-of-N that runs on stops sooner (CI time), whatever the testbed's answers
SPEC = f"""
tasks: kv_recall
limit: {LIMIT}
lm_eval: {{device: cpu, log_samples: true}}
model_args: {{preset: recall-cpu, max_problems_in_flight: 1, max_steps: 24}}
grid: {{mode: [rescue, bon], budget: [16, 32], seed: [0, 1]}}
report: {{metric: pass_at_1}}
"""
ARMS = 2 * 2 * 2 + 2  # the grid, and one full-KV arm per seed


def kvrescue_eval():
    script = Path(sys.executable).with_name("kvrescue-eval")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "kvrescue_eval.cli"]


def sweep(spec, out, *extra, timeout=900):
    run = subprocess.run([*kvrescue_eval(), "sweep", str(spec), "--out", str(out), "--no-progress", *extra],
                         capture_output=True, text=True, env=ENV, cwd=spec.parent, timeout=timeout)
    return run


def kill_during_second_arm(spec, out):
    arms = expand(load(spec, output=out))
    second = arms[1]
    process = subprocess.Popen([*kvrescue_eval(), "sweep", str(spec), "--out", str(out), "--no-progress"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=spec.parent,
                               start_new_session=True)
    deadline = time.monotonic() + 600
    while state.journaled_problems(second) < 1:
        assert process.poll() is None, "the sweep ended before its second arm journaled a problem"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return arms


def report_of(out):
    folder = out / "report"
    tables = json.loads((folder / "report.json").read_text())["tables"]
    # the runs' file names carry lm-eval's dates and the sweep's folder: all that may differ between two sweeps
    markdown = re.sub(r"_\d{4}-\d{2}-\d{2}T[\d.-]+\.json", "_<date>.json",
                      (folder / "report.md").read_text().replace(str(out), "OUT"))
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".csv", ".svg", ".png")}
    return tables, markdown, files


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "recall.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def uninterrupted(spec):
    out = spec.parent / "uninterrupted"
    run = sweep(spec, out, "--processes", "2")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return out, run.stdout


def test_a_sweep_killed_in_its_second_arm_resumes_to_the_uninterrupted_report(spec, uninterrupted):
    out = spec.parent / "killed"
    arms = kill_during_second_arm(spec, out)
    first, second = arms[0], arms[1]
    assert state.status(first)[0] == "complete"
    status, journaled = state.status(second)
    assert status == "interrupted" and 1 <= journaled < LIMIT
    assert not (out / "report").exists()

    rerun = sweep(spec, out)
    assert rerun.returncode == 0, rerun.stdout[-4000:] + rerun.stderr[-4000:]
    lines = {line.split()[0]: line for line in rerun.stdout.splitlines() if line.startswith("  ")}
    assert "skipped: complete" in lines[first.name]
    assert f"{journaled} problem(s) resumed from its journal" in lines[second.name]
    assert f"sweep summary: {ARMS - 1} ran, 1 skipped (complete), 0 failed, of {ARMS} arms" in rerun.stdout
    assert report_of(out) == report_of(uninterrupted[0])


def test_the_recovery_table_is_complete(uninterrupted):
    out, stdout = uninterrupted
    rows = json.loads((out / "report" / "report.json").read_text())["tables"]["recovery"]["rows"]
    assert len(rows) == 2                                   # rescue at budgets 16 and 32, seeds pooled
    assert all(not row["status"].startswith("incomplete") for row in rows), rows
    assert f"sweep summary: {ARMS} ran, 0 skipped (complete), 0 failed, of {ARMS} arms" in stdout


def test_a_complete_sweep_reruns_nothing(spec, uninterrupted):
    out, _ = uninterrupted
    before = sorted(glob.glob(str(out / "arms" / "**" / "*.json"), recursive=True))
    rerun = sweep(spec, out)
    assert rerun.returncode == 0, rerun.stdout[-4000:] + rerun.stderr[-4000:]
    assert f"0 ran, {ARMS} skipped (complete)" in rerun.stdout
    assert sorted(glob.glob(str(out / "arms" / "**" / "*.json"), recursive=True)) == before


@pytest.fixture(scope="module")
def printed_command(spec, uninterrupted):
    """The `lm_eval` line that `--dry-run` prints for the sweep's first full-KV arm, run as a plain command into
    a folder of its own."""
    out, _ = uninterrupted
    dry = sweep(spec, out, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    commands = [shlex.split(line) for line in dry.stdout.splitlines() if line.startswith("lm_eval ")]
    assert len(commands) == ARMS
    full = next(c for c in commands if "mode=full" in c[c.index("--model_args") + 1])
    name = Path(full[full.index("--output_path") + 1]).stem
    own = spec.parent / "own" / f"{name}.json"
    full[full.index("--output_path") + 1] = str(own)
    run = lm_eval(full, spec.parent)
    assert run.returncode == 0, run.stderr[-4000:]
    return full, own.parent, out / "arms" / name


def lm_eval(command, cwd):
    return subprocess.run([sys.executable, "-m", "lm_eval", *command[1:]], capture_output=True, text=True, env=ENV,
                          cwd=cwd, timeout=900)


def samples(folder):
    paths = sorted(glob.glob(str(folder / "samples_kv_recall_*.jsonl")))
    return [(s["doc_id"], s["resps"], s["pass_at_1"]) for s in map(json.loads, Path(paths[-1]).read_text().splitlines())]


def test_dry_run_prints_the_lm_eval_lines_that_give_the_arms_results(printed_command):
    _, own, arm_folder = printed_command
    assert samples(own) == samples(arm_folder)


def test_rerunning_a_finished_command_then_reporting_its_folder_prints_the_tables(spec, printed_command):
    command, own, _ = printed_command
    rerun = lm_eval(command, spec.parent)                 # every problem comes from the journal
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert len(glob.glob(str(own / "*_20*.json"))) == 2    # lm-eval wrote a second results file beside the first
    report = subprocess.run([*kvrescue_eval(), "report", str(own), "--metric", "pass_at_1", "--no-plots"],
                            capture_output=True, text=True, env=ENV, cwd=spec.parent, timeout=300)
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    first = report.stdout.splitlines()[0]                 # beside the runs, said first (relative to the cwd)
    assert first.startswith(f"kvrescue-eval report: writing to {own.relative_to(spec.parent)}/kvrescue-report/")
    assert "### " in report.stdout and "Superseded results" in report.stdout and "an identical rerun" in report.stdout
    assert "duplicate" not in report.stdout + report.stderr


def test_a_failed_arm_does_not_stop_the_others_and_the_exit_code_says_so(tmp_path):
    spec = tmp_path / "failing.yaml"
    # max_steps 0 is refused when the model starts (before any model loads): that arm fails, the other runs
    spec.write_text("tasks: kv_recall\nlimit: 1\nlm_eval: {device: cpu}\n"
                    "model_args: {preset: recall-cpu, mode: full}\ngrid: {max_steps: [0, 24]}\n"
                    "report: {metric: pass_at_1}\n")
    run = sweep(spec, tmp_path / "out")
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-4000:]
    lines = {line.split()[0]: line for line in run.stdout.splitlines() if line.startswith("  ")}
    assert "FAILED (exit 1" in lines["full_max_steps-0"] and "full_max_steps-0.log" in lines["full_max_steps-0"]
    assert "ran in" in lines["full_max_steps-24"]
    assert "sweep summary: 1 ran, 0 skipped (complete), 1 failed, of 2 arms" in run.stdout
    assert "ok: kvrescue-eval report" in lines["report"]     # the report of what ran
    assert "max_steps" in (tmp_path / "out" / "logs" / "full_max_steps-0.log").read_text()
