"""The report's tables. Each table keeps raw values (CSV, JSON) and renders them for markdown.

Accuracies are fractions in CSV/JSON and percentages with one decimal in markdown.
"""

import csv
import io
from dataclasses import dataclass

from kvrescue_eval.analysis.comparisons import average_recovery

SETTING_COLUMNS = ("base", "mode", "n", "evictor", "budget", "helper", "scorer")


@dataclass
class Table:
    name: str
    title: str
    columns: tuple
    rows: list          # dicts column -> raw value
    formats: dict       # column -> function(raw) -> str, for markdown

    def to_markdown(self):
        lines = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        for row in self.rows:
            cells = [self.formats.get(col, _plain)(row.get(col)) for col in self.columns]
            lines.append("| " + " | ".join(cells) + " |")
        if not self.rows:
            lines.append("| " + " | ".join(["(none)"] + [""] * (len(self.columns) - 1)) + " |")
        return "\n".join(lines) + "\n"

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


def _setting_fields(setting):
    return {col: getattr(setting, col) for col in SETTING_COLUMNS}


def _ratio(numerator, denominator):
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def accuracy_table(cells):
    """Table 5 layout, long form: pass@1 as mean ± std over seeds per setting and benchmark."""
    rows = []
    for cell in cells:
        row = _setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, seeds=cell.qwen.count,
                   pass1_mean=cell.qwen.mean, pass1_std=cell.qwen.std,
                   pass1_strict_mean=cell.strict.mean if cell.strict else None,
                   pass1_strict_std=cell.strict.std if cell.strict else None)
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "seeds", "pass1_mean", "pass1_std", "pass1_strict_mean",
                                 "pass1_strict_std")
    formats = {col: percent for col in columns if col.startswith("pass1")}
    return Table("accuracy", "pass@1 (%) per setting and benchmark, mean ± std over seeds", columns, rows, formats)


def accuracy_matrix(cells):
    """Table 5 layout: one row per setting, one column per benchmark, cells 'mean ± std'."""
    benchmarks = sorted({cell.benchmark for cell in cells})
    by_setting = {}
    for cell in cells:
        by_setting.setdefault(cell.setting, {})[cell.benchmark] = cell
    rows = []
    for setting, per_bench in by_setting.items():
        row = _setting_fields(setting)
        for bench in benchmarks:
            cell = per_bench.get(bench)
            row[bench] = (cell.qwen.mean, cell.qwen.std) if cell else None
        means = [per_bench[b].qwen.mean for b in benchmarks if b in per_bench]
        row["avg"] = (sum(means) / len(means), None) if len(means) == len(benchmarks) else None
        rows.append(row)
    columns = SETTING_COLUMNS + tuple(benchmarks) + ("avg",)
    formats = {col: mean_std for col in tuple(benchmarks) + ("avg",)}
    return Table("table5", "Table 5 layout: pass@1 (%), mean ± std over seeds (grader mode qwen)",
                 columns, rows, formats)


def recovery_table(comparisons):
    rows = []
    for comp in comparisons:
        row = _setting_fields(comp.rescue.setting)
        row.update(benchmark=comp.rescue.benchmark, rescue=comp.rescue.qwen.mean,
                   bon=comp.bon.qwen.mean if comp.bon else None, full=comp.full.qwen.mean if comp.full else None,
                   helper_alone=comp.helper.qwen.mean if comp.helper else None, recovery=comp.recovery,
                   status=comp.status)
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "rescue", "bon", "full", "helper_alone", "recovery", "status")
    formats = {col: percent for col in ("rescue", "bon", "full", "helper_alone", "recovery")}
    return Table("recovery", "Recovery (A_rescue - A_bon) / (A_full - A_bon) per setting; accuracies in %",
                 columns, rows, formats)


def recovery_average_table(comparisons):
    rows = []
    for setting, mean, defined, total in average_recovery(comparisons):
        row = _setting_fields(setting)
        row.update(mean_recovery=mean, benchmarks=f"{defined}/{total}")
        rows.append(row)
    columns = SETTING_COLUMNS + ("mean_recovery", "benchmarks")
    return Table("recovery_average", "Recovery (%) averaged over benchmarks per setting and budget",
                 columns, rows, {"mean_recovery": percent})


def decode_cost_table(cells):
    """Table 1 layout: mean per problem of steps, output length, base and helper tokens."""
    rows = []
    for cell in cells:
        row = _setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, steps=cell.stats.get("steps"),
                   output_tokens=cell.stats.get("output_tokens"), base_tokens=cell.stats.get("base_tokens"),
                   helper_tokens=cell.stats.get("helper_tokens"))
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "steps", "output_tokens", "base_tokens", "helper_tokens")
    return Table("decode_cost", "Table 1 layout: decode cost per problem (means; — where the run has no "
                 "engine statistics, e.g. stock lm-eval models)", columns, rows,
                 {col: number for col in columns[-4:]})


def ablation_table(cells):
    """Table 2 layout. Early-exit rate = early exits / base candidates, base candidates = steps x N."""
    rows = []
    for cell in cells:
        stats, n = cell.stats, cell.setting.n
        base_candidates = stats["steps"] * n if "steps" in stats and cell.setting.mode in ("rescue", "bon") else None
        row = _setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, accuracy=cell.qwen.mean, degeneration_rate=stats.get("degenerated"),
                   base_tokens=stats.get("base_tokens"), steps=stats.get("steps"),
                   early_exit_rate=_ratio(stats.get("early_exits"), base_candidates))
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "accuracy", "degeneration_rate", "base_tokens", "steps",
                                 "early_exit_rate")
    formats = {"accuracy": percent, "degeneration_rate": percent, "early_exit_rate": percent,
               "base_tokens": number, "steps": number}
    return Table("ablation", "Table 2 layout: accuracy (%), degeneration rate (%), base tokens, steps, "
                 "early-exit rate (% of base candidates)", columns, rows, formats)


def helper_share_table(cells):
    """Figure 6 data: share of committed steps that came from the helper (ratio of means)."""
    rows = []
    for cell in cells:
        if cell.setting.mode != "rescue":
            continue
        row = _setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark,
                   helper_share=_ratio(cell.stats.get("helper_steps"), cell.stats.get("steps")))
        rows.append(row)
    return Table("helper_share", "Helper share of committed steps (%)",
                 SETTING_COLUMNS + ("benchmark", "helper_share"), rows, {"helper_share": percent})


def unpaired_table(unpaired):
    rows = []
    for cell, reason in unpaired:
        row = _setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, reason=reason)
        rows.append(row)
    return Table("unpaired", "Runs outside any complete comparison", SETTING_COLUMNS + ("benchmark", "reason"),
                 rows, {})


def all_tables(analysis):
    return [accuracy_matrix(analysis.cells), accuracy_table(analysis.cells), recovery_table(analysis.comparisons),
            recovery_average_table(analysis.comparisons), decode_cost_table(analysis.cells),
            ablation_table(analysis.cells), helper_share_table(analysis.cells), unpaired_table(analysis.unpaired)]
