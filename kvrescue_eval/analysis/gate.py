"""The CI gate: what makes KV-Rescue KV-Rescue, checked per rescue setting and benchmark.

Criteria (a GateSpec; a criterion set to None is not checked; GATES holds the named gates, e.g. the
kv_recall testbed's, the one place their thresholds live):
- recovery = (A_rescue - A_bon) / (A_full - A_bon) >= min_recovery ("below minimum"); with A_full == A_bon
  recovery is undefined: it passes if A_rescue >= A_bon;
- against a baseline report: recovery >= baseline recovery - max_drop ("dropped");
- above both parents: A_rescue >= max(A_helper_alone, A_bon) + min_margin (interleaving beats each model
  alone; needs the helper-alone arm at the rescue's N);
- the helper share of committed steps (helper_steps / steps, ratio of the per-problem means) within
  helper_share = (low, high): neither model is switched off;
- the base-token ratio, rescue's mean base tokens per problem over bon's, <= max_base_token_ratio (the paper's
  decode-cost effect: an evicted best-of-N runs on, KV-Rescue ends).

A verdict is "ok" or every failed criterion, joined by "; ". A comparison the gate cannot compute fails:
"incomplete: ..." when an arm (bon, full, or the helper alone when the margin is checked) is missing or
ambiguous, naming the command that would produce it, or when the runs lack the engine statistics a criterion
needs; "missing" for a setting of the baseline that is absent from the runs.
"""

from dataclasses import dataclass, replace

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.json_input import load_json_object
from kvrescue_eval.analysis.missing_runs import arm_command
from kvrescue_eval.analysis.tables import SETTING_COLUMNS, Table, percent

KEY_COLUMNS = SETTING_COLUMNS + ("benchmark",)
# Recoveries are ratios of means of 0/1 verdicts: a threshold met exactly must not fail on rounding.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class GateSpec:
    min_recovery: float | None = None
    min_margin: float | None = None            # A_rescue - max(A_helper_alone, A_bon) >= this
    helper_share: tuple | None = None          # (low, high): bounds of the helper's share of committed steps
    max_base_token_ratio: float | None = None  # rescue's base tokens per problem / bon's <= this

    def __post_init__(self):
        for name in ("min_recovery", "min_margin", "max_base_token_ratio"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise ValueError(f"gate {name}={value!r} is invalid; valid: a number, or None (not checked)")
        if self.max_base_token_ratio is not None and self.max_base_token_ratio <= 0:
            raise ValueError(f"gate max_base_token_ratio={self.max_base_token_ratio!r} is invalid; valid: a number > 0")
        if self.helper_share is not None:
            low, high = self.helper_share
            if not 0 <= low <= high <= 1:
                raise ValueError(f"gate helper_share={self.helper_share!r} is invalid; valid: (low, high) with "
                                 "0 <= low <= high <= 1")

    def describe(self):
        parts = []
        if self.min_recovery is not None:
            parts.append(f"recovery >= {self.min_recovery:g}")
        if self.min_margin is not None:
            parts.append(f"rescue >= max(helper alone, bon) + {self.min_margin:g}")
        if self.helper_share is not None:
            parts.append(f"helper share of committed steps in [{self.helper_share[0]:.0%}, {self.helper_share[1]:.0%}]")
        if self.max_base_token_ratio is not None:
            parts.append(f"base tokens rescue / bon <= {self.max_base_token_ratio:g}")
        return "; ".join(parts) or "nothing"


# The kv_recall testbed's gate (.ci/recovery-gate; docs/testbed.md, "CI gate"): the targets of issue 20 for the
# testbed, which a selector that ignores the steps' content fails (tests/testbed/test_gate_sabotage.py).
GATES = {
    "testbed": GateSpec(min_recovery=0.8, min_margin=0.25, helper_share=(0.15, 0.70), max_base_token_ratio=0.6),
}


def gate_spec(name=None, **overrides):
    """The named gate (None: no criterion) with the given criteria overridden (None values are ignored)."""
    if name is not None and name not in GATES:
        raise ValueError(f"unknown gate {name!r}; valid: {', '.join(GATES)}")
    spec = GATES[name] if name else GateSpec()
    return replace(spec, **{key: value for key, value in overrides.items() if value is not None})


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


def check(analysis, spec, baseline=None, max_drop=0.0):
    """Returns the gate's table and whether every setting passed. `spec`: a GateSpec, or a number (the
    minimum recovery alone)."""
    if not isinstance(spec, GateSpec):
        spec = GateSpec(min_recovery=spec)
    rows = []
    seen = set()
    for comp in analysis.comparisons:
        row = {col: getattr(comp.rescue.setting, col) for col in SETTING_COLUMNS}
        row["benchmark"] = comp.rescue.benchmark
        key = _key(row)
        seen.add(key)
        reference = baseline.get(key) if baseline else None
        row.update(_measures(comp), recovery=comp.recovery, minimum=spec.min_recovery, baseline=reference)
        row["verdict"] = _verdict(comp, row, spec, reference, max_drop)
        rows.append(row)
    for key, reference in (baseline or {}).items():
        if key not in seen:
            row = dict(zip(KEY_COLUMNS, key))
            row.update(recovery=None, minimum=spec.min_recovery, baseline=reference, verdict="missing")
            rows.append(row)
    measures = ("rescue", "bon", "helper_alone", "margin", "helper_share", "base_token_ratio")
    table = Table("gate", f"Recovery gate: {spec.describe()}",
                  KEY_COLUMNS + measures + ("recovery", "minimum", "baseline", "verdict"), rows,
                  {**{col: percent for col in measures[:5]}, "base_token_ratio": _ratio_format,
                   "recovery": percent, "minimum": percent, "baseline": percent})
    return table, all(row["verdict"] == "ok" for row in rows)


def _ratio_format(value):
    return "—" if value is None else f"{value:.2f}"


def _measures(comp):
    rescue = comp.rescue
    parents = [arm.accuracy.mean for arm in (comp.helper, comp.bon) if arm is not None]
    steps, helper_steps = rescue.stats.get("steps"), rescue.stats.get("helper_steps")
    rescue_tokens, bon_tokens = rescue.stats.get("base_tokens"), comp.bon.stats.get("base_tokens") if comp.bon else None
    return dict(rescue=rescue.accuracy.mean, bon=comp.bon.accuracy.mean if comp.bon else None,
                helper_alone=comp.helper.accuracy.mean if comp.helper else None,
                margin=rescue.accuracy.mean - max(parents) if comp.helper and comp.bon else None,
                helper_share=helper_steps / steps if steps and helper_steps is not None else None,
                base_token_ratio=rescue_tokens / bon_tokens if bon_tokens and rescue_tokens is not None else None)


def _verdict(comp, row, spec, reference, max_drop):
    incomplete = list(comp.missing)
    if spec.min_margin is not None and comp.helper is None:
        incomplete.append(f"no helper-alone run at N={comp.rescue.setting.n} with helper {comp.rescue.setting.helper} "
                          f"(the margin over both parents needs it); run: {arm_command(comp.rescue, 'helper')}")
    for name, needed, stats in (("helper_share", spec.helper_share, "helper_steps and steps"),
                                ("base_token_ratio", spec.max_base_token_ratio, "base_tokens")):
        if needed is not None and not comp.missing and row[name] is None:
            incomplete.append(f"no {name.replace('_', ' ')}: the rescue or bon run reports no {stats} "
                              "(engine statistics of the kvrescue model)")
    if incomplete:
        return "incomplete: " + "; ".join(incomplete)
    failed = []
    recovery = comp.recovery
    if spec.min_recovery is not None:
        if recovery is None:
            if comp.rescue.accuracy.mean < comp.bon.accuracy.mean:
                failed.append("below minimum")
        elif recovery < spec.min_recovery - TOLERANCE:
            failed.append("below minimum")
    if reference is not None and recovery is not None and recovery < reference - max_drop - TOLERANCE:
        failed.append("dropped")
    if spec.min_margin is not None and row["margin"] < spec.min_margin - TOLERANCE:
        failed.append(f"not above both parents by {spec.min_margin:g} (rescue {row['rescue']:.3f}, helper alone "
                      f"{row['helper_alone']:.3f}, bon {row['bon']:.3f})")
    if spec.helper_share is not None:
        low, high = spec.helper_share
        share = row["helper_share"]
        if not low - TOLERANCE <= share <= high + TOLERANCE:
            failed.append(f"helper share {share:.1%} {'below' if share < low else 'above'} [{low:.0%}, {high:.0%}]")
    if spec.max_base_token_ratio is not None and row["base_token_ratio"] > spec.max_base_token_ratio + TOLERANCE:
        failed.append(f"base tokens rescue / bon {row['base_token_ratio']:.2f} > {spec.max_base_token_ratio:g}")
    return "; ".join(failed) or "ok"
