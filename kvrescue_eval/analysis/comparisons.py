"""From runs to cells (one setting on one benchmark, seeds pooled) and to rescue comparisons.

A comparison pairs a rescue cell with the arms its recovery needs, on the same benchmark, all at the
rescue's N (the paper's reference rows are at the same N as the row they are compared with; an arm at
another N is never used in its place):
- bon: evicted best-of-N with the same base, N, evictor and budget, detector off (the paper's
  baseline has no early exit);
- full: the full-KV run of the same base at the same N, detector off;
- helper (optional, for Figure 5): the helper model alone at the same N (mode "helper" with that helper,
  or a full run whose model is the helper, e.g. a stock `--model hf` run when N = 1).
Arms must also share the rescue's step and context limits (max_steps, max_step_tokens, max_context)
when they record them, and what else of the rescue's setting applies to them (sampling, scorer, buffer,
eviction options, backends: analysis/identity.py); results that differ in any recorded field that changes
them are separate cells, never pooled. Recovery = (A_rescue - A_bon) / (A_full - A_bon) on the chosen accuracy metric
(default: the task's primary metric, exact_match_boxed on the math benchmarks); undefined when A_full == A_bon. A comparison with a missing arm is
reported incomplete, naming the arm and the exact lm_eval command that would produce it.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.identity import label_variants, mismatches, with_generation
from kvrescue_eval.analysis.missing_runs import arm_command
from kvrescue_eval.analysis.recovery import recovery
from kvrescue_eval.analysis.reruns import newest
from kvrescue_eval.analysis.seeds import pool

LIMITS = ("max_steps", "max_step_tokens", "max_context")


@dataclass
class Cell:
    setting: object
    benchmark: str
    runs: list
    metric: str        # the accuracy metric of `accuracy`
    accuracy: object   # SeedSummary of the chosen metric
    metrics: dict      # accuracy metric name -> SeedSummary (those every run of the cell reports)
    stats: dict
    task_version: object
    config_sha256: str
    n_samples: int
    # pass@k and maj@k of a cell of one run (metric -> {(kind, k) -> value}); empty when several runs are
    # pooled (each run's statistics are over its own repeats)
    over_repeats: dict = field(default_factory=dict)

    @property
    def limits(self):
        """--limit values of its runs (empty: every run used the whole test set)."""
        return sorted({run.limit for run in self.runs if run.limit is not None})


@dataclass
class Comparison:
    rescue: Cell
    bon: Cell | None
    full: Cell | None
    helper: Cell | None = None
    missing: list = field(default_factory=list)  # why an arm is absent, with the command that makes it

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
        return recovery(rescue=self.rescue.accuracy.mean, bon=self.bon.accuracy.mean, full=self.full.accuracy.mean)


@dataclass
class Analysis:
    cells: list
    comparisons: list
    unpaired: list  # (cell, reason) for cells that no complete comparison uses
    metric: str = "exact_match_boxed"  # the cells' accuracy metric, or which metric each benchmark's is
    superseded: list = field(default_factory=list)  # reruns.Superseded: older results a newer one replaces
    not_pooled: list = field(default_factory=list)  # why settings that look alike were kept apart


def analyse(runs, any_scorer=False):
    """`any_scorer`: pair a rescue run with baseline arms whatever their scorer (a selector compared against
    fixed baselines); by default a scored arm must have the rescue's scorer (analysis/identity.py)."""
    superseded = []
    cells = build_cells(runs, superseded)
    not_pooled = label_variants(cells)
    comparisons = [compare(cell, cells, any_scorer) for cell in cells if cell.setting.mode == "rescue"]
    used = {id(c) for comp in comparisons if comp.complete for c in (comp.rescue, comp.bon, comp.full, comp.helper)}
    unpaired = [(cell, _unpaired_reason(cell, comparisons)) for cell in cells if id(cell) not in used]
    return Analysis(cells, comparisons, unpaired, metric_description(cells), superseded, not_pooled)


def metric_description(cells):
    """The accuracy metric of the cells: its name when they share one, else which is whose."""
    by_metric = defaultdict(set)
    for cell in cells:
        by_metric[cell.metric].add(cell.benchmark)
    if len(by_metric) <= 1:
        return next(iter(by_metric), "exact_match_boxed")
    return "each task's primary metric (" + "; ".join(
        f"{metric}: {', '.join(sorted(benches))}" for metric, benches in sorted(by_metric.items())) + ")"


def _unpaired_reason(cell, comparisons):
    if cell.setting.mode == "rescue":
        return next(c for c in comparisons if c.rescue is cell).status
    waiting = [c for c in comparisons if any(cell is arm for arm in (c.bon, c.full, c.helper))]
    if waiting:  # it is an arm of a comparison that lacks another arm: say which
        return "; ".join(dict.fromkeys(c.status for c in waiting))
    s = cell.setting

    def could_use(comp):  # a rescue run that this bon or full cell is the arm of, but for what it differs in
        r = comp.rescue.setting
        return (comp.rescue.benchmark == cell.benchmark and (r.n, r.base) == (s.n, s.base) and not comp.complete
                and (s.mode == "full" or (s.mode == "bon" and (r.evictor, r.budget) == (s.evictor, s.budget))))

    looked_at = [c for c in comparisons if could_use(c)]
    if looked_at:  # a rescue run could have used it, but it differs or is one of several: say so
        return "; ".join(dict.fromkeys(c.status for c in looked_at))
    if cell.setting.mode == "bon":
        return "no rescue run with this base, N, evictor and budget"
    return "reference only: no complete rescue comparison uses it"


def build_cells(runs, superseded=None):
    """Cells of the runs; of several results of one setting and seed on a benchmark the newest counts
    (analysis/reruns.py), and the others are appended to `superseded` when a list is given."""
    members = defaultdict(list)
    for run in runs:
        for task in run.tasks.values():
            members[(with_generation(run.setting, task.generation), task.benchmark, run.seed)].append((run, task))
    grouped = defaultdict(list)
    for (setting, benchmark, _), results in members.items():
        kept, older = newest(results)
        grouped[(setting, benchmark)].append(kept)
        if superseded is not None:
            superseded += older
    _check_consistency([member for kept in grouped.values() for member in kept])
    cells = []
    for (setting, benchmark), members in grouped.items():
        tasks = [task for _, task in members]
        stats = {}
        for key in tasks[0].stats:
            values = [t.stats[key] for t in tasks if key in t.stats]
            if len(values) == len(tasks):
                stats[key] = sum(values) / len(values)
        metrics = {name: pool(t.metrics[name] for t in tasks) for name in tasks[0].metrics
                   if all(name in t.metrics for t in tasks)}
        cells.append(Cell(setting, benchmark, [run for run, _ in members], tasks[0].metric,
                          pool(t.accuracy for t in tasks),
                          metrics, stats, tasks[0].version, tasks[0].config_sha256, tasks[0].n_samples,
                          tasks[0].over_repeats if len(tasks) == 1 else {}))
    cells.sort(key=lambda c: (c.setting.sort_key(), c.benchmark))
    return cells


def _check_consistency(members):
    """Results compared on one benchmark must use the same task version and the same documents."""
    first = {}
    for run, task in members:
        if task.benchmark not in first:
            first[task.benchmark] = (run, task)
            continue
        other_run, other = first[task.benchmark]
        if task.metric != other.metric:
            raise AnalysisInputError(run.path, f"results.{task.task}",
                                     f"{task.benchmark}: accuracy read as {task.metric} here, as {other.metric} in "
                                     f"{other_run.path}; pass one --metric for both")
        if task.version != other.version:
            raise AnalysisInputError(run.path, f"versions.{task.task}",
                                     f"mixed task versions: {task.version!r} here, {other.version!r} in "
                                     f"{other_run.path}")
        if task.n_samples != other.n_samples:
            raise AnalysisInputError(run.path, f"n-samples.{task.task}.effective",
                                     f"{task.benchmark}: {_documents(run, task)} here, {_documents(other_run, other)} "
                                     f"in {other_run.path}; results compared on one benchmark must cover the same "
                                     "documents: run both with the same --limit")


def _documents(run, task):
    return f"{task.n_samples} documents ({'--limit ' + str(run.limit) if run.limit is not None else 'no --limit'})"


def _same_limits(arm, rescue):
    return all(getattr(arm.setting, name) in (None, getattr(rescue.setting, name)) for name in LIMITS)


def compare(rescue, cells, any_scorer=False):
    s, benchmark = rescue.setting, rescue.benchmark
    candidates = [c for c in cells if c.benchmark == benchmark and c.setting.n == s.n and _same_limits(c, rescue)]
    bons = [c for c in candidates if c.setting.mode == "bon" and c.setting.base == s.base
            and c.setting.evictor == s.evictor and c.setting.budget == s.budget]
    fulls = [c for c in candidates if c.setting.mode == "full" and c.setting.base == s.base]
    helpers = [c for c in candidates if c.setting.mode == "helper" and c.setting.helper == s.helper]
    helpers = helpers or [c for c in candidates if c.setting.mode == "full" and c.setting.base == s.helper]
    missing = []
    chosen = {}
    for arm, found in (("bon", bons), ("full", fulls)):
        without_detector = [c for c in found if c.setting.detector == "off"]
        usable = [c for c in without_detector if not mismatches(c, rescue, arm, any_scorer)]
        chosen[arm] = _unique(usable)
        if len(usable) != 1:
            missing.append(_absence(rescue, arm, usable, without_detector, found, cells, any_scorer))
    return Comparison(rescue, chosen["bon"], chosen["full"],
                      _unique([c for c in helpers if not mismatches(c, rescue, "helper", any_scorer)]), missing)


def _absence(rescue, arm, usable, without_detector, found, cells, any_scorer):
    s = rescue.setting
    if len(usable) > 1:
        return (f"{len(usable)} {arm} settings match: ambiguous ("
                + "; ".join(c.setting.variant or "no variant" for c in usable) + ")")
    what = f"no {arm} run at N={s.n} with base {s.base}" + (f", {s.evictor} B={s.budget}" if arm == "bon" else "")
    if without_detector:
        differing = [f"{'; '.join(mismatches(c, rescue, arm, any_scorer))}" for c in without_detector]
        what += (" that shares the rescue's settings (found " + str(len(without_detector)) + " that differ: "
                 + " | ".join(differing) + "; they are not paired)")
    elif found:
        what += " and the detector off (found only runs with detector=on; the paper's baselines have no early exit)"
    else:
        other_n = sorted({c.setting.n for c in cells if c.benchmark == rescue.benchmark and c.setting.mode == arm
                          and c.setting.base == s.base and c.setting.n != s.n})
        if other_n:
            what += f" (found N={', '.join(map(str, other_n))}, which is not comparable)"
    return f"{what}; run: {arm_command(rescue, arm)}"


def _unique(cells):
    return cells[0] if len(cells) == 1 else None


def average_recovery(comparisons):
    """Mean recovery over benchmarks per setting (same base, helper, N, evictor, budget, detector)."""
    grouped = defaultdict(list)
    for comp in comparisons:
        grouped[comp.rescue.setting].append(comp)
    rows = []
    for setting in sorted(grouped, key=lambda s: s.sort_key()):
        defined = [c.recovery for c in grouped[setting] if c.recovery is not None]
        rows.append((setting, sum(defined) / len(defined) if defined else None, len(defined),
                     len(grouped[setting])))
    return rows
