"""Backends: the library that runs each role of a run (the base, the helper, the scorer's model), by name.

A backend is one module with a class, registered by one line in BACKENDS; model_args name one per role
(`base_backend`, `helper_backend`, `prm_backend`; a scorer declares the backends it runs on, see
model_adapters/scorers). The class has:
- `check(role, settings)` (classmethod): refuse, before anything loads, a role it cannot run (a ValueError
  naming the model_arg, its value and what is valid); `require()` (classmethod): an ImportError with the
  install lines when its library is absent; class attributes `title` (its library, in messages), `beside`
  (its policies are step-level and run beside the base's decoding: overlap=auto turns background threads on),
  `options` (None, or a dataclass of its own settings, validated by itself: model_args `<name>_<field>`,
  in `settings.backend_options[name]`), `device_map` (whether it places its models with model_arg device_map,
  accelerate's placement over the visible GPUs) and `spread` (how it spreads a model over GPUs otherwise:
  named when device_map is refused for a role on it);
- `__init__(settings, dtype)`: one instance per run, shared by the roles it runs (a model loads once);
  `dtype` is the torch dtype's name that model_arg dtype resolved to on this device;
- `policy(role, model)`: the engine policy (TokenPolicy or StepPolicy) of role "base" or "helper";
- `resources()`: {name in scorers.RESOURCES: thunk} for the scorer factories on this backend;
- `statistics()`: {role: {...}} what its roles measured over the run (config.kvrescue.vllm_statistics).
The transformers backend (`hf`) runs every role, the evicted base included; the vLLM backend (`vllm`) runs
step-level full-KV roles. `tests/adapters/test_backends.py` adds a toy backend with one module and one line.
"""

import difflib
import importlib
from dataclasses import replace
from typing import NamedTuple

BACKENDS = {
    "hf": "..hf.backend:HFBackend",        # transformers: token-level, in the engine's loop
    "vllm": "..vllm.backend:VLLMBackend",  # vLLM: step-level, beside it
}
POLICY_ROLES = ("base", "helper")


def backend_class(name: str):
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}{did_you_mean(name, BACKENDS)}")
    entry = BACKENDS[name]
    if isinstance(entry, str):
        module, attribute = entry.split(":")
        entry = getattr(importlib.import_module(module, __name__), attribute)
    return entry


def did_you_mean(name, valid) -> str:
    """" (did you mean X?)" for the valid name closest to a misspelt one, else ""."""
    lowered = {str(v).lower(): v for v in valid}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1)
    return f" (did you mean {lowered[close[0]]}?)" if close else ""


class Components(NamedTuple):
    base: object      # the base's policy, or None when the mode does not use it
    helper: object
    scorer: object    # None when one candidate per step needs no scorer
    config: object    # the EngineConfig
    backends: dict    # backend name -> its instance, for statistics()

    def statistics(self) -> dict:
        return {role: stats for backend in self.backends.values() for role, stats in backend.statistics().items()}


def build(settings) -> Components:
    """Each role's policy or scorer on its backend, and the engine's config. Each backend is made once, so a
    model that several roles read (base, helper, a scorer that reads the helper) loads once."""
    from ..hf.loading import resolve_device, torch_dtype

    settings = replace(settings, device=resolve_device(settings.device))
    dtype = str(torch_dtype(settings.dtype, settings.device)).removeprefix("torch.")
    running = {}

    def backend(name):
        if name not in running:
            running[name] = backend_class(name)(settings, dtype)
        return running[name]

    roles = settings.backends
    base, helper = (backend(roles[role]).policy(role, getattr(settings, role)) if role in roles else None
                    for role in POLICY_ROLES)
    scorer = _scorer(settings, backend(settings.scorer_backend)) if settings.scored else None
    return Components(base, helper, scorer, settings.engine, running)


def _scorer(settings, backend):
    from ..scorers import build_scorer, scorer_resources

    name, on = settings.scorer, settings.scorer_backend
    offered = backend.resources()
    missing = [r for r in scorer_resources(name, on) if r not in offered]
    if missing:
        raise ValueError(f"scorer {name} on backend {on} asks for {missing}, which that backend does not offer "
                         f"(it offers {', '.join(offered)})")
    resources = {resource: offered[resource]() for resource in scorer_resources(name, on)}
    return build_scorer(name, on, **resources.pop("engine_kwargs", {}), **resources, **settings.scorer_options)


def build_components(settings):
    """(base policy or None, helper policy or None, scorer or None, EngineConfig)."""
    return tuple(build(settings))[:4]
