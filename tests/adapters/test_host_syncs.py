"""The evicted base never makes the host wait for the device while it decodes or compresses.

300 decode steps of 8 candidate rows (two problems of different prompt lengths in one forward pass, as
the lm-eval model runs them), every row compressed at least 3 times in every layer, under a counter of
device-to-host reads (`host_reads.HostReads`: every read of a value computed on the model's device).
Allowed: exactly one read per decode call, the sampled tokens' candidates and entropies of all rows
together (`sample`); none in the cache, the attention or the compression, nor anywhere else.
"""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
sys.path.insert(0, str(Path(__file__).parent))

from host_reads import HostReads  # noqa: E402
from tiny_models import tiny_model, tiny_tokenizer  # noqa: E402

import kvrescue_eval.eviction as eviction  # noqa: E402
from kvrescue_eval.engine.sampling import SamplingParams  # noqa: E402
from hf_probes import make_evicting_cache  # noqa: E402
from kvrescue_eval.model_adapters.hf.policy import HFPolicy  # noqa: E402

STEPS, BUDGET, BUFFER = 300, 24, 64
CACHE_FILES = ("evicting_cache.py", "evicting_layer.py", "evicting_attention.py", "kv_slots.py",
               "kvrescue_eval/eviction/")


# R-KV on every architecture; and the protocol's other cache paths: per-slot state updated every step (h2o),
# per-head validity (adakv), values and the output projection handed over (criticalkv), which slots hold the
# prompt (randomattention).
@pytest.mark.parametrize("arch, attention, evictor", [("qwen2", "sdpa", "rkv"), ("llama", "eager", "rkv"),
                                                      ("qwen3", "sdpa", "rkv"),
                                                      ("qwen2", "sdpa", "h2o"), ("qwen2", "sdpa", "adakv"),
                                                      ("qwen2", "sdpa", "criticalkv"),
                                                      ("qwen2", "sdpa", "randomattention")])
def test_decode_and_compression_read_nothing_back_but_the_sampled_tokens(monkeypatch, arch, attention, evictor):
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, arch=arch, seed=3)
    compressed_rows = []
    select = eviction.EvictionSchedule.select

    def counting(schedule, view):
        compressed_rows.append(view.keys.shape[0])
        return select(schedule, view)

    monkeypatch.setattr(eviction.EvictionSchedule, "select", counting)
    policy = HFPolicy(model, tokenizer, SamplingParams(), batch_problems=True, new_cache=lambda: make_evicting_cache(
        model, budget=BUDGET, buffer=BUFFER, method=evictor, attention=attention))
    with HostReads(model) as reads:
        policy.start("a", [{"role": "user", "content": "Compute step by step. " * 6}])
        policy.start("b", [{"role": "user", "content": "Then 2x + 3 = 7."}])
        rows = policy.fork("a", [1, 2, 3, 4]) + policy.fork("b", [5, 6, 7, 8])
        before, compressed_rows[:] = sum(reads.by_place.values()), []
        for _ in range(STEPS):
            policy.decode(rows)
        during = sum(reads.by_place.values()) - before
    assert policy.length("a") != policy.length("b")        # rows of different lengths share the forward pass
    layers = model.config.num_hidden_layers
    assert sum(compressed_rows) >= 3 * len(rows) * layers   # >= 3 compressions per row and layer
    assert reads.in_files(*CACHE_FILES) == 0, dict(reads.by_place)
    assert during == STEPS, dict(reads.by_place)
    assert reads.in_files("kvrescue_eval/engine/sampling.py") == STEPS, dict(reads.by_place)


def test_the_counter_sees_reads_of_device_values_only():
    model = torch.nn.Linear(4, 2)
    with HostReads(model) as reads:
        out = model(torch.ones(1, 4))           # computed from the parameters: on the device
        host = torch.arange(3)                  # made on the host
        host.tolist()
        bool(host[0] == 0)
        out.sum().item()                        # 1: item
        if out.max() > 0:                       # 2: __bool__
            pass
        moved = out.cpu()                       # 3: cpu
        moved.tolist()                          # a host tensor now: free
        out[out > 0]                            # 4: boolean-mask indexing
        torch.zeros(2, device=out.device).tolist()   # 5: made on the device
    assert sum(reads.by_place.values()) == 5, dict(reads.by_place)
