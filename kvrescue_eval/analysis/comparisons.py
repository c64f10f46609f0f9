"""From runs to cells (one setting on one benchmark, seeds pooled) and to rescue comparisons.

A comparison pairs a rescue cell with the arms its recovery needs, on the same benchmark:
- bon: evicted best-of-N with the same base, N, evictor and budget;
- full: the full-KV run of the same base (the one with the same N if there is one, else N=1);
- helper (optional, for Figure 5): the helper model alone (mode "helper" with that helper, or a full
  run whose model is the helper, e.g. a stock `--model hf` run).
Recovery = (A_rescue - A_bon) / (A_full - A_bon) on the mean pass@1 (grader mode qwen); undefined when
A_full == A_bon. Cells that are not part of a complete comparison are listed with what they lack.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.seeds import pool


@dataclass
class Cell:
    setting: object
    benchmark: str
    runs: list
    qwen: object
    strict: object
    stats: dict
    task_version: object
    config_sha256: str
    n_samples: int


@dataclass
class Comparison:
    rescue: Cell
    bon: Cell | None
    full: Cell | None
    helper: Cell | None = None
    missing: list = field(default_factory=list)  # why an arm is absent, e.g. "no bon run"

    @property
    def status(self):
        if self.missing:
            return "incomplete: " + "; ".join(self.missing)
        if self.recovery is None:
            return "undefined: A_full = A_bon (no eviction loss)"
        return "complete"

    @property
    def complete(self):
        return not self.missing

    @property
    def recovery(self):
        if not self.complete:
            return None
        gap = self.full.qwen.mean - self.bon.qwen.mean
        if gap == 0:
            return None
        return (self.rescue.qwen.mean - self.bon.qwen.mean) / gap


@dataclass
class Analysis:
    cells: list
    comparisons: list
    unpaired: list  # (cell, reason) for cells that no complete comparison uses


def analyse(runs):
    cells = build_cells(runs)
    comparisons = [compare(cell, cells) for cell in cells if cell.setting.mode == "rescue"]
    used = {id(c) for comp in comparisons if comp.complete for c in (comp.rescue, comp.bon, comp.full, comp.helper)}
    unpaired = []
    for cell in cells:
        if id(cell) in used:
            continue
        if cell.setting.mode == "rescue":
            reason = next(c for c in comparisons if c.rescue is cell).status
        elif cell.setting.mode == "bon":
            reason = "no rescue run with this base, N, evictor and budget"
        else:
            reason = "reference only: no complete rescue comparison uses it"
        unpaired.append((cell, reason))
    return Analysis(cells, comparisons, unpaired)


def build_cells(runs):
    _check_consistency(runs)
    grouped = defaultdict(list)
    seen = {}
    for run in runs:
        for task in run.tasks.values():
            key = (run.setting, task.benchmark)
            if run.seed is not None:
                if (key, run.seed) in seen:
                    raise AnalysisInputError(run.path, "config.kvrescue.seed",
                                             f"duplicate run: {task.benchmark} with the same setting and seed "
                                             f"{run.seed!r} as {seen[(key, run.seed)]}")
                seen[(key, run.seed)] = run.path
            grouped[key].append((run, task))
    cells = []
    for (setting, benchmark), members in grouped.items():
        tasks = [task for _, task in members]
        strict = [t.strict for t in tasks]
        stats = {}
        for key in tasks[0].stats:
            values = [t.stats[key] for t in tasks if key in t.stats]
            if len(values) == len(tasks):
                stats[key] = sum(values) / len(values)
        cells.append(Cell(setting, benchmark, [run for run, _ in members], pool(t.qwen for t in tasks),
                          pool(strict) if all(s is not None for s in strict) else None, stats,
                          tasks[0].version, tasks[0].config_sha256, tasks[0].n_samples))
    cells.sort(key=lambda c: (c.setting.sort_key(), c.benchmark))
    return cells


def _check_consistency(runs):
    """Runs compared on one benchmark must use the same task version and the same documents."""
    first = {}
    for run in runs:
        for task in run.tasks.values():
            if task.benchmark not in first:
                first[task.benchmark] = (run, task)
                continue
            other_run, other = first[task.benchmark]
            if task.version != other.version:
                raise AnalysisInputError(run.path, f"versions.{task.task}",
                                         f"mixed task versions: {task.version!r} here, {other.version!r} in "
                                         f"{other_run.path}")
            if task.n_samples != other.n_samples:
                raise AnalysisInputError(run.path, f"n-samples.{task.task}.effective",
                                         f"{task.n_samples} documents here, {other.n_samples} in {other_run.path} "
                                         "(a --limit run cannot be compared with a full one)")


def compare(rescue, cells):
    s, benchmark = rescue.setting, rescue.benchmark
    same_bench = [c for c in cells if c.benchmark == benchmark]
    bons = [c for c in same_bench if c.setting.mode == "bon" and c.setting.base == s.base
            and c.setting.n == s.n and c.setting.evictor == s.evictor and c.setting.budget == s.budget]
    fulls = [c for c in same_bench if c.setting.mode == "full" and c.setting.base == s.base]
    fulls = [c for c in fulls if c.setting.n == s.n] or [c for c in fulls if c.setting.n == 1] or fulls
    helpers = [c for c in same_bench if c.setting.mode == "helper" and c.setting.helper == s.helper]
    helpers = helpers or [c for c in same_bench if c.setting.mode == "full" and c.setting.base == s.helper]
    helpers = [c for c in helpers if c.setting.n == 1] or helpers
    missing = [_absence(name, found) for name, found in (("bon", bons), ("full", fulls)) if len(found) != 1]
    return Comparison(rescue, _unique(bons), _unique(fulls), _unique(helpers), missing)


def _absence(arm, found):
    if not found:
        return f"no {arm} run"
    return f"{len(found)} {arm} settings match (they differ in N, scorer or buffer): ambiguous"


def _unique(cells):
    return cells[0] if len(cells) == 1 else None


def average_recovery(comparisons):
    """Mean recovery over benchmarks per setting (same base, helper, N, evictor, budget)."""
    grouped = defaultdict(list)
    for comp in comparisons:
        grouped[comp.rescue.setting].append(comp)
    rows = []
    for setting in sorted(grouped, key=lambda s: s.sort_key()):
        defined = [c.recovery for c in grouped[setting] if c.recovery is not None]
        rows.append((setting, sum(defined) / len(defined) if defined else None, len(defined),
                     len(grouped[setting])))
    return rows
