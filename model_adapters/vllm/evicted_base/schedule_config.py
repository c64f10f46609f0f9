"""The eviction settings the vLLM evicted base carries in its model config, and the schedule built from them.

They travel as one JSON-able dict under `KEY` in `hf_overrides` (so every vLLM process, the engine core's
and each worker's, rebuilds the same `EvictionSchedule` from the model config it loads):

    {"method": "rkv", "budget": 128, "buffer": 128, "window": 8, "compress_prompt": true,
     "options": {"pool_kernel": 7, "mix_lambda": 0.1}}

`options` are the evictor's dataclass fields (`kvrescue_eval.eviction.evictor_options`); unknown ones are
refused with the valid names.
"""

from kvrescue_eval.eviction import EVICTORS, EvictionSchedule, build_evictor, evictor_options

KEY = "kvrescue_eviction"
FIELDS = ("method", "budget", "buffer", "window", "compress_prompt", "options")


def eviction_settings(method: str, budget: int, buffer: int = 128, window: int = 8, compress_prompt: bool = True,
                      **options) -> dict:
    """The dict for `hf_overrides[KEY]`, checked now (before any vLLM process starts) by building its schedule."""
    settings = {"method": method, "budget": budget, "buffer": buffer, "window": window,
                "compress_prompt": compress_prompt, "options": dict(options)}
    schedule_from_settings(settings)
    return settings


def schedule_from_settings(settings: dict) -> EvictionSchedule:
    if not isinstance(settings, dict) or set(settings) - set(FIELDS) or "method" not in settings or "budget" not in settings:
        raise ValueError(f"the {KEY} model-config entry must be a dict with keys {', '.join(FIELDS)} "
                         f"(method and budget required), got {settings!r}")
    method = settings["method"]
    if method not in EVICTORS:
        raise ValueError(f"unknown eviction method {method!r}; valid methods: {', '.join(sorted(EVICTORS))}")
    options = dict(settings.get("options") or {})
    declared = evictor_options(EVICTORS[method])
    unknown = sorted(set(options) - set(declared))
    if unknown:
        raise ValueError(f"eviction method {method!r} has no option(s) {', '.join(unknown)}; its options: "
                         f"{', '.join(sorted(declared)) or 'none'}")
    return EvictionSchedule(build_evictor(method, **options), settings["budget"], settings.get("buffer", 128),
                            settings.get("window", 8), settings.get("compress_prompt", True))
