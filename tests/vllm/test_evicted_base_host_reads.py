"""The evicted layer's decode and compression path reads nothing back from the device (what would stall a GPU),
counted on CPU by tests/adapters/host_reads.py with the state blocks and the step's q, k, v marked as device data:
over 60 decode steps of three requests of different lengths, with a prompt, an appended chunk and compressions
in every request, for R-KV, SnapKV, H2O (per-slot state), AdaKV (per-head validity), CriticalKV (values and the
output projection) and Random Attention (which slots hold the prompt)."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "adapters"))
from host_reads import HostReads  # noqa: E402

from kvrescue_eval.eviction import EvictionSchedule  # noqa: E402
from kvrescue_eval.model_adapters.vllm.evicted_base.evict_step import LayerStep  # noqa: E402
from kvrescue_eval.model_adapters.vllm.evicted_base.state_block import BlockLayout  # noqa: E402

KV_HEADS, Q_HEADS, DIM, BLOCKS = 2, 4, 32, 4


@pytest.mark.parametrize("method", ["rkv", "snapkv", "h2o", "adakv", "criticalkv", "randomattention"])
def test_decode_and_compression_read_nothing_back(method):
    schedule = EvictionSchedule(method, 16, 8, 4)
    layout = BlockLayout.of(schedule, 0, 1, kv_heads=KV_HEADS, q_heads=Q_HEADS, head_dim=DIM, dtype=torch.float32)
    raw = torch.zeros(BLOCKS, layout.nbytes(), dtype=torch.int8)
    generator = torch.Generator().manual_seed(0)

    def qkv(tokens):
        return (torch.randn(Q_HEADS, tokens, DIM, generator=generator),
                torch.randn(KV_HEADS, tokens, DIM, generator=generator),
                torch.randn(KV_HEADS, tokens, DIM, generator=generator))

    out_proj = torch.randn(Q_HEADS * DIM, Q_HEADS * DIM, generator=generator)   # o_proj.weight (hidden, q_heads x dim)
    step = LayerStep(schedule, 0, 1, DIM ** -0.5, out_proj)
    chunks = [qkv(length) for length in (30, 9, 12)] + [qkv(5)]       # three prompts, then one appended chunk
    decodes = [qkv(3) for _ in range(60)]
    with HostReads(tensors=[raw, out_proj, *(t for chunk in chunks + decodes for t in chunk)]) as reads:
        views = layout.unpack(raw)
        for tensor in (views.keys, views.values, views.queries, views.state, views.valid, views.prompt):
            if tensor is not None:
                reads.mark(tensor)
        blocks, counts = [1, 2, 3], []
        for block, (q, k, v) in zip(blocks, chunks):
            counts.append(step.chunk_row(views, block, 0, 0, q, k, v)[1])
        before = counts[0]
        counts[0] = step.chunk_row(views, 1, counts[0], 30, *chunks[3])[1]
        assert counts[0] < before + 5 or before + 5 < schedule.slots()   # compressed, or it fits
        compressions = 0
        for q, k, v in decodes:
            out, new = step.decode_rows(views, blocks, counts, q.transpose(0, 1), k.transpose(0, 1),
                                        v.transpose(0, 1))
            compressions += sum(n <= c for n, c in zip(new, counts))
            counts = new
    assert compressions >= 3 * 5
    assert sum(reads.by_place.values()) == 0, dict(reads.by_place)
