"""The CI gate: every rescue setting must reach a minimum recovery and, given a baseline report, must
not lose more than a given amount of recovery against it.

Verdicts per rescue setting and benchmark:
- "ok";
- "below minimum": recovery < min_recovery;
- "dropped": recovery < baseline recovery - max_drop;
- "incomplete: ...": the bon or full arm is missing or ambiguous, so recovery cannot be computed (a gate
  must not pass on what it cannot see);
- "missing": in the baseline, absent from the runs;
- with A_full == A_bon recovery is undefined: "ok" if A_rescue >= A_bon, else "below minimum".
"""


from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.json_input import load_json_object
from kvrescue_eval.analysis.tables import SETTING_COLUMNS, Table, percent

KEY_COLUMNS = SETTING_COLUMNS + ("benchmark",)
# Recoveries are ratios of means of 0/1 verdicts: a threshold met exactly must not fail on rounding.
TOLERANCE = 1e-9


def _key(row):
    return tuple(row.get(col) for col in KEY_COLUMNS)


def load_baseline(path):
    """Recovery per setting and benchmark from a report.json written by `kvrescue-eval report`."""
    data = load_json_object(path)
    rows = ((data.get("tables") or {}).get("recovery") or {}).get("rows")
    if not isinstance(rows, list):
        raise AnalysisInputError(path, "tables.recovery.rows",
                                 "missing: the baseline must be a report.json written by `kvrescue-eval report`")
    return {_key(row): row.get("recovery") for row in rows}


def check(analysis, min_recovery, baseline=None, max_drop=0.0):
    """Returns the gate's table and whether every setting passed."""
    rows = []
    seen = set()
    for comp in analysis.comparisons:
        row = {col: getattr(comp.rescue.setting, col) for col in SETTING_COLUMNS}
        row["benchmark"] = comp.rescue.benchmark
        key = _key(row)
        seen.add(key)
        recovery = comp.recovery
        reference = baseline.get(key) if baseline else None
        row.update(recovery=recovery, minimum=min_recovery, baseline=reference,
                   verdict=_verdict(comp, recovery, min_recovery, reference, max_drop))
        rows.append(row)
    for key, reference in (baseline or {}).items():
        if key not in seen:
            row = dict(zip(KEY_COLUMNS, key))
            row.update(recovery=None, minimum=min_recovery, baseline=reference, verdict="missing")
            rows.append(row)
    table = Table("gate", "Recovery gate", KEY_COLUMNS + ("recovery", "minimum", "baseline", "verdict"), rows,
                  {"recovery": percent, "minimum": percent, "baseline": percent})
    return table, all(row["verdict"] == "ok" for row in rows)


def _verdict(comp, recovery, min_recovery, reference, max_drop):
    if not comp.complete:
        return comp.status
    if recovery is None:
        return "ok" if comp.rescue.accuracy.mean >= comp.bon.accuracy.mean else "below minimum"
    if recovery < min_recovery - TOLERANCE:
        return "below minimum"
    if reference is not None and recovery < reference - max_drop - TOLERANCE:
        return "dropped"
    return "ok"
