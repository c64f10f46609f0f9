"""`kvrescue-eval info`: versions, where our tasks live, and whether lm-eval will find them."""

HELP = "Show versions, the task folder and whether the plain lm_eval command finds kvrescue."


def add_arguments(parser):
    pass


def run(args):
    import sys
    from importlib.metadata import PackageNotFoundError, version

    from kvrescue_eval.model_adapters.lm_eval_discovery import _LmEvalFinder, tasks_folder

    for package in ("kvrescue-eval", "lm_eval", "torch", "transformers", "sympy"):
        try:
            print(f"{package:>14}: {version(package)}")
        except PackageNotFoundError:
            print(f"{package:>14}: not installed")
    print(f"{'tasks folder':>14}: {tasks_folder()}")
    hooked = any(isinstance(finder, _LmEvalFinder) for finder in sys.meta_path)
    print(f"{'lm_eval hook':>14}: {'installed' if hooked else 'NOT installed (reinstall the package)'}")
    return 0 if hooked else 1
