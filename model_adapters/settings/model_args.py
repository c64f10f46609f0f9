"""`--model_args` of the `kvrescue` model: parsing, preset resolution and validation.

Everything here runs before any model is loaded, so a bad value fails in a second with a message
that names the argument and the valid values. The evictor is built here, once, with its options; any
parameter of the chosen evictor's class or of the chosen scorer's factory is a model_arg too (e.g. `sinks`
for `streamingllm`, `pool_kernel` for `rkv`/`snapkv`, `max_batch_rows` for the scorers), so a new plug-in
brings its options with it.

Budget semantics: `budget` B counts every slot kept per layer and KV head after a compression,
including the `window` most recent ones (always kept; their queries score the others), as in R-KV's
reference code; B - window slots are chosen by score. The paper describes B as the score-selected
entries plus a protected recent window; here the window is inside B. Between compressions the cache
grows by up to `buffer` slots, so memory is bounded by B + buffer (192 slots at the paper's B = 64).

Detector: on by default in mode rescue only; the baselines (bon, full, helper) have no early exit,
as in the paper. `detector=off` with mode rescue is the paper's Table 2 row "+ interleaving".

Seed: `seed=S` here, else the seed of `lm_eval --seed` (its first value), see lm_eval/seed.py.
"""

from dataclasses import asdict, dataclass, field, fields, replace

from kvrescue_eval.detector import DetectorConfig
from kvrescue_eval.engine.config import MODES

from .presets import DEFAULT_PRESET, PRESETS
from ..scorers import VLLM_VARIANTS

DTYPES = ("auto", "float32", "bfloat16", "float16")
OVERLAP = ("auto", "on", "off")
BACKENDS = ("hf", "vllm")  # transformers (token-level, in the engine's loop) or vLLM (step-level, beside it)
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's placements over visible GPUs
# lm-eval passes these from its own command line; batching is `max_problems_in_flight`.
LM_EVAL_EXTRAS = ("batch_size", "max_batch_size")
# The paper uses early exit in KV-Rescue only: its best-of-N and full-KV baselines have none (Table 2).
DETECTOR_DEFAULT = {name: "on" if mode.early_exit else "off" for name, mode in MODES.items()}
DETECTOR_SWITCH = {"on": "on", "off": "off", True: "on", False: "off", "true": "on", "false": "off"}
_PAPER_DETECTOR = DetectorConfig()


@dataclass(frozen=True)
class ModelArgs:
    base: str | None = None         # base model (hub id or local folder; "smollm2": the packaged model)
    helper: str | None = None       # helper model, full KV cache (needed by modes rescue and helper)
    scorer: str = "qwen-prm"        # step scorer: a name of model_adapters.scorers.SCORERS
    prm: str | None = None          # checkpoint of the qwen-prm scorer
    mode: str = "rescue"            # rescue | bon | full | helper
    n: int = 8                      # candidates per model and step
    n_base: int | None = None       # overrides n for the base (default: n if the mode uses the base)
    n_helper: int | None = None     # overrides n for the helper (default: n if the mode uses the helper)
    evictor: str = "rkv"            # eviction method of the base (modes rescue and bon): a name of EVICTORS
    budget: int = 64                # KV slots kept per layer and KV head after a compression (see below)
    buffer: int = 128               # slots added between compressions (memory bound: budget + buffer)
    window: int = 8                 # recent slots always kept; their queries score the others
    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 20
    max_steps: int = 1024           # committed steps per problem
    max_step_tokens: int = 512      # tokens per candidate step
    max_context: int = 4096         # prompt + trajectory tokens (base tokenizer)
    max_problems_in_flight: int = 8  # problems decoded at once (continuous batching)
    # Degeneration detector (early exit of base candidates): on | off; None = the mode's default
    # (on for rescue, off for bon, full and helper, as in the paper). detector=off with mode=rescue
    # is the paper's Table 2 row "+ interleaving". Thresholds: kvrescue_eval.detector.DetectorConfig.
    detector: str | None = None
    detector_entropy_threshold: float = _PAPER_DETECTOR.entropy_threshold  # nats, moving average
    detector_window: int = _PAPER_DETECTOR.window                           # tokens averaged
    detector_guard: int = _PAPER_DETECTOR.guard                             # tokens before the first check
    detector_gzip_threshold: float = _PAPER_DETECTOR.gzip_threshold         # gzip ratio below this: a loop
    detector_gzip_chars: int = _PAPER_DETECTOR.gzip_chars                   # characters compressed
    dtype: str = "auto"
    device: str = "cpu"
    seed: int = 0
    preset: str | None = None
    # Run journal (docs/resume.md): finished problems on disk, so a rerun resumes. Default: beside
    # lm-eval's --output_path when given; "off": none. Not part of a result's identity.
    journal: str | None = None
    # Which library runs each role. base_backend=vllm with an evicting base: model_adapters/vllm/evicted_base.
    helper_backend: str = "hf"
    prm_backend: str = "hf"         # for scorer=qwen-prm
    base_backend: str = "hf"
    # Helper proposals and scoring on background threads beside the base's decoding: on | off | auto
    # (auto: on when a role runs on vLLM). Off, an all-transformers run is bit-reproducible: which
    # problems share a scorer batch (and when the next step's rows join the base's batch) never depends
    # on thread timing. On, it can, through the float rounding of differently composed batches.
    overlap: str = "auto"
    # vLLM engine settings (passed to every vLLM engine when set; model_adapters/vllm/engine.py)
    vllm_gpu_memory_utilization: float | None = None  # share of GPU memory per engine (GPU default per role)
    vllm_kv_cache_memory_bytes: int | None = None     # KV cache size per engine (CPU default 1 GiB)
    vllm_tensor_parallel_size: int | None = None
    vllm_max_model_len: int | None = None
    vllm_enforce_eager: bool | None = None
    vllm_max_num_seqs: int | None = None
    vllm_block_size: int | None = None
    vllm_quantization: str | None = None
    evictor_options: dict = field(default_factory=dict)  # options of the evictor class, as given
    scorer_options: dict = field(default_factory=dict)   # options of the scorer factory, as given
    # The evictor object, built once from `evictor` and `evictor_options` (None when the mode does not evict).
    eviction: object = field(default=None, compare=False, repr=False)
    # placement of a model too large for one device: its layers spread over all visible GPUs of this
    # process (transformers' device_map through accelerate); None: the whole model on `device`
    device_map: str | None = None

    @property
    def backends(self) -> dict:
        """role -> backend of the roles this run uses ("base", "helper", "prm")."""
        n_base, n_helper = self.counts
        roles = {"base": (n_base, self.base_backend), "helper": (n_helper, self.helper_backend),
                 "prm": (n_base + n_helper > 1 and self.scorer in VLLM_VARIANTS, self.prm_backend)}
        return {role: backend for role, (used, backend) in roles.items() if used}

    @property
    def overlaps(self) -> bool:
        return self.uses_vllm if self.overlap == "auto" else self.overlap == "on"

    @property
    def uses_vllm(self) -> bool:
        return "vllm" in self.backends.values() or self.scorer in VLLM_VARIANTS.values()

    @property
    def counts(self) -> tuple[int, int]:
        """(N_b, N_h) of the mode."""
        mode = MODES[self.mode]
        n_base = self.n_base if self.n_base is not None else self.n
        n_helper = self.n_helper if self.n_helper is not None else self.n
        return (n_base if mode.uses_base else 0), (n_helper if mode.uses_helper else 0)

    @property
    def evicts(self) -> bool:
        return MODES[self.mode].evicts

    @property
    def scored(self) -> bool:
        """Whether steps are chosen among several candidates (one candidate needs no scorer)."""
        return sum(self.counts) > 1

    @property
    def detector_on(self) -> bool:
        """The effective detector switch: the model_arg, else the mode's default."""
        return (self.detector or DETECTOR_DEFAULT[self.mode]) == "on"

    @property
    def detector_config(self) -> DetectorConfig | None:
        """What the engine gets: None when the detector is off (no candidate is ever aborted)."""
        if not self.detector_on:
            return None
        return DetectorConfig(entropy_threshold=self.detector_entropy_threshold, window=self.detector_window,
                              guard=self.detector_guard, gzip_threshold=self.detector_gzip_threshold,
                              gzip_chars=self.detector_gzip_chars)

    def as_dict(self) -> dict:
        return {name: value for name, value in asdict(self).items() if name != "eviction"}


_PLUGIN_FIELDS = ("evictor_options", "scorer_options", "eviction")
NAMES = tuple(f.name for f in fields(ModelArgs) if f.name not in _PLUGIN_FIELDS)
NUMERIC = {**{f.name: type(f.default) for f in fields(ModelArgs) if type(f.default) in (int, float)},
           "n_base": int, "n_helper": int, "vllm_gpu_memory_utilization": float, "vllm_kv_cache_memory_bytes": int,
           "vllm_tensor_parallel_size": int, "vllm_max_model_len": int, "vllm_max_num_seqs": int,
           "vllm_block_size": int}
BOOLEAN = ("vllm_enforce_eager",)
VLLM_SETTINGS = tuple(name for name in NAMES if name.startswith("vllm_"))


def parse_model_args(raw: dict) -> ModelArgs:
    """ModelArgs from lm-eval's parsed `--model_args` (values may already be int/float/bool)."""
    raw = {k: v for k, v in raw.items() if k not in LM_EVAL_EXTRAS}
    preset = raw.get("preset") or (None if raw.get("base") or raw.get("helper") else DEFAULT_PRESET)
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown preset={preset!r}; valid presets: {', '.join(PRESETS)}")
    values = {**(PRESETS[preset] if preset else {}), **{k: v for k, v in raw.items() if v is not None}}
    if "prm" in raw and "scorer" not in raw:
        values["scorer"] = "qwen-prm"  # `prm=PATH` alone means: score with that Qwen PRM
    values["preset"] = preset
    evictor = str(values.get("evictor", ModelArgs.evictor))
    scorer = str(values.get("scorer", ModelArgs.scorer))
    evictor_defaults, scorer_defaults = _plugin_options(evictor, scorer)
    unknown = sorted(set(values) - set(NAMES) - set(evictor_defaults) - set(scorer_defaults))
    if unknown:
        plugin_names = sorted(set(evictor_defaults) | set(scorer_defaults))
        raise ValueError(f"unknown model_arg(s) {unknown} for --model kvrescue; valid: {', '.join(NAMES)}"
                         + (f", and the options of evictor {evictor} / scorer {scorer}: {', '.join(plugin_names)}"
                            if plugin_names else ""))
    core = {name: _convert(name, value) for name, value in values.items() if name in NAMES}
    args = ModelArgs(**core,
                     evictor_options={k: _convert_option(k, v, evictor_defaults[k]) for k, v in values.items()
                                      if k in evictor_defaults and k not in NAMES},
                     scorer_options={k: _convert_option(k, v, scorer_defaults[k]) for k, v in values.items()
                                     if k in scorer_defaults and k not in NAMES and k not in evictor_defaults})
    validate(args)
    return replace(args, eviction=_checked_schedule(args).evictor if args.evicts else None)


def _plugin_options(evictor: str, scorer: str) -> tuple[dict, dict]:
    """(option -> default) of the evictor class and of the scorer factory; empty for unknown names
    (validate() then names the valid ones)."""
    from kvrescue_eval.eviction import EVICTORS, evictor_options

    from ..scorers import SCORERS, scorer_options

    evictor_defaults = evictor_options(EVICTORS[evictor]) if evictor in EVICTORS else {}
    return evictor_defaults, (scorer_options(scorer) if scorer in SCORERS else {})


def _checked_schedule(args: ModelArgs):
    """The base's eviction schedule, which checks budget, buffer and window (the one place they are checked)."""
    from kvrescue_eval.eviction import EvictionSchedule

    try:
        return EvictionSchedule(_build_evictor(args), args.budget, args.buffer, args.window)
    except TypeError as error:
        raise ValueError(f"model_args budget={args.budget!r}, buffer={args.buffer!r}, window={args.window!r}: "
                         f"{error}") from None
    except ValueError as error:
        if str(error).startswith("model_args of evictor="):
            raise
        raise ValueError(f"model_args budget={args.budget!r}, buffer={args.buffer!r}, window={args.window!r}: "
                         f"{error}") from None


def _build_evictor(args: ModelArgs):
    from kvrescue_eval.eviction import EVICTORS

    try:
        return EVICTORS[args.evictor](**args.evictor_options)
    except (TypeError, ValueError) as error:
        raise ValueError(f"model_args of evictor={args.evictor}: {error}") from None


def _convert(name: str, value):
    if name == "detector" and value is not None:
        key = value.lower() if isinstance(value, str) else value
        if key not in DETECTOR_SWITCH:
            raise ValueError(f"model_arg detector={value!r} is invalid; valid: on, off "
                             f"(default: {', '.join(f'{v} for {m}' for m, v in DETECTOR_DEFAULT.items())})")
        return DETECTOR_SWITCH[key]
    if name in BOOLEAN and value is not None:
        if isinstance(value, bool) or str(value).lower() in ("true", "false"):
            return value if isinstance(value, bool) else str(value).lower() == "true"
        raise ValueError(f"model_arg {name}={value!r} must be true or false")
    if value is None or name not in NUMERIC:
        return None if value is None else str(value)
    return _to_number(name, value, NUMERIC[name])


def _convert_option(name: str, value, default):
    """A plug-in option given as text (or already typed by lm-eval), converted to its default's type."""
    if isinstance(default, bool):
        if isinstance(value, bool) or str(value).lower() in ("true", "false"):
            return value if isinstance(value, bool) else str(value).lower() == "true"
        raise ValueError(f"model_arg {name}={value!r} must be true or false")
    if type(default) in (int, float):
        return _to_number(name, value, type(default))
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


def validate(args: ModelArgs) -> None:
    from kvrescue_eval.eviction import EVICTORS

    from ..scorers import SCORERS, scorer_model_args

    def bad(name, valid):
        raise ValueError(f"model_arg {name}={getattr(args, name)!r} is invalid; valid: {valid}")

    if args.mode not in MODES:
        bad("mode", ", ".join(MODES))
    for name in ("n", "max_steps", "max_step_tokens", "max_context", "max_problems_in_flight"):
        if getattr(args, name) < 1:
            bad(name, "an integer >= 1")
    for name in ("n_base", "n_helper"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            bad(name, "an integer >= 0")
    mode = MODES[args.mode]
    n_base, n_helper = args.counts
    if mode.uses_base and n_base < 1:
        bad("n_base", f"an integer >= 1 in mode {args.mode}")
    if mode.uses_helper and not mode.uses_base and n_helper < 1:
        bad("n_helper", f"an integer >= 1 in mode {args.mode}")
    if mode.uses_base and not args.base:
        bad("base", f"a model name or folder (mode {args.mode} decodes with the base)")
    if n_helper and not args.helper:
        bad("helper", f"a model name or folder (mode {args.mode} with n_helper={n_helper} needs a helper)")
    if args.evicts:
        if args.evictor not in EVICTORS:
            bad("evictor", ", ".join(sorted(EVICTORS)))
    if args.scored:
        if args.scorer not in SCORERS:
            bad("scorer", ", ".join(sorted(SCORERS)))
        for name in scorer_model_args(args.scorer):
            if not getattr(args, name):
                others = ", ".join(f"scorer={other}" for other in sorted(SCORERS) if other != args.scorer)
                bad(name, f"a model name or folder: scorer={args.scorer} reads it (or choose {others})")
    if args.temperature < 0:
        bad("temperature", "a number >= 0 (0: greedy)")
    if not 0 < args.top_p <= 1:
        bad("top_p", "a number in (0, 1]")
    if args.top_k < 0:
        bad("top_k", "an integer >= 0 (0: off)")
    if args.dtype not in DTYPES:
        bad("dtype", ", ".join(DTYPES))
    if args.device_map is not None and args.device_map not in DEVICE_MAPS:
        bad("device_map", ", ".join(DEVICE_MAPS))
    validate_detector(args)
    validate_backends(args)


def validate_detector(args: ModelArgs) -> None:
    if args.detector == "on" and not MODES[args.mode].uses_base:
        raise ValueError(f"model_arg detector=on does nothing in mode {args.mode}: the detector screens base "
                         f"candidates only, never the helper's (valid: detector=off or no detector in mode helper)")
    limits = {"detector_entropy_threshold": (0, "a number >= 0 (nats)"), "detector_window": (1, "an integer >= 1"),
              "detector_guard": (0, "an integer >= 0"), "detector_gzip_threshold": (0, "a number >= 0"),
              "detector_gzip_chars": (1, "an integer >= 1")}
    for name, (lowest, valid) in limits.items():
        if not getattr(args, name) >= lowest:  # also refuses nan
            raise ValueError(f"model_arg {name}={getattr(args, name)!r} is invalid; valid: {valid}")


def validate_backends(args: ModelArgs) -> None:
    if args.overlap not in OVERLAP:
        raise ValueError(f"model_arg overlap={args.overlap!r} is invalid; valid: {', '.join(OVERLAP)}")
    """Backends and vLLM settings; asking for vLLM without it installed fails here, before loading."""
    def bad(name, valid):
        raise ValueError(f"model_arg {name}={getattr(args, name)!r} is invalid; valid: {valid}")

    for name in ("helper_backend", "prm_backend", "base_backend"):
        if getattr(args, name) not in BACKENDS:
            bad(name, ", ".join(BACKENDS))
    if args.prm_backend == "vllm" and args.scorer not in VLLM_VARIANTS:
        bad("prm_backend", f"hf with scorer={args.scorer} (prm_backend=vllm serves "
                           f"{', '.join(f'scorer={name}' for name in VLLM_VARIANTS)})")
    given = [name for name in VLLM_SETTINGS if getattr(args, name) is not None]
    if given and not args.uses_vllm:
        raise ValueError(f"model_arg(s) {given} set vLLM engine settings but no role runs on vLLM; "
                         f"set helper_backend, prm_backend or base_backend to vllm")
    if args.vllm_gpu_memory_utilization is not None and not 0 < args.vllm_gpu_memory_utilization <= 1:
        bad("vllm_gpu_memory_utilization", "a number in (0, 1]")
    for name in ("vllm_kv_cache_memory_bytes", "vllm_tensor_parallel_size", "vllm_max_model_len",
                 "vllm_max_num_seqs", "vllm_block_size"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            bad(name, "an integer >= 1")
    if args.uses_vllm:
        from ..vllm.engine import require_vllm

        require_vllm()
