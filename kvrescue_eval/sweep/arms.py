"""The arms of a sweep: one `lm_eval --model kvrescue` command each, from the cross product of a spec's blocks.

- Each block is a cross product: a key with a list is an axis, a key with one value is fixed for the block;
  the spec's `model_args` apply to every block. Keys are model_args, plus `tasks` (lm_eval --tasks).
- An arm leaves out what its mode does not use (a full or helper arm has no eviction; only modes with a helper
  take helper settings), so `mode: [rescue, full]` x `budget: [64, 128]` gives one full arm, not two identical ones.
- With `recovery_arms` (the default), every rescue arm also gets the evicted best-of-N and full-KV arms that its
  recovery needs (analysis/missing_runs.baseline_args: same models, N, limits and seed; baselines without the
  detector), unless the grid has them already.
- An arm is named by its mode and its values on the axes (`rescue_budget-64_seed-0`); the name is its folder
  under OUT/arms/, and lm-eval writes `OUT/arms/NAME/NAME_<date>.json` (`--output_path .../NAME.json`).
"""

import re
import shlex
from dataclasses import dataclass
from itertools import product
from pathlib import Path

from kvrescue_eval.analysis.missing_runs import baseline_args, eviction_args
from kvrescue_eval.run_modes import MODES
from kvrescue_eval.model_args_text import join_model_args, value_text

from .spec import SpecError

DEFAULT_MODE = "rescue"  # the kvrescue model's default mode
HELPER_ARGS = ("helper", "n_helper", "helper_backend")
RESERVED_OPTIONS = ("model", "model_args", "tasks", "limit", "output_path")


@dataclass(frozen=True)
class Arm:
    name: str
    model_args: tuple       # (key, value as lm_eval reads it) pairs, in order
    tasks: str
    options: tuple          # lm_eval's other arguments (--limit, the spec's lm_eval options)
    folder: Path            # OUT/arms/NAME
    added_for: str | None = None  # the rescue arm whose recovery needs it, when the sweep added it

    @property
    def mode(self):
        return dict(self.model_args).get("mode", DEFAULT_MODE)

    @property
    def output_path(self):
        return self.folder / f"{self.name}.json"

    def argv(self):
        """lm_eval's arguments for this arm (what `lm_eval` would be given)."""
        return ["--model", "kvrescue", "--model_args", join_model_args(self.model_args),
                "--tasks", self.tasks, *self.options, "--output_path", str(self.output_path)]

    def command(self, processes=1):
        """The equivalent shell command: `lm_eval ...`, or under torchrun when data parallel."""
        launcher = ["lm_eval"] if processes == 1 else ["torchrun", "--standalone", f"--nproc_per_node={processes}",
                                                       "-m", "lm_eval"]
        return shlex.join(launcher + self.argv())


def expand(spec):
    """The spec's arms, in the spec's order, recovery arms after the grid's."""
    axes = list(dict.fromkeys(key for block in spec.blocks for key, value in block.items() if isinstance(value, list)))
    settings = []
    for block in spec.blocks:
        fixed = {k: v for k, v in block.items() if not isinstance(v, list)}
        keys = [k for k, v in block.items() if isinstance(v, list)]
        for values in product(*(block[k] for k in keys)):
            args = {**spec.model_args, **fixed, **dict(zip(keys, values))}
            if args.get("mode", DEFAULT_MODE) not in MODES:
                raise SpecError(spec.source, "mode", f"{args['mode']!r} is not one of {', '.join(MODES)}")
            settings.append((applicable(args), None))
    if spec.recovery_arms:
        settings += [(applicable(baseline_args(args, arm)), _name(args, axes))
                     for args, _ in list(settings) if args.get("mode", DEFAULT_MODE) == "rescue"
                     for arm in ("bon", "full")]
    arms, seen = [], {}
    options = _options(spec)
    for args, added_for in settings:
        key = tuple(sorted((k, value_text(v)) for k, v in args.items()))
        if key in seen:
            continue
        name = _name(args, axes)
        if name in {arm.name for arm in arms}:
            other = next(arm for arm in arms if arm.name == name)
            raise SpecError(spec.source, "grid", f"two arms get the name {name!r} ({join_model_args(args)} and "
                                                 f"{join_model_args(dict(other.model_args))}): make the key that "
                                                 "separates them a list (an axis), so that it is in the name")
        seen[key] = name
        tasks = args.pop("tasks", spec.tasks)
        arms.append(Arm(name, tuple((k, value_text(v)) for k, v in args.items()), str(tasks), options,
                        spec.output / "arms" / name, added_for))
    return arms


def applicable(args):
    """The model_args a mode uses: no eviction for full and helper, no helper settings for bon and full."""
    mode = args.get("mode", DEFAULT_MODE)
    dropped = (set() if MODES[mode].evicts else eviction_args()) | (set() if MODES[mode].uses_helper else set(HELPER_ARGS))
    return {k: v for k, v in args.items() if k not in dropped}


def _name(args, axes):
    parts = [str(args.get("mode", DEFAULT_MODE))]
    parts += [f"{key}-{_safe(args[key])}" for key in axes if key != "mode" and key in args]
    return "_".join(parts)


def _safe(value):
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", value_text(value)).strip("-")


def _options(spec):
    options = []
    if spec.limit is not None:
        options += ["--limit", value_text(int(spec.limit) if float(spec.limit).is_integer() else spec.limit)]
    for key, value in spec.lm_eval.items():
        if key in RESERVED_OPTIONS:
            raise SpecError(spec.source, f"lm_eval.{key}", f"the sweep sets --{key} itself"
                            + (" (use the spec's own `tasks`, `limit` or `model_args`)" if key != "output_path" else
                               " (use the spec's `output`)"))
        if value is True:
            options.append(f"--{key}")
        elif value is not False:
            options += [f"--{key}", value_text(value)]
    return tuple(options)
