"""The folder lm-eval writes a kvrescue run's results to is named after what ran, not drawn at random.

With `--output_path DIR`, lm-eval 0.4.13 writes `DIR/<name>/results_<date>.json` (and the samples beside it),
`<name>` taken from a `peft=`, `delta=`, `pretrained=`, `model=`, `path=` or `engine=` model_arg, else a random
8-character name from Python's generator after lm-eval seeded it (one name per seed and lm-eval version, naming
nothing). The kvrescue model has none of those model_args, so for `--model kvrescue` the name is
`kvrescue-<preset>` (the default preset when model_args name no model), else `kvrescue-<mode>-<base>` (the base's
folder or hub name, its last path part; the helper's for the helper-alone mode). A path ending in `.json`
(`--output_path results/demo.json`) still names the files itself, as lm-eval documents.
"""

import functools
from pathlib import PurePath

MODEL = "kvrescue"


def run_name(model_args) -> str:
    """`kvrescue-<preset>` or `kvrescue-<mode>-<model>`, read from the model_args as given (the model itself
    validates them, with its own messages)."""
    from lm_eval.utils import simple_parse_args_string

    from kvrescue_eval.run_modes import MODES

    from ..settings.model_args import preset_of
    from ..settings.tree import Settings

    raw = simple_parse_args_string(model_args) if isinstance(model_args, str) else dict(model_args or {})
    preset = preset_of(raw)
    if preset:
        return f"{MODEL}-{preset}"
    mode = str(raw.get("mode") or Settings.mode)
    model = raw.get("helper") if mode in MODES and not MODES[mode].uses_base else raw.get("base")
    return f"{MODEL}-{mode}-{PurePath(str(model or raw.get('helper'))).name}"


def patch_evaluation_tracker(module) -> None:
    tracker = module.GeneralConfigTracker
    original = tracker.log_experiment_args
    if getattr(original, "_kvrescue_patched", False):
        return

    @functools.wraps(original)
    def log_experiment_args(self, model_source, model_args, *args, **kwargs):
        original(self, model_source, model_args, *args, **kwargs)
        if model_source == MODEL and tracker._get_model_name(model_args) is None:
            self.model_name = run_name(model_args)
            self.model_name_sanitized = module.sanitize_model_name(self.model_name)

    log_experiment_args._kvrescue_patched = True
    tracker.log_experiment_args = log_experiment_args
