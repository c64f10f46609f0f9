"""Refusing the requests the kvrescue model cannot answer, before any model loads.

The model generates (`generate_until`); loglikelihood requests (multiple-choice tasks, scored
continuations) and loglikelihood_rolling ones (perplexity) it cannot answer. lm-eval 0.4.13 builds the
requests of every task first and then calls the model once per request type, in task order, so the
first call may be `generate_until` while a later task needs loglikelihoods: the `requests` of the
`lm_eval.evaluator.evaluate` call on the stack (request type -> Instances) tells, at the first call,
every type this evaluation will ask for. The model loads lazily, at its first `generate_until`, so a
refusal costs no loading at all.
"""

import sys

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
    """Request type -> task names, for the types other than generate_until that the evaluation on the stack
    has built requests for (empty outside lm-eval's evaluate)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "evaluate" and code.co_filename.replace("\\", "/").endswith("lm_eval/evaluator.py"):
            requests = frame.f_locals.get("requests")
            if not isinstance(requests, dict):
                return {}
            return {kind: {getattr(r, "task_name", None) or "?" for r in instances}
                    for kind, instances in requests.items() if kind != GENERATES and instances}
        frame = frame.f_back
    return {}


def tasks_of(requests) -> set:
    return {getattr(r, "task_name", None) or "?" for r in requests}
