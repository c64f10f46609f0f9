"""The report's tables. Each table keeps raw values (CSV, JSON) and renders them for markdown.

Accuracies are fractions in CSV/JSON and percentages with one decimal in markdown. "±" is the
population standard deviation (ddof 0) over seeds, as in the paper. The accuracy of a table is the
analysis's metric (default exact_match_boxed, the paper's "boxed and correct").
"""

import csv
import io
from dataclasses import dataclass

from kvrescue_eval.analysis.comparisons import average_recovery
from kvrescue_eval.analysis.identity import mismatches
from kvrescue_eval.analysis.markdown import markdown_table
from kvrescue_eval.analysis.recovery import recovery
from kvrescue_eval.analysis.runs import ACCURACY_METRICS
from kvrescue_eval.repeat_statistics import KINDS
from kvrescue_eval.run_modes import MODES

# `variant`: what tells a setting from another with the same named fields (analysis/identity.py), else empty
SETTING_COLUMNS = ("base", "mode", "n", "evictor", "budget", "helper", "scorer", "detector", "max_steps",
                   "max_step_tokens", "max_context", "variant")
STD_NOTE = "± population std (ddof 0) over seeds"


@dataclass
class Table:
    name: str
    title: str
    columns: tuple
    rows: list          # dicts column -> raw value
    formats: dict       # column -> function(raw) -> str, for markdown

    def to_markdown(self):
        """The table in markdown; an empty table renders as nothing."""
        if not self.rows:
            return ""
        cells = [[self.formats.get(col, _plain)(row.get(col)) for col in self.columns] for row in self.rows]
        return f"### {self.title}\n\n" + markdown_table(self.columns, cells) + "\n"

    def to_csv(self):
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=self.columns, lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({col: self._csv_value(col, row.get(col)) for col in self.columns})
        return out.getvalue()

    def _csv_value(self, col, value):
        if value is None:
            return ""
        return self.formats[col](value) if isinstance(value, tuple) else value

    def to_json(self):
        return {"title": self.title, "columns": list(self.columns), "rows": self.rows}


def _plain(value):
    return "—" if value is None else str(value)


def percent(value):
    return "—" if value is None else f"{100 * value:.1f}"


def mean_std(pair):
    if pair is None or pair[0] is None:
        return "—"
    mean, std = pair
    return f"{100 * mean:.1f}" if std is None else f"{100 * mean:.1f} ± {100 * std:.1f}"


def number(value):
    return "—" if value is None else f"{value:.1f}"


def setting_fields(setting):
    return {col: getattr(setting, col) for col in SETTING_COLUMNS}


def _ratio(numerator, denominator):
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def accuracy_table(cells, metric):
    """Table 5 layout, long form: the chosen metric and every other accuracy metric, mean and std over seeds."""
    rows = []
    others = [name for name in ACCURACY_METRICS if name != metric]
    for cell in cells:
        row = setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, problems=cell.n_samples, limit=_limit(cell), seeds=cell.accuracy.count,
                   pass1_mean=cell.accuracy.mean, pass1_std=cell.accuracy.std, pass1_stderr=cell.accuracy.stderr)
        for name in others:
            summary = cell.metrics.get(name)
            row[f"{name}_mean"] = summary.mean if summary else None
            row[f"{name}_std"] = summary.std if summary else None
            row[f"{name}_stderr"] = summary.stderr if summary else None
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "problems", "limit", "seeds", "pass1_mean", "pass1_std",
                                 "pass1_stderr") + tuple(f"{name}_{part}" for name in others
                                                         for part in ("mean", "std", "stderr"))
    formats = {col: percent for col in columns if col.endswith(("_mean", "_std", "_stderr"))}
    return Table("accuracy", f"pass@1 (%) per setting and benchmark: pass1 = {metric}, mean, population std "
                 f"(ddof 0) over seeds and standard error over problems (seeds of a problem together; — for "
                 f"several runs pooled); other accuracy metrics beside it", columns, rows, formats)


def repeats_table(cells, metric):
    """Statistics over repeats of every cell with several: avg@K ± spread (the mean pass@1 over the K repeats,
    population std over repeats), its standard error over problems, pass@k and maj@k of the chosen metric."""
    cells = [cell for cell in cells if cell.accuracy.count > 1]
    ks = sorted({key for cell in cells for key in cell.over_repeats.get(cell.metric, {})},
                key=lambda key: (KINDS.index(key[0]), key[1]))
    stat_columns = tuple(f"{kind}@{k}" for kind, k in ks)
    rows = []
    for cell in cells:
        row = setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, problems=cell.n_samples, repeats=cell.accuracy.count,
                   avg=(cell.accuracy.mean, cell.accuracy.std), avg_stderr=cell.accuracy.stderr)
        row.update({f"{kind}@{k}": cell.over_repeats.get(cell.metric, {}).get((kind, k)) for kind, k in ks})
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "problems", "repeats", "avg", "avg_stderr") + stat_columns
    formats = {"avg": mean_std, "avg_stderr": percent, **{col: percent for col in stat_columns}}
    return Table("repeats", f"Over repeats (%), {metric}: avg = avg@K, the mean pass@1 over the K repeats, "
                 f"{STD_NOTE} (the spread); avg_stderr over problems; pass@k unbiased (Chen et al. 2021); maj@k "
                 f"the majority vote of the first k repeats (— for several runs pooled or not reported)",
                 columns, rows, formats)


def _limit(cell):
    return ", ".join(str(limit) for limit in cell.limits) or None


def accuracy_matrix(cells, metric):
    """Table 5 layout: one row per setting, one column per benchmark, cells 'mean ± std'."""
    benchmarks = sorted({cell.benchmark for cell in cells})
    by_setting = {}
    for cell in cells:
        by_setting.setdefault(cell.setting, {})[cell.benchmark] = cell
    rows = []
    for setting, per_bench in by_setting.items():
        row = setting_fields(setting)
        for bench in benchmarks:
            cell = per_bench.get(bench)
            row[bench] = (cell.accuracy.mean, cell.accuracy.std) if cell else None
        means = [per_bench[b].accuracy.mean for b in benchmarks if b in per_bench]
        row["avg"] = (sum(means) / len(means), None) if len(means) == len(benchmarks) else None
        rows.append(row)
    columns = SETTING_COLUMNS + tuple(benchmarks) + ("avg",)
    formats = {col: mean_std for col in tuple(benchmarks) + ("avg",)}
    return Table("table5", f"Table 5 layout: {metric} (%), mean {STD_NOTE}", columns, rows, formats)


def recovery_table(comparisons, metric):
    rows = []
    for comp in comparisons:
        row = setting_fields(comp.rescue.setting)
        row.update(benchmark=comp.rescue.benchmark, problems=comp.rescue.n_samples, rescue=comp.rescue.accuracy.mean,
                   bon=comp.bon.accuracy.mean if comp.bon else None,
                   full=comp.full.accuracy.mean if comp.full else None,
                   helper_alone=comp.helper.accuracy.mean if comp.helper else None, recovery=comp.recovery,
                   status=comp.status)
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "problems", "rescue", "bon", "full", "helper_alone", "recovery",
                                 "status")
    formats = {col: percent for col in ("rescue", "bon", "full", "helper_alone", "recovery")}
    return Table("recovery", f"Recovery (A_rescue - A_bon) / (A_full - A_bon) per setting, on {metric}, every arm "
                 "at the rescue's N; accuracies in %", columns, rows, formats)


def recovery_average_table(comparisons):
    rows = []
    for setting, mean, defined, total in average_recovery(comparisons):
        row = setting_fields(setting)
        row.update(mean_recovery=mean, benchmarks=f"{defined}/{total}")
        rows.append(row)
    columns = SETTING_COLUMNS + ("mean_recovery", "benchmarks")
    return Table("recovery_average", "Recovery (%) averaged over benchmarks per setting and budget",
                 columns, rows, {"mean_recovery": percent})


def evictor_table(comparisons, metric):
    """Recovery grouped by evictor: per evictor, budget and benchmark, the bon and rescue accuracies, the full
    base's, recovery, the same on step accuracy where the task reports it (the testbed), and the base tokens per
    problem of both evicted arms."""
    rows = []
    for comp in sorted(comparisons, key=lambda c: (c.rescue.setting.evictor or "", c.rescue.setting.budget or 0,
                                                   c.rescue.benchmark, c.rescue.setting.n)):
        setting = comp.rescue.setting
        step = {arm: _metric_mean(getattr(comp, arm), "step_accuracy") for arm in ("bon", "rescue", "full")}
        rows.append(dict(evictor=setting.evictor, budget=setting.budget, benchmark=comp.rescue.benchmark, n=setting.n,
                         bon=comp.bon.accuracy.mean if comp.bon else None, rescue=comp.rescue.accuracy.mean,
                         full=comp.full.accuracy.mean if comp.full else None, recovery=comp.recovery,
                         bon_step_accuracy=step["bon"], rescue_step_accuracy=step["rescue"],
                         step_recovery=None if None in step.values() else recovery(**step),
                         bon_base_tokens=comp.bon.stats.get("base_tokens") if comp.bon else None,
                         rescue_base_tokens=comp.rescue.stats.get("base_tokens"), status=comp.status))
    columns = ("evictor", "budget", "benchmark", "n", "bon", "rescue", "full", "recovery", "bon_step_accuracy",
               "rescue_step_accuracy", "step_recovery", "bon_base_tokens", "rescue_base_tokens", "status")
    formats = {**{col: percent for col in ("bon", "rescue", "full", "recovery", "bon_step_accuracy",
                                           "rescue_step_accuracy", "step_recovery")},
               "bon_base_tokens": number, "rescue_base_tokens": number}
    return Table("by_evictor", f"By evictor: {metric} (%) of evicted best-of-N and rescue, recovery, the same on step "
                 "accuracy (where the task reports it), and base tokens per problem", columns, rows, formats)


def _metric_mean(cell, name):
    summary = cell.metrics.get(name) if cell is not None else None
    return summary.mean if summary is not None else None


def decode_cost_table(cells):
    """Table 1 layout: mean per problem of steps, output length, base and helper tokens."""
    rows = []
    for cell in cells:
        row = setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, steps=cell.stats.get("steps"),
                   output_tokens=cell.stats.get("output_tokens"), base_tokens=cell.stats.get("base_tokens"),
                   helper_tokens=cell.stats.get("helper_tokens"))
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "steps", "output_tokens", "base_tokens", "helper_tokens")
    return Table("decode_cost", "Table 1 layout: decode cost per problem (means; — where the run has no "
                 "engine statistics, e.g. stock lm-eval models)", columns, rows,
                 {col: number for col in columns[-4:]})


ABLATION_STATS = ("accuracy", "degeneration_rate", "base_tokens", "steps", "early_exit_rate")
ABLATION_FORMATS = {"accuracy": percent, "degeneration_rate": percent, "early_exit_rate": percent,
                    "base_tokens": number, "steps": number}
# the statistics table adds these (the testbed's calibration grid reads them all there)
RUN_STATS = ABLATION_STATS + ("step_accuracy", "helper_tokens", "helper_share", "recovery")
RUN_FORMATS = {**ABLATION_FORMATS, "step_accuracy": percent, "helper_tokens": number, "helper_share": percent,
               "recovery": percent}


def ablation_values(cell):
    """Early-exit rate = early exits / base candidates, base candidates = steps x N."""
    stats, n = cell.stats, cell.setting.n
    base_candidates = stats["steps"] * n if "steps" in stats and MODES[cell.setting.mode].uses_base else None
    return dict(accuracy=cell.accuracy.mean, degeneration_rate=stats.get("degenerated"),
                base_tokens=stats.get("base_tokens"), steps=stats.get("steps"),
                early_exit_rate=_ratio(stats.get("early_exits"), base_candidates))


def ablation_table(analysis):
    """Every cell with the Table 2 statistics, its step accuracy (where the task reports it), helper tokens, helper
    share of committed steps, and, for a rescue cell, its recovery."""
    recoveries = {id(comp.rescue): comp.recovery for comp in analysis.comparisons}
    rows = [{**setting_fields(cell.setting), "benchmark": cell.benchmark, **ablation_values(cell),
             "step_accuracy": _metric_mean(cell, "step_accuracy"), "helper_tokens": cell.stats.get("helper_tokens"),
             "helper_share": _ratio(cell.stats.get("helper_steps"), cell.stats.get("steps")),
             "recovery": recoveries.get(id(cell))} for cell in analysis.cells]
    return Table("ablation", f"Statistics of every setting: {analysis.metric} (%), degeneration rate (%), base tokens, "
                 "steps, early-exit rate (% of base candidates), step accuracy (%), helper tokens, helper share of "
                 "committed steps (%), recovery (%) of a rescue setting", SETTING_COLUMNS + ("benchmark",) + RUN_STATS,
                 rows, RUN_FORMATS)


# The paper's Table 2 rows, cumulative: evicted best-of-N, + interleaving (rescue, detector off),
# + early exit (rescue, detector on); the full-KV base first, as the reference.
TABLE2_METHODS = (("full", "full", "off"), ("bon", "bon", "off"), ("+ interleaving", "rescue", "off"),
                  ("+ early exit", "rescue", "on"))
TABLE2_KEY = ("base", "n", "evictor", "budget", "max_steps", "max_step_tokens", "max_context")


def table2_rows(cells):
    """(group key, method, cell) of the Table 2 layout, for every budget with at least one rescue row."""
    by_budget = {}
    for cell in cells:
        s = cell.setting
        if s.mode in ("bon", "rescue"):
            key = tuple(getattr(s, name) for name in TABLE2_KEY) + (cell.benchmark,)
            by_budget.setdefault(key, []).append(cell)
    rows = []
    for key, members in by_budget.items():
        if not any(c.setting.mode == "rescue" for c in members):
            continue
        base, n = key[0], key[1]
        fulls = [c for c in cells if c.benchmark == key[-1] and c.setting.mode == "full" and c.setting.base == base
                 and c.setting.n == n and c.setting.detector == "off"]
        rescues = [c for c in members if c.setting.mode == "rescue"]
        for method, mode, detector in TABLE2_METHODS:
            pool = fulls if mode == "full" else members
            for cell in pool:
                if cell.setting.mode == mode and cell.setting.detector == detector and (
                        mode == "rescue" or any(not mismatches(cell, r, mode) for r in rescues)):
                    rows.append((key, method, cell))
    return rows


def table2(cells, metric):
    rows = []
    for key, method, cell in table2_rows(cells):
        row = dict(zip(TABLE2_KEY, key[:-1]), benchmark=key[-1], method=method, helper=cell.setting.helper)
        row.update(ablation_values(cell))
        rows.append(row)
    columns = ("base", "n", "evictor", "budget", "benchmark", "method", "helper") + ABLATION_STATS
    return Table("table2", f"Table 2 layout (cumulative): bon, + interleaving (rescue, detector off), + early exit "
                 f"(rescue, detector on), full-KV for reference; {metric} (%), degeneration rate (%), base tokens, "
                 "steps, early-exit rate (% of base candidates)", columns, rows, ABLATION_FORMATS)


def helper_share_table(cells):
    """Figure 6 data: share of committed steps that came from the helper, and share of committed steps whose
    text the base and the helper both proposed (the tie the engine draws; ratios of means)."""
    rows = []
    for cell in cells:
        if cell.setting.mode != "rescue":
            continue
        row = setting_fields(cell.setting)
        steps = cell.stats.get("steps")
        row.update(benchmark=cell.benchmark, helper_share=_ratio(cell.stats.get("helper_steps"), steps),
                   shared_share=_ratio(cell.stats.get("shared_steps"), steps))
        rows.append(row)
    return Table("helper_share", "Helper share of committed steps (%), and share of committed steps whose text "
                 "both models proposed (%; the engine draws which of them the step counts for)",
                 SETTING_COLUMNS + ("benchmark", "helper_share", "shared_share"), rows,
                 {"helper_share": percent, "shared_share": percent})


def unpaired_table(unpaired):
    rows = []
    for cell, reason in unpaired:
        row = setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, reason=reason)
        rows.append(row)
    return Table("unpaired", "Runs outside any complete comparison", SETTING_COLUMNS + ("benchmark", "reason"),
                 rows, {})


def all_tables(analysis):
    cells, metric = analysis.cells, analysis.metric
    return [accuracy_matrix(cells, metric), accuracy_table(cells, metric), recovery_table(analysis.comparisons, metric),
            recovery_average_table(analysis.comparisons), evictor_table(analysis.comparisons, metric),
            repeats_table(cells, metric), decode_cost_table(cells), table2(cells, metric),
            ablation_table(analysis), helper_share_table(cells), unpaired_table(analysis.unpaired)]
