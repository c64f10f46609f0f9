"""What the engine records of every base candidate it decodes token by token: the data of the paper's Fig. 3.

For each base candidate (whether the detector is on or off):
- outcome: "coherent" (the step ended: a step separator or EOS), "degenerate" (it ran on to the step cap
  without ending) or "aborted" (the detector stopped it; only with the detector on);
- tokens: the tokens decoded for it, EOS included (they add up to the sample's `base_tokens`);
- entropy: the largest moving average of the per-token entropy over the detector's `window` tokens, the mean of
  all of them for a candidate shorter than the window (the EOS token's entropy included);
- gzip: the gzip ratio of the last `gzip_chars` characters of its text without the trailing step separator
  (kvrescue_eval.detector.gzip_ratio); None when that text is empty.
An aborted candidate's statistics are those at the abort. Step-level base candidates (a base that proposes
whole steps) carry no per-token entropies and are not recorded.

In a `--log_samples` document the metric `base_candidates` (kvrescue_eval.stats.BASE_CANDIDATES) holds a list
over seeds; each response's records are stored by outcome, as columns, floats rounded to DIGITS decimals, so
sample files stay small: {outcome: {"tokens": [...], "entropy": [...], "gzip": [...]}}, outcomes without
candidates left out.
"""

from dataclasses import dataclass

from kvrescue_eval import STEP_SEPARATOR
from kvrescue_eval.detector import CandidateMonitor, gzip_ratio

COHERENT, DEGENERATE, ABORTED = "coherent", "degenerate", "aborted"
OUTCOMES = (COHERENT, DEGENERATE, ABORTED)
COLUMNS = ("tokens", "entropy", "gzip")
DIGITS = 3


@dataclass(frozen=True)
class CandidateRecord:
    outcome: str
    tokens: int
    entropy: float
    gzip: float | None


def candidate_record(monitor: CandidateMonitor, text: str, ended: bool, aborted: bool) -> CandidateRecord:
    """The record of a finished candidate whose tokens `monitor` saw; `ended`: it stopped at a separator or EOS."""
    body = text.removesuffix(STEP_SEPARATOR)
    outcome = ABORTED if aborted else COHERENT if ended else DEGENERATE
    return CandidateRecord(outcome, monitor.tokens, monitor.peak_average,
                           gzip_ratio(body, monitor.config.gzip_chars) if body else None)


def compact(records) -> dict:
    """The records of one response as stored in a sample: by outcome, as rounded columns."""
    out = {}
    for record in records:
        columns = out.setdefault(record.outcome, {name: [] for name in COLUMNS})
        columns["tokens"].append(record.tokens)
        columns["entropy"].append(round(record.entropy, DIGITS))
        columns["gzip"].append(None if record.gzip is None else round(record.gzip, DIGITS))
    return out


def expand(stored) -> list[CandidateRecord]:
    """The records of one response from their stored form; ValueError naming what is wrong."""
    if not isinstance(stored, dict) or set(stored) - set(OUTCOMES):
        raise ValueError(f"base candidate records must be a dict with keys among {', '.join(OUTCOMES)}; "
                         f"got {stored!r:.200}")
    records = []
    for outcome, columns in stored.items():
        if (not isinstance(columns, dict) or set(columns) != set(COLUMNS)
                or len({len(columns[c]) for c in COLUMNS}) != 1):
            raise ValueError(f"base candidate records of outcome {outcome!r} must be equally long lists "
                             f"{', '.join(COLUMNS)}; got {columns!r:.200}")
        records += [CandidateRecord(outcome, *row) for row in zip(*(columns[c] for c in COLUMNS))]
    return records
