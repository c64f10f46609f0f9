"""Crash and resume through the real `lm_eval --model kvrescue` command, in subprocesses.

A run killed with SIGKILL after some problems finished, rerun with the same command, gives the
results and samples of an uninterrupted run and generates only the problems the journal lacks; a
comparison that hangs the grader is killed, counted, and the run goes on."""

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from tiny_models import save_tiny_model  # noqa: E402

pytestmark = pytest.mark.slow
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
       "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
PROBLEMS = 8
# one problem in flight: the interrupted and the uninterrupted run batch identically, so they agree to the bit
RECALL = ["--model_args", "preset=recall-cpu,max_problems_in_flight=1", "--tasks", "kv_recall",
          "--limit", str(PROBLEMS)]


def command(out, args):
    return [sys.executable, "-m", "lm_eval", "--model", "kvrescue", *args, "--device", "cpu",
            "--output_path", str(out), "--log_samples"]


def newest(pattern):
    return max(glob.glob(pattern, recursive=True), key=os.path.getmtime)


def lm_eval(folder, args):
    folder.mkdir(exist_ok=True)
    run = subprocess.run(command(folder / "out", args), capture_output=True, text=True, env=ENV, cwd=folder,
                         timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    results = json.loads(Path(newest(str(folder / "out" / "**" / "results_*.json"))).read_text())
    samples = [json.loads(line) for line in Path(newest(str(folder / "out" / "**" / "samples_*.jsonl"))).read_text()
               .splitlines()]
    return results, sorted(samples, key=lambda s: s["doc_id"]), run.stderr


def journal_lines(folder):
    paths = glob.glob(str(folder / "out" / "kvrescue-journals" / "*.jsonl"))
    return (Path(paths[0]).read_bytes().split(b"\n"), paths[0]) if paths else ([], None)


def finished_in(lines):
    return sum(line.startswith(b'{"key"') and line.endswith(b"}") for line in lines)


def kill_after(folder, args, finished):
    """Start the command and SIGKILL it as soon as its journal holds `finished` problems."""
    folder.mkdir(exist_ok=True)
    process = subprocess.Popen(command(folder / "out", args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=ENV, cwd=folder)
    deadline = time.monotonic() + 1200
    while finished_in(journal_lines(folder)[0]) < finished:
        assert process.poll() is None, process.stderr.read().decode()[-6000:]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()
    assert process.returncode == -signal.SIGKILL


def test_a_run_killed_with_sigkill_resumes_to_the_uninterrupted_results(tmp_path):
    reference, reference_samples, _ = lm_eval(tmp_path / "reference", RECALL)

    kill_after(tmp_path / "crashed", RECALL, finished=3)
    lines, path = journal_lines(tmp_path / "crashed")
    done = finished_in(lines)
    assert 3 <= done < PROBLEMS, "the run ended before it was killed: nothing left to resume"
    assert not list((tmp_path / "crashed" / "out").glob("**/results_*.json"))   # lm-eval wrote nothing

    results, samples, stderr = lm_eval(tmp_path / "crashed", RECALL)
    assert samples == reference_samples
    assert results["results"] == reference["results"]
    info, reference_info = results["config"]["kvrescue"], reference["config"]["kvrescue"]
    assert info["totals"] == reference_info["totals"]
    assert (info["run"]["resumed"], info["run"]["generated"]) == (done, PROBLEMS - done)
    assert (reference_info["run"]["resumed"], reference_info["run"]["generated"]) == (0, PROBLEMS)
    assert f"{done} of {PROBLEMS} problems already finished" in stderr
    assert f"problems, {done} resumed:" in stderr and f"| {done}/{PROBLEMS} [" in stderr  # the bar starts at them

    assert len(glob.glob(str(tmp_path / "crashed" / "out" / "kvrescue-journals" / "*.jsonl"))) == 1


@pytest.fixture
def tiny_folder(tmp_path):
    return save_tiny_model(tmp_path / "tiny")


def test_a_hanging_comparison_is_killed_counted_and_the_run_goes_on(tmp_path, tiny_folder):
    """The answer of a journaled problem is replaced by one that hangs sympy against MATH500's first gold
    answer (3, pi/2); the rerun takes it from the journal and grades it through lm-eval."""
    args = ["--model_args", f"base={tiny_folder},helper={tiny_folder},scorer=helper-logprob,n=2,budget=16,buffer=8,"
            f"max_steps=2,max_step_tokens=8", "--tasks", "math500", "--limit", "1"]
    lm_eval(tmp_path / "run", args)
    lines, path = journal_lines(tmp_path / "run")
    entries = [json.loads(line) for line in lines if line]
    for entry in entries:
        if "key" in entry:
            entry["result"]["text"] = "\\boxed{\\left( 9^{9^{9}}, \\frac{\\pi}{2} \\right)}"
    Path(path).write_text("".join(json.dumps(entry) + "\n" for entry in entries))

    results, samples, stderr = lm_eval(tmp_path / "run", args)
    run = results["config"]["kvrescue"]["run"]
    assert (run["resumed"], run["generated"]) == (1, 0)
    assert run["grader_timeouts"] >= 1 and "killed, counted as wrong" in stderr
    assert samples[0]["exact_match"] == [0] and results["results"]["math500"]["exact_match,none"] == 0
