"""Per-seed math metrics: what `process_results` reports per doc, and how lm-eval aggregates it.

With `repeats: K` a doc gets K responses, response j from seed j. Per doc, every correctness metric
is the list of the K per-seed 0/1 verdicts (so `--log_samples` holds per-seed accuracy); the
aggregations turn the lists of all docs into per-seed accuracies and report their mean and their
population standard deviation (ddof 0, as the paper's Table 5: one right answer in 5 x 30 AIME24
problems is 0.7 +- 1.3).

Correctness metrics:
- `exact_match`: right under grader mode qwen (the answer may come from the harness's fallbacks,
  "The answer is ..." or the last number);
- `exact_match_strict`: right under grader mode strict;
- `exact_match_boxed`: right under mode qwen AND the answer was taken from a \\boxed{} (the paper's
  Table 5 metric, "boxed and correct").

Engine statistics are reported only when every response is a `TextWithStats` (the `kvrescue`
model): stock lm-eval models report the correctness metrics alone, and lm-eval then simply shows
no row for the statistics.
"""

import statistics

from kvrescue_eval.stats import DEGENERATION_MIN_STEPS, STAT_KEYS, TextWithStats

MODES = {"exact_match": "qwen", "exact_match_strict": "strict"}
BOXED = "exact_match_boxed"
SEED_STD_SUFFIX = "_seed_std"


def score_responses(doc, results, *, benchmark):
    """`process_results` for one doc: per-seed verdicts under both grader modes, plus statistics."""
    from kvrescue_eval import grading

    (responses,) = results  # one request per doc; its filtered responses are the K repeats
    metrics = {}
    for metric, mode in MODES.items():
        # Each mode normalises its own way (strict keeps single letters), so extract per mode.
        gold = grading.parse_gold(doc, benchmark, mode=mode)
        metrics[metric] = [
            int(grading.math_equal(grading.extract_answer(str(response), benchmark, mode=mode), gold, mode=mode))
            for response in responses]
    metrics[BOXED] = [int(right and grading.has_boxed_answer(str(response)))
                      for right, response in zip(metrics["exact_match"], responses)]
    if len(responses) > 1:
        for metric in (*MODES, BOXED):
            metrics[metric + SEED_STD_SUFFIX] = metrics[metric]
    if responses and all(isinstance(response, TextWithStats) for response in responses):
        metrics.update(engine_statistics(responses, metrics["exact_match"]))
    return metrics


def engine_statistics(responses, verdicts):
    """Per-seed engine statistics; `degenerated`: long (>= 256 steps) and wrong, as in the paper."""
    metrics = {key: [response.stats[key] for response in responses] for key in STAT_KEYS}
    metrics["degenerated"] = [
        int(response.stats["steps"] >= DEGENERATION_MIN_STEPS and not correct)
        for response, correct in zip(responses, verdicts)]
    return metrics


def per_seed_accuracy(items):
    """items[d][j]: verdict of doc d under seed j -> accuracy of every seed."""
    seeds = {len(verdicts) for verdicts in items}
    if len(seeds) != 1:
        raise ValueError(f"every doc must have the same number of seeds, got lengths {sorted(seeds)}")
    return [statistics.fmean(column) for column in zip(*items)]


def mean_over_seeds(items):
    return statistics.fmean(per_seed_accuracy(items))


def seed_std(items):
    """Population standard deviation (ddof 0) over seeds of the per-seed accuracy."""
    return statistics.pstdev(per_seed_accuracy(items))


def mean_over_samples(items):
    """Mean of a per-sample statistic over every sample of every doc."""
    return statistics.fmean(value for values in items for value in values)
