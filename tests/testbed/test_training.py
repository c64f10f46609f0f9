"""The training script is deterministic: two runs give bit-identical weights (small spec, few steps)."""

import dataclasses

import pytest
import torch

from kvrescue_eval.model_adapters.testbed import train
from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer
from kvrescue_eval.tasks.kv_recall.generate import read_split


@pytest.fixture(autouse=True)
def deterministic_torch():
    threads, mode = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    yield
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(mode)


@pytest.mark.parametrize("name", ["base", "helper", "prm"])
def test_two_runs_give_bit_identical_weights(tmp_path, name):
    tokenizer = build_tokenizer()
    problems = read_split("train")[:16]
    # The PRM starts from scratch here: starting from a trained base is the same copy in both runs.
    spec = dataclasses.replace(train.SPECS[name], hidden=16, intermediate=32, layers=1, steps=3, batch=4,
                               init_from=None)
    runs = []
    for run in ("a", "b"):
        if name.startswith("prm"):
            train.train_prm(tokenizer, problems, problems[:2], tmp_path / run, lambda m: None, spec=spec, name=name)
        else:
            train.train_lm(name, tokenizer, problems, problems[:2], tmp_path / run, lambda m: None, spec=spec)
        runs.append((tmp_path / run / name / "model.safetensors").read_bytes())
    assert runs[0] == runs[1]
    fresh = dataclasses.replace(spec, seed=spec.seed + 1)
    if name.startswith("prm"):
        train.train_prm(tokenizer, problems, problems[:2], tmp_path / "c", lambda m: None, spec=fresh, name=name)
    else:
        train.train_lm(name, tokenizer, problems, problems[:2], tmp_path / "c", lambda m: None, spec=fresh)
    assert (tmp_path / "c" / name / "model.safetensors").read_bytes() != runs[0]  # the seed matters
