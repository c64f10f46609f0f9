"""The paper's Fig. 1(a): an oracle that picks, per problem, the better of the evicted base's and the helper's answers.

Inputs: the `--log_samples` files of an evicted best-of-N run (mode bon) and of a helper-alone run (mode helper,
or a stock full-KV run of the helper model), at the same N, on the same task and the same problems, and the
full-KV base's accuracy at that N for the gap.

Definitions (per task, on the analysis's accuracy metric, e.g. exact_match_boxed or kv_recall's pass_at_1):
- a run's per-problem accuracy a(p) is the mean of its per-seed pass@1 verdicts for problem p (the verdict lists
  of the samples file, one 0/1 per repeat, pooled over every run of the cell, as the rest of the analysis pools
  seeds); with one seed a(p) is 0 or 1, whether the run's answer is correct;
- oracle(p) = max(a_bon(p), a_helper(p)): the oracle picks, per problem, the run whose answer is more often
  right. With one seed a problem counts as solved if either run's answer is correct. With K > 1 seeds it is the
  per-problem mean of the better of the two runs, not the mean over seeds of the better verdict of seed s: the
  seeds of two runs are independent samples, not pairs, so pairing them by index would pick between unrelated
  answers (and that per-seed maximum is >= the one used here);
- A_oracle = mean over problems of oracle(p); oracle recovery = (A_oracle - A_bon) / (A_full - A_bon), the share
  of the eviction gap that picking between the two models' answers would recover (undefined when A_full = A_bon);
- the problem breakdown: share of problems where only bon is better (a_bon(p) > a_helper(p)), only the helper is
  better, both are right in every seed, and neither is ever right. The errors are complementary when the first
  two are both large.
"""

from dataclasses import dataclass

from kvrescue_eval.analysis.comparisons import LIMITS
from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.recovery import recovery
from kvrescue_eval.analysis.runs import sample_records, samples_file
from kvrescue_eval.analysis.tables import Table, percent


@dataclass(frozen=True)
class Verdicts:
    """Per-problem verdicts of one arm on one task: doc_id -> (doc_hash, [0/1 per seed])."""
    task: str
    mode: str
    n: int
    problems: dict
    where: str  # the files it was read from, for messages

    def accuracy(self):
        return _mean([_mean(v) for _, v in self.problems.values()])


@dataclass(frozen=True)
class OracleResult:
    problems: int
    bon: float
    helper: float
    oracle: float
    full: float | None
    bon_only: float      # share of problems where bon's per-problem accuracy is above the helper's
    helper_only: float   # ... where the helper's is above bon's
    both: float          # ... both right in every seed
    neither: float       # ... neither ever right

    @property
    def recovery(self):
        """(A_oracle - A_bon) / (A_full - A_bon); None without A_full or when A_full = A_bon."""
        return None if self.full is None else recovery(rescue=self.oracle, bon=self.bon, full=self.full)


def run_verdicts(run, benchmark, metric):
    """Verdicts of one run (lm-eval results file + its samples file) on `benchmark`."""
    task = next((name for name, result in run.tasks.items() if result.benchmark == benchmark), None)
    if task is None:
        raise AnalysisInputError(run.path, "results", f"no task of benchmark {benchmark!r} in this run "
                                 f"(tasks: {', '.join(run.tasks) or 'none'})")
    path = samples_file(run.path, task)
    if path is None:
        raise AnalysisInputError(run.path, None, f"no samples file of task {task!r} beside this results file: "
                                 "the oracle needs per-problem answers, rerun with --log_samples")
    return Verdicts(task, run.setting.mode, run.setting.n, _read_samples(path, metric), str(path))


def cell_verdicts(cell, metric):
    """Verdicts of a cell: its runs (seeds) pooled, problem by problem."""
    parts = [run_verdicts(run, cell.benchmark, metric) for run in cell.runs]
    first = parts[0]
    problems = {doc: (digest, list(v)) for doc, (digest, v) in first.problems.items()}
    for part in parts[1:]:
        _same_problems(first, part)
        for doc, (_, v) in part.problems.items():
            problems[doc][1].extend(v)
    return Verdicts(first.task, first.mode, first.n, problems, ", ".join(p.where for p in parts))


def oracle_pick(bon, helper, full_accuracy=None):
    """The oracle between a bon arm and a helper-alone arm (Verdicts), with the full-KV base's accuracy."""
    if bon.mode != "bon":
        raise AnalysisInputError(bon.where, "config.kvrescue.mode",
                                 f"the evicted arm of the oracle must be a bon run (evicted best-of-N), got mode "
                                 f"{bon.mode!r}")
    if helper.mode not in ("helper", "full"):
        raise AnalysisInputError(helper.where, "config.kvrescue.mode",
                                 f"the helper arm of the oracle must be a helper-alone run (mode helper, or a stock "
                                 f"full-KV run of the helper model), got mode {helper.mode!r}")
    if bon.n != helper.n:
        raise AnalysisInputError(helper.where, "N", f"the helper-alone run has N={helper.n}, the bon run "
                                 f"({bon.where}) N={bon.n}: the oracle compares runs at the same N")
    if bon.task != helper.task:
        raise AnalysisInputError(helper.where, "task", f"task {helper.task!r} here, {bon.task!r} in the bon run "
                                 f"({bon.where}): the oracle compares answers to the same problems")
    _same_problems(bon, helper)
    per_problem = [(_mean(bon.problems[doc][1]), _mean(helper.problems[doc][1])) for doc in sorted(bon.problems)]
    count = len(per_problem)

    def share(test):
        return sum(1 for b, h in per_problem if test(b, h)) / count

    return OracleResult(problems=count, bon=_mean([b for b, _ in per_problem]),
                        helper=_mean([h for _, h in per_problem]),
                        oracle=_mean([max(b, h) for b, h in per_problem]), full=full_accuracy,
                        bon_only=share(lambda b, h: b > h), helper_only=share(lambda b, h: h > b),
                        both=share(lambda b, h: b == h == 1), neither=share(lambda b, h: b == h == 0))


ORACLE_COLUMNS = ("base", "n", "evictor", "budget", "helper", "scorer", "detector", "benchmark", "problems", "bon",
                  "helper_alone", "full", "oracle", "oracle_recovery", "rescue", "recovery", "bon_only",
                  "helper_only", "both", "neither", "status")


def oracle_table(analysis):
    """Fig. 1(a) beside KV-Rescue: one row per rescue comparison with a bon and a helper-alone arm, and one per
    bon x helper-alone pair (same benchmark, N and limits) that no rescue run uses. Arms without --log_samples
    get a row that says so."""
    rows, paired = [], set()
    for comp in analysis.comparisons:
        if comp.bon is None or comp.helper is None:
            continue
        paired.add((id(comp.bon), id(comp.helper)))
        s = comp.rescue.setting
        rows.append(_oracle_row(comp.bon, comp.helper, comp.full, comp.bon.metric, scorer=s.scorer,
                                detector=s.detector, rescue=comp.rescue.accuracy.mean, recovery=comp.recovery))
    cells = analysis.cells
    for bon in (c for c in cells if c.setting.mode == "bon" and c.setting.detector == "off"):
        for helper in (c for c in cells if c.setting.mode == "helper" and _pairs(bon, c)):
            if (id(bon), id(helper)) not in paired:
                fulls = [c for c in cells if c.setting.mode == "full" and c.setting.base == bon.setting.base
                         and c.setting.detector == "off" and _pairs(bon, c)]
                rows.append(_oracle_row(bon, helper, fulls[0] if len(fulls) == 1 else None, bon.metric))
    formats = {col: percent for col in ("bon", "helper_alone", "full", "oracle", "oracle_recovery", "rescue",
                                        "recovery", "bon_only", "helper_only", "both", "neither")}
    return Table("oracle", f"Fig. 1(a): per-problem oracle between evicted best-of-N and the helper alone (same N), "
                 f"on {analysis.metric}: oracle = mean over problems of max(per-problem accuracy of bon, of the "
                 "helper); oracle_recovery = (oracle - bon) / (full - bon), beside KV-Rescue's recovery; bon_only / "
                 "helper_only: % of problems where that arm is the better one; accuracies in %", ORACLE_COLUMNS,
                 rows, formats)


def _pairs(bon, other):
    return (other.benchmark == bon.benchmark and other.setting.n == bon.setting.n
            and all(getattr(other.setting, name) in (None, getattr(bon.setting, name)) for name in LIMITS))


def _oracle_row(bon, helper, full, metric, **rescue):
    s = bon.setting
    row = {**dict.fromkeys(ORACLE_COLUMNS), **rescue}
    row.update(base=s.base, n=s.n, evictor=s.evictor, budget=s.budget,
               helper=helper.setting.helper or helper.setting.base, benchmark=bon.benchmark, problems=bon.n_samples)
    without = [cell for cell in (bon, helper) for run in cell.runs
               if samples_file(run.path, _task(run, cell.benchmark)) is None]
    if without:
        return {**row, "status": "no --log_samples output: " + ", ".join(str(cell.runs[0].path) for cell in without)}
    result = oracle_pick(cell_verdicts(bon, metric), cell_verdicts(helper, metric),
                         full.accuracy.mean if full else None)
    return {**row, "bon": result.bon, "helper_alone": result.helper, "full": result.full, "oracle": result.oracle,
            "oracle_recovery": result.recovery, "bon_only": result.bon_only, "helper_only": result.helper_only,
            "both": result.both, "neither": result.neither,
            "status": "no full-KV run at this N" if full is None else
            "undefined: A_full = A_bon" if result.recovery is None else "complete"}


def _task(run, benchmark):
    return next(name for name, result in run.tasks.items() if result.benchmark == benchmark)


def _same_problems(first, other):
    missing, extra = sorted(set(first.problems) - set(other.problems)), sorted(set(other.problems) - set(first.problems))
    if missing or extra:
        raise AnalysisInputError(other.where, "doc_id",
                                 f"different problems than {first.where}: doc_ids {_ids(missing)} missing here"
                                 f"{', ' + _ids(extra) + ' only here' if extra else ''}; run both with the "
                                 "same task and --limit")
    changed = [doc for doc in sorted(first.problems) if first.problems[doc][0] != other.problems[doc][0]]
    if changed:
        raise AnalysisInputError(other.where, "doc_hash",
                                 f"doc_ids {_ids(changed)} are other problems than in {first.where} (their "
                                 "doc_hash differs): the two runs used different data")


def _ids(docs):
    return ", ".join(map(str, docs[:5])) + (f" (and {len(docs) - 5} more)" if len(docs) > 5 else "") if docs else "none"


def _read_samples(path, metric):
    by_filter = {}
    for number, record in sample_records(path):
        if metric not in record:
            continue
        verdicts = record[metric] if isinstance(record[metric], list) else [record[metric]]
        if not verdicts or any(v not in (0, 1) or isinstance(v, str) for v in verdicts):
            raise AnalysisInputError(path, f"line {number}: {metric}",
                                     f"expected 0/1 verdicts per seed, got {record[metric]!r}")
        doc = record.get("doc_id")
        problems = by_filter.setdefault(record.get("filter"), {})
        if doc in problems:
            raise AnalysisInputError(path, f"line {number}: doc_id", f"doc_id {doc!r} appears twice")
        problems[doc] = (record.get("doc_hash"), [float(v) for v in verdicts])
    if len(by_filter) != 1:
        raise AnalysisInputError(path, metric, f"no record has per-problem verdicts of {metric!r}" if not by_filter
                                 else f"several filters report {metric}: {', '.join(map(str, by_filter))}")
    (problems,) = by_filter.values()
    return problems


def _mean(values):
    values = list(values)
    return sum(values) / len(values)
