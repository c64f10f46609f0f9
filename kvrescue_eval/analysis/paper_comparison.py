"""`kvrescue-eval report --reference paper`: our values beside the paper's, cell by cell, with the difference.

A paper value is shown only where the setting is the paper's: the same base model (Qwen2.5-Math-7B or
-72B-Instruct; the 1.5B helper for helper-alone rows), N, mode, budget and benchmark (Tables 1 and 2:
7B, N = 8; Table 2: MATH500). Elsewhere (the kv_recall testbed, other models) the paper column is empty
and `note` says why. Recovery compares with the paper's at the same N and budget: for the paper's
models and benchmarks the same cell, otherwise the paper's mean over its 2 bases x 5 benchmarks.
Differences are ours minus the paper's. Paper figures are "reported by the paper, not reproduced here".
"""

from kvrescue_eval.analysis import paper
from kvrescue_eval.analysis.comparisons import average_recovery
from kvrescue_eval.analysis.tables import (SETTING_COLUMNS, Table, ablation_values, number, percent, setting_fields,
                                           table2_rows)

NOT_PAPER = "no paper row: the paper reports Qwen2.5-Math 7B/72B (helper 1.5B) on its five benchmarks"


def _difference(ours, theirs):
    return None if ours is None or theirs is None else ours - theirs


def table5_side_by_side(cells, metric):
    rows = []
    for cell in cells:
        reported = paper.table5_cell(cell.setting, cell.benchmark)
        row = setting_fields(cell.setting)
        row.update(benchmark=cell.benchmark, ours_mean=cell.accuracy.mean, ours_std=cell.accuracy.std,
                   paper_mean=reported[0] if reported else None, paper_std=reported[1] if reported else None,
                   difference=_difference(cell.accuracy.mean, reported[0] if reported else None),
                   note=None if reported else _why_no_row(cell.setting))
        if reported and cell.metric != "exact_match_boxed":
            row["note"] = f"ours is {cell.metric}; the paper's is boxed and correct (exact_match_boxed)"
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "ours_mean", "ours_std", "paper_mean", "paper_std", "difference", "note")
    formats = {col: percent for col in ("ours_mean", "ours_std", "paper_mean", "paper_std", "difference")}
    return Table("paper_table5", f"Table 5 beside the paper: {metric} (%), ours and the paper's mean and population "
                 f"std over seeds, difference = ours - paper (paper: {paper.NOTE})", columns, rows, formats)


def _why_no_row(setting):
    if setting.detector != paper.papers_detector(setting.mode):
        return (f"no paper row: the paper's {setting.mode} runs with the detector {paper.papers_detector(setting.mode)}"
                + (" (rescue without early exit: Table 2, + interleaving)" if setting.mode == "rescue" else ""))
    return NOT_PAPER


def recovery_side_by_side(comparisons):
    rows = []
    for comp in comparisons:
        s = comp.rescue.setting
        theirs, basis = _paper_recovery(s, comp.rescue.benchmark)
        row = setting_fields(s)
        row.update(benchmark=comp.rescue.benchmark, ours=comp.recovery, paper=theirs,
                   difference=_difference(comp.recovery, theirs), paper_basis=basis, status=comp.status)
        rows.append(row)
    for setting, mean, defined, total in average_recovery(comparisons):
        theirs, basis = _paper_recovery(setting, None)
        row = setting_fields(setting)
        row.update(benchmark=f"mean of {defined}/{total}", ours=mean, paper=theirs,
                   difference=_difference(mean, theirs), paper_basis=basis, status=None)
        rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "ours", "paper", "difference", "paper_basis", "status")
    return Table("paper_recovery", f"Recovery (%) beside the paper's (from its Table 5; {paper.NOTE})", columns, rows,
                 {col: percent for col in ("ours", "paper", "difference")})


def _paper_recovery(setting, benchmark):
    if setting.detector == "off":  # the paper's rescue rows use early exit, but for Table 2's "+ interleaving"
        label = paper.base_label(setting.base)
        value = paper.interleaving_recovery(setting.budget) if (label, setting.n, benchmark) == ("7B", 8, "math500") else None
        if value is not None:
            return value, "paper Table 2, + interleaving (rescue without early exit)"
        return None, "the paper reports rescue without early exit only in Table 2 (MATH500, 7B, N=8, B 64/128)"
    ns, budgets = paper.settings()
    if setting.n not in ns or setting.budget not in budgets:
        return None, (f"the paper has no N={setting.n}, B={setting.budget} setting "
                      f"(N in {ns}, B in {budgets})")
    label = paper.base_label(setting.base)
    if label in paper.BASES and benchmark in paper.BENCHMARKS:
        return paper.table5_recovery(label, setting.n, setting.budget, benchmark), f"paper {label}, same cell"
    if label in paper.BASES and benchmark is None:
        return paper.mean_recovery(setting.n, setting.budget, labels=(label,)), f"paper {label}, mean of 5 benchmarks"
    return (paper.mean_recovery(setting.n, setting.budget),
            f"paper mean over 2 bases x 5 benchmarks at N={setting.n}, B={setting.budget} (other model or benchmark)")


TABLE1_QUANTITIES = ("steps", "output_tokens", "base_tokens", "helper_tokens")


def table1_side_by_side(cells):
    rows = []
    for cell in cells:
        s = cell.setting
        reported = None
        if (paper.base_label(s.base) == "7B" and s.n == 8 and s.mode in ("bon", "rescue", "full")
                and s.detector == paper.papers_detector(s.mode)):
            reported = paper.table1().get((cell.benchmark, s.budget, s.mode))
        for quantity in TABLE1_QUANTITIES:
            ours = cell.stats.get(quantity)
            theirs = reported.get(quantity) if reported else None
            if ours is None and theirs is None:
                continue
            row = setting_fields(s)
            row.update(benchmark=cell.benchmark, quantity=quantity, ours=ours, paper=theirs,
                       difference=_difference(ours, theirs),
                       note=None if reported else "no paper row: Table 1 is Qwen2.5-Math-7B, N=8, five benchmarks, "
                                                  "early exit in rescue only")
            rows.append(row)
    columns = SETTING_COLUMNS + ("benchmark", "quantity", "ours", "paper", "difference", "note")
    return Table("paper_table1", f"Table 1 beside the paper: decode cost per problem (means; {paper.NOTE})", columns,
                 rows, {col: number for col in ("ours", "paper", "difference")})


def table2_side_by_side(cells):
    rows = []
    for key, method, cell in table2_rows(cells):
        s = cell.setting
        reported = None
        if paper.base_label(s.base) == "7B" and s.n == 8 and cell.benchmark == "math500":
            reported = paper.table2().get((None if method == "full" else s.budget, method))
        for quantity, ours in ablation_values(cell).items():
            theirs = reported.get(quantity) if reported else None
            if quantity in RATES:  # percentages in this long table, so one number format fits every row
                quantity, ours, theirs = quantity + "_pct", _pct(ours), _pct(theirs)
            row = dict(base=s.base, n=s.n, evictor=key[2], budget=key[3], benchmark=cell.benchmark, method=method,
                       quantity=quantity, ours=ours, paper=theirs, difference=_difference(ours, theirs),
                       note=None if reported else "no paper row: Table 2 is MATH500, Qwen2.5-Math-7B, N=8, B 64/128")
            rows.append(row)
    columns = ("base", "n", "evictor", "budget", "benchmark", "method", "quantity", "ours", "paper", "difference", "note")
    return Table("paper_table2", f"Table 2 beside the paper: accuracy, degeneration and early-exit rates in % (*_pct), "
                 f"tokens and steps per problem ({paper.NOTE})", columns, rows,
                 {col: number for col in ("ours", "paper", "difference")})


RATES = ("accuracy", "degeneration_rate", "early_exit_rate")


def _pct(value):
    return None if value is None else 100 * value


def paper_tables(analysis):
    return [table5_side_by_side(analysis.cells, analysis.metric), recovery_side_by_side(analysis.comparisons),
            table1_side_by_side(analysis.cells), table2_side_by_side(analysis.cells)]
