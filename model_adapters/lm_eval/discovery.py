"""Makes the plain `lm_eval` command find our tasks and models, with no flags.

lm-eval 0.4.13 has no plugin discovery: `--model NAME` only finds models registered in the
running process and tasks come from its own folder or `--include_path`. A one-line `.pth` file
(written by setup.py) calls `install()` at interpreter start. `install()` only appends a finder
to `sys.meta_path`; nothing is imported until a process imports lm-eval itself, so processes that
never touch lm-eval pay one tiny module import (measured in docs/discovery.md).

When lm-eval's task manager module is executed, our task folder is appended to every
`TaskManager`'s include path (built-in tasks are indexed first and keep their names). When
`lm_eval.models` is executed (it registers the built-in models lazily), every entry point of
group `lm_eval.models` is registered lazily too: the group newer lm-eval versions read, which is
how `kvrescue` is declared in pyproject.toml and how any other package can add a model. When
`lm_eval.evaluator_utils` and `lm_eval.evaluator` are executed, harness_patches.py gives aggregations
their own standard errors and lets a kvrescue run's `--write_out` and results config say what it did, and
fewshot_notice.py makes an ignored `--num_fewshot` a warning. When `lm_eval.loggers.evaluation_tracker` is
executed, results_folder.py names a kvrescue run's results folder after what ran.

The hook never raises into the importing program: a failure is logged and lm-eval runs as stock.
"""

import sys

ENTRY_POINT_GROUP = "lm_eval.models"
_PATCHED_MODULES = ("lm_eval.tasks.manager", "lm_eval.models", "lm_eval.evaluator_utils", "lm_eval.evaluator",
                    "lm_eval.loggers.evaluation_tracker")


def install():
    """Add the finder once (idempotent)."""
    if not any(isinstance(finder, _LmEvalFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LmEvalFinder())


def tasks_folder():
    """The folder holding our task YAMLs, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("kvrescue_eval.tasks")
    return list(spec.submodule_search_locations)[0]


class _LmEvalFinder:
    """A meta-path finder that only decorates the loaders of the modules named above."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _PATCHED_MODULES:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _PatchingLoader(spec.loader, _PATCHES[fullname])
        return spec


class _PatchingLoader:
    def __init__(self, inner, patch):
        self._inner = inner
        self._patch = patch

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            self._patch(module)
        except Exception as error:  # never break lm-eval itself
            import logging

            logging.getLogger(__name__).warning(
                "kvrescue-eval could not hook into lm-eval's %s (%s: %s); for our tasks use --include_path",
                module.__name__, type(error).__name__, error)


def _patch_task_manager(module):
    task_manager = module.TaskManager
    if getattr(task_manager.__init__, "_kvrescue_patched", False):
        return
    original_init = task_manager.__init__
    ours = tasks_folder()

    def __init__(self, *args, include_path=None, **kwargs):
        paths = [] if include_path is None else (
            list(include_path) if isinstance(include_path, (list, tuple)) else [include_path])
        if not any(str(p) == ours for p in paths):
            paths = [ours] + paths  # later paths override earlier: the user's own win
        original_init(self, *args, include_path=paths, **kwargs)

    __init__._kvrescue_patched = True
    task_manager.__init__ = __init__


def _register_entry_point_models(module):
    from importlib.metadata import entry_points

    from lm_eval.api.registry import model_registry

    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name not in model_registry:
            model_registry.register(entry_point.name, target=entry_point.value)


def _patch_evaluator_utils(module):
    from .harness_patches import patch_evaluator_utils

    patch_evaluator_utils(module)


def _patch_evaluator(module):
    from . import fewshot_notice
    from .harness_patches import patch_evaluator

    patch_evaluator(module)
    fewshot_notice.install(module.eval_logger)


def _patch_evaluation_tracker(module):
    from .results_folder import patch_evaluation_tracker

    patch_evaluation_tracker(module)


_PATCHES = {
    "lm_eval.tasks.manager": _patch_task_manager,
    "lm_eval.models": _register_entry_point_models,
    "lm_eval.evaluator_utils": _patch_evaluator_utils,
    "lm_eval.evaluator": _patch_evaluator,
    "lm_eval.loggers.evaluation_tracker": _patch_evaluation_tracker,
}
