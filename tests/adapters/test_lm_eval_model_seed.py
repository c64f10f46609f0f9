"""`lm_eval --seed S` reaches the engine when no `seed` model_arg is given, and the results say which seed ran."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
sys.path.insert(0, str(Path(__file__).parent))

from test_lm_eval_model_cli import lm_eval  # noqa: E402
from tiny_models import tiny_model, tiny_tokenizer  # noqa: E402


def test_outside_lm_eval_the_model_arg_or_its_default_applies():
    from kvrescue_eval.model_adapters.lm_eval.seed import effective_seed

    assert effective_seed({"seed": 3}) == ({"seed": 3}, "model_args")
    assert effective_seed({"n": 2}) == ({"n": 2, "seed": 0}, "default")


def simple_evaluate(random_seed):
    """Stands in for nothing: `effective_seed` looks for lm-eval's own function by name and file."""
    from kvrescue_eval.model_adapters.lm_eval.seed import effective_seed

    return effective_seed({})


def test_a_function_that_is_not_lm_evals_is_not_mistaken_for_it():
    assert simple_evaluate(random_seed=7) == ({"seed": 0}, "default")


@pytest.mark.slow
def test_lm_eval_seed_changes_trajectories_and_is_recorded(tmp_path):
    folder = tmp_path / "tiny"
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, scale=3.0)   # flat enough that two seeds sample different texts
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    args = f"base={folder},helper={folder},scorer=helper-logprob,n=2,budget=16,buffer=8,max_steps=3,max_step_tokens=8"
    runs = {}
    for name, extra in (("default", ()), ("seed1", ("--seed", "1")), ("arg_wins", ("--seed", "1"))):
        (tmp_path / name).mkdir()
        model_args = args + (",seed=0" if name == "arg_wins" else "")
        results, samples, _ = lm_eval(tmp_path / name, model_args, "math500", *extra)
        runs[name] = (results["config"], {s["doc_id"]: s["resps"] for s in samples})
    (default, default_resps), (seed1, seed1_resps), (arg_wins, arg_resps) = runs.values()
    assert (default["kvrescue"]["seed"], default["kvrescue"]["seed_source"]) == (0, "lm_eval --seed")
    assert (seed1["kvrescue"]["seed"], seed1["kvrescue"]["seed_source"], seed1["random_seed"]) == (1, "lm_eval --seed", 1)
    assert seed1_resps != default_resps
    assert (arg_wins["kvrescue"]["seed"], arg_wins["kvrescue"]["seed_source"]) == (0, "model_args")
    assert arg_resps == default_resps
