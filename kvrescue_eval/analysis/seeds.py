"""Accuracy over sampling seeds: mean and population standard deviation (ddof 0) of per-seed accuracies.

The population std is the paper's (Table 5: AIME24 "0.7 +- 1.3" is one right answer in 5 seeds x 30
problems; the sample std would be 1.49). Runs report either the per-seed values (from --log_samples
files) or only their count, mean and std (results JSON, math tasks version >= 2.0). Both pool exactly,
through the sum and the sum of squares.

`stderr` is the run's standard error over problems (each problem's seeds together), as the task reported
it (`<metric>_stderr`); runs pooled over the same problems have no such figure of their own (their seeds
share problems, so the runs' standard errors do not combine as independent ones): None.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SeedSummary:
    count: int
    mean: float
    std: float | None          # population std (ddof 0); None for a single seed
    values: tuple | None = None  # the per-seed accuracies when known
    stderr: float | None = None  # standard error over problems of the mean (one run's), when reported

    @classmethod
    def of(cls, values, stderr=None):
        values = tuple(float(v) for v in values)
        mean = sum(values) / len(values)
        std = None
        if len(values) > 1:
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        return cls(len(values), mean, std, values, stderr)

    def _sums(self):
        square = (self.std or 0.0) ** 2 * self.count + self.count * self.mean ** 2
        return self.count * self.mean, square


def pool(summaries):
    """One summary over all seeds of several summaries (several runs of one setting)."""
    summaries = list(summaries)
    if len(summaries) == 1:
        return summaries[0]
    if all(s.values is not None for s in summaries):
        return SeedSummary.of([v for s in summaries for v in s.values])
    count = sum(s.count for s in summaries)
    total = sum(s._sums()[0] for s in summaries)
    square = sum(s._sums()[1] for s in summaries)
    mean = total / count
    variance = max(square - count * mean ** 2, 0.0) / count
    return SeedSummary(count, mean, math.sqrt(variance))
