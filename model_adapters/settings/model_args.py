"""`--model_args` of the `kvrescue` model parsed onto the settings tree (tree.py), before any model loads, so a
bad name or value fails in a second with a message that names the argument and the valid values.

Each model_arg sets one field of one object of the tree, found by name, never by a list kept here:
- the fields of the core's objects under their own names: `temperature`, `top_p`, `top_k` (SamplingParams);
  `max_steps`, `max_step_tokens`, `max_context`, `max_problems_in_flight`, `seed` (EngineConfig); `budget`,
  `buffer`, `window` (EvictionSchedule);
- by prefix: `detector_<field>` (DetectorConfig), `<backend>_<field>` (a backend's options, e.g.
  `vllm_max_model_len`, model_adapters/backends);
- the chosen evictor's fields and the chosen scorer factory's options under their own names (e.g. `sinks` for
  `streamingllm`, `max_batch_rows` for the scorers), so a new plug-in brings its options with it;
- the rest: the fields of `Settings` itself (models, mode, evictor, scorer, dtype, device, ...), `n`,
  `n_base`, `n_helper` (the engine's counts, by mode), `detector` (on | off; default: on in mode rescue only)
  and `<role>_backend` (RoleBackends).
A value given as text is converted to its field's type. A name that nothing takes fails, with the closest one.
Seed: `seed=S` here, else the seed of `lm_eval --seed` (its first value), see lm_eval/seed.py. An evictor
that draws (a field `random_seed`: random, randomattention) draws from the run's seed unless it is given.
"""

import typing
from dataclasses import MISSING, fields

from kvrescue_eval.detector import DetectorConfig
from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.run_modes import MODES
from kvrescue_eval.engine.sampling import SamplingParams

from ..backends import BACKENDS, backend_class, did_you_mean, option_prefix
from .presets import DEFAULT_PRESET, PRESETS
from .tree import RoleBackends, Settings, plain

# lm-eval passes these from its own command line; batching is `max_problems_in_flight`.
LM_EVAL_EXTRAS = ("batch_size", "max_batch_size")
# The paper uses early exit in KV-Rescue only: its best-of-N and full-KV baselines have none (Table 2).
DETECTOR_DEFAULT = {name: "on" if mode.early_exit else "off" for name, mode in MODES.items()}
DETECTOR_SWITCH = {"on": "on", "off": "off", True: "on", False: "off", "true": "on", "false": "off"}
EVICTION_FIELDS = {"budget": 64, "buffer": 128, "window": 8}  # of EvictionSchedule, with the paper's defaults
COUNTS = {"n": 8, "n_base": None, "n_helper": None}  # n_base, n_helper: n unless given


def _kind(hint):
    """int, float, bool or str: the type a model_arg's text converts to (None: not settable from text)."""
    options = [arg for arg in typing.get_args(hint) if arg is not type(None)] or [hint]
    return options[0] if options[0] in (int, float, bool, str) else None


def _fields(cls, exclude=()) -> dict:
    """field -> (kind, default) of a dataclass's fields settable from text."""
    hints = typing.get_type_hints(cls)
    return {f.name: (_kind(hints[f.name]), f.default) for f in fields(cls)
            if f.init and f.name not in exclude and _kind(hints[f.name]) is not None}


def sections() -> dict:
    """node -> (model_arg prefix, {field: (kind, default)}) of every object a model_arg can set."""
    found = {"settings": ("", _fields(Settings)),
             "counts": ("", {name: (int, default) for name, default in COUNTS.items()}),
             "backends": ("", {f"{role}_backend": (str, default) for role, (_, default) in _fields(RoleBackends).items()}),
             "sampling": ("", _fields(SamplingParams)),
             "engine": ("", _fields(EngineConfig, exclude=("n_base", "n_helper"))),
             "eviction": ("", {name: (int, default) for name, default in EVICTION_FIELDS.items()}),
             "detector": ("detector_", _fields(DetectorConfig))}
    found["settings"][1]["detector"] = ("switch", None)
    for name in BACKENDS:
        options = backend_class(name).options
        if options is not None:
            found[f"backend:{name}"] = (option_prefix(name), _fields(options))
    return found


def preset_of(raw: dict) -> str | None:
    """The preset model_args ask for: theirs, else the default one when they name no model."""
    return raw.get("preset") or (None if raw.get("base") or raw.get("helper") else DEFAULT_PRESET)


def parse_model_args(raw: dict) -> Settings:
    """The settings of lm-eval's parsed `--model_args` (values may already be int/float/bool)."""
    raw = {k: v for k, v in raw.items() if k not in LM_EVAL_EXTRAS}
    preset = preset_of(raw)
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown preset={preset!r}; valid presets: {', '.join(PRESETS)}" + did_you_mean(preset, PRESETS))
    values = {**(PRESETS[preset] if preset else {}), **{k: v for k, v in raw.items() if v is not None}}
    if "prm" in raw and "scorer" not in raw:
        values["scorer"] = "qwen-prm"  # `prm=PATH` alone means: score with that Qwen PRM
    values["preset"] = preset
    nodes = sections()
    by_name = {prefix + name: (node, name, kind) for node, (prefix, table) in nodes.items()
               for name, (kind, _) in table.items()}
    evictor, scorer = str(values.get("evictor", Settings.evictor)), str(values.get("scorer", Settings.scorer))
    evictor_defaults, scorer_defaults = _plugin_options(evictor, scorer, values.get("prm_backend"))
    unknown = sorted(set(values) - set(by_name) - set(evictor_defaults) - set(scorer_defaults))
    if unknown:
        plugin_names = sorted(set(evictor_defaults) | set(scorer_defaults))
        everything = [*by_name, *plugin_names]
        hints = "".join(f" ({name}: did you mean {close[0]}?)" for name in unknown
                        if (close := _close(name, everything)))
        raise ValueError(f"unknown model_arg(s) {unknown} for --model kvrescue{hints}; valid: {', '.join(by_name)}"
                         + (f", and the options of evictor {evictor} / scorer {scorer}: {', '.join(plugin_names)}"
                            if plugin_names else ""))
    given = {node: {} for node in nodes}
    for name, value in values.items():
        if name in by_name:
            node, field, kind = by_name[name]
            given[node][field] = None if value is None else _convert(name, value, kind)
    options = {"evictor": {k: _convert_option(k, v, evictor_defaults[k]) for k, v in values.items()
                           if k in evictor_defaults and k not in by_name},
               "scorer": {k: _convert_option(k, v, scorer_defaults[k]) for k, v in values.items()
                          if k in scorer_defaults and k not in by_name and k not in evictor_defaults}}
    return _settings(given, options, nodes)


def model_args_of(settings: Settings) -> dict:
    """The settings as model_args (name -> value, what parse_model_args would take back): the counts resolved by
    mode, the eviction fields only where they apply, the detector's also when it is off (they set the recorded
    candidate statistics), the plug-ins' options as dicts."""
    nodes = sections()
    objects = {"settings": settings, "sampling": settings.sampling, "engine": settings.engine,
               "eviction": settings.eviction, "detector": settings.engine.candidate_detector,
               **{f"backend:{name}": options for name, options in settings.backend_options.items()}}
    flat = {prefix + name: getattr(objects[node], name) for node, (prefix, table) in nodes.items()
            if objects.get(node) is not None for name in table if name != "detector"}
    flat.update({f"{role}_backend": getattr(settings.backends_of, role) for role in ("base", "helper", "prm")})
    flat.update(n_base=settings.engine.n_base, n_helper=settings.engine.n_helper,
                detector="on" if settings.detector is not None else "off",
                evictor_options=plain(settings.eviction.evictor) if settings.eviction is not None else None,
                scorer_options=dict(settings.scorer_options))
    return flat


def _close(name, valid):
    import difflib

    return difflib.get_close_matches(name, valid, n=1)


def _settings(given: dict, options: dict, nodes: dict) -> Settings:
    """The tree from the converted values of each node; each object checks its own fields."""
    top = given["settings"]
    mode = top.get("mode", Settings.mode)
    if mode not in MODES:
        raise ValueError(f"model_arg mode={mode!r} is invalid; valid: {', '.join(MODES)}" + did_you_mean(mode, MODES))
    n_base, n_helper = _counts(mode, {**{k: d for k, (_, d) in nodes["counts"][1].items()}, **given["counts"]})
    switch = top.pop("detector", None) or DETECTOR_DEFAULT[mode]
    detector = _built(DetectorConfig, given["detector"], "detector_")  # off: it sets the recorded statistics
    on = switch == "on"
    engine = _built(EngineConfig, given["engine"], n_base=n_base, n_helper=n_helper,
                    detector=detector if on else None, detector_when_off=None if on else detector)
    eviction = _eviction(top.get("evictor", Settings.evictor), {"random_seed": engine.seed, **options["evictor"]},
                         given["eviction"]) if MODES[mode].evicts else None
    backend_options = {node.split(":", 1)[1]: _built(option_class, given[node], nodes[node][0])
                       for node in nodes if node.startswith("backend:")
                       for option_class in [backend_class(node.split(":", 1)[1]).options]}
    roles = RoleBackends(**{name.removesuffix("_backend"): value for name, value in given["backends"].items()})
    return Settings(**top, sampling=_built(SamplingParams, given["sampling"]), engine=engine, eviction=eviction,
                    backends_of=roles, backend_options=backend_options, scorer_options=options["scorer"])


def _counts(mode: str, counts: dict) -> tuple[int, int]:
    """(N_b, N_h) of the mode from n, n_base and n_helper."""
    def bad(name, valid):
        raise ValueError(f"model_arg {name}={counts[name]!r} is invalid; valid: {valid}")

    if counts["n"] < 1:
        bad("n", "an integer >= 1")
    for name in ("n_base", "n_helper"):
        if counts[name] is not None and counts[name] < 0:
            bad(name, "an integer >= 0")
    used = MODES[mode]
    n_base = counts["n_base"] if counts["n_base"] is not None else counts["n"]
    n_helper = counts["n_helper"] if counts["n_helper"] is not None else counts["n"]
    n_base, n_helper = (n_base if used.uses_base else 0), (n_helper if used.uses_helper else 0)
    if used.uses_base and n_base < 1:
        raise ValueError(f"model_arg n_base={n_base!r} is invalid; valid: an integer >= 1 in mode {mode}")
    if used.uses_helper and not used.uses_base and n_helper < 1:
        raise ValueError(f"model_arg n_helper={n_helper!r} is invalid; valid: an integer >= 1 in mode {mode}")
    return n_base, n_helper


def _built(cls, given: dict, prefix: str = "", **derived):
    """cls(**given, **derived), its own check's error naming the model_args given."""
    try:
        return cls(**given, **derived)
    except (TypeError, ValueError) as error:
        named = ", ".join(f"{prefix}{k}={v!r}" for k, v in given.items())
        raise ValueError(f"model_arg(s) {named or '(defaults)'}: {error}") from None


def _eviction(name: str, options: dict, values: dict):
    """The base's EvictionSchedule with its evictor, built once from `evictor` and those of `options` that the
    evictor declares (the run's `random_seed` is offered to all)."""
    from kvrescue_eval.eviction import EVICTORS, EvictionSchedule, evictor_options

    if name not in EVICTORS:
        raise ValueError(f"model_arg evictor={name!r} is invalid; valid: {', '.join(sorted(EVICTORS))}"
                         + did_you_mean(name, EVICTORS))
    declared = evictor_options(EVICTORS[name])
    try:
        evictor = EVICTORS[name](**{key: value for key, value in options.items() if key in declared})
    except (TypeError, ValueError) as error:
        raise ValueError(f"model_args of evictor={name}: {error}") from None
    schedule = {**EVICTION_FIELDS, **values}
    try:
        return EvictionSchedule(evictor, **schedule)
    except (TypeError, ValueError) as error:
        raise ValueError(f"model_args {', '.join(f'{k}={v!r}' for k, v in schedule.items())}: {error}") from None


def _plugin_options(evictor: str, scorer: str, backend: str | None) -> tuple[dict, dict]:
    """(option -> default) of the evictor class and of the scorer factory on its backend; empty for unknown
    names (the tree then names the valid ones)."""
    from kvrescue_eval.eviction import EVICTORS, evictor_options

    from ..scorers import SCORERS, scorer_backends, scorer_options

    evictor_defaults = evictor_options(EVICTORS[evictor]) if evictor in EVICTORS else {}
    runs = scorer in SCORERS and (backend is None or backend in scorer_backends(scorer))
    return evictor_defaults, (scorer_options(scorer, backend) if runs else {})


def _convert(name: str, value, kind):
    if kind == "switch":
        key = value.lower() if isinstance(value, str) else value
        if key not in DETECTOR_SWITCH:
            raise ValueError(f"model_arg detector={value!r} is invalid; valid: on, off "
                             f"(default: {', '.join(f'{v} for {m}' for m, v in DETECTOR_DEFAULT.items())})")
        return DETECTOR_SWITCH[key]
    if kind is bool:
        if isinstance(value, bool) or str(value).lower() in ("true", "false"):
            return value if isinstance(value, bool) else str(value).lower() == "true"
        raise ValueError(f"model_arg {name}={value!r} must be true or false")
    if kind in (int, float):
        return _to_number(name, value, kind)
    return str(value)


def _convert_option(name: str, value, default):
    """A plug-in option given as text (or already typed by lm-eval), converted to its default's type."""
    if isinstance(default, bool) or type(default) in (int, float):
        return _convert(name, value, type(default))
    return value if default is None or isinstance(value, type(default)) else type(default)(value)


def _to_number(name: str, value, kind):
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
        if kind is int and number != int(number):
            raise ValueError
        return kind(number)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"model_arg {name}={value!r} must be {'an integer' if kind is int else 'a number'}") from None
