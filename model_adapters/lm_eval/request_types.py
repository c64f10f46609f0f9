"""Refusing the requests the kvrescue model cannot answer, before any model loads.

The model generates (`generate_until`); loglikelihood requests (multiple-choice tasks, scored
continuations) and loglikelihood_rolling ones (perplexity) it cannot answer. lm-eval 0.4.13 builds the
requests of every task first (each task's `instances`) and then calls the model once per request type, in
task order, so the first call may be `generate_until` while a later task needs loglikelihoods: the tasks of
the running `lm_eval.evaluator.evaluate` call (its `task_dict`, recorded by our wrapper of it:
lm_eval/evaluation.py) tell, at the first call, every request type this evaluation will ask for. The model
loads lazily, at its first `generate_until`, so a refusal costs no loading at all.
"""

from .evaluation import current

GENERATES = "generate_until"
WHAT = {"loglikelihood": "loglikelihood: multiple-choice or scored continuations",
        "loglikelihood_rolling": "loglikelihood_rolling: perplexity"}


class UnsupportedRequests(NotImplementedError):
    """A task asks for request types the kvrescue model cannot answer."""


def refusal(tasks_by_type: dict) -> UnsupportedRequests:
    parts = [f"{', '.join(sorted(tasks)) or 'a task'} ({WHAT.get(kind, kind)})"
             for kind, tasks in tasks_by_type.items()]
    return UnsupportedRequests(
        "the kvrescue model generates only (generate_until tasks); it cannot answer " + "; ".join(parts)
        + ". Run those tasks with another model (e.g. --model hf) or leave them out of --tasks; nothing was loaded")


def pending_unsupported() -> dict[str, set]:
    """Request type -> task names, for the types other than generate_until that the running evaluation has
    built requests for (empty outside lm-eval's evaluate)."""
    evaluation = current()
    pending = {}
    for name, task in tasks_in(evaluation.task_dict if evaluation is not None else {}):
        for instance in getattr(task, "instances", None) or ():
            if instance.request_type != GENERATES:
                pending.setdefault(instance.request_type, set()).add(name)
    return pending


def tasks_in(task_dict) -> list:
    """(name, task) of `evaluate`'s task_dict: TaskManager.load()'s {"tasks": {name: Task}, "groups": ...}, or
    the legacy nesting {group or name: task or {name: task}} that evaluate also accepts."""
    if "tasks" in task_dict:
        return list(task_dict["tasks"].items())
    found = []
    for key, value in task_dict.items():
        if isinstance(value, dict):
            found += tasks_in(value)
        else:
            found.append((str(key), value))
    return found


def tasks_of(requests) -> set:
    return {getattr(r, "task_name", None) or "?" for r in requests}
