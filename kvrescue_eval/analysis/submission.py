"""Leaderboard submissions: built from an analysis, validated against the JSON schema, and gathered
into a sorted markdown leaderboard.

The schema ships inside the package (submission.schema.json beside this file; leaderboards/ in the
repository links to it). Validation uses the jsonschema package, imported inside `schema_errors`.

Ranking: by the mean over benchmarks of pass@1 "boxed and correct" (the paper's Table 5 metric). Only
comparable submissions are ranked: every problem of each benchmark (no --limit), and a kvrescue run's
step and context limits equal to the paper's (1024 steps, 512 tokens per step, 4096 context). The others
are listed below the ranking with the reason.
"""

import json
import re
from collections import defaultdict
from importlib import resources
from importlib.metadata import PackageNotFoundError, version

from kvrescue_eval.analysis import paper
from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.json_input import load_json_object
from kvrescue_eval.analysis.markdown import markdown_table
from kvrescue_eval import benchmark_table
from kvrescue_eval.run_modes import MODES

REFERENCE_NOTE = paper.NOTE
SCHEMA_VERSION = 2
RANKED_METRIC = "boxed"
GRADER_METRICS = {"boxed": "exact_match_boxed", "qwen": "exact_match", "strict": "exact_match_strict"}
OPTIONAL_GRADER_METRICS = {"math_verify": "exact_match_math_verify"}  # with the math-verify extra only


def schema():
    return json.loads((resources.files("kvrescue_eval.analysis") / "submission.schema.json").read_text("utf-8"))


def schema_errors(document):
    """Every violation of the schema and of the seed means: a list of (field, message), top level first."""
    try:
        import jsonschema
    except ImportError:
        raise SystemExit("validating submissions needs jsonschema: pip install jsonschema") from None
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: ([str(p) for p in e.absolute_path], e.message))
    found = [("/".join(str(p) for p in error.absolute_path) or "(top level)", error.message) for error in errors]
    benchmarks = document.get("benchmarks") if isinstance(document, dict) else None
    for bench, entry in (benchmarks if isinstance(benchmarks, dict) else {}).items():
        by_grader = entry.get("pass_at_1") if isinstance(entry, dict) else None
        for grader, values in (by_grader if isinstance(by_grader, dict) else {}).items():
            if not isinstance(values, dict):
                continue
            seeds, mean = values.get("seeds"), values.get("mean")
            if (isinstance(seeds, list) and seeds and all(isinstance(v, (int, float)) for v in seeds)
                    and isinstance(mean, (int, float)) and abs(sum(seeds) / len(seeds) - mean) > 1e-6):
                found.append((f"benchmarks/{bench}/pass_at_1/{grader}/mean", f"{mean} is not the mean of the seeds {seeds}"))
    return found


def validate(document, path="submission"):
    """Raise AnalysisInputError listing every field that violates the schema or the seed means."""
    errors = schema_errors(document)
    if errors:
        field, message = errors[0]
        if len(errors) > 1:
            message = f"{len(errors)} errors:\n" + "\n".join(f"  {where}: {what}" for where, what in errors)
        raise AnalysisInputError(path, field, message)


def load(path):
    document = load_json_object(path)
    validate(document, path)
    return document


def _package_version(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def submission_name(setting):
    parts = [setting.mode, setting.base.split("/")[-1]]
    if setting.helper and setting.mode == "rescue":
        parts.append("helper-" + setting.helper.split("/")[-1])
    if setting.evictor:
        parts += [setting.evictor, f"B{setting.budget}"]
    parts.append(f"N{setting.n}")
    if setting.max_steps is not None and setting.detector != ("on" if MODES[setting.mode].early_exit else "off"):
        parts.append(f"detector-{setting.detector}")   # e.g. the Table 2 row "+ interleaving"
    for name, short in (("max_steps", "steps"), ("max_step_tokens", "steptokens"), ("max_context", "context")):
        value = getattr(setting, name)
        if value is not None and value != paper.PROTOCOL[name]:
            parts.append(f"{short}{value}")
    return "_".join(parts)


def build_submissions(analysis):
    """One run submission per setting, with every benchmark of that setting."""
    by_setting = defaultdict(list)
    for cell in analysis.cells:
        by_setting[cell.setting].append(cell)
    submissions = []
    for setting, cells in by_setting.items():
        benchmarks = {}
        for cell in cells:
            summaries = {grader: cell.metrics.get(metric) for grader, metric in GRADER_METRICS.items()}
            for grader, summary in summaries.items():
                if summary is None or summary.values is None:
                    raise AnalysisInputError(cell.runs[0].path, f"samples ({GRADER_METRICS[grader]})",
                                             f"a submission needs the per-seed accuracies of {cell.benchmark} under "
                                             f"{', '.join(GRADER_METRICS.values())}: run one of our math tasks with "
                                             "lm_eval --log_samples and keep the samples_*.jsonl files beside the "
                                             "results file")
            optional = {mode: cell.metrics.get(metric) for mode, metric in OPTIONAL_GRADER_METRICS.items()}
            summaries.update({mode: summary for mode, summary in optional.items()
                              if summary is not None and summary.values is not None})
            task = cell.runs[0].tasks
            task_name = next(name for name, t in task.items() if t.benchmark == cell.benchmark)
            benchmarks[cell.benchmark] = {
                "task": task_name,
                "task_version": cell.task_version,
                "task_config_sha256": cell.config_sha256,
                "data_sha256": benchmark_table.data_sha256().get(cell.benchmark),
                "num_problems": cell.n_samples,
                "pass_at_1": {grader: {"seeds": list(s.values), "mean": s.mean, "std": s.std, "num_seeds": s.count}
                              for grader, s in summaries.items()},
                "engine_stats": dict(cell.stats),
            }
            if over_repeats(cell):
                benchmarks[cell.benchmark]["over_repeats"] = over_repeats(cell)
        limits = sorted({limit for cell in cells for limit in cell.limits})
        lm_eval_versions = {run.lm_eval_version for cell in cells for run in cell.runs}
        kvrescue = setting.max_steps is not None
        document = {
            "schema_version": SCHEMA_VERSION,
            "name": submission_name(setting),
            "source": {"kind": "run"},
            "setting": {"base": setting.base, "helper": setting.helper, "prm": setting.scorer, "mode": setting.mode,
                        "evictor": setting.evictor, "budget": setting.budget, "buffer": setting.buffer,
                        "n": setting.n, "detector": setting.detector if kvrescue else None},
            "protocol": {"limit": max(limits) if limits else None, "max_steps": setting.max_steps,
                         "max_step_tokens": setting.max_step_tokens, "max_context": setting.max_context},
            "benchmarks": benchmarks,
            "versions": {"lm_eval": ",".join(sorted(v or "unknown" for v in lm_eval_versions)),
                         "kvrescue_eval": _package_version("kvrescue-eval")},
        }
        validate(document, document["name"])
        submissions.append(document)
    return submissions


def over_repeats(cell):
    """pass@k and maj@k per grader mode of a cell of one run with several repeats (None otherwise)."""
    metrics = {**GRADER_METRICS, **OPTIONAL_GRADER_METRICS}
    modes = {mode: cell.over_repeats.get(metric) for mode, metric in metrics.items() if cell.over_repeats.get(metric)}
    if cell.accuracy.count < 2 or not modes:
        return None
    return {"repeats": cell.accuracy.count, **{
        mode: {f"{kind}_at_k": {str(k): value for (name, k), value in sorted(stats.items()) if name == kind}
               for kind in ("pass", "maj")} for mode, stats in modes.items()}}


def file_name(document):
    return re.sub(r"[^A-Za-z0-9._-]+", "-", document["name"]) + ".json"


def not_ranked_reason(document):
    """Why a submission cannot be ranked with the others (None: comparable)."""
    reasons = []
    protocol = document.get("protocol") or {}
    if protocol.get("limit") is not None:
        reasons.append(f"--limit {protocol['limit']}")
    for bench, entry in document["benchmarks"].items():
        row = benchmark_table.TABLE.get(bench)
        full = row.problems if row else None
        if full is not None and entry.get("num_problems") not in (None, full):
            reasons.append(f"{bench}: {entry['num_problems']} of {full} problems")
        if RANKED_METRIC not in entry["pass_at_1"]:
            reasons.append(f"{bench}: no boxed accuracy")
    for name, value in paper.PROTOCOL.items():
        if protocol.get(name) not in (None, value):
            reasons.append(f"{name}={protocol[name]} (the paper's: {value})")
    return "; ".join(reasons) or None


def leaderboard_rows(documents):
    """Rows sorted by mean pass@1 (boxed and correct) over the benchmarks each submission reports, best
    first: (average, document, means per benchmark). Submissions that cannot be ranked have average None."""
    benchmarks = sorted({b for d in documents for b in d["benchmarks"]})
    rows = []
    for doc in documents:
        means = {b: _mean(e["pass_at_1"][RANKED_METRIC]) for b, e in doc["benchmarks"].items()
                 if RANKED_METRIC in e["pass_at_1"]}
        average = sum(means.values()) / len(means) if means else None
        rows.append((average, doc, means))
    rows.sort(key=lambda r: (r[0] is None, -(r[0] or 0), r[1]["name"]))
    return benchmarks, rows


def _mean(by_seed):
    if "mean" in by_seed:
        return by_seed["mean"]
    return sum(by_seed["seeds"]) / len(by_seed["seeds"])


def _row_cells(doc, means, benchmarks, average):
    s = doc["setting"]
    source = "run" if doc["source"]["kind"] == "run" else f"*reference* ({doc['source'].get('citation', '')})"
    cells = [doc["name"], source, s["mode"], s["base"], s.get("helper") or "—", s.get("evictor") or "—",
             str(s.get("budget") or "—"), str(s["n"]), s.get("detector") or "—"]
    cells += [f"{100 * means[b]:.1f}" if b in means else "—" for b in benchmarks]
    cells.append("—" if average is None else f"{100 * average:.1f}")
    return cells


def leaderboard_markdown(documents):
    benchmarks, rows = leaderboard_rows(documents)
    ranked = [(a, d, m) for a, d, m in rows if not_ranked_reason(d) is None]
    others = [(a, d, m) for a, d, m in rows if not_ranked_reason(d) is not None]
    header = ["name", "source", "mode", "base", "helper", "evictor", "budget", "N", "detector"] + benchmarks + ["avg"]
    lines = ["# kvrescue-eval leaderboard", "",
             "pass@1 (%) boxed and correct (the paper's Table 5 metric; task metric exact_match_boxed), mean over "
             "seeds. Sorted by the average over the benchmarks a submission reports (a row with fewer benchmarks is "
             f"not directly comparable; see the dashes). Rows marked *reference* are {REFERENCE_NOTE}.", "",
             "Generated by `kvrescue-eval leaderboard build` from leaderboards/submissions/; do not edit.", ""]
    if ranked:
        lines.append(markdown_table(["rank"] + header, [[rank] + _row_cells(doc, means, benchmarks, average)
                                                         for rank, (average, doc, means) in enumerate(ranked, 1)]))
    if others:
        lines += ["", "## Not ranked: partial or non-standard runs", "",
                  "Not comparable with the rows above (fewer problems, `--limit`, other step or context limits).", "",
                  markdown_table(header + ["why not ranked"],
                                 [_row_cells(doc, means, benchmarks, average) + [not_ranked_reason(doc)]
                                  for average, doc, means in others])]
    return "\n".join(lines) + "\n"
