"""qwen-prm scoring with the committed prefix cached against re-scoring the whole trajectory.

The model has the Qwen2.5-Math-PRM-7B layout (a Qwen2 decoder under `model.*` and the score head
`score.0`/`score.2`, saved as a checkpoint and loaded by `load_qwen_prm`) at a CPU size (below):
random weights, since speed does not depend on them. Tokenizer: SmolLM2's byte-level BPE with
"<extra_0>" added as one special token and its ChatML template (Qwen2.5 uses the same markup).
Steps are real solution lines (pinned GSM8K answers), about 20 tokens each; 8 candidates per call
(N = 4 + 4).

At k committed steps the cached scorer has already scored step k - 1 (as in the engine, where it
scored every earlier step), so its call extends the cached prefix by one step and runs the
candidates; the uncached scorer runs every candidate's whole input. Both return the same rewards
(checked). prm_prefix_speedup_k = uncached seconds / cached seconds of that call.
"""

import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench_common import QWEN_SYSTEM, fail, setup_threads, show, sizes
from records import machine, record

from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.model_adapters.scorers.qwen_prm import QwenPRMScorer, load_qwen_prm

# Qwen2.5-Math-PRM-7B: hidden 3584, 28 layers, 28 heads / 4 KV heads (head_dim 128), MLP 18944.
# CPU size, same head_dim and MLP ratio (~5.3x), grouped-query attention.
PRM_SHAPE = dict(hidden_size=384, num_hidden_layers=8, num_attention_heads=3, num_key_value_heads=1,
                 intermediate_size=2048, head_dim=128)
CANDIDATES = 8


def prm_checkpoint(folder: Path):
    """Write a random PRM checkpoint (config, safetensors, tokenizer) in the PRM-7B layout."""
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2Model

    from kvrescue_eval.model_adapters.model_files.smollm2 import smollm2_path
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=4096, tie_word_embeddings=False,
                         architectures=["Qwen2ForProcessRewardModel"], **PRM_SHAPE)
    config.save_pretrained(folder)
    hidden = config.hidden_size
    tensors = {f"model.{k}": v for k, v in Qwen2Model(config).state_dict().items()}
    tensors.update({"score.0.weight": torch.randn(hidden, hidden) / hidden ** 0.5, "score.0.bias": torch.zeros(hidden),
                    "score.2.weight": torch.randn(2, hidden) / hidden ** 0.5, "score.2.bias": torch.zeros(2)})
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "model.safetensors")


def solution_lines(count: int) -> list[str]:
    """Real reasoning steps: lines of the pinned GSM8K solutions, calculator marks removed."""
    import re

    from kvrescue_eval.tasks.data import load_benchmark

    lines = []
    for doc in load_benchmark("gsm8k"):
        lines += [re.sub(r"<<[^>]*>>", "", line) for line in doc["answer"].split("\n") if not line.startswith("####")]
        if len(lines) >= count:
            return lines[:count]
    fail(f"the GSM8K solutions have only {len(lines)} lines, {count} needed")


def timed_score(scorer, request, repeats):
    seconds, scores = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        [scores] = scorer.score([request])
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), scores


def measure(cached, uncached, question, lines, steps, repeats):
    """Median seconds of one scoring call at `steps` committed steps, cached and uncached."""
    history, candidates = lines[:steps], lines[steps:steps + CANDIDATES]
    key = ("bench", steps)
    cached_seconds = []
    for repeat in range(repeats):
        cached.release(key)
        cached.score([ScoreRequest(key, question, history[:-1], candidates, QWEN_SYSTEM)])  # the previous step
        seconds, cached_scores = timed_score(cached, ScoreRequest(key, question, history, candidates, QWEN_SYSTEM), 1)
        cached_seconds.append(seconds)
    full_seconds, full_scores = timed_score(uncached, ScoreRequest(key, question, history, candidates, QWEN_SYSTEM),
                                            repeats)
    if max(abs(a - b) for a, b in zip(cached_scores, full_scores)) > 1e-4:
        fail(f"cached and uncached rewards differ at {steps} steps: {cached_scores} vs {full_scores}")
    return statistics.median(cached_seconds), full_seconds


def main():
    threads = setup_threads()
    print(f"machine: {machine()}")
    repeats = sizes(3, 1)
    points = (10, 30)
    with tempfile.TemporaryDirectory() as folder:
        prm_checkpoint(Path(folder))
        cached = load_qwen_prm(folder, dtype="float32")
    uncached = QwenPRMScorer(cached.model, cached.tokenizer, use_prefix_cache=False)
    from kvrescue_eval.tasks.data import load_benchmark

    question = load_benchmark("gsm8k")[0]["question"]
    lines = solution_lines(max(points) + CANDIDATES)
    tokens = len(uncached.encode(uncached.render(QWEN_SYSTEM, question, lines[:max(points) + 1])))
    records = []
    for steps in points:
        cached_seconds, full_seconds = measure(cached, uncached, question, lines, steps, repeats)
        records.append(record(f"prm_prefix_speedup_{steps}", full_seconds / cached_seconds, "x",
                              target=5.0 if steps == 30 else None, detail={
            "committed_steps": steps, "candidates": CANDIDATES, "cached_seconds": cached_seconds,
            "uncached_seconds": full_seconds, "prm_shape": PRM_SHAPE, "dtype": "float32",
            "tokens_at_31_steps": tokens, "repeats": repeats, "threads": threads}))
    show(records)


if __name__ == "__main__":
    main()
