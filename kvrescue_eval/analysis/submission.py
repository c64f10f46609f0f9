"""Leaderboard submissions: built from an analysis, validated against the JSON schema, and gathered
into a sorted markdown leaderboard.

The schema ships inside the package (submission.schema.json beside this file; leaderboards/ in the
repository links to it). Validation uses the jsonschema package, imported inside `validate`.
"""

import json
import re
from collections import defaultdict
from importlib import resources
from importlib.metadata import PackageNotFoundError, version

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.json_input import load_json_object
from kvrescue_eval.benchmarks import DATA_SHA256

REFERENCE_NOTE = "reported by the paper, not reproduced here"


def schema():
    return json.loads((resources.files("kvrescue_eval.analysis") / "submission.schema.json").read_text("utf-8"))


def validate(document, path="submission"):
    """Raise AnalysisInputError naming the first field that violates the schema or the seed means."""
    try:
        import jsonschema
    except ImportError:
        raise SystemExit("validating submissions needs jsonschema: pip install jsonschema") from None
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        field = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise AnalysisInputError(path, field, error.message)
    for bench, entry in document["benchmarks"].items():
        for mode, values in entry["pass_at_1"].items():
            seeds, mean = values.get("seeds"), values.get("mean")
            if seeds and mean is not None and abs(sum(seeds) / len(seeds) - mean) > 1e-6:
                raise AnalysisInputError(path, f"benchmarks/{bench}/pass_at_1/{mode}/mean",
                                         f"{mean} is not the mean of the seeds {seeds}")


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
            for mode, summary in (("qwen", cell.qwen), ("strict", cell.strict)):
                if summary is None or summary.values is None:
                    raise AnalysisInputError(cell.runs[0].path, f"samples ({mode})",
                                             f"a submission needs the per-seed accuracies of {cell.benchmark}: "
                                             "run lm_eval with --log_samples and keep the samples_*.jsonl files "
                                             "beside the results file")
            task = cell.runs[0].tasks
            task_name = next(name for name, t in task.items() if t.benchmark == cell.benchmark)
            benchmarks[cell.benchmark] = {
                "task": task_name,
                "task_version": cell.task_version,
                "task_config_sha256": cell.config_sha256,
                "data_sha256": DATA_SHA256.get(cell.benchmark),
                "num_problems": cell.n_samples,
                "pass_at_1": {mode: {"seeds": list(s.values), "mean": s.mean, "std": s.std, "num_seeds": s.count}
                              for mode, s in (("qwen", cell.qwen), ("strict", cell.strict))},
                "engine_stats": dict(cell.stats),
            }
        lm_eval_versions = {run.lm_eval_version for cell in cells for run in cell.runs}
        document = {
            "schema_version": 1,
            "name": submission_name(setting),
            "source": {"kind": "run"},
            "setting": {"base": setting.base, "helper": setting.helper, "prm": setting.scorer, "mode": setting.mode,
                        "evictor": setting.evictor, "budget": setting.budget, "buffer": setting.buffer,
                        "n": setting.n},
            "benchmarks": benchmarks,
            "versions": {"lm_eval": ",".join(sorted(v or "unknown" for v in lm_eval_versions)),
                         "kvrescue_eval": _package_version("kvrescue-eval")},
        }
        validate(document, document["name"])
        submissions.append(document)
    return submissions


def file_name(document):
    return re.sub(r"[^A-Za-z0-9._-]+", "-", document["name"]) + ".json"


def leaderboard_rows(documents):
    """Rows sorted by mean pass@1 (qwen) over the benchmarks each submission reports, best first."""
    benchmarks = sorted({b for d in documents for b in d["benchmarks"]})
    rows = []
    for doc in documents:
        means = {b: _mean(e["pass_at_1"]["qwen"]) for b, e in doc["benchmarks"].items()}
        average = sum(means.values()) / len(means)
        rows.append((average, doc, means))
    rows.sort(key=lambda r: (-r[0], r[1]["name"]))
    return benchmarks, rows


def _mean(grader_mode):
    if "mean" in grader_mode:
        return grader_mode["mean"]
    return sum(grader_mode["seeds"]) / len(grader_mode["seeds"])


def leaderboard_markdown(documents):
    benchmarks, rows = leaderboard_rows(documents)
    header = ["rank", "name", "source", "mode", "base", "helper", "evictor", "budget", "N"] + benchmarks + ["avg"]
    lines = ["# kvrescue-eval leaderboard", "",
             "pass@1 (%) under grader mode qwen, mean over seeds. Sorted by the average over the benchmarks a "
             "submission reports (a row with fewer benchmarks is not directly comparable; see the dashes). "
             f"Rows marked *reference* are {REFERENCE_NOTE}.", "",
             "Generated by `kvrescue-eval leaderboard build` from leaderboards/submissions/; do not edit.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rank, (average, doc, means) in enumerate(rows, 1):
        s = doc["setting"]
        source = "run" if doc["source"]["kind"] == "run" else f"*reference* ({doc['source'].get('citation', '')})"
        cells = [str(rank), doc["name"], source, s["mode"], s["base"], s.get("helper") or "—",
                 s.get("evictor") or "—", str(s.get("budget") or "—"), str(s["n"])]
        cells += [f"{100 * means[b]:.1f}" if b in means else "—" for b in benchmarks]
        cells.append(f"{100 * average:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
