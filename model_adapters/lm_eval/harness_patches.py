"""Three places where lm-eval 0.4.13 offers a model or a task no say, decorated by our import hook
(discovery.py) when lm-eval's modules execute; stock models and stock tasks see no difference.

- Standard errors: `stderr_for_metric` knows the standard error of a closed list of lm-eval's own
  aggregations only, so every other aggregation reports "N/A". An aggregation function that carries a
  `stderr` attribute (`stderr(items, bootstrap_iters) -> float`) now gets it: our tasks' seed-aware
  aggregations do (tasks/seed_metrics.py), so their `_stderr` columns are numbers like any task's.
- `--write_out` prints each task's first prompt as lm-eval built it, before any model runs. When the
  model evaluated is kvrescue, its `show_model_input` first makes the requests show what it will
  receive (lm_eval/requests.py), so the print is the model's real input.
- `results["config"]["device"]` is lm-eval's `--device` and `gen_kwargs` its `--gen_kwargs`, written
  after the model's own info: for a kvrescue run they become what it used (the device it ran on; the
  generation kwargs it applied, per task also in `configs.<task>.generation_kwargs`), as recorded in
  `config.kvrescue`.
"""

import functools

from .evaluation import current, from_evaluate, from_simple_evaluate, recording


def patch_evaluator_utils(module) -> None:
    original = module.stderr_for_metric
    if getattr(original, "_kvrescue_patched", False):
        return

    @functools.wraps(original)
    def stderr_for_metric(metric, bootstrap_iters):
        own = getattr(metric, "stderr", None)
        if callable(own) and isinstance(bootstrap_iters, int) and bootstrap_iters > 0:
            return lambda items: own(items, bootstrap_iters)
        return original(metric, bootstrap_iters)

    stderr_for_metric._kvrescue_patched = True
    module.stderr_for_metric = stderr_for_metric


def patch_evaluator(module) -> None:
    """Also records the running `simple_evaluate` and `evaluate` calls' arguments (evaluation.py)."""
    if getattr(module.simple_evaluate, "_kvrescue_patched", False):
        return
    print_writeout, simple_evaluate = module.print_writeout, module.simple_evaluate

    @functools.wraps(print_writeout)
    def print_writeout_of_the_model_input(task):
        evaluation = current()
        show = getattr(evaluation.lm if evaluation else None, "show_model_input", None)  # evaluate's model
        if callable(show):
            show(task.instances)
        return print_writeout(task)

    @functools.wraps(simple_evaluate)
    def simple_evaluate_recording_what_ran(*args, **kwargs):
        results = simple_evaluate(*args, **kwargs)
        if isinstance(results, dict):
            record_what_ran(results)
        return results

    simple_evaluate_recording_what_ran = recording(simple_evaluate_recording_what_ran, from_simple_evaluate)
    simple_evaluate_recording_what_ran._kvrescue_patched = True
    module.print_writeout = print_writeout_of_the_model_input
    module.simple_evaluate = simple_evaluate_recording_what_ran
    module.evaluate = recording(module.evaluate, from_evaluate)


def record_what_ran(results: dict) -> None:
    """A kvrescue run's `config.device`, `config.gen_kwargs` and tasks' `generation_kwargs` as it used them."""
    config = results.get("config") or {}
    info = config.get("kvrescue")
    if not isinstance(info, dict):
        return
    if info.get("device"):
        config["device"] = info["device"]
    used = info.get("generation") or {}
    for task, task_config in (results.get("configs") or {}).items():
        if task in used and isinstance(task_config.get("generation_kwargs"), dict):
            task_config["generation_kwargs"] = _as_used(task_config["generation_kwargs"], used[task])
    if isinstance(config.get("gen_kwargs"), dict) and used:
        config["gen_kwargs"] = _as_used(config["gen_kwargs"], _common(used.values()))


def _as_used(asked: dict, used: dict) -> dict:
    """`asked` with every honoured kwarg at the value used and the ignored ones left out."""
    out = {name: value for name, value in asked.items() if name not in used.get("ignored", {})}
    for name, value in used.items():
        if name in out and name != "ignored":
            out[name] = value
    return out


def _common(records) -> dict:
    """The values every task used alike (a --gen_kwargs value applies to every task)."""
    records = list(records)
    first = records[0]
    return {name: value for name, value in first.items() if all(r.get(name) == value for r in records)}
