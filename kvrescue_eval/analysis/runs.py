"""Reading lm-eval 0.4.13 output folders into runs.

`lm_eval --output_path DIR [--log_samples]` writes, per run, `DIR/<model_name_sanitized>/results_<date>.json`
and beside it `samples_<task>_<date>.jsonl` (one JSON object per document and filter). With an
output path ending in `.json` it writes `<stem>_<date>.json` and the samples into its folder.

A run is classified by the `kvrescue` block that the `kvrescue` model puts into `results["config"]`, read as
its typed record (`kvrescue_eval/run_record.py`, `RunRecord`).
A run without that block (stock `--model hf`, `vllm`, ...) is a full-KV run of the model named by
`pretrained=` (or `model=`/`path=`) in its model_args: mode "full", N=1, no evictor, no budget, no
detector. It serves as the full-KV reference of that model when it is the base, and as the helper-alone
reference when it is the helper. Model names are canonicalised (analysis/model_identity.py), so a stock
run on the converted SmolLM2 folder is a run of `smollm2`.

Accuracy: `metric` is the accuracy that recovery, the Table 5 layout and the gate use; by default (None)
each task's primary metric: that of its row in the benchmark table (exact_match_boxed, the paper's "boxed
and correct", on the math benchmarks), else the first of the task's `metric_list` (pass_at_1 on the
kv_recall testbed). The other accuracy metrics a task reports (ACCURACY_METRICS) are read beside it.
Seed spreads are population standard deviations (ddof 0).

The detector of a kvrescue run is the recorded `detector` ("on"/"off"); runs written before that was
recorded ran with the detector on in every mode, which is what they are read as (RunRecord's default).
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from kvrescue_eval import benchmark_table
from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.json_input import load_json_object
from kvrescue_eval.analysis.model_identity import model_identity
from kvrescue_eval.analysis.seeds import SeedSummary
from kvrescue_eval.model_args_text import split_model_args
from kvrescue_eval.repeat_statistics import KINDS, statistic_name
from kvrescue_eval.run_modes import MODES
from kvrescue_eval.run_record import RecordError, RunRecord
from kvrescue_eval.stats import STAT_KEYS

# Accuracy metrics of our math tasks, read beside the chosen one when a task reports them.
# the testbed's step_accuracy too: the share of a trajectory's steps that are right (tasks/kv_recall)
ACCURACY_METRICS = ("exact_match_boxed", "exact_match", "exact_match_strict", "exact_match_math_verify",
                    "step_accuracy")
ENGINE_STATS = STAT_KEYS + ("degenerated",)
_DATE = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_STOCK_MODEL_KEYS = ("pretrained", "model", "path", "engine")


# Fields of config.kvrescue that change results beside the Setting's named ones: a setting's identity includes
# them (runs that differ in one are never pooled) and a comparison's arms must share those that apply to them
# (comparisons.py). What one process did (RUN_DEPENDENT in reruns.py), the seed and the device are not in it.
IDENTITY_FIELDS = ("prm", "scorer_options", "window", "mix_lambda", "evictor_options", "temperature", "top_p",
                   "top_k", "detector_settings", "dtype", "backends", "thinking")


@dataclass(frozen=True)
class Setting:
    """What was run, without the benchmark and the seed. `identity` holds the other recorded fields that change
    results (IDENTITY_FIELDS, as (name, canonical JSON) pairs); `variant` names, in a report, what tells this
    setting from another one whose named fields are the same (None when no other one is)."""
    base: str
    mode: str
    n: int
    evictor: str | None = None
    budget: int | None = None
    helper: str | None = None
    scorer: str | None = None
    buffer: int | None = None
    detector: str = "off"               # "on": base candidates were screened (early exit)
    max_steps: int | None = None        # None: not a kvrescue run (a stock model has its own limits)
    max_step_tokens: int | None = None
    max_context: int | None = None
    identity: tuple = ()
    variant: str | None = None

    def sort_key(self):
        return (self.base, list(MODES).index(self.mode), self.evictor or "", self.budget or 0, self.n,
                self.helper or "", self.scorer or "", self.buffer or 0, self.detector,
                self.max_steps or 0, self.max_step_tokens or 0, self.max_context or 0, self.identity)

    def recorded(self, name):
        """An identity field's value as recorded (decoded), or KeyError when the run did not record it."""
        return json.loads(dict(self.identity)[name])


@dataclass
class TaskResult:
    task: str
    benchmark: str
    metric: str            # the accuracy metric read as its accuracy
    generation: str | None  # what the task was generated with (config.kvrescue.generation), canonical JSON
    version: object
    config_sha256: str
    n_samples: int
    accuracy: SeedSummary  # the chosen metric
    metrics: dict          # every accuracy metric the task reports (the chosen one too) -> SeedSummary
    stats: dict            # engine statistic -> mean per sample; empty for stock models
    # statistics over repeats the task reports (kvrescue_eval/repeat_statistics.py), of each metric in
    # `metrics`: metric -> {("pass" | "maj", k): mean over problems}
    over_repeats: dict = field(default_factory=dict)


@dataclass
class Run:
    path: Path
    setting: Setting
    seed: object
    lm_eval_version: str | None
    tasks: dict = field(default_factory=dict)  # task name -> TaskResult
    model_info: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)  # results["config"] as lm-eval wrote it
    metric: str | None = None  # the metric asked for; None: each task's primary metric
    date: float | None = None  # lm-eval's recorded start of the run (seconds since the epoch)

    @property
    def limit(self):
        """lm-eval's --limit of the run (None: every document); lm-eval records 3 as 3.0."""
        limit = self.config.get("limit")
        return int(limit) if isinstance(limit, float) and limit.is_integer() else limit

    @property
    def output_path(self):
        """The --output_path folder lm-eval wrote this run under (results are in <it>/<model>/)."""
        return self.path.parent.parent


def find_results_files(paths):
    """Every results JSON under the given folders (recursively) or given directly, sorted."""
    found = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            hits = sorted(p for p in path.rglob("*.json") if re.search(rf"_{_DATE}\.json$", p.name)
                          and not p.name.startswith("samples_"))
            if not hits:
                raise AnalysisInputError(path, None, "no lm-eval results file (results_<date>.json) "
                                         "in this folder or below it")
            found += hits
        else:
            raise AnalysisInputError(path, None, "no such file or folder")
    return found


def read_runs(paths, metric=None):
    return [read_run(p, metric) for p in find_results_files(paths)]


def primary_metric(task, task_config):
    """The accuracy a task is judged by: its benchmark table row's metric, else the first metric of its
    `metric_list` (as lm-eval records the task's config), else None."""
    row = benchmark_table.of_task(task)
    if row is not None:
        return row.metric
    for entry in (task_config or {}).get("metric_list") or ():
        name = entry.get("metric") if isinstance(entry, dict) else None
        if isinstance(name, str):
            return name
    return None


def read_run(results_path, metric=None):
    results_path = Path(results_path)
    data = load_json_object(results_path)
    results = _require(data, "results", dict, results_path)
    config = _require(data, "config", dict, results_path)
    setting, seed = classify(config, results_path)
    run = Run(results_path, setting, seed, data.get("lm_eval_version"),
              model_info=config.get("kvrescue") or {}, config=config, metric=metric,
              date=data["date"] if isinstance(data.get("date"), (int, float)) else None)
    groups = {name for name, children in (data.get("group_subtasks") or {}).items() if children}
    configs = data.get("configs") or {}
    for task, metrics in results.items():
        if task in groups or not isinstance(metrics, dict):
            continue
        chosen = metric or primary_metric(task, configs.get(task))
        if chosen is None or not any(key.startswith(chosen + ",") for key in metrics):
            continue
        run.tasks[task] = _read_task(data, task, metrics, chosen, results_path)
    if not run.tasks:
        reported = sorted({key.split(",")[0] for metrics in results.values() if isinstance(metrics, dict)
                           for key in metrics if "," in key and not key.split(",")[0].endswith(("_stderr", "_seed_std"))})
        asked = (f"the metric {metric!r}" if metric else "its primary metric (" + ", ".join(
            f"{task}: {primary_metric(task, configs.get(task)) or 'none recorded'}" for task in results) + ")")
        raise AnalysisInputError(results_path, "results",
                                 f"no task reports {asked} (tasks: {', '.join(results) or 'none'}; "
                                 f"their metrics: {', '.join(reported) or 'none'}); choose one with --metric")
    return run


def classify(config, path):
    info = config.get("kvrescue")
    if info is None:
        return Setting(base=model_identity(_stock_model_name(config, path)), mode="full", n=1), config.get("random_seed")
    try:
        record = RunRecord.from_json(info)
    except RecordError as error:
        raise AnalysisInputError(path, "config.kvrescue" + (f".{error.field}" if error.field else ""),
                                 error.message) from None
    mode = MODES[record.mode]
    # A helper-alone run decodes with the helper only (base None): its model is the helper.
    base = record.base if mode.uses_base else record.helper
    evicting = mode.evicts
    setting = Setting(base=model_identity(base), mode=record.mode, n=record.n,
                      evictor=record.evictor if evicting else None, budget=record.budget if evicting else None,
                      helper=model_identity(record.helper if mode.uses_helper else None), scorer=record.scorer,
                      buffer=record.buffer if evicting else None,
                      detector=record.detector if mode.uses_base else "off",
                      max_steps=record.max_steps, max_step_tokens=record.max_step_tokens,
                      max_context=record.max_context,
                      identity=tuple((name, canonical(identity_value(name, info[name])))
                                     for name in IDENTITY_FIELDS if name in info))
    return setting, record.seed


def identity_value(name, value):
    """A recorded field as the identity compares it: an evictor's options without its private state (records
    written before run_info kept only the options held a random evictor's stream, as a repr with an address, so
    that no two runs of it would pair)."""
    if name == "evictor_options" and isinstance(value, dict):
        return {key: option for key, option in value.items() if not key.startswith("_")}
    return value


def canonical(value):
    return json.dumps(value, sort_keys=True)


def _stock_model_name(config, path):
    args = config.get("model_args")
    pairs = split_model_args(args)
    for key in _STOCK_MODEL_KEYS:
        if pairs.get(key):
            return str(pairs[key])
    raise AnalysisInputError(path, "config.model_args",
                             f"neither a 'kvrescue' block in config nor a model name "
                             f"({'/'.join(_STOCK_MODEL_KEYS)}=...) in model_args {args!r}")


def _read_task(data, task, metrics, metric, path):
    filters = sorted(key.split(",", 1)[1] for key in metrics if key.startswith(metric + ","))
    if len(filters) != 1:
        raise AnalysisInputError(path, f"results.{task}",
                                 f"several filters report {metric}: {', '.join(filters)}; expected one")
    flt = filters[0]
    repeats = (data.get("configs") or {}).get(task, {}).get("repeats", 1)
    n_samples = _effective_samples(data, task, path)
    names = [metric] + [name for name in ACCURACY_METRICS if name != metric and f"{name},{flt}" in metrics]
    summaries = {name: _summary(metrics, name, flt, repeats, task, path) for name in names}
    samples_path = samples_file(path, task)
    if samples_path is not None:
        seeds = per_seed_accuracies(samples_path, flt, repeats, n_samples, names)
        summaries = {name: _checked(seeds, name, summary, samples_path) for name, summary in summaries.items()}
    stats = {key: float(metrics[f"{key},{flt}"]) for key in ENGINE_STATS
             if isinstance(metrics.get(f"{key},{flt}"), (int, float))}
    task_config = (data.get("configs") or {}).get(task, {})
    generation = ((data.get("config") or {}).get("kvrescue") or {}).get("generation") or {}
    return TaskResult(task=task, benchmark=benchmark_of_task(task), metric=metric,
                      over_repeats={name: statistics_over_repeats(metrics, name, flt, repeats) for name in names},
                      generation=canonical(generation[task]) if isinstance(generation, dict) and task in generation
                      else None,
                      version=(data.get("versions") or {}).get(task), config_sha256=config_sha256(task_config),
                      n_samples=n_samples, accuracy=summaries[metric], metrics=summaries, stats=stats)


def statistics_over_repeats(metrics, metric, flt, repeats):
    """{(kind, k): value} of the pass@k and maj@k of `metric` that a task's results report."""
    found = {}
    for kind in KINDS:
        for k in range(1, repeats + 1):
            value = metrics.get(f"{statistic_name(metric, kind, k)},{flt}")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found[(kind, k)] = float(value)
    return found


def benchmark_of_task(task):
    """The benchmark an lm-eval task runs (the benchmark table's name for it); other tasks keep their own name."""
    row = benchmark_table.of_task(task)
    return row.name if row else task


def config_sha256(task_config):
    """Hash of a task's configuration, without lm-eval's run-dependent metadata and without the memory addresses
    in the reprs lm-eval writes for functions (`<function target at 0x7f...>`: another process, another address)."""
    stable = {key: value for key, value in task_config.items() if key != "metadata"}
    text = json.dumps(stable, sort_keys=True, default=str)
    return hashlib.sha256(re.sub(r" at 0x[0-9a-fA-F]+>", ">", text).encode()).hexdigest()


def _effective_samples(data, task, path):
    counts = (data.get("n-samples") or {}).get(task)
    if not isinstance(counts, dict) or not isinstance(counts.get("effective"), int):
        raise AnalysisInputError(path, f"n-samples.{task}.effective", "missing or not an integer")
    return counts["effective"]


def _summary(metrics, name, flt, repeats, task, path):
    mean = metrics[f"{name},{flt}"]
    if not isinstance(mean, (int, float)):
        raise AnalysisInputError(path, f"results.{task}.{name},{flt}", f"expected a number, got {mean!r}")
    stderr = metrics.get(f"{name}_stderr,{flt}")  # "N/A" where lm-eval had none (a single document, old runs)
    stderr = float(stderr) if isinstance(stderr, (int, float)) and not isinstance(stderr, bool) else None
    if repeats == 1:
        return SeedSummary(1, float(mean), None, stderr=stderr)
    std_key = f"{name}_seed_std,{flt}"
    std = metrics.get(std_key)
    if not isinstance(std, (int, float)):
        raise AnalysisInputError(path, f"results.{task}.{std_key}",
                                 f"missing seeds: the task has repeats={repeats} but no per-seed std")
    return SeedSummary(repeats, float(mean), float(std), stderr=stderr)


def _checked(seeds, name, summary, samples_path):
    if name not in seeds:
        raise AnalysisInputError(samples_path, name, "no per-document verdicts for this metric")
    from_samples = SeedSummary.of(seeds[name], stderr=summary.stderr)
    if abs(from_samples.mean - summary.mean) > 1e-6:
        raise AnalysisInputError(samples_path, name,
                                 f"per-seed accuracies average {from_samples.mean:.6f} but the results file "
                                 f"reports {summary.mean:.6f}: samples and results are from different runs")
    return from_samples


def samples_file(results_path, task):
    """The --log_samples file of `task` written by the same run, or None."""
    match = re.search(rf"({_DATE})\.json$", results_path.name)
    if not match:
        return None
    candidate = results_path.parent / f"samples_{task}_{match.group(1)}.jsonl"
    return candidate if candidate.exists() else None


def sample_records(path):
    """The records of a --log_samples file with their line numbers, blank lines skipped; a line that is not
    JSON is refused, naming it."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise AnalysisInputError(path, f"line {number}", f"not valid JSON: {error}") from None
            yield number, record


def per_seed_accuracies(samples_path, flt, repeats, n_docs, metric_names):
    """Per-seed accuracy of each metric from the per-document verdict lists of a samples file."""
    totals = {name: [0.0] * repeats for name in metric_names}
    present = set()
    docs = set()
    for number, record in sample_records(samples_path):
        if record.get("filter") != flt:
            continue
        docs.add(record.get("doc_id"))
        for name in metric_names:
            if name not in record:
                continue
            present.add(name)
            verdicts = record[name] if isinstance(record[name], list) else [record[name]]
            if len(verdicts) != repeats:
                raise AnalysisInputError(
                    samples_path, f"line {number}: {name}",
                    f"missing seeds: {len(verdicts)} per-seed verdicts for doc_id {record.get('doc_id')}, "
                    f"the task has repeats={repeats}")
            for seed, verdict in enumerate(verdicts):
                totals[name][seed] += float(verdict)
    if len(docs) != n_docs:
        raise AnalysisInputError(samples_path, "doc_id",
                                 f"{len(docs)} documents with filter {flt!r}, the results file counts {n_docs}")
    return {name: [total / n_docs for total in totals[name]] for name in metric_names if name in present}




def _require(mapping, key, kind, path, prefix=""):
    value = mapping.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise AnalysisInputError(path, prefix + key,
                                 f"missing or not {'an' if kind is int else 'a'} {kind.__name__} (got {value!r})")
    return value
