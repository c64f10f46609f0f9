"""A setting's identity beyond its named fields, and what a comparison's arms must share with the rescue run.

A Setting (runs.py) names the base, mode, N, evictor, budget, helper, scorer, buffer, detector and limits. Its
`identity` adds every other recorded field that changes results (runs.IDENTITY_FIELDS: sampling, the evictor's
window, mix_lambda and options, the PRM and the scorer's options, the detector's thresholds, the dtype, each
role's backend, the thinking mode) and, per task, what the task was generated with (`generation`: temperature,
top-p, top-k, token cap, stop strings as used). Results that differ in any of it are never pooled: they are
separate cells, and the report labels each with what tells it apart (`variant`) and says why they were not pooled.

An arm of a comparison must share with the rescue run what applies to that arm, where both record it:
- every arm: the sampling and the generation, and the dtype;
- a scored arm (N > 1 picks by the scorer): the scorer, the PRM and the scorer's options, unless the analysis
  is asked to compare a selector against fixed baselines (`any_scorer`: `check --arms-any-scorer`, as the
  testbed gate does with its sabotaged selectors and its vLLM rescue);
- bon: the buffer, the window, mix_lambda and the evictor's options.
Backends are not: a backend computes the same trajectories as another (tests/vllm checks that they commit the
transformers ones), so a rescue run on vLLM is compared with arms on transformers; they are still never pooled.
"""

import json
from collections import defaultdict
from dataclasses import replace

ALL_ARMS = ("temperature", "top_p", "top_k", "dtype", "generation.")
SCORED = ("prm", "scorer_options")
BY_ARM = {"bon": ("window", "mix_lambda", "evictor_options"), "full": (), "helper": ()}


def flat(setting):
    """The setting's identity as dotted names (backends.base, generation.temperature, ...) -> values."""
    out = {}

    def walk(prefix, value):
        if isinstance(value, dict) and value:
            for key, item in value.items():
                walk(f"{prefix}.{key}", item)
        else:
            out[prefix] = value

    for name, text in setting.identity:
        walk(name, json.loads(text))
    return out


def with_generation(setting, generation):
    """The setting of one task's results: the run's, plus what that task was generated with (canonical JSON)."""
    if generation is None:
        return setting
    return replace(setting, identity=setting.identity + (("generation", generation),))


def named(setting):
    """The setting without its identity: what the report's setting columns show."""
    return replace(setting, identity=(), variant=None)


def label_variants(cells):
    """Give the cells of settings that look alike (same named fields) a `variant` naming what tells them apart;
    returns the report's notes on them (why they were not pooled)."""
    by_name = defaultdict(set)
    for cell in cells:
        by_name[named(cell.setting)].add(cell.setting)
    labels, notes = {}, []
    for name, settings in by_name.items():
        if len(settings) < 2:
            continue
        flats = {s: flat(s) for s in settings}
        keys = sorted({k for f in flats.values() for k in f})
        differing = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flats.values()}) > 1]
        for s, f in flats.items():
            labels[s] = ", ".join(f"{k}={_show(f.get(k))}" for k in differing)
        notes.append(f"{_describe(name)}: not pooled, the runs differ in {', '.join(differing)} ("
                     + "; ".join(sorted(labels[s] for s in settings)) + ")")
    for cell in cells:
        if cell.setting in labels:
            cell.setting = replace(cell.setting, variant=labels[cell.setting])
    return notes


def mismatches(arm_cell, rescue_cell, arm, any_scorer=False):
    """What `arm_cell` (the arm "bon", "full" or "helper") does not share with the rescue cell, as
    "name: rescue X, arm Y" (empty: it may be paired with it); `any_scorer`: the scorer is not compared."""
    arm_s, rescue_s = arm_cell.setting, rescue_cell.setting
    found = []
    scored = arm_s.scorer is not None and not any_scorer
    if scored and arm_s.scorer != rescue_s.scorer:
        found.append(f"scorer: rescue {rescue_s.scorer}, {arm} {arm_s.scorer}")
    if arm == "bon" and None not in (arm_s.buffer, rescue_s.buffer) and arm_s.buffer != rescue_s.buffer:
        found.append(f"buffer: rescue {rescue_s.buffer}, {arm} {arm_s.buffer}")
    shared = ALL_ARMS + (SCORED if scored else ()) + BY_ARM[arm]
    ours, theirs = flat(arm_s), flat(rescue_s)
    for key in sorted(set(ours) & set(theirs)):
        if any(key == p or key.startswith(p if p.endswith(".") else p + ".") for p in shared) \
                and ours[key] != theirs[key]:
            found.append(f"{key}: rescue {_show(theirs[key])}, {arm} {_show(ours[key])}")
    return found


def _show(value):
    return "—" if value is None else value if isinstance(value, str) else json.dumps(value)


def _describe(setting):
    parts = [setting.base, setting.mode, f"N={setting.n}"]
    if setting.evictor:
        parts.append(f"{setting.evictor} B={setting.budget}")
    return " ".join(str(p) for p in parts)
