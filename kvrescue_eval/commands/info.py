"""`kvrescue-eval info`: versions (checked against the supported ranges), where our tasks live, and whether
lm-eval will find them. Exit status 1 when something is wrong, with the reason and the fix."""

HELP = "Show versions (checked against the supported ranges), the task folder and whether lm_eval finds kvrescue."


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

    from kvrescue_eval.environment import version_checks

    for package in ("kvrescue-eval", "torch", "sympy"):
        try:
            print(f"{package:>14}: {version(package)}")
        except PackageNotFoundError:
            print(f"{package:>14}: not installed")
    problems = []
    for check in version_checks():  # the frameworks, then each backend's library (its entry point)
        state = "ok" if check.ok else f"NOT SUPPORTED: {check.why}"
        installed = check.installed or "not installed"
        if check.distribution:  # a backend's library: which distribution is it
            installed = f"{check.distribution} {installed}"
        print(f"{check.framework:>14}: {installed} (supported: {check.supported or 'unknown'}; {state})")
        if not check.ok:
            problems.append(check.problem())
    print(f"{'tasks folder':>14}: {tasks_folder()}")
    hooked = any(type(finder).__module__ == HOOK_MODULE for finder in sys.meta_path)
    print(f"{'lm_eval hook':>14}: {'installed' if hooked else 'NOT installed (reinstall the package)'}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 0 if hooked and not problems else 1
