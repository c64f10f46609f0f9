"""`report` and `check` over folders written by the real `lm_eval` command, with a tiny random Llama and a
byte-level tokenizer built here (offline), on our real tasks (math500, 1 seed; aime24_qwen, 5 seeds).

- a stock `--model hf` run: classified as the full-KV run of its model, reported as a reference with no
  comparison;
- a full / bon / rescue grid of the `kvrescue` model: the tables and the gate.
Expected values are counted directly from the per-seed verdicts and statistics in the samples files.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvrescue_eval.cli import main

# The console script of the interpreter that runs the tests: an `lm_eval` found first on PATH may belong to
# another Python, with another install of this package.
_SCRIPT = Path(sys.executable).parent / "lm_eval"
LM_EVAL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "lm_eval"]


def tiny_model(folder):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["Please reason step by step, and put your final answer within \\boxed{}."], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>", pad_token="<eos>")
    fast.save_pretrained(folder)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.eos_token_id)
    import torch
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_report_reads_a_real_lm_eval_folder(tmp_path):
    model = tiny_model(tmp_path / "tiny")
    output = tmp_path / "lm_eval_out"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    command = [*LM_EVAL, "run", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
               "--tasks", "math500,aime24_qwen", "--limit", "2", "--gen_kwargs", "max_gen_toks=12",
               "--batch_size", "16", "--device", "cpu", "--output_path", str(output), "--log_samples"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]

    out = tmp_path / "report"
    assert main(["report", str(output), "--out", str(out), "--no-plots", "--submission"]) == 0
    data = json.loads((out / "report.json").read_text())
    rows = {row["benchmark"]: row for row in data["tables"]["accuracy"]["rows"]}
    assert set(rows) == {"math500", "aime24"}
    for task, bench, seeds in (("math500", "math500", 1), ("aime24_qwen", "aime24", 5)):
        samples = next(output.rglob(f"samples_{task}_*.jsonl"))
        verdicts = [json.loads(line)["exact_match_boxed"] for line in samples.read_text().splitlines()]
        assert len(verdicts) == 2 and all(len(v) == seeds for v in verdicts)
        per_seed = [sum(doc[s] for doc in verdicts) / 2 for s in range(seeds)]
        row = rows[bench]
        assert (row["base"], row["mode"], row["n"], row["evictor"], row["budget"]) == (str(model), "full", 1, None, None)
        assert row["seeds"] == seeds
        assert row["pass1_mean"] == pytest.approx(sum(per_seed) / seeds)
    # A full-KV run alone forms no comparison: reported as such, not dropped.
    assert {row["reason"] for row in data["tables"]["unpaired"]["rows"]} == \
        {"reference only: no complete rescue comparison uses it"}
    (submission,) = (out / "submissions").glob("*.json")
    assert main(["leaderboard", "validate", str(submission)]) == 0


def run_kvrescue(model, output, mode, env):
    args = (f"base={model},helper={model},scorer=helper-logprob,mode={mode},n=2,evictor=rkv,budget=16,buffer=8,"
            "window=4,max_steps=2,max_step_tokens=6,max_problems_in_flight=4,dtype=float32")
    command = [*LM_EVAL, "run", "--model", "kvrescue", "--model_args", args, "--tasks", "math500,aime24_qwen",
               "--limit", "2", "--device", "cpu", "--output_path", str(output / mode), "--log_samples"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]


def from_samples(output, mode, task, key):
    """Per-seed accuracy (key exact_match_boxed) or per-sample statistic means, read straight from the samples."""
    samples = next((output / mode).rglob(f"samples_{task}_*.jsonl"))
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    lists = [r[key] for r in records]
    if key == "exact_match_boxed":
        seeds = len(lists[0])
        return sum(sum(doc[s] for doc in lists) / len(lists) for s in range(seeds)) / seeds
    return sum(sum(values) for values in lists) / sum(len(values) for values in lists)


@pytest.mark.slow
def test_report_and_gate_on_real_kvrescue_runs(tmp_path):
    model = tiny_model(tmp_path / "tiny")
    output = tmp_path / "runs"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for mode in ("full", "bon", "rescue"):
        run_kvrescue(model, output, mode, env)

    out = tmp_path / "report"
    assert main(["report", str(output), "--out", str(out), "--no-plots", "--submission"]) == 0
    data = json.loads((out / "report.json").read_text())
    for task, bench in (("math500", "math500"), ("aime24_qwen", "aime24")):
        accuracy = {mode: from_samples(output, mode, task, "exact_match_boxed") for mode in ("full", "bon", "rescue")}
        row = next(r for r in data["tables"]["recovery"]["rows"] if r["benchmark"] == bench)
        assert (row["base"], row["n"], row["budget"], row["evictor"], row["detector"]) == (str(model), 2, 16, "rkv", "on")
        assert (row["rescue"], row["bon"], row["full"]) == pytest.approx(
            (accuracy["rescue"], accuracy["bon"], accuracy["full"]))
        gap = accuracy["full"] - accuracy["bon"]
        expected = None if gap == 0 else (accuracy["rescue"] - accuracy["bon"]) / gap
        assert row["recovery"] == (None if expected is None else pytest.approx(expected))
        cost = next(r for r in data["tables"]["decode_cost"]["rows"] if r["benchmark"] == bench and r["mode"] == "rescue")
        for key in ("steps", "output_tokens", "base_tokens", "helper_tokens"):
            assert cost[key] == pytest.approx(from_samples(output, "rescue", task, key))
        seeds = next(r for r in data["tables"]["accuracy"]["rows"] if r["benchmark"] == bench and r["mode"] == "rescue")
        assert seeds["seeds"] == (5 if bench == "aime24" else 1)
    for path in (out / "submissions").glob("*.json"):
        assert main(["leaderboard", "validate", str(path)]) == 0

    rows = data["tables"]["recovery"]["rows"]
    for minimum in (-1.0, 2.0):
        passes = [r["recovery"] >= minimum if r["recovery"] is not None else r["rescue"] >= r["bon"] for r in rows]
        assert main(["check", str(output), "--min-recovery", str(minimum)]) == (0 if all(passes) else 1)
