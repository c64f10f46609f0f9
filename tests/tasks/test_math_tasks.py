"""The five math tasks and their group, run through the real `lm_eval` command with test-only models.

Expected values come from the definitions: pass@1 per seed is the share of right answers, the task
score is the mean over seeds, the spread is the population standard deviation over seeds, the group is
the unweighted mean over its five tasks.
"""

import json
import math
import os
import subprocess

import pytest
from lm_eval_cli import LM_EVAL, run_lm_eval

OURS = {"math500": 500, "amc23": 40, "olympiadbench": 675, "aime24_qwen": 30, "gsm8k_qwen": 1319}
SEEDS = {"math500": 1, "amc23": 5, "olympiadbench": 1, "aime24_qwen": 5, "gsm8k_qwen": 1}
STAT_METRICS = ("steps", "output_tokens", "base_tokens", "helper_tokens", "helper_steps", "shared_steps", "early_exits",
                "early_exit_entropy", "early_exit_gzip", "degenerated")

# Gold answers that the grader cannot match even against themselves, boxed: (mode, task, doc_id) -> why.
UNMATCHABLE_GOLD = {}


@pytest.mark.slow
def test_lm_eval_lists_our_tasks_next_to_the_builtins():
    listing = subprocess.run([*LM_EVAL, "ls", "tasks"], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout
    rows = {cells[1].strip(): cells[2].strip() for line in listing.splitlines()
            if len(cells := line.split("|")) > 3}
    for name in [*OURS, "kvrescue_math", "aime25_qwen"]:
        assert rows.get(name, "").endswith(f"{name}.yaml") and "lm_eval/tasks" not in rows[name], name
    for builtin in ("gsm8k", "aime24", "aime25", "hellaswag"):
        assert rows.get(builtin, "").startswith("lm_eval/tasks/"), builtin


@pytest.mark.slow
def test_gold_oracle_scores_every_answer_right_on_the_full_suite(oracle_site, tmp_path):
    results, samples = run_lm_eval(
        ["--model", "oracle", "--model_args", "answer=gold", "--tasks", "kvrescue_math",
         "--apply_chat_template", "--log_samples"], output=tmp_path, pythonpath=[oracle_site])
    for task, size in OURS.items():
        assert len(samples[task]) == size
        for metric, mode in (("exact_match", "qwen"), ("exact_match_strict", "strict"), ("exact_match_boxed", "qwen")):
            wrong = {s["doc_id"] for s in samples[task] if not all(s[metric])}
            expected = {doc for (m, t, doc) in UNMATCHABLE_GOLD if (m, t) == (mode, task)}
            assert wrong == expected, (task, mode, sorted(wrong - expected), sorted(expected - wrong))
            assert results["results"][task][f"{metric},none"] == pytest.approx(1 - len(expected) / size)
    for metric in ("exact_match", "exact_match_strict", "exact_match_boxed"):
        group = results["results"]["kvrescue_math"][f"{metric},none"]
        assert group == pytest.approx(sum(results["results"][t][f"{metric},none"] for t in OURS) / 5)


@pytest.mark.slow
def test_wrong_oracle_scores_zero_and_stock_responses_report_no_statistics(oracle_site, tmp_path):
    results, samples = run_lm_eval(
        ["--model", "oracle", "--model_args", "answer=wrong", "--tasks", ",".join(OURS), "--limit", "2",
         "--log_samples"], output=tmp_path, pythonpath=[oracle_site])
    for task in OURS:
        scores = results["results"][task]
        assert scores["exact_match,none"] == 0.0 and scores["exact_match_strict,none"] == 0.0
        assert scores["exact_match_boxed,none"] == 0.0
        assert all(len(s["exact_match"]) == SEEDS[task] for s in samples[task])
        assert ("exact_match_seed_std,none" in scores) == (SEEDS[task] > 1)
        if SEEDS[task] > 1:
            assert scores["exact_match_seed_std,none"] == 0.0
        assert not any(key.startswith(STAT_METRICS) for key in scores), scores


SAMPLES = {"math500": [0, 1], "olympiadbench": [0, 1, 2, 3], "gsm8k_qwen": list(range(8)),
           "amc23": [0, 1, 2, 3], "aime24_qwen": [0, 1]}


@pytest.mark.slow
def test_seed_mean_std_group_mean_and_engine_statistics(oracle_site, tmp_path):
    """Staircase oracle: seed j of doc d is right iff d <= j; steps = 100 * (j + 1)."""
    results, samples = run_lm_eval(
        ["--model", "oracle", "--model_args", "answer=staircase,stats=1", "--tasks", "kvrescue_math",
         "--samples", json.dumps(SAMPLES), "--log_samples"], output=tmp_path, pythonpath=[oracle_site])
    scores = results["results"]
    # One seed: only doc 0 is right.
    assert scores["math500"]["exact_match,none"] == pytest.approx(1 / 2)
    assert scores["olympiadbench"]["exact_match,none"] == pytest.approx(1 / 4)
    assert scores["gsm8k_qwen"]["exact_match,none"] == pytest.approx(1 / 8)
    # amc23, 4 docs: per-seed accuracy .25 .5 .75 1 1 -> mean .7, population variance .425 / 5.
    assert scores["amc23"]["exact_match,none"] == pytest.approx(0.7)
    assert scores["amc23"]["exact_match_seed_std,none"] == pytest.approx(math.sqrt(0.425 / 5))
    # aime24_qwen, 2 docs: .5 1 1 1 1 -> mean .9, population variance .2 / 5.
    assert scores["aime24_qwen"]["exact_match,none"] == pytest.approx(0.9)
    assert scores["aime24_qwen"]["exact_match_strict_seed_std,none"] == pytest.approx(0.2)
    # the oracle boxes every answer: boxed and correct is correct
    assert scores["aime24_qwen"]["exact_match_boxed_seed_std,none"] == pytest.approx(0.2)
    assert scores["amc23"]["exact_match_boxed,none"] == pytest.approx(0.7)
    assert [s["exact_match"] for s in samples["aime24_qwen"]] == [[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]]
    # Group: unweighted mean (the size-weighted mean would be 7.6 / 20 = .38).
    assert scores["kvrescue_math"]["exact_match,none"] == pytest.approx((.5 + .25 + .125 + .7 + .9) / 5)
    # Standard errors over problems, each problem's seeds together: the sample std (ddof 1) of the per-doc
    # means over seeds, over sqrt(docs). math500: docs 1, 0 -> std .7071 / sqrt 2 = .5; olympiadbench: 1, 0, 0, 0
    # -> .5 / 2 = .25; gsm8k: one 1 in 8 -> sqrt(1/8) / sqrt 8 = .125; amc23: per-doc means 1, .8, .6, .4 ->
    # sqrt(.2 / 3) / 2; aime24: 1, .8 -> .1414 / sqrt 2 = .1. The group: sqrt(sum of squares) / 5.
    expected = {"math500": .5, "olympiadbench": .25, "gsm8k_qwen": .125, "amc23": math.sqrt(.2 / 3) / 2,
                "aime24_qwen": .1}
    for task, stderr in expected.items():
        for metric in ("exact_match", "exact_match_strict", "exact_match_boxed"):
            assert scores[task][f"{metric}_stderr,none"] == pytest.approx(stderr), (task, metric)
    assert scores["kvrescue_math"]["exact_match_boxed_stderr,none"] == pytest.approx(
        math.sqrt(sum(v ** 2 for v in expected.values())) / 5)
    assert scores["amc23"]["steps_stderr,none"] == 0.0   # every doc's steps average 300 over its seeds
    # Statistics: mean over samples; degenerated = >= 256 steps and wrong: amc23 doc 3 under seed 2 only.
    assert scores["gsm8k_qwen"]["steps,none"] == pytest.approx(100)
    assert scores["amc23"]["steps,none"] == pytest.approx(300)
    assert scores["amc23"]["output_tokens,none"] == pytest.approx(1.5)
    assert scores["amc23"]["degenerated,none"] == pytest.approx(1 / 20)
    assert scores["aime24_qwen"]["degenerated,none"] == 0.0
    assert samples["amc23"][3]["degenerated"] == [0, 0, 1, 0, 0]
