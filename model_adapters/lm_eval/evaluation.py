"""The lm-eval evaluation this thread is running, as lm-eval's public entry points were called, without
reading any caller's stack frame.

lm-eval 0.4.13 hands a model only its model_args, yet the model needs two things of the evaluation it runs in:
the run seed (`simple_evaluate(random_seed=...)`, lm_eval/seed.py) and, at its first `generate_until`, the
request types every task of the evaluation will ask for (`evaluate(lm, task_dict)`: each task's `instances`,
built before the model is first called; lm_eval/request_types.py). `--write_out`'s print needs the model
`evaluate` runs (harness_patches.py). Our import hook (discovery.py) wraps `simple_evaluate` and `evaluate`
when lm-eval's evaluator module executes: each wrapper binds its call's arguments by the function's own
signature and keeps them in a context variable for the length of the call. A model built outside lm-eval
finds none (its model_arg defaults apply).
"""

import functools
import inspect
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

CURRENT: ContextVar = ContextVar("kvrescue_lm_eval_evaluation", default=None)


@dataclass(frozen=True)
class Evaluation:
    random_seed: int | None = None  # simple_evaluate's
    lm: object = None               # evaluate's model
    task_dict: dict = field(default_factory=dict)  # evaluate's tasks (lm_eval.evaluator_utils.get_task_list)


def current() -> Evaluation | None:
    return CURRENT.get()


def recording(function, take):
    """`function` wrapped to keep `take(bound arguments, the evaluation so far)` as the current evaluation."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        token = CURRENT.set(take(bound.arguments, CURRENT.get() or Evaluation()))
        try:
            return function(*args, **kwargs)
        finally:
            CURRENT.reset(token)

    return wrapper


def from_simple_evaluate(arguments: dict, evaluation: Evaluation) -> Evaluation:
    seed = arguments.get("random_seed")
    return replace(evaluation, random_seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None)


def from_evaluate(arguments: dict, evaluation: Evaluation) -> Evaluation:
    return replace(evaluation, lm=arguments.get("lm"), task_dict=arguments.get("task_dict") or {})
