"""One arm of a sweep, run in this process through lm-eval's own command-line entry point.

`run_arm(argv)` is `lm_eval ARGV` without a new interpreter: `sys.argv` is the command's while lm-eval's
`cli_evaluate` (what the `lm_eval` console script calls: its parser, `simple_evaluate`, the EvaluationTracker
that writes the results and samples) runs, so every option means what it means to `lm_eval`, and the
`kvrescue` model finds its journal beside `--output_path` as it does under the command (docs/resume.md).

lm-eval 0.4.13 reads all of its ~14,000 task YAML files whenever a TaskManager is made (13 s on these
machines, more than a small arm's generation). A process that runs many arms reads them once:
`TaskIndex.build` is memoised per process by its folders (each arm gets its own dict of the index's
entries, which lm-eval reads only: its TaskFactory deep-copies an entry's config before using it).
"""

import gc
import sys
import traceback


def run_arm(argv: list[str]) -> int:
    """`lm_eval ARGV` in this process; its exit code (a failure is printed, never raised)."""
    from lm_eval.__main__ import cli_evaluate

    memoise_task_index()
    saved = sys.argv
    sys.argv = ["lm_eval", *argv]
    try:
        cli_evaluate()
        return 0
    except SystemExit as stop:  # argparse and lm-eval stop with SystemExit on bad input
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except Exception:  # noqa: BLE001 - one failed arm must not stop the others
        traceback.print_exc()
        return 1
    finally:
        sys.argv = saved
        release_memory()


def memoise_task_index() -> None:
    from lm_eval.tasks import _index

    build = _index.TaskIndex.build
    if getattr(build, "kvrescue_memoised", False):
        return
    built = {}

    def memoised(paths, *, resolve_includes=True):
        paths = list(paths)
        key = (tuple(str(path) for path in paths), resolve_includes)
        if key not in built:
            built[key] = build(paths, resolve_includes=resolve_includes)
        return dict(built[key])

    memoised.kvrescue_memoised = True
    _index.TaskIndex.build = staticmethod(memoised)


def release_memory() -> None:
    """What an arm's models held, back to the allocator, before the next arm loads its own."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()

