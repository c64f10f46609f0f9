"""Backends: the library that runs each role of a run (the base, the helper, the scorer's model), by name.

A backend is one sub-package (or module) with a class, registered by one line in BACKENDS; model_args name one
per role (`base_backend`, `helper_backend`, `prm_backend`; a scorer declares the backends it runs on, see
model_adapters/scorers). The class subclasses `Backend` (model_adapters/backend_base.py: what it declares
about its library, its methods); everything outside the backend that depends on a library asks this registry:
- `libraries(names)`: each backend's distributions, tested range and the reason, for the version checks
  (`kvrescue-eval info`, through the entry point `kvrescue_eval.libraries`, and the model's start-up check);
- `journal_identity(settings)`: the used backends' part of a run journal's identity;
- `must_retire()`: whether this process used a backend that must not run another arm in it (sweep workers);
- `Components.statistics()`: each used backend's statistics under its `statistics_name` (config.kvrescue).
The transformers backend (`hf`) runs every role, the evicted base included; the vLLM backend (`vllm`) runs
step-level full-KV roles and the evicted base. `tests/adapters/test_backends.py` adds a toy backend with one
module and one line; `tests/adapters/test_backend_registry.py` a complete one, library and all.
"""

import difflib
import importlib
from dataclasses import replace
from typing import NamedTuple

from kvrescue_eval.environment import Library

from ..backend_base import Backend  # noqa: F401 (the class a backend subclasses)

BACKENDS = {
    "hf": "..hf.backend:HFBackend",        # transformers: token-level, in the engine's loop
    "vllm": "..vllm.backend:VLLMBackend",  # vLLM: step-level, beside it
    "http": "..http.backend:HTTPBackend",  # vLLM servers over HTTP: the helper and the PRM, beside it
}
POLICY_ROLES = ("base", "helper")
_USED: set = set()  # names of the backends instantiated in this process (must_retire)


def backend_class(name: str):
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}{did_you_mean(name, BACKENDS)}")
    entry = BACKENDS[name]
    if isinstance(entry, str):
        module, attribute = entry.split(":")
        entry = getattr(importlib.import_module(module, __name__), attribute)
    return entry


def libraries(names=None) -> list[Library]:
    """The library of each backend in `names` (default: every registered one) that declares distributions."""
    out = []
    for name in BACKENDS if names is None else sorted(names):
        cls = backend_class(name)
        if cls.distributions:
            out.append(Library(f"{name} backend", cls.distributions, cls.supported, cls.why))
    return out


def journal_identity(settings) -> dict:
    """backend name -> its part of a run journal's identity, for each backend the run uses."""
    return {name: backend_class(name).identity(settings) for name in sorted(settings.used_backends)}


def must_retire() -> bool:
    """Whether a backend whose class says its process must retire after use (`retire_after_use`) was
    instantiated in this process: a sweep worker then exits after its arm."""
    return any(backend_class(name).retire_after_use for name in _USED if name in BACKENDS)


def option_prefix(name: str) -> str:
    """What the model_args of a backend's options start with."""
    prefix = backend_class(name).option_prefix
    return f"{name}_" if prefix is None else prefix


def statistics_name(name: str) -> str:
    return backend_class(name).statistics_name or name


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
        """statistics name -> {role: what it measured}, for each backend that measured something."""
        out = {statistics_name(name): backend.statistics() for name, backend in self.backends.items()}
        return {name: stats for name, stats in out.items() if stats}


def build(settings) -> Components:
    """Each role's policy or scorer on its backend, and the engine's config. Each backend is made once, so a
    model that several roles read (base, helper, a scorer that reads the helper) loads once."""
    from ..hf.loading import resolve_device, torch_dtype

    settings = replace(settings, device=resolve_device(settings.device))
    dtype = str(torch_dtype(settings.dtype, settings.device)).removeprefix("torch.")
    running = {}

    def backend(name):
        if name not in running:
            _USED.add(name)
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
