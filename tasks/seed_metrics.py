"""Per-seed math metrics: what `process_results` reports per doc, and how lm-eval aggregates it.

With `repeats: K` a doc gets K responses, response j from seed j. Per doc, every correctness metric
is the list of the K per-seed 0/1 verdicts (so `--log_samples` holds per-seed accuracy); the
aggregations turn the lists of all docs into per-seed accuracies and report their mean and their
sample standard deviation.

Engine statistics are reported only when every response is a `TextWithStats` (the `kvrescue`
model): stock lm-eval models report the correctness metrics alone, and lm-eval then simply shows
no row for the statistics.
"""

import statistics

from kvrescue_eval.stats import DEGENERATION_MIN_STEPS, STAT_KEYS, TextWithStats

MODES = {"exact_match": "qwen", "exact_match_strict": "strict"}
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
        if len(responses) > 1:
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
    """Sample standard deviation over seeds of the per-seed accuracy."""
    return statistics.stdev(per_seed_accuracy(items))


def mean_over_samples(items):
    """Mean of a per-sample statistic over every sample of every doc."""
    return statistics.fmean(value for values in items for value in values)
