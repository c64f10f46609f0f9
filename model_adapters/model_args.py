"""`--model_args` of the `kvrescue` model: parsing, preset resolution and validation.

Everything here runs before any model is loaded, so a bad value fails in a second with a message
that names the argument and the valid values.

Budget semantics: `budget` B counts every slot kept per layer and KV head after a compression,
including the `window` most recent ones (always kept; their queries score the others), as in R-KV's
reference code; B - window slots are chosen by score. The paper describes B as the score-selected
entries plus a protected recent window; here the window is inside B. Between compressions the cache
grows by up to `buffer` slots, so memory is bounded by B + buffer (192 slots at the paper's B = 64).

Detector: on by default in mode rescue only; the baselines (bon, full, helper) have no early exit,
as in the paper. `detector=off` with mode rescue is the paper's Table 2 row "+ interleaving".

Seed: `seed=S` here, else the seed of `lm_eval --seed` (its first value), see lm_eval_seed.py.
"""

from dataclasses import asdict, dataclass, fields

from kvrescue_eval.detector import DetectorConfig
from kvrescue_eval.engine.config import MODES

from .presets import DEFAULT_PRESET, PRESETS

DTYPES = ("auto", "float32", "bfloat16", "float16")
BACKENDS = ("hf", "vllm")  # transformers (token-level, in the engine's loop) or vLLM (step-level, beside it)
# lm-eval passes these from its own command line; batching is `max_problems_in_flight`.
LM_EVAL_EXTRAS = ("batch_size", "max_batch_size")
# The paper uses early exit in KV-Rescue only: its best-of-N and full-KV baselines have none (Table 2).
DETECTOR_DEFAULT = {"rescue": "on", "bon": "off", "full": "off", "helper": "off"}
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
    evictor: str = "rkv"            # eviction method of the base (modes rescue and bon)
    budget: int = 64                # KV slots kept per layer and KV head after a compression (see below)
    buffer: int = 128               # slots added between compressions (memory bound: budget + buffer)
    window: int = 8                 # recent slots always kept; their queries score the others
    mix_lambda: float = 0.1         # R-KV: weight of attention importance against redundancy
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
    # Which library runs each role. The base evicts, which vLLM cannot: base_backend=vllm needs mode full.
    helper_backend: str = "hf"
    prm_backend: str = "hf"         # for scorer=qwen-prm
    base_backend: str = "hf"
    # vLLM engine settings (passed to every vLLM engine when set; model_adapters/vllm_loading.py)
    vllm_gpu_memory_utilization: float | None = None  # share of GPU memory per engine (GPU default per role)
    vllm_kv_cache_memory_bytes: int | None = None     # KV cache size per engine (CPU default 1 GiB)
    vllm_tensor_parallel_size: int | None = None
    vllm_max_model_len: int | None = None
    vllm_enforce_eager: bool | None = None
    vllm_max_num_seqs: int | None = None
    vllm_block_size: int | None = None
    vllm_quantization: str | None = None

    @property
    def backends(self) -> dict:
        """role -> backend of the roles this run uses ("base", "helper", "prm")."""
        n_base, n_helper = self.counts
        roles = {"base": (n_base, self.base_backend), "helper": (n_helper, self.helper_backend),
                 "prm": (n_base + n_helper > 1 and self.scorer == "qwen-prm", self.prm_backend)}
        return {role: backend for role, (used, backend) in roles.items() if used}

    @property
    def uses_vllm(self) -> bool:
        return "vllm" in self.backends.values() or self.scorer == "qwen-prm-vllm"

    @property
    def counts(self) -> tuple[int, int]:
        """(N_b, N_h) of the mode."""
        uses_base, uses_helper = MODES[self.mode]
        n_base = self.n_base if self.n_base is not None else (self.n if uses_base else 0)
        n_helper = self.n_helper if self.n_helper is not None else (self.n if uses_helper else 0)
        return (n_base if uses_base else 0), (n_helper if uses_helper else 0)

    @property
    def evicts(self) -> bool:
        return self.mode in ("rescue", "bon")

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
        return asdict(self)


NAMES = tuple(f.name for f in fields(ModelArgs))
NUMERIC = {**{f.name: type(f.default) for f in fields(ModelArgs) if type(f.default) in (int, float)},
           "n_base": int, "n_helper": int, "vllm_gpu_memory_utilization": float, "vllm_kv_cache_memory_bytes": int,
           "vllm_tensor_parallel_size": int, "vllm_max_model_len": int, "vllm_max_num_seqs": int,
           "vllm_block_size": int}
BOOLEAN = ("vllm_enforce_eager",)
VLLM_SETTINGS = tuple(name for name in NAMES if name.startswith("vllm_"))


def parse_model_args(raw: dict) -> ModelArgs:
    """ModelArgs from lm-eval's parsed `--model_args` (values may already be int/float/bool)."""
    raw = {k: v for k, v in raw.items() if k not in LM_EVAL_EXTRAS}
    unknown = sorted(set(raw) - set(NAMES))
    if unknown:
        raise ValueError(f"unknown model_arg(s) {unknown} for --model kvrescue; valid: {', '.join(NAMES)}")
    preset = raw.get("preset") or (None if raw.get("base") or raw.get("helper") else DEFAULT_PRESET)
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown preset={preset!r}; valid presets: {', '.join(PRESETS)}")
    values = {**(PRESETS[preset] if preset else {}), **{k: v for k, v in raw.items() if v is not None}}
    if "prm" in raw and "scorer" not in raw:
        values["scorer"] = "qwen-prm"  # `prm=PATH` alone means: score with that Qwen PRM
    values["preset"] = preset
    args = ModelArgs(**{name: _convert(name, value) for name, value in values.items()})
    validate(args)
    return args


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
    kind = NUMERIC[name]
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

    from .scorers import SCORERS

    def bad(name, valid):
        raise ValueError(f"model_arg {name}={getattr(args, name)!r} is invalid; valid: {valid}")

    if args.mode not in MODES:
        bad("mode", ", ".join(MODES))
    for name in ("n", "max_steps", "max_step_tokens", "max_context", "max_problems_in_flight", "buffer", "window"):
        if getattr(args, name) < 1:
            bad(name, "an integer >= 1")
    for name in ("n_base", "n_helper"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            bad(name, "an integer >= 0")
    uses_base, uses_helper = MODES[args.mode]
    n_base, n_helper = args.counts
    if uses_base and n_base < 1:
        bad("n_base", f"an integer >= 1 in mode {args.mode}")
    if uses_helper and args.mode == "helper" and n_helper < 1:
        bad("n_helper", "an integer >= 1 in mode helper")
    if uses_base and not args.base:
        bad("base", f"a model name or folder (mode {args.mode} decodes with the base)")
    if n_helper and not args.helper:
        bad("helper", f"a model name or folder (mode {args.mode} with n_helper={n_helper} needs a helper)")
    if args.evicts:
        if args.evictor not in EVICTORS:
            bad("evictor", ", ".join(sorted(EVICTORS)))
        if args.budget <= args.window:
            raise ValueError(f"model_arg budget={args.budget} must be larger than window={args.window} "
                             f"(valid: budget > window)")
    if n_base + n_helper > 1:
        if args.scorer not in SCORERS:
            bad("scorer", ", ".join(sorted(SCORERS)))
        if args.scorer in ("qwen-prm", "qwen-prm-vllm") and not args.prm:
            bad("prm", "a Qwen2.5-Math-PRM checkpoint (hub id or folder) for scorer=qwen-prm, "
                       "or choose scorer=helper-logprob")
        if args.scorer == "helper-logprob" and not args.helper:
            bad("helper", "a model name or folder: scorer=helper-logprob scores with the helper")
    if args.temperature < 0:
        bad("temperature", "a number >= 0 (0: greedy)")
    if not 0 < args.top_p <= 1:
        bad("top_p", "a number in (0, 1]")
    if args.top_k < 0:
        bad("top_k", "an integer >= 0 (0: off)")
    if not 0 <= args.mix_lambda <= 1:
        bad("mix_lambda", "a number in [0, 1]")
    if args.dtype not in DTYPES:
        bad("dtype", ", ".join(DTYPES))
    validate_detector(args)
    validate_backends(args)


def validate_detector(args: ModelArgs) -> None:
    if args.detector == "on" and not MODES[args.mode][0]:
        raise ValueError(f"model_arg detector=on does nothing in mode {args.mode}: the detector screens base "
                         f"candidates only, never the helper's (valid: detector=off or no detector in mode helper)")
    limits = {"detector_entropy_threshold": (0, "a number >= 0 (nats)"), "detector_window": (1, "an integer >= 1"),
              "detector_guard": (0, "an integer >= 0"), "detector_gzip_threshold": (0, "a number >= 0"),
              "detector_gzip_chars": (1, "an integer >= 1")}
    for name, (lowest, valid) in limits.items():
        if not getattr(args, name) >= lowest:  # also refuses nan
            raise ValueError(f"model_arg {name}={getattr(args, name)!r} is invalid; valid: {valid}")


def validate_backends(args: ModelArgs) -> None:
    """Backends and vLLM settings; asking for vLLM without it installed fails here, before loading."""
    def bad(name, valid):
        raise ValueError(f"model_arg {name}={getattr(args, name)!r} is invalid; valid: {valid}")

    for name in ("helper_backend", "prm_backend", "base_backend"):
        if getattr(args, name) not in BACKENDS:
            bad(name, ", ".join(BACKENDS))
    if args.backends.get("base") == "vllm" and args.evicts:
        bad("base_backend", f"hf in mode {args.mode} (vLLM has no per-request KV eviction); "
                            f"vllm only for a base that keeps its full KV cache (mode full)")
    if args.prm_backend == "vllm" and args.scorer != "qwen-prm":
        bad("prm_backend", f"hf with scorer={args.scorer} (prm_backend=vllm serves scorer=qwen-prm)")
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
        from .vllm_loading import require_vllm

        require_vllm()
