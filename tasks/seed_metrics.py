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
  Table 5 metric, "boxed and correct");
- `exact_match_math_verify`: right under Math-Verify (reported only where it is installed, the
  `math-verify` extra; docs/grader.md).

Statistics over repeats (kvrescue_eval/repeat_statistics.py, where they are defined): per doc,
`<metric>_pass_at_<k>` (the unbiased pass@k) and `<metric>_maj_at_<k>` (the majority vote of the first k
repeats; the vote's answers are those the metric grades: a boxed one only for `exact_match_boxed`), for the
metrics and k of the task's `RepeatPlan` (tasks/repeated_sampling.py); lm-eval averages them over docs.

`degenerated` (the paper's Table 2): long (>= 256 committed steps) and incorrect, where correct is the
benchmark's primary metric (the benchmark table's: boxed and correct on the math benchmarks, as Table 2's
accuracy), so a right answer that was not boxed counts as incorrect there too. `unfinished_thinking`: the
response opened a think block and never closed it, so it has no answer (kvrescue_eval/grading/thinking.py).

Engine statistics are reported only when every response carries them (a `TextWithStats` of the
`kvrescue` model): stock lm-eval models report the correctness metrics alone, and lm-eval then simply
shows no row for the statistics.

Standard errors (the `_stderr` columns) are over problems, each problem's seeds kept together: a
problem is one draw, its seeds are not independent ones. For the means (accuracies, statistics) that is
lm-eval's own standard error of a mean (`mean_stderr`) taken over the per-problem means, the closed form
of bootstrapping problems (with one seed, exactly what lm-eval reports for `aggregation: mean`); for a
std over seeds, a bootstrap over problems (lm-eval's `--bootstrap_iters` draws, a fixed random seed).
Each aggregation carries its own as its `stderr` attribute, which lm-eval reads through our import hook
(model_adapters/lm_eval/harness_patches.py).
"""

import statistics

import numpy

from kvrescue_eval import benchmark_table, grading
from kvrescue_eval.stats import BASE_CANDIDATES, DEGENERATION_MIN_STEPS, STAT_KEYS, carries_statistics

GRADER_MODES = {"exact_match": "qwen", "exact_match_strict": "strict"}  # metric -> grader mode
BOXED = "exact_match_boxed"
MATH_VERIFY = "exact_match_math_verify"
SEED_STD_SUFFIX = "_seed_std"


def score_responses(doc, results, *, benchmark, plan=None):
    """`process_results` for one doc: per-seed verdicts under both grader modes (and Math-Verify's when
    installed), the statistics over repeats of `plan` (kvrescue_eval.repeat_statistics), engine statistics."""
    (responses,) = results  # one request per doc; its filtered responses are the K repeats
    graded = grade(doc, [str(response) for response in responses], benchmark)
    metrics = {metric: verdicts for metric, (verdicts, _, _) in graded.items()}
    if len(responses) > 1:
        metrics.update({metric + SEED_STD_SUFFIX: verdicts for metric, verdicts in list(metrics.items())})
    metrics.update(over_repeats(plan, metrics, {metric: (answers, equal) for metric, (_, answers, equal)
                                                in graded.items()}))
    if responses and all(map(carries_statistics, responses)):
        metrics.update(engine_statistics(responses, metrics[benchmark_table.benchmark(benchmark).metric]))
    return metrics


def grade(doc, texts, benchmark):
    """metric -> (per-repeat 0/1 verdicts, the answers they grade, the grader's equality of two answers)."""
    graded = {metric: _harness(doc, texts, benchmark, mode) for metric, mode in GRADER_MODES.items()}
    verdicts, answers, equal = graded["exact_match"]
    boxed = [grading.has_boxed_answer(text) for text in texts]
    graded[BOXED] = ([int(right and is_boxed) for right, is_boxed in zip(verdicts, boxed)],
                     [answer if is_boxed else None for answer, is_boxed in zip(answers, boxed)], equal)
    if grading.math_verify_available():
        graded[MATH_VERIFY] = _math_verify(doc, texts, benchmark)
    return graded


def _harness(doc, texts, benchmark, mode):
    # Each mode normalises its own way (strict keeps single letters), so extract per mode.
    gold = grading.parse_gold(doc, benchmark, mode=mode)
    answers = [grading.extract_answer(text, benchmark, mode=mode) for text in texts]
    verdicts = [int(grading.math_equal(answer, gold, mode=mode)) for answer in answers]
    return verdicts, answers, lambda a, b: grading.math_equal(a, b, mode=mode)


def _math_verify(doc, texts, benchmark):
    gold = grading.math_verify_gold(grading.parse_gold(doc, benchmark))
    answers = [grading.math_verify_answer(text) for text in texts]
    verdicts = [int(grading.math_verify_equal(gold, answer)) for answer in answers]
    return verdicts, answers, lambda a, b: grading.math_verify_equal(a, b) and grading.math_verify_equal(b, a)


def over_repeats(plan, metrics, votes):
    """pass@k and maj@k of one doc for every metric of `plan` the doc reports; votes[metric] is
    (the answer of each repeat, the equality of two answers)."""
    if plan is None:
        return {}
    out = {}
    for metric in plan.metrics:
        if metric in metrics:
            answers, equal = votes[metric]
            out.update(plan.statistics(metric, metrics[metric], answers, equal))
    return out


def engine_statistics(responses, verdicts):
    """Per-seed engine statistics; `degenerated`: long (>= 256 steps) and wrong, as in the paper, where
    `verdicts` are the per-seed verdicts of the task's primary metric."""
    metrics = {key: [response.stats[key] for response in responses] for key in STAT_KEYS}
    metrics["degenerated"] = [
        int(response.stats["steps"] >= DEGENERATION_MIN_STEPS and not correct)
        for response, correct in zip(responses, verdicts)]
    from kvrescue_eval import grading

    metrics["unfinished_thinking"] = [int(grading.unfinished_thinking(str(response))) for response in responses]
    if all(response.base_candidates is not None for response in responses):
        metrics[BASE_CANDIDATES] = [response.base_candidates for response in responses]
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


def problem_means_stderr(items, bootstrap_iters=None):
    """Standard error over problems of a mean over seeds: lm-eval's `mean_stderr` of the per-problem means."""
    from lm_eval.api.metrics import mean_stderr

    return mean_stderr([statistics.fmean(values) for values in items])


BOOTSTRAP_SEED = 1234
BOOTSTRAP_CHUNK = 1000


def seed_std_stderr(items, bootstrap_iters):
    """Bootstrap standard error of `seed_std`: resample problems (with all their seeds), recompute the
    population std over seeds of the per-seed accuracy, take the sample std of those."""
    verdicts = numpy.asarray(items, dtype=float)  # (problems, seeds)
    rng = numpy.random.default_rng(BOOTSTRAP_SEED)
    draws = []
    for start in range(0, bootstrap_iters, BOOTSTRAP_CHUNK):
        picks = rng.integers(0, len(verdicts), size=(min(BOOTSTRAP_CHUNK, bootstrap_iters - start), len(verdicts)))
        draws.append(verdicts[picks].mean(axis=1).std(axis=1))
    return float(numpy.concatenate(draws).std(ddof=1))


def _candidate_counts(items):
    """items[d][j]: the stored base-candidate records of doc d under seed j -> how many candidates each holds."""
    return [[sum(len(columns["tokens"]) for columns in stored.values()) for stored in seeds] for seeds in items]


def base_candidates_per_sample(items):
    """The mean number of recorded base candidates per sample (the records themselves are in --log_samples)."""
    return mean_over_samples(_candidate_counts(items))


def base_candidates_stderr(items, bootstrap_iters=None):
    return problem_means_stderr(_candidate_counts(items))


mean_over_seeds.stderr = problem_means_stderr
mean_over_samples.stderr = problem_means_stderr
seed_std.stderr = seed_std_stderr
base_candidates_per_sample.stderr = base_candidates_stderr
