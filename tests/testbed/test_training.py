"""The training script is deterministic: two runs give bit-identical weights (small spec, few steps), and
with its pinned kernels they do not depend on the instruction sets the CPU offers."""

import dataclasses
import os
import subprocess
import sys

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


@pytest.mark.parametrize("stop_argmax, evaluations", [(0.0, 1), (1.01, 4)])
def test_a_language_model_stops_once_both_its_held_out_scores_reach_the_specs(tmp_path, stop_argmax, evaluations):
    """Mean p(right answer) >= stop_at (0: met at once) and teacher-forced argmax accuracy >= stop_argmax
    (above 1: never met): it stops at the first evaluation meeting both, else trains every step."""
    tokenizer, problems, seen = build_tokenizer(), read_split("train")[:16], []
    spec = dataclasses.replace(train.SPECS["base"], hidden=16, intermediate=32, layers=1, steps=4, batch=4,
                               eval_every=1, stop_at=0.0, stop_argmax=stop_argmax)
    train.train_lm("base", tokenizer, problems, problems[:2], tmp_path, lambda m: None, spec=spec,
                   observe=lambda *_: seen.append(1))
    assert len(seen) == evaluations


@pytest.mark.parametrize("patience, evaluations", [(0, 8), (3, 5), (4, 8)])
def test_training_stops_once_patience_evaluations_in_a_row_bring_no_better_held_out_score(patience, evaluations):
    """Held-out scores 0.5, 0.7, 0.6, 0.65, 0.7, 0.9, 0.8, 0.85 (0.7 again does not beat 0.7): with patience 3
    the 3rd evaluation in a row without a better score is the 5th; with 4 none comes before the 6th beats the
    best, so all 8 run, as with patience 0 (never)."""
    scores, seen = iter([0.5, 0.7, 0.6, 0.65, 0.7, 0.9, 0.8, 0.85]), []

    def evaluate(model):
        seen.append(next(scores))
        return seen[-1], False

    model = torch.nn.Linear(2, 1)
    spec = dataclasses.replace(train.SPECS["prm"], steps=8, eval_every=1, warmup=1, patience=patience)
    batches = iter(lambda: torch.ones(2), None)
    train.train_loop(model, spec, batches, lambda m, batch: m(batch).sum(), lambda message: None, evaluate)
    assert len(seen) == evaluations


SHORT_BASE_RUN = """
import dataclasses, sys
from pathlib import Path
import torch
from kvrescue_eval.model_adapters.testbed import train
from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer
from kvrescue_eval.tasks.kv_recall.generate import read_split
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
problems = read_split("train")[:32]
spec = dataclasses.replace(train.SPECS["base"], steps=3)
train.train_lm("base", build_tokenizer(), problems, problems[:2], Path(sys.argv[1]), lambda m: None, spec=spec)
"""
# What an x86-64 CPU without AVX-512 offers, as torch, MKL, oneDNN and OpenBLAS read it
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "OPENBLAS_CORETYPE": "Haswell"}
KERNEL_SETTINGS = {*AVX2_ONLY, *train.PINNED_KERNELS}


def short_base_weights(folder, settings):
    """The weights of a 3-step run of the real base spec in a fresh process with these kernel settings."""
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_SETTINGS} | settings
    subprocess.run([sys.executable, "-c", SHORT_BASE_RUN, str(folder)], env=env, check=True, capture_output=True)
    return (folder / "base" / "model.safetensors").read_bytes()


def test_pinned_kernels_give_the_same_weights_whatever_instruction_sets_the_cpu_offers(tmp_path):
    on_this_cpu = short_base_weights(tmp_path / "a", train.PINNED_KERNELS)
    avx2_only = short_base_weights(tmp_path / "b", AVX2_ONLY | train.PINNED_KERNELS)
    assert on_this_cpu == avx2_only
    if torch.backends.cpu.get_cpu_capability() == "AVX512":  # the check can see a difference: unpinned, it is there
        assert short_base_weights(tmp_path / "c", {}) != short_base_weights(tmp_path / "d", AVX2_ONLY)
