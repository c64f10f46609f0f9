"""Reruns: of several results of one setting and seed on a benchmark, the newest one counts.

Rerunning a finished `lm_eval` command (docs/resume.md advises it after a crash; a sweep does it for an arm it
cannot prove complete) writes a second results file beside the first. Such results are the same experiment:
the report keeps the newest (lm-eval's recorded start, `date`) and lists the older ones as superseded, saying
what differs between them: nothing (an identical rerun) or the documents (another `--limit`).

Results that the report files under one setting and seed but that were run under other recorded settings
(another temperature, task configuration or device type, say) are not reruns of each other: the newer would
hide a run of another experiment, so that is an error naming every differing field.
"""

from dataclasses import dataclass

from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.model_args_text import split_model_args
from kvrescue_eval.journal import differences
from kvrescue_eval.run_record import RunRecord

# Fields of the `kvrescue` block that describe what one process did, not the experiment (RunRecord's `process`
# fields): they differ between a run and its rerun, or label it.
RUN_DEPENDENT = RunRecord.process_fields()
# What lm-eval records about a stock model's run besides its model_args.
STOCK_FIELDS = ("model", "gen_kwargs", "random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
# Model_args of stock models that change batching only.
STOCK_BATCHING = ("batch_size", "max_batch_size")


@dataclass(frozen=True)
class Superseded:
    """A result that a newer result of the same setting and seed replaces."""
    run: object
    task: object
    by: object       # the run that counts
    changes: tuple   # what differs ("" for an identical rerun)

    def describe(self):
        what = "an identical rerun" if not self.changes else "differs in " + "; ".join(self.changes)
        return f"{self.run.path} ({self.task.benchmark}, seed {self.run.seed!r}) by the newer {self.by.path}: {what}"


def experiment(run, task):
    """Everything recorded about a result that changes it, except the documents (`--limit`)."""
    config = run.config
    if run.model_info:
        recorded = {"kvrescue": {k: v for k, v in run.model_info.items() if k not in RUN_DEPENDENT}}
    else:
        recorded = {name: config.get(name) for name in STOCK_FIELDS}
        recorded["model_args"] = {k: v for k, v in split_model_args(config.get("model_args")).items()
                                  if k not in STOCK_BATCHING}
    recorded["device"] = str(config.get("device") or "").split(":")[0] or None
    recorded["task"] = {"name": task.task, "version": task.version, "config_sha256": task.config_sha256}
    return recorded


def documents(run, task):
    return {"limit": run.limit, "documents": task.n_samples}


def newest(members):
    """members: (run, task) pairs of one setting, seed and benchmark. The pair that counts (the newest run) and
    the superseded others; AnalysisInputError when two of them are not the same experiment."""
    ordered = sorted(members, key=lambda member: (member[0].date or 0.0, str(member[0].path)))
    kept_run, kept_task = ordered[-1]
    superseded = []
    for run, task in ordered[:-1]:
        foreign = differences(experiment(run, task), experiment(kept_run, kept_task), show=_change)
        if foreign:
            raise AnalysisInputError(
                kept_run.path, "config",
                f"{kept_task.benchmark}: this result and {run.path} have the same setting and seed "
                f"{run.seed!r} as far as the report tells settings apart, but they were run differently ("
                + "; ".join(foreign) + "): they are not a run and its rerun; "
                "report them separately")
        changes = tuple(differences(documents(run, task), documents(kept_run, kept_task), show=_change))
        superseded.append(Superseded(run, task, kept_run, changes))
    return (kept_run, kept_task), superseded


def _change(name, old, new):
    return f"{name} {old!r} → {new!r}"
