"""A small slice of the testbed's calibration through the real `lm_eval` command line.

The table in docs/testbed.md is measured on all 200 test problems; here 16 problems keep the test short,
so the thresholds leave room for sampling noise while still separating the modes.
"""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvrescue_eval.model_adapters.testbed import WEIGHTS_DIR as _WEIGHTS
from kvrescue_eval.tasks.kv_recall.utils import passed, read_split

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (_WEIGHTS / "base" / "config.json").is_file(),
                                 reason="testbed weights not shipped yet (README, section testbed)")]
LIMIT = 16


def lm_eval(tmp_path, model_args):
    out = tmp_path / model_args.replace(",", "_").replace("=", "-")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "lm_eval", "--model", "kvrescue", "--model_args", model_args,
               "--tasks", "kv_recall", "--limit", str(LIMIT), "--device", "cpu", "--output_path", str(out),
               "--log_samples"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    results = json.loads(Path(glob.glob(str(out / "**" / "results_*.json"), recursive=True)[0]).read_text())
    samples = [json.loads(line) for line in
               Path(glob.glob(str(out / "**" / "samples_kv_recall_*.jsonl"), recursive=True)[0]).read_text().splitlines()]
    return results, samples, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recall")
    return {mode: lm_eval(tmp, f"preset=recall-cpu,mode={mode},n=4,budget=64")
            for mode in ("full", "bon", "rescue")}


def pass_at_1(run):
    return run[0]["results"]["kv_recall"]["pass_at_1,none"]


def test_samples_are_graded_by_the_definition(runs):
    docs = {doc["id"]: doc for doc in read_split("test")[:LIMIT]}
    for results, samples, _ in runs.values():
        assert len(samples) == LIMIT
        verdicts = [passed(sample["resps"][0][0], docs[sample["doc"]["id"]]["steps"]) for sample in samples]
        assert [sample["pass_at_1"] for sample in samples] == [[v] for v in verdicts]
        assert results["results"]["kv_recall"]["pass_at_1,none"] == pytest.approx(sum(verdicts) / LIMIT)


def test_eviction_forgets_and_rescue_recovers(runs):
    # docs/testbed.md at N = 4, budget 64: full near 1, bon far below, rescue recovering most of the gap.
    full, bon, rescue = (pass_at_1(runs[mode]) for mode in ("full", "bon", "rescue"))
    assert full >= 0.8
    assert bon <= full - 0.4
    assert (rescue - bon) / (full - bon) >= 0.6


def statistic(run, name):
    return run[0]["results"]["kv_recall"][f"{name},none"]


def test_evicted_best_of_n_runs_on_and_rescue_ends(runs):
    """The paper's Tables 1-3 shape: evicted best-of-N runs on past the answer, rescue ends like full KV,
    so rescue generates far fewer base tokens and degenerates less."""
    full, bon, rescue = (runs[mode] for mode in ("full", "bon", "rescue"))
    assert statistic(bon, "steps") >= 1.3 * statistic(full, "steps")
    assert statistic(rescue, "steps") <= 1.2 * statistic(full, "steps")
    assert statistic(rescue, "base_tokens") <= 0.8 * statistic(bon, "base_tokens")
    assert statistic(bon, "degenerated") > statistic(rescue, "degenerated")
    assert statistic(full, "degenerated") == 0


def test_the_ci_gate_reads_these_runs(runs, tmp_path):
    """`kvrescue-eval check` pairs the three runs into one comparison and applies the threshold."""
    folders = [str(run[2]) for run in runs.values()]
    check = [sys.executable, "-m", "kvrescue_eval.cli", "check", *folders, "--metric", "pass_at_1"]
    met = subprocess.run([*check, "--min-recovery", "0.5"], capture_output=True, text=True)
    assert met.returncode == 0, met.stdout + met.stderr
    missed = subprocess.run([*check, "--min-recovery", "1.01"], capture_output=True, text=True)
    assert missed.returncode == 1, missed.stdout + missed.stderr


def test_run_information_and_statistics(runs):
    for mode, (results, samples, _) in runs.items():
        info = results["config"]["kvrescue"]
        assert (info["preset"], info["mode"], info["n_base"]) == ("recall-cpu", mode, 4)
        assert info["budget"] == (None if mode == "full" else 64)
        assert info["totals"]["problems"] == LIMIT
        helper_steps = sum(sample["helper_steps"][0] for sample in samples)
        assert helper_steps == info["totals"]["helper_steps"]
        assert (helper_steps > 0) == (mode == "rescue")
