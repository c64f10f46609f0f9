"""A `kvrescue` run's settings as one tree of typed objects, each validated once, when it is built:

    Settings
      models: base, helper, prm (names), mode, evictor and scorer (names, with the scorer's options)
      sampling   kvrescue_eval.engine.sampling.SamplingParams      (checks temperature, top_p, top_k)
      engine     kvrescue_eval.engine.config.EngineConfig           (checks steps, tokens, context, counts)
        detector kvrescue_eval.detector.DetectorConfig or None      (checks its thresholds)
      eviction   kvrescue_eval.eviction.EvictionSchedule or None    (checks budget, buffer, window; holds the evictor)
      backends   RoleBackends: the backend of each role (names of model_adapters.backends.BACKENDS)
      backend_options: backend name -> its options object (e.g. vllm/engine.py's VLLMOptions, which checks itself)
      dtype, device, device_map, overlap, journal, preset

The objects of the core check their own fields; `Settings` checks only what relates them (a mode's models, a
scorer's models and backend, each role's backend). `model_args.py` parses `--model_args` onto this tree.

Budget semantics: `budget` B counts every slot kept per layer and KV head after a compression,
including the `window` most recent ones (always kept; their queries score the others), as in R-KV's
reference code; B - window slots are chosen by score. The paper describes B as the score-selected
entries plus a protected recent window; here the window is inside B. Between compressions the cache
grows by up to `buffer` slots, so memory is bounded by B + buffer (192 slots at the paper's B = 64).

Detector: on by default in mode rescue only; the baselines (bon, full, helper) have no early exit,
as in the paper. `detector=off` with mode rescue is the paper's Table 2 row "+ interleaving".
"""

from dataclasses import dataclass, field, fields, is_dataclass

from kvrescue_eval.detector import DetectorConfig
from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.run_modes import MODES
from kvrescue_eval.engine.sampling import SamplingParams

from ..backends import BACKENDS, backend_class, did_you_mean, option_prefix

DTYPES = ("auto", "float32", "bfloat16", "float16")
OVERLAP = ("auto", "on", "off")
THINKING = ("auto", "on", "off")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's placements over visible GPUs


@dataclass(frozen=True)
class RoleBackends:
    """Which backend runs each role; `prm`: the scorer's (None: the scorer's first, scorers.SCORERS)."""
    base: str = "hf"
    helper: str = "hf"
    prm: str | None = None

    def __post_init__(self):
        for role in ("base", "helper", "prm"):
            name = getattr(self, role)
            if name is not None and name not in BACKENDS:
                raise ValueError(f"model_arg {role}_backend={name!r} is invalid; valid: {', '.join(BACKENDS)}"
                                 + did_you_mean(name, BACKENDS))


@dataclass(frozen=True)
class Settings:
    base: str | None = None         # base model (hub id or local folder; "smollm2": the packaged model)
    helper: str | None = None       # helper model, full KV cache (needed by modes rescue and helper)
    prm: str | None = None          # checkpoint of the qwen-prm scorer
    mode: str = "rescue"            # rescue | bon | full | helper (kvrescue_eval.run_modes.MODES)
    evictor: str = "rkv"            # the base's evictor, a name of EVICTORS (its object: eviction.evictor)
    scorer: str = "qwen-prm"        # step scorer: a name of model_adapters.scorers.SCORERS
    scorer_options: dict = field(default_factory=dict)  # options of the scorer's factory, as given
    sampling: SamplingParams = SamplingParams()
    engine: EngineConfig = EngineConfig(detector=None)
    eviction: object = None         # EvictionSchedule of the base, None when the mode does not evict
    backends_of: RoleBackends = RoleBackends()
    backend_options: dict = field(default_factory=dict)  # backend name -> its options object
    dtype: str = "auto"
    device: str = "cpu"
    # placement of a model too large for one device: its layers spread over all visible GPUs of this
    # process (transformers' device_map through accelerate); None: the whole model on `device`
    device_map: str | None = None
    # Helper proposals and scoring on background threads beside the base's decoding: on | off | auto
    # (auto: on when a role runs on a backend that works beside, e.g. vLLM). Off, an all-transformers run is
    # bit-reproducible: which problems share a scorer batch never depends on thread timing.
    overlap: str = "auto"
    # Thinking mode of base and helper (docs/thinking.md): on | off | auto (auto: on when the chat template has
    # one, Qwen3's enable_thinking or a <think> opening); settings/thinking.py resolves it before models load.
    thinking: str = "auto"
    # Run journal (docs/resume.md): default beside lm-eval's --output_path; "off": none. Not a result's identity.
    journal: str | None = None
    preset: str | None = None

    def __post_init__(self):
        from ..scorers import SCORERS, scorer_model_args

        def bad(name, valid):
            raise ValueError(f"model_arg {name}={getattr(self, name)!r} is invalid; valid: {valid}")

        if self.mode not in MODES:
            bad("mode", ", ".join(MODES) + did_you_mean(self.mode, MODES))
        mode, (_, n_helper) = MODES[self.mode], self.counts
        if mode.uses_base and not self.base:
            bad("base", f"a model name or folder (mode {self.mode} decodes with the base)")
        if n_helper and not self.helper:
            bad("helper", f"a model name or folder (mode {self.mode} with n_helper={n_helper} needs a helper)")
        if mode.evicts != (self.eviction is not None):
            raise ValueError(f"mode {self.mode} {'evicts' if mode.evicts else 'keeps the full KV cache'}: "
                             f"eviction={self.eviction!r} does not fit it")
        if self.engine.detector is not None and not mode.uses_base:
            raise ValueError(f"model_arg detector=on does nothing in mode {self.mode}: the detector screens base "
                             f"candidates only, never the helper's (valid: detector=off or no detector in mode helper)")
        if self.scored:
            if self.scorer not in SCORERS:
                bad("scorer", ", ".join(sorted(SCORERS)) + did_you_mean(self.scorer, SCORERS))
            self._check_scorer_backend()
            for name in scorer_model_args(self.scorer, self.scorer_backend):
                if not getattr(self, name):
                    others = ", ".join(f"scorer={other}" for other in sorted(SCORERS) if other != self.scorer)
                    bad(name, f"a model name or folder: scorer={self.scorer} reads it (or choose {others})")
        elif self.scorer in SCORERS:
            self._check_scorer_backend()
        if self.dtype not in DTYPES:
            bad("dtype", ", ".join(DTYPES) + did_you_mean(self.dtype, DTYPES))
        if self.device_map is not None and self.device_map not in DEVICE_MAPS:
            bad("device_map", ", ".join(DEVICE_MAPS) + did_you_mean(self.device_map, DEVICE_MAPS))
        if self.overlap not in OVERLAP:
            bad("overlap", ", ".join(OVERLAP))
        if self.thinking not in THINKING:
            bad("thinking", ", ".join(THINKING) + did_you_mean(self.thinking, THINKING))
        self._check_backends()

    def _check_scorer_backend(self) -> None:
        from ..scorers import SCORERS, scorer_backends

        if self.scorer_backend not in scorer_backends(self.scorer):
            serving = [name for name in SCORERS if self.scorer_backend in scorer_backends(name)]
            raise ValueError(f"model_arg prm_backend={self.backends_of.prm!r} is invalid; valid: "
                             f"{', '.join(scorer_backends(self.scorer))} with scorer={self.scorer} (prm_backend="
                             f"{self.scorer_backend} serves {', '.join(f'scorer={s}' for s in serving) or 'none'})")

    def _check_backends(self) -> None:
        """Each role's backend takes its role; options of a backend no role runs on are refused."""
        for role, backend in self.backends.items():
            backend_class(backend).check(role, self)
        self._check_device_map()
        for name, options in self.backend_options.items():
            given = [f"{option_prefix(name)}{f.name}" for f in fields(options) if getattr(options, f.name) != f.default]
            if given and name not in self.used_backends:
                title = backend_class(name).title
                raise ValueError(f"model_arg(s) {given} set {title} engine settings but no role runs on {title}; "
                                 f"set helper_backend, prm_backend or base_backend to {name}")

    def _check_device_map(self) -> None:
        """device_map places the run's main model (the base; the helper in a mode without a base). A backend that
        spreads its models its own way would ignore it without a word, so it is refused there, naming that way."""
        if self.device_map is None:
            return
        role = next(role for role in ("base", "helper") if role in self.backends)
        backend = backend_class(self.backends[role])
        if not backend.device_map:
            placing = " or ".join(f"{role}_backend={name}" for name in BACKENDS if backend_class(name).device_map)
            spread = f" ({backend.spread})" if backend.spread else ""
            raise ValueError(f"model_arg device_map={self.device_map!r} cannot place the {role} on "
                             f"{role}_backend={self.backends[role]}: {backend.title} places its models itself"
                             f"{spread}; drop device_map, or set {placing} for accelerate's placement")

    def require_libraries(self) -> None:
        """An ImportError with the install lines for the first backend whose library is absent. Called after the
        models are found, so that a run missing both hears of its models first (their table names them all)."""
        for backend in sorted(self.used_backends):
            backend_class(backend).require()

    # -- what the settings imply -------------------------------------------------------------------------
    @property
    def counts(self) -> tuple[int, int]:
        """(N_b, N_h): candidates per step of the base and of the helper (0 for a model the mode does not use)."""
        return self.engine.n_base, self.engine.n_helper

    @property
    def evicts(self) -> bool:
        return MODES[self.mode].evicts

    @property
    def scored(self) -> bool:
        """Whether steps are chosen among several candidates (one candidate needs no scorer)."""
        return sum(self.counts) > 1

    @property
    def detector(self) -> DetectorConfig | None:
        """What the engine gets: None when the detector is off (no candidate is ever aborted)."""
        return self.engine.detector

    @property
    def scorer_backend(self) -> str:
        """The backend the scorer runs on: prm_backend, else the scorer's first."""
        from ..scorers import scorer_backends

        return self.backends_of.prm or scorer_backends(self.scorer)[0]

    @property
    def backends(self) -> dict:
        """role -> backend of the roles this run uses ("base", "helper", and "prm" when the scorer reads it)."""
        from ..scorers import scorer_model_args

        n_base, n_helper = self.counts
        roles = {"base": (n_base, self.backends_of.base), "helper": (n_helper, self.backends_of.helper),
                 "prm": (self.scored and "prm" in scorer_model_args(self.scorer, self.scorer_backend),
                         self.scorer_backend)}
        return {role: backend for role, (used, backend) in roles.items() if used}

    @property
    def used_backends(self) -> set:
        """The backends of every role this run runs, the scorer's included."""
        return set(self.backends.values()) | ({self.scorer_backend} if self.scored else set())

    @property
    def overlaps(self) -> bool:
        if self.overlap != "auto":
            return self.overlap == "on"
        return any(backend_class(name).beside for name in self.used_backends)

    @property
    def libraries(self) -> list:
        """The libraries of the backends this run uses, for the version check at the model's start."""
        from ..backends import libraries

        return libraries(self.used_backends)


def plain(value):
    """A settings value as JSON: dataclasses as {field: value}, dicts and sequences item by item, other
    objects (an evictor that is no dataclass) by repr."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value) if f.init}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)
