"""The seed of a `kvrescue` run: `--model_args seed=S`, else the seed `lm_eval --seed` set.

lm-eval 0.4.13 seeds Python's, numpy's and torch's generators in `simple_evaluate` and then builds the
model, but hands the model no seed. Its own "random_seed" (the first value of `--seed`, 0 by default,
recorded in results["config"]["random_seed"]) is what users change to resample; the engine's random
streams derive from one integer, so that is the one taken. It is the argument `random_seed` of the
`simple_evaluate` call building the model, as our wrapper of that function recorded it
(lm_eval/evaluation.py); outside lm-eval (a model built directly) the model_arg default applies.
"""

from .evaluation import current

DEFAULT_SEED = 0


def lm_eval_random_seed() -> int | None:
    """`random_seed` of the running lm_eval.evaluator.simple_evaluate call, or None."""
    evaluation = current()
    return evaluation.random_seed if evaluation is not None else None


def effective_seed(model_args: dict) -> tuple[dict, str]:
    """(model_args with `seed` filled in, where it came from: "model_args", "lm_eval --seed" or "default")."""
    if model_args.get("seed") is not None:
        return model_args, "model_args"
    seed = lm_eval_random_seed()
    if seed is None:
        return {**model_args, "seed": DEFAULT_SEED}, "default"
    return {**model_args, "seed": seed}, "lm_eval --seed"
