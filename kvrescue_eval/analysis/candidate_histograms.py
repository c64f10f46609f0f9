"""The paper's Fig. 3 from `--log_samples` output: the detector's two statistics over base candidates, coherent
against degenerate (and aborted, with the detector on), with the run's detector thresholds.

Input: the `base_candidates` of every document of a run's samples file (kvrescue_eval/candidate_records.py
defines the statistics and the outcomes), pooled over the documents and seeds of the run, per task. The
thresholds are the run's recorded `candidate_detector` (the detector's settings, also when it was off).
The detector's thresholds are read off these histograms, in the valley between the two modes (Fig. 3).

Per run and task, per outcome: the count, its share of all candidates, the mean tokens, and the shares above
the entropy threshold and below the gzip threshold: of the degenerate candidates, what the detector would
catch; of the coherent ones, what it would wrongly abort. (The detector also waits for its guard before
the entropy rule and for `gzip_chars` characters before the gzip rule; the histograms do not.)
"""

from bisect import bisect_right
from dataclasses import dataclass, field

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.runs import sample_records, samples_file
from kvrescue_eval.analysis.tables import SETTING_COLUMNS, Table, number, percent, setting_fields
from kvrescue_eval.candidate_records import OUTCOMES, expand
from kvrescue_eval.stats import BASE_CANDIDATES

# bin edges: entropy 0 to 6 nats in steps of 0.25, gzip ratio 0 to 2 in steps of 0.05; a value outside
# falls into the first or the last bin
BINS = {"entropy": [i / 4 for i in range(25)], "gzip": [i / 20 for i in range(41)]}
# the detector's rule on each statistic: degenerate above the entropy threshold, below the gzip threshold
THRESHOLDS = {"entropy": "entropy_threshold", "gzip": "gzip_threshold"}


@dataclass
class CandidateHistograms:
    run: object                  # analysis.runs.Run
    task: str
    detector: dict | None        # the run's candidate_detector (None: not recorded)
    records: dict = field(default_factory=lambda: {outcome: [] for outcome in OUTCOMES})

    def counts(self, statistic, outcome):
        """Candidates per bin of BINS[statistic] (those without a value, e.g. an empty text's gzip, left out)."""
        return histogram([getattr(r, statistic) for r in self.records[outcome] if getattr(r, statistic) is not None],
                         BINS[statistic])

    def threshold(self, statistic):
        return None if self.detector is None else self.detector.get(THRESHOLDS[statistic])

    def flagged(self, outcome, statistic):
        """Share of the outcome's candidates on the degenerate side of the statistic's threshold (None: no
        threshold, or no candidate with a value)."""
        threshold = self.threshold(statistic)
        values = [getattr(r, statistic) for r in self.records[outcome] if getattr(r, statistic) is not None]
        if threshold is None or not values:
            return None
        above = statistic == "entropy"
        return sum(value > threshold if above else value < threshold for value in values) / len(values)


def histogram(values, edges):
    """Counts of `values` in the bins [edges[i], edges[i+1]); values outside go to the first or last bin."""
    counts = [0] * (len(edges) - 1)
    for value in values:
        counts[min(max(bisect_right(edges, value) - 1, 0), len(counts) - 1)] += 1
    return counts


def candidate_histograms(runs):
    """CandidateHistograms of every run and task whose samples file holds base-candidate records."""
    found = []
    for run in runs:
        for task in run.tasks:
            path = samples_file(run.path, task)
            if path is None:
                continue
            entry = CandidateHistograms(run, task, run.model_info.get("candidate_detector"))
            if _read(path, entry):
                found.append(entry)
    return found


def _read(path, entry):
    """Adds the records of a samples file to `entry` (each document once, whatever its filters); False: none (also
    a run whose base proposed whole steps, or that had no base: its documents hold empty records)."""
    seen = set()
    for number, record in sample_records(path):
        if BASE_CANDIDATES not in record or record.get("doc_id") in seen:
            continue
        seen.add(record.get("doc_id"))
        for stored in record[BASE_CANDIDATES]:
            try:
                candidates = expand(stored)
            except ValueError as error:
                raise AnalysisInputError(path, f"line {number}: {BASE_CANDIDATES}", str(error)) from None
            for candidate in candidates:
                entry.records[candidate.outcome].append(candidate)
    return any(entry.records.values())


def candidate_table(histograms):
    """Fig. 3's numbers: per run, task and outcome, the candidates, their share, mean tokens and the shares on the
    degenerate side of each threshold."""
    rows = []
    for entry in histograms:
        total = sum(len(records) for records in entry.records.values())
        for outcome in OUTCOMES:
            records = entry.records[outcome]
            if not records:
                continue
            rows.append({**run_fields(entry.run), "task": entry.task, "outcome": outcome, "candidates": len(records),
                         "share": len(records) / total, "mean_tokens": sum(r.tokens for r in records) / len(records),
                         "entropy_threshold": entry.threshold("entropy"),
                         "entropy_above": entry.flagged(outcome, "entropy"),
                         "gzip_threshold": entry.threshold("gzip"), "gzip_below": entry.flagged(outcome, "gzip")})
    columns = SETTING_COLUMNS + ("seed", "task", "outcome", "candidates", "share", "mean_tokens", "entropy_threshold",
                                 "entropy_above", "gzip_threshold", "gzip_below")
    return Table("candidate_histograms", "Fig. 3 layout: base candidates by outcome, their share (%), mean tokens, and "
                 "the share (%) above the entropy threshold and below the gzip threshold (of the degenerate ones: what "
                 "the detector would catch; of the coherent ones: what it would wrongly abort)", columns, rows,
                 {"share": percent, "entropy_above": percent, "gzip_below": percent,
                  "mean_tokens": number})


def run_fields(run):
    """A run named by its setting and seed, not its folder: the same runs elsewhere give the same report."""
    return {**setting_fields(run.setting), "seed": run.seed}


def histogram_data(histograms):
    """Fig. 3's histograms as JSON-ready data: the bin edges, and per run and task the detector settings and the
    counts per statistic and outcome."""
    return {"edges": BINS, "runs": [
        {**run_fields(entry.run), "task": entry.task, "detector": entry.detector,
         "counts": {statistic: {outcome: entry.counts(statistic, outcome) for outcome in OUTCOMES}
                    for statistic in BINS}} for entry in histograms]}
