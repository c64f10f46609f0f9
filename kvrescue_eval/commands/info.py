"""`kvrescue-eval info`: versions, where our tasks live, and whether lm-eval will find them."""

HELP = "Show versions, the task folder and whether the plain lm_eval command finds kvrescue."


# The core does not import the adapters (.importlinter): the hook is recognised by the module of the finder
# that the installed .pth puts on sys.meta_path, and the tasks folder is found without importing it.
HOOK_MODULE = "kvrescue_eval.model_adapters.lm_eval.discovery"


def tasks_folder():
    import importlib.util

    spec = importlib.util.find_spec("kvrescue_eval.tasks")
    return list(spec.submodule_search_locations)[0] if spec else "NOT installed"


def add_arguments(parser):
    pass


def run(args):
    import sys
    from importlib.metadata import PackageNotFoundError, version

    for package in ("kvrescue-eval", "lm_eval", "torch", "transformers", "sympy"):
        try:
            print(f"{package:>14}: {version(package)}")
        except PackageNotFoundError:
            print(f"{package:>14}: not installed")
    print(f"{'tasks folder':>14}: {tasks_folder()}")
    hooked = any(type(finder).__module__ == HOOK_MODULE for finder in sys.meta_path)
    print(f"{'lm_eval hook':>14}: {'installed' if hooked else 'NOT installed (reinstall the package)'}")
    return 0 if hooked else 1
