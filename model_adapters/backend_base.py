"""What a backend class declares about its library, with the defaults of a backend that needs nothing beyond
this package's own dependencies (the registry, model_adapters/backends/__init__.py, reads these; nothing else
names a library).

A backend subclasses `Backend` and sets what differs:
- `title`: its library, in messages; `beside`: its policies are step-level and run beside the base's decoding
  (overlap=auto turns background threads on); `options`: None, or a dataclass of its own settings, validated by
  itself (model_args `<option_prefix><field>`, the prefix `<name>_` unless the class sets `option_prefix`; in
  `settings.backend_options[name]`);
- `distributions`: the installed distributions that are its library (the first installed one counts),
  `supported`: the version range it is tested with (pyproject's extra of the same name pins it:
  tests/adapters/test_backend_registry.py), `why`: what breaks outside it. `kvrescue-eval info` and the model's
  start-up check read them; they are also its part of a run journal's identity (`identity()`);
- `retire_after_use`: a process that used it must exit before another run (its library keeps memory that it
  never gives back inside a process): a sweep worker retires (`must_retire()`);
- `statistics_name`: the key of `config.kvrescue.backend_statistics` holding `statistics()`;
- `device_map`: whether model_arg device_map (accelerate's placement over the visible GPUs) places its models;
  `spread`: how it spreads a model over GPUs otherwise, named when device_map is refused for a role on it
  (settings/tree.py);
- `planned_here`: its roles' weights and KV caches take this process's device memory as settings/memory.py
  plans it before loading (a library that plans its own memory, or a server elsewhere, leaves them out).
"""

from importlib import metadata


class Backend:
    title = "?"
    beside = False
    options = None
    option_prefix = None  # None: "<name>_"
    distributions: tuple[str, ...] = ()
    supported = ""
    why = ""
    retire_after_use = False
    statistics_name = None  # None: the backend's registry name
    device_map = False
    spread = ""
    planned_here = False

    @classmethod
    def check(cls, role: str, settings) -> None:
        """Refuse, before anything loads, a role it cannot run (a ValueError naming the model_arg, its value
        and what is valid)."""

    @classmethod
    def require(cls) -> None:
        """An ImportError with the install lines when its library is absent."""

    @classmethod
    def installed(cls) -> tuple[str, str] | None:
        """(distribution, version) of its library as installed, or None."""
        for distribution in cls.distributions:
            try:
                return distribution, metadata.version(distribution)
            except metadata.PackageNotFoundError:
                continue
        return None

    @classmethod
    def identity(cls, settings) -> dict:
        """Its part of a run journal's identity: what, changed, may change the responses of a run on it."""
        installed = cls.installed()
        return {installed[0]: installed[1]} if installed else {}

    def __init__(self, settings, dtype: str):
        """One instance per run, shared by the roles it runs; `dtype`: the torch dtype's name of model_arg dtype."""
        self.settings, self.dtype = settings, dtype

    def policy(self, role: str, name: str):
        """The engine policy (TokenPolicy or StepPolicy) of role "base" or "helper" on model `name`."""
        raise ValueError(f"backend {self.title} runs no policy (role {role})")

    def resources(self) -> dict:
        """{name in scorers.RESOURCES: thunk} for the scorer factories on this backend."""
        return {}

    def statistics(self) -> dict:
        """{role: {...}}: what its roles measured over the run."""
        return {}
