"""What the engine, memory, PRM and decode-cost benchmarks share: thread control, quick mode, a
clock, SmolLM2 and a real benchmark prompt.

Threads: torch uses OMP_NUM_THREADS (run_all.py sets it from --threads; default 1 here), set before
any work and reported with every figure. On 2-core machines shared with other torch processes,
use 1: element-wise ops with 2 threads and a busy second core are hundreds of times slower.
"""

import os
import sys
import time
from contextlib import contextmanager

import torch

from kvrescue_eval.tasks.qwen_math_cot import SYSTEM_PROMPT as QWEN_SYSTEM  # the math tasks' own system turn

QUICK = os.environ.get("KVRESCUE_BENCH_QUICK") == "1"


def setup_threads() -> int:
    threads = int(os.environ.get("OMP_NUM_THREADS") or 1)
    torch.set_num_threads(threads)
    return threads


def sizes(full, quick):
    """The full-run value, or the smoke-run value under KVRESCUE_BENCH_QUICK=1."""
    return quick if QUICK else full


class Stopwatch:
    """Sums the wall time (and the process's CPU time) of the blocks it times."""

    def __init__(self):
        self.seconds = self.cpu_seconds = 0.0
        self.calls = 0

    @contextmanager
    def __call__(self):
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += time.process_time() - cpu
            self.calls += 1

    def wrap(self, function):
        def timed(*args, **kwargs):
            with self():
                return function(*args, **kwargs)
        return timed


def load_smollm2_sdpa():
    """(model, tokenizer): SmolLM2-135M-Instruct in float32 on CPU, as the `smollm2` model name loads it."""
    from kvrescue_eval.model_adapters.hf.loading import load_causal_lm
    from kvrescue_eval.model_adapters.model_files.locate import SMOLLM2

    return load_causal_lm(SMOLLM2, "float32", "cpu")


def gsm8k_conversations(count: int) -> list[list[dict]]:
    """The first `count` pinned GSM8K questions as chat conversations (Qwen2.5-Math CoT system prompt)."""
    from kvrescue_eval.tasks.data import load_benchmark

    docs = load_benchmark("gsm8k")[:count]
    return [[{"role": "system", "content": QWEN_SYSTEM}, {"role": "user", "content": doc["question"]}]
            for doc in docs]


def fail(message: str) -> None:
    """A benchmark that cannot measure exits non-zero with the reason."""
    print(f"cannot measure: {message}", file=sys.stderr)
    sys.exit(1)


def show(records) -> None:
    """Report the figures (table, and JSON lines for run_all.py) and print each one's details."""
    import json

    from records import emit

    emit(records)
    for rec in records:
        print(f"{rec['name']}: {json.dumps(rec['detail'])}")
