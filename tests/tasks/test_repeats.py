"""Repeats chosen per run (`--metadata repeats=K ks=[...]`, tasks/repeated_sampling.py) and the statistics over
them in lm-eval's results, the samples and the report.

The staircase oracle (oracle_lm.py) answers doc d right on seed j iff d <= j, and gives every wrong answer the
same number. With 4 repeats on docs 0-3 the docs have c = 4, 3, 2, 1 right answers, so by hand:
- avg@4 = 10/16; per-seed accuracies 1/4, 2/4, 3/4, 4/4, population std sqrt(0.078125);
- pass@2 = mean(1, 1 - C(1,2)/C(4,2), 1 - C(2,2)/C(4,2), 1 - C(3,2)/C(4,2)) = mean(1, 1, 5/6, 1/2); pass@4 = 1;
- maj@k (first k seeds; the tie rule: the answer seen first): doc 0 always right; doc 1 (W R R R) right only at
  k = 4; doc 2 (W W R R) a 2-2 tie at k = 4 that its first answer, wrong, wins; doc 3 never:
  maj@1 = maj@2 = 1/4, maj@4 = 2/4.
"""

import json
import math
import subprocess
from pathlib import Path

import pytest
from lm_eval_cli import LM_EVAL, run_lm_eval
from markdown_cells import table_under

from kvrescue_eval.cli import main

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def build(task_yaml, **metadata):
    """The task lm-eval builds from a YAML with `--metadata` (its TaskFactory merges it into `metadata`)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    config = load_yaml(task_yaml, resolve_func=True)
    config["metadata"] = {**config.get("metadata", {}), **metadata}
    return config["class"](config=config)


def test_default_repeats_are_the_yamls_and_recorded():
    task = build(TASKS / "aime25_qwen" / "aime25_qwen.yaml")
    assert task.config.repeats == 5 and task.config.filter_list[0]["filter"][0]["k"] == 5
    assert (task.config.metadata["repeats"], task.config.metadata["ks"]) == (5, [1, 2, 4, 5])
    metrics = [entry["metric"] for entry in task.config.metric_list]
    assert "exact_match_pass_at_4" in metrics and "exact_match_boxed_maj_at_5" in metrics


def test_chosen_repeats_and_ks_replace_the_yamls():
    task = build(TASKS / "kv_recall" / "kv_recall.yaml", repeats=8, ks=[2, 8])
    assert task.config.repeats == 8 and task.config.filter_list[0]["filter"][0]["k"] == 8
    added = [entry["metric"] for entry in task.config.metric_list][-4:]
    assert added == ["pass_at_2", "pass_at_8", "maj_at_2", "maj_at_8"]


def test_one_repeat_adds_no_statistics():
    task = build(TASKS / "math500" / "math500.yaml")
    assert task.config.repeats == 1
    assert not any("_at_" in entry["metric"] for entry in task.config.metric_list)


@pytest.mark.parametrize("metadata, message", [
    ({"repeats": 0}, r"repeats=0 is not valid: the repeats must be a positive integer"),
    ({"repeats": 2.5}, r"repeats=2.5 is not valid"),
    ({"repeats": "many"}, r"repeats='many' is not valid"),
    ({"ks": [8]}, r"ks=\[8\] is not valid: each k must be an integer in 1\.\.5"),
    ({"repeats": 2, "ks": 3}, r"ks=3 is not valid: each k must be an integer in 1\.\.2"),
])
def test_bad_values_are_refused_naming_the_valid_range(metadata, message):
    with pytest.raises(ValueError, match=message):
        build(TASKS / "aime25_qwen" / "aime25_qwen.yaml", **metadata)


@pytest.mark.slow
def test_lm_eval_refuses_a_k_above_the_repeats_before_any_model_runs(tmp_path):
    done = subprocess.run([*LM_EVAL, "run", "--model", "dummy", "--tasks", "aime25_qwen", "--metadata", "repeats=2",
                           "ks=[4]", "--output_path", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "ks=[4] is not valid: each k must be an integer in 1..2" in done.stderr


@pytest.mark.slow
def test_chosen_repeats_reach_results_samples_and_report(oracle_site, tmp_path):
    output = tmp_path / "run"
    results, samples = run_lm_eval(
        ["--model", "oracle", "--model_args", "answer=staircase,pretrained=oracle", "--tasks", "aime25_qwen",
         "--limit", "4", "--metadata", "repeats=4", "--log_samples"], output=output, pythonpath=[oracle_site])
    assert results["configs"]["aime25_qwen"]["repeats"] == 4
    assert results["configs"]["aime25_qwen"]["metadata"]["repeats"] == 4
    assert [len(s["exact_match"]) for s in sorted(samples["aime25_qwen"], key=lambda s: s["doc_id"])] == [4] * 4
    scores = results["results"]["aime25_qwen"]
    expected = {"exact_match": 10 / 16, "exact_match_seed_std": math.sqrt(0.078125),
                "exact_match_pass_at_1": 10 / 16, "exact_match_pass_at_2": (1 + 1 + 5 / 6 + 1 / 2) / 4,
                "exact_match_pass_at_4": 1.0,
                "exact_match_maj_at_1": 1 / 4, "exact_match_maj_at_2": 1 / 4, "exact_match_maj_at_4": 2 / 4}
    for metric in ("exact_match", "exact_match_boxed"):  # the oracle boxes every answer
        for name, value in expected.items():
            key = name.replace("exact_match", metric, 1)
            assert scores[f"{key},none"] == pytest.approx(value), key
    # the standard error of a statistic is over problems: maj@4's per-problem values 1, 1, 0, 0
    assert scores["exact_match_maj_at_4_stderr,none"] == pytest.approx(math.sqrt(1 / 3) / 2)

    out = tmp_path / "report"
    assert main(["report", str(output), "--out", str(out), "--no-plots", "--submission"]) == 0
    (row,) = json.loads((out / "report.json").read_text())["tables"]["repeats"]["rows"]
    assert (row["benchmark"], row["repeats"]) == ("aime25", 4)
    assert row["avg"] == pytest.approx([10 / 16, math.sqrt(0.078125)])
    assert (row["pass@2"], row["maj@4"]) == (pytest.approx(expected["exact_match_pass_at_2"]), 0.5)
    markdown = (out / "report.md").read_text()
    (shown,) = table_under(markdown, "### Over repeats")
    assert (shown["benchmark"], shown["problems"], shown["repeats"], shown["avg"]) == ("aime25", "4", "4", "62.5 ± 28.0")

    (path,) = (out / "submissions").glob("*.json")
    entry = json.loads(path.read_text())["benchmarks"]["aime25"]
    assert entry["over_repeats"]["repeats"] == 4
    for mode in ("boxed", "qwen"):
        assert entry["over_repeats"][mode]["maj_at_k"] == {"1": 0.25, "2": 0.25, "4": 0.5}
        assert entry["over_repeats"][mode]["pass_at_k"]["2"] == pytest.approx(expected["exact_match_pass_at_2"])
    assert entry["pass_at_1"]["math_verify"]["mean"] == pytest.approx(10 / 16)
    assert main(["leaderboard", "validate", str(path)]) == 0
