"""Data parallel over problems: two CPU processes under `torchrun` (gloo) give every document the same
result as one process, and lm-eval gathers all of them (seeds come from the problem, never the rank)."""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from tiny_models import tiny_model, tiny_tokenizer  # noqa: E402

from kvrescue_eval.model_adapters.testbed import WEIGHTS_DIR  # noqa: E402

pytestmark = pytest.mark.slow


def lm_eval(out, model_args, task, limit, processes):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
                if processes > 1 else [sys.executable])
    command = [*launcher, "-m", "lm_eval", "--model", "kvrescue", "--model_args", model_args, "--tasks", task,
               "--limit", str(limit), "--device", "cpu", "--output_path", str(out), "--log_samples"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=out.parent, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    results = json.loads(Path(glob.glob(str(out / "**" / "results_*.json"), recursive=True)[0]).read_text())
    samples_file = glob.glob(str(out / "**" / f"samples_{task}_*.jsonl"), recursive=True)[0]
    samples = [json.loads(line) for line in Path(samples_file).read_text().splitlines()]
    return results, {sample["doc_id"]: sample for sample in samples}


def assert_same_per_document(tmp_path, model_args, task, limit):
    results_1, one = lm_eval(tmp_path / "one", model_args, task, limit, processes=1)
    results_2, two = lm_eval(tmp_path / "two", model_args, task, limit, processes=2)
    assert sorted(one) == sorted(two) == list(range(limit))
    for doc_id, sample in one.items():
        assert two[doc_id]["resps"] == sample["resps"], doc_id
        assert two[doc_id]["filtered_resps"] == sample["filtered_resps"], doc_id
    assert_same_aggregates(results_2["results"][task], results_1["results"][task])
    totals_1, totals_2 = (r["config"]["kvrescue"]["totals"] for r in (results_1, results_2))
    assert totals_2 == totals_1            # run totals of both ranks, without lm-eval's padding
    return one


def assert_same_aggregates(two, one):
    """The same metrics; a float to its last bits only: lm-eval gathers the ranks' per-document values in
    another order, which can change the last bit of their sum. Other values ("N/A" stderrs, names) exactly."""
    assert two.keys() == one.keys()
    for key, value in one.items():
        if isinstance(value, float):
            assert two[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
        else:
            assert two[key] == value, key


def test_two_processes_equal_one_on_math500_with_a_tiny_model(tmp_path):
    folder = tmp_path / "tiny"
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, scale=20.0)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    args = (f"base={folder},helper={folder},scorer=helper-logprob,n=2,budget=16,buffer=8,max_steps=4,"
            "max_step_tokens=8")
    samples = assert_same_per_document(tmp_path, args, "math500", limit=4)
    assert len({json.dumps(s["resps"]) for s in samples.values()}) > 1


@pytest.mark.skipif(not (WEIGHTS_DIR / "base" / "config.json").is_file(), reason="testbed weights not shipped")
def test_two_processes_equal_one_on_kv_recall_with_the_testbed(tmp_path):
    """One problem in flight per process: rows of several problems share a forward pass otherwise, whose float
    rounding depends on which problems a rank holds, and can flip a token drawn from a flat distribution (the
    testbed base's run-ons are near-uniform soup). Alone, a problem's trajectory is bit-identical on any rank."""
    assert_same_per_document(tmp_path, "preset=recall-cpu,mode=rescue,n=4,max_problems_in_flight=1", "kv_recall",
                             limit=16)
