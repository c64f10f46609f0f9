"""`kvrescue-eval sweep` over the kv_recall testbed, as a user runs it (the console script, in subprocesses).

Two modes x two budgets x two seeds (the sweep adds the full-KV arms that recovery needs), a few problems each:
- killed (the whole process group, SIGKILL) while its second arm has journaled a problem but not finished, then
  rerun: the first arm is skipped, the second resumes from its journal, and the report equals the report of an
  uninterrupted sweep (run on two processes at once) table for table and figure for figure;
- the recovery table is complete (every rescue setting has its bon and full arms);
- `--dry-run` prints one `lm_eval` line per arm; run as a plain command, a printed line gives the samples the
  sweep's arm gave.
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

from kvrescue_eval.sweep import state
from kvrescue_eval.sweep.arms import expand
from kvrescue_eval.sweep.spec import load

pytestmark = pytest.mark.slow
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
       "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
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


def test_dry_run_prints_the_lm_eval_lines_that_give_the_arms_results(spec, uninterrupted, tmp_path):
    out, _ = uninterrupted
    dry = sweep(spec, out, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    commands = [shlex.split(line) for line in dry.stdout.splitlines() if line.startswith("lm_eval ")]
    assert len(commands) == ARMS
    full = next(c for c in commands if "mode=full" in c[c.index("--model_args") + 1])
    name = Path(full[full.index("--output_path") + 1]).stem
    own = tmp_path / "own" / f"{name}.json"
    full[full.index("--output_path") + 1] = str(own)
    run = subprocess.run([sys.executable, "-m", "lm_eval", *full[1:]], capture_output=True, text=True, env=ENV,
                         cwd=spec.parent, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]

    def samples(folder):
        (path,) = glob.glob(str(folder / "samples_kv_recall_*.jsonl"))
        return [(s["doc_id"], s["resps"], s["pass_at_1"]) for s in map(json.loads, Path(path).read_text().splitlines())]

    assert samples(own.parent) == samples(out / "arms" / name)
