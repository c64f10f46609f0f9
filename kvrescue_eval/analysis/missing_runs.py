"""The exact `lm_eval` command that produces a missing reference arm of a rescue comparison.

It is the rescue run's own command with the mode changed: the same `--model_args` (preset, models,
N, limits, seed), the same task, `--limit` and `--seed`, the detector left at the mode's default (off
for the baselines, as in the paper), written beside the rescue run so that the same report finds it.
"""

import shlex

from kvrescue_eval.model_args_text import join_model_args, split_model_args

EVICTION_ARGS = ("evictor", "budget", "buffer", "window")
NEVER_COPIED = ("mode", "detector", "n_base", "n_helper", "batch_size", "max_batch_size")


def eviction_args():
    """Model_args that only an evicting mode uses: the eviction's own and every option of every evictor."""
    from dataclasses import fields

    from kvrescue_eval.eviction.registry import EVICTORS

    return set(EVICTION_ARGS) | {f.name for evictor in EVICTORS.values() for f in fields(evictor)}


def baseline_args(model_args, arm):
    """The model_args of the baseline `arm` ("bon", "full" or "helper") of a rescue run with these model_args:
    the same models, N, limits and seed; the detector at the mode's default (off for the baselines, as in the
    paper); eviction only for bon."""
    evicting = eviction_args() if arm != "bon" else set()
    args = {k: v for k, v in model_args.items()
            if k not in NEVER_COPIED and not k.startswith("detector_") and k not in evicting}
    return {**args, "mode": arm}


def arm_command(rescue_cell, arm):
    """The command line (one string, shell-quoted) that runs `arm` ("bon", "full" or "helper") for this cell."""
    run = rescue_cell.runs[0]
    setting = rescue_cell.setting
    args = baseline_args(split_model_args(run.config.get("model_args")), arm)
    args["n"] = str(setting.n)
    if arm == "bon":  # the rescue's eviction, stated whatever the preset or defaults were
        args.update(evictor=setting.evictor, budget=str(setting.budget))
        if setting.buffer is not None:
            args["buffer"] = str(setting.buffer)
    task = next(name for name, task in run.tasks.items() if task.benchmark == rescue_cell.benchmark)
    command = ["lm_eval", "--model", "kvrescue", "--model_args", join_model_args(args),
               "--tasks", task]
    if run.limit is not None:
        command += ["--limit", _number(run.limit)]
    if run.config.get("random_seed") not in (None, 0) and "seed" not in args:
        command += ["--seed", str(run.config["random_seed"])]
    if run.config.get("device"):
        command += ["--device", str(run.config["device"])]
    command += ["--log_samples", "--output_path", str(run.output_path / arm)]
    return shlex.join(command)


def _number(value):
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
