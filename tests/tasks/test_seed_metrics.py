import math

import pytest

from kvrescue_eval.tasks import seed_metrics


def test_per_seed_accuracy_is_the_column_mean():
    assert seed_metrics.per_seed_accuracy([[1, 0, 1], [1, 1, 0]]) == [1.0, 0.5, 0.5]


def test_mean_and_population_std_over_seeds():
    items = [[1, 0, 1], [1, 1, 0]]  # per seed 1, .5, .5: mean 2/3, deviations 1/3, -1/6, -1/6
    assert seed_metrics.mean_over_seeds(items) == pytest.approx(2 / 3)
    assert seed_metrics.seed_std(items) == pytest.approx(math.sqrt(((1 / 3) ** 2 + 2 * (1 / 6) ** 2) / 3))


def test_seed_std_is_the_papers_population_std():
    # Table 5, AIME24, 7B N=1 bon B64: one right answer in 5 seeds x 30 problems is "0.7 +- 1.3"
    items = [[0] * 5 for _ in range(30)]
    items[0][0] = 1
    assert 100 * seed_metrics.mean_over_seeds(items) == pytest.approx(0.667, abs=1e-3)
    assert 100 * seed_metrics.seed_std(items) == pytest.approx(1.333, abs=1e-3)   # the sample std: 1.49
    assert round(100 * seed_metrics.seed_std(items), 1) == 1.3


def test_boxed_metric_needs_a_boxed_answer():
    doc = {"question": "q", "answer": "12 + 5 = 17\n#### 17"}
    right_unboxed = "First, 3 * 4 = 12.\n\nSo the total is 12 + 5 = 17"
    metrics = seed_metrics.score_responses(doc, [[right_unboxed, "So \\boxed{17}.", "The answer is 17.",
                                                   "So \\boxed{16}."]], benchmark="gsm8k")
    assert metrics["exact_match"] == [1, 1, 1, 0]
    assert metrics["exact_match_boxed"] == [0, 1, 0, 0]
    assert metrics["exact_match_boxed_seed_std"] == metrics["exact_match_boxed"]   # per-seed lists, aggregated


def test_degenerated_is_long_and_not_boxed_and_correct():
    from kvrescue_eval.stats import TextWithStats

    doc = {"question": "q", "answer": "12 + 5 = 17\n#### 17"}
    # (text, committed steps): right and boxed, right but unboxed, wrong and boxed, each long (256 steps,
    # the paper's threshold) or short (255)
    cases = [("So \\boxed{17}.", 256), ("The answer is 17.", 256), ("So \\boxed{16}.", 256),
             ("So \\boxed{17}.", 255), ("The answer is 17.", 255), ("So \\boxed{16}.", 255)]
    responses = [TextWithStats(text, {"steps": steps}, "eos") for text, steps in cases]
    metrics = seed_metrics.score_responses(doc, [responses], benchmark="gsm8k")
    assert metrics["exact_match"] == [1, 1, 0, 1, 1, 0]
    assert metrics["exact_match_boxed"] == [1, 0, 0, 1, 0, 0]
    # Table 2 counts "incorrect" by its accuracy, boxed and correct: the unboxed right answer degenerated
    assert metrics["degenerated"] == [0, 1, 1, 0, 0, 0]


def test_docs_with_different_seed_counts_are_rejected():
    with pytest.raises(ValueError, match=r"same number of seeds.*\[2, 3\]"):
        seed_metrics.per_seed_accuracy([[1, 0, 1], [1, 1]])


def test_statistics_average_over_all_samples():
    assert seed_metrics.mean_over_samples([[100, 200], [300, 400]]) == 250


def test_strict_mode_extracts_and_grades_with_its_own_normalisation():
    # The harness deletes single letters as units while normalising, so "t+1" and "a+1" both become
    # "+1" in mode qwen (a quirk it counts as right); strict keeps the letters: wrong.
    doc = {"problem": "p", "solution": "so \\boxed{a+1}", "answer": "a+1"}
    metrics = seed_metrics.score_responses(doc, [["The answer is \\boxed{t+1}."]], benchmark="math500")
    assert metrics["exact_match"] == [1]
    assert metrics["exact_match_strict"] == [0]


def test_the_stderr_of_a_mean_keeps_each_problems_seeds_together():
    items = [[1, 1], [0, 1], [0, 0]]   # per-problem means 1, .5, 0: sample std .5, over sqrt(3) problems
    assert seed_metrics.problem_means_stderr(items) == pytest.approx(0.5 / math.sqrt(3))
    assert seed_metrics.mean_over_seeds.stderr is seed_metrics.problem_means_stderr


def test_the_stderr_of_the_seed_std_is_the_bootstrap_over_problems():
    """The exact bootstrap: every one of the 3^3 resamples of 3 problems (with their seeds) is equally likely."""
    import itertools

    items = [[1, 1], [0, 1], [0, 0]]
    draws = [seed_metrics.seed_std([items[i] for i in picks]) for picks in itertools.product(range(3), repeat=3)]
    mean = sum(draws) / len(draws)
    exact = math.sqrt(sum((d - mean) ** 2 for d in draws) / len(draws))
    assert seed_metrics.seed_std_stderr(items, 20000) == pytest.approx(exact, rel=0.03)
    assert seed_metrics.seed_std.stderr is seed_metrics.seed_std_stderr


def test_lm_eval_computes_the_standard_errors_our_aggregations_carry():
    """Through the import hook: lm-eval's stderr_for_metric, which knows only its own aggregations."""
    from lm_eval import evaluator_utils
    from lm_eval.api.metrics import mean, mean_stderr

    items = [[1, 1], [0, 1], [0, 0]]
    assert evaluator_utils.stderr_for_metric(seed_metrics.mean_over_seeds, 100000)(items) == pytest.approx(
        0.5 / math.sqrt(3))
    assert evaluator_utils.stderr_for_metric(mean, 100000) is mean_stderr      # lm-eval's own, unchanged
    assert evaluator_utils.stderr_for_metric(seed_metrics.mean_over_seeds, 0) is None   # --bootstrap_iters 0


def test_votes_follow_each_metrics_answers():
    """maj@4 by metric: under exact_match the unboxed 17s (by the harness's fallbacks) outvote the boxed 16s;
    under exact_match_boxed only boxed answers vote, and the 16s win. pass@k counts each metric's verdicts."""
    from kvrescue_eval.repeat_statistics import RepeatPlan

    doc = {"question": "q", "answer": "#### 17"}
    responses = ["So \\boxed{16}.", "The answer is 17.", "So \\boxed{16}.", "It is 17", "The answer is 17."][:4]
    plan = RepeatPlan.from_metadata({}, default_repeats=4, metrics=["exact_match", "exact_match_boxed"])
    metrics = seed_metrics.score_responses(doc, [responses], benchmark="gsm8k", plan=plan)
    assert metrics["exact_match"] == [0, 1, 0, 1] and metrics["exact_match_boxed"] == [0, 0, 0, 0]
    assert metrics["exact_match_maj_at_4"] == 0      # 2 - 2: the first answer, a boxed 16, wins the tie
    assert metrics["exact_match_maj_at_2"] == 0      # 16 vs 17: the first, 16
    assert metrics["exact_match_boxed_maj_at_4"] == 0
    assert metrics["exact_match_pass_at_2"] == pytest.approx(1 - 1 / 6)  # C(2,2) / C(4,2)
    assert metrics["exact_match_boxed_pass_at_4"] == 0.0
    right = seed_metrics.score_responses(doc, [["The answer is 17.", "So \\boxed{16}.", "It is 17", "x"]],
                                         benchmark="gsm8k", plan=plan)
    assert right["exact_match_maj_at_4"] == 1        # 17 twice (the last number of "x" is none: no vote)
    assert right["exact_match_boxed_maj_at_4"] == 0  # the one boxed answer, 16


def test_math_verify_sits_beside_exact_match_and_its_absence_changes_nothing_else(monkeypatch):
    from kvrescue_eval import grading

    doc = {"question": "q", "answer": "#### 17"}
    responses = [["So \\boxed{17}.", "So \\boxed{16}.", "We get $17$.", "no idea"]]
    with_it = seed_metrics.score_responses(doc, responses, benchmark="gsm8k")
    assert with_it["exact_match_math_verify"] == [1, 0, 1, 0]
    monkeypatch.setitem(__import__("sys").modules, "math_verify", None)  # as if the extra were not installed
    assert not grading.math_verify_available()
    without = seed_metrics.score_responses(doc, responses, benchmark="gsm8k")
    assert without == {k: v for k, v in with_it.items() if "math_verify" not in k}
