"""Statistics over the repeats of a problem (K samples per problem, sample j drawn with seed j).

Defined once here; the tasks report them per problem (tasks/seed_metrics.py) and lm-eval averages them over
problems; the analysis and the leaderboard read them from the results.

- avg@K: the mean over the K repeats of the per-repeat accuracy (the mean pass@1). Its spread is the
  population std (ddof 0) over repeats of the per-repeat accuracy (the paper's seed std), its standard error
  is over problems (a problem's repeats kept together). The tasks report these as `<metric>`,
  `<metric>_seed_std` and `<metric>_stderr`.
- pass@k: the unbiased estimator of Chen et al. 2021 (the Codex paper) for one problem with n samples of
  which c are right: 1 - C(n - c, k) / C(n, k), the chance that at least one of k samples drawn without
  replacement from the n is right. At k = 1 it is c / n, so pass@1 averaged over problems is avg@K.
- maj@k: majority vote over the answers extracted from the first k repeats (seeds 0 .. k-1, so a run of K
  repeats reports the maj@k a run of k repeats with the same seeds would). A repeat with no extracted answer
  does not vote. Answers are grouped in seed order: an answer joins the first group whose first answer it
  equals under the grader's equality, else it opens a group. The largest group wins; a tie goes to the group
  whose first answer came first (the lowest seed). The vote is right when the winning group's first answer is
  right; with no answer at all it is wrong.
"""

from collections import Counter
from dataclasses import dataclass
from math import comb

REPEATS_KEY = "repeats"  # lm-eval `--metadata repeats=K`
KS_KEY = "ks"            # lm-eval `--metadata ks=[1,4,16]` (or one integer): the k of pass@k and maj@k


def pass_at_k(n, c, k):
    """Unbiased pass@k of one problem: n samples, c of them right (Chen et al. 2021)."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n = {n} samples; got k={k}")
    if not 0 <= c <= n:
        raise ValueError(f"the right samples c must be in 0..{n}; got c={c}")
    return 1.0 - comb(n - c, k) / comb(n, k)


def vote_groups(answers, equal):
    """The group of each answer (the index of the group's first answer; None: no answer, no vote), formed in
    seed order by the rule above. Groups form greedily in order, so those of the first k answers are these
    restricted to them: one grouping serves every k."""
    firsts, labels = [], []
    for index, answer in enumerate(answers):
        if not answer:
            labels.append(None)
            continue
        label = next((f for f in firsts if answers[f] == answer or equal(answers[f], answer)), None)
        if label is None:
            firsts.append(label := index)
        labels.append(label)
    return labels


def vote_winner(labels):
    """Index of the winning answer given the group labels of the voting answers; None when none voted."""
    sizes = Counter(label for label in labels if label is not None)
    if not sizes:
        return None
    return max(sizes, key=lambda first: (sizes[first], -first))  # largest; on a tie the earliest


def majority_vote(answers, equal):
    """Index of the winning answer of a vote over `answers` in seed order (an empty one abstains), by the rule
    above; None when no answer voted. `equal(a, b)` is the grader's equality of two answers."""
    return vote_winner(vote_groups(answers, equal))


def maj_at_k(answers, verdicts, k, equal, labels=None):
    """1 if the majority vote over the first k answers is right (its verdict), else 0; `labels`: the answers'
    `vote_groups`, when already known."""
    if not 1 <= k <= len(answers):
        raise ValueError(f"maj@k needs 1 <= k <= {len(answers)} repeats; got k={k}")
    winner = vote_winner((vote_groups(answers, equal) if labels is None else labels)[:k])
    return 0 if winner is None else int(verdicts[winner])


def default_ks(repeats):
    """k = 1, 2, 4, ... below the repeats, and the repeats themselves."""
    ks, k = [], 1
    while k < repeats:
        ks.append(k)
        k *= 2
    return ks + [repeats]


def check_repeats(value, *, where=f"--metadata {REPEATS_KEY}"):
    """The repeats as an int; a clear error for anything but a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}={value!r} is not valid: the repeats must be a positive integer (1, 2, 3, ...)")
    return value


def check_ks(value, repeats, *, where=f"--metadata {KS_KEY}"):
    """The k of pass@k and maj@k, sorted and unique; each an integer in 1..repeats. None: `default_ks`."""
    if value is None:
        return default_ks(repeats)
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    bad = [k for k in values if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= repeats]
    if not values or bad:
        raise ValueError(f"{where}={value!r} is not valid: each k must be an integer in 1..{repeats} "
                         f"(the repeats; raise them with --metadata {REPEATS_KEY}=K)")
    return sorted(set(values))


def statistic_name(metric, kind, k):
    """Result name of a statistic over repeats of a per-repeat verdict `metric` (kind "pass" or "maj"):
    `exact_match_pass_at_4`; a metric that is itself a pass@1 (`pass_at_1`) gives `pass_at_4` (and its
    pass@1 is the metric itself, which plans do not report twice)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    stem = metric.removesuffix("pass_at_1").rstrip("_")
    return f"{stem}_{kind}_at_{k}".lstrip("_")


KINDS = ("pass", "maj")


@dataclass(frozen=True)
class RepeatPlan:
    """What a task samples and reports over repeats: its repeats, the k of pass@k and maj@k, and the
    per-repeat verdict metrics those are reported for. Nothing is reported over a single repeat."""
    repeats: int
    ks: tuple
    metrics: tuple

    @classmethod
    def from_metadata(cls, metadata, *, default_repeats, metrics):
        """The plan of a task: `repeats` and `ks` from lm-eval's `--metadata` when given, else the task's own
        repeats and `default_ks`; a clear error for a value out of range."""
        metadata = metadata or {}
        repeats = check_repeats(metadata.get(REPEATS_KEY, default_repeats))
        return cls(repeats, tuple(check_ks(metadata.get(KS_KEY), repeats)), tuple(metrics))

    def names(self):
        """Result names of every statistic of this plan, metric by metric, pass@k then maj@k."""
        if self.repeats < 2:
            return []
        names = [statistic_name(m, kind, k) for m in self.metrics for kind in KINDS for k in self.ks]
        return [name for name in names if name not in self.metrics]

    def statistics(self, metric, verdicts, answers, equal):
        """{result name: value} of one problem: pass@k of its verdicts, maj@k of its answers."""
        if self.repeats < 2:
            return {}
        if not len(verdicts) == len(answers) == self.repeats:
            raise ValueError(f"{metric}: expected {self.repeats} repeats, got {len(verdicts)} verdicts "
                             f"and {len(answers)} answers")
        right = sum(map(int, verdicts))
        out = {statistic_name(metric, "pass", k): pass_at_k(self.repeats, right, k) for k in self.ks}
        labels = vote_groups(answers, equal)
        out.update({statistic_name(metric, "maj", k): maj_at_k(answers, verdicts, k, equal, labels) for k in self.ks})
        out.pop(metric, None)  # pass@1 of a metric that is a pass@1: the metric itself
        return out
