"""Writes h2o_cases.pt: the slots H2O's own code keeps, step by step, on a saved random stream of post-RoPE
queries and keys, for tests/eviction/test_reference.py.

The reference is `H2OKVCache_LayerWise` in FMInference/H2O (h2o_hf/utils_real_drop/modify_llama.py), driven
as its `H2OLlamaAttention.forward` drives it: causal softmax attention (float32) of the chunk's queries over
the cached keys, then the cache call, which adds the attention each slot received to its heavy-hitter score
and keeps the top `hh_size` older slots plus the `recent_size` newest. Values carry each token's position, so
the kept positions can be read back. It imports transformers (the reference module does), so run it where a
transformers that the reference imports is installed, e.g. the kvpress venv (see generate_kvpress_cases.py):

    git clone <a checkout of FMInference/H2O> /tmp/h2o
    /work/venvs/kvpress/bin/python tests/eviction/reference/generate_h2o_cases.py --h2o-repo /tmp/h2o
"""

import argparse
import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
HEADS, DIM, PROMPT, DECODE, HH, RECENT = 2, 8, 20, 40, 6, 8


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--h2o-repo", type=Path, required=True, help="a checkout of FMInference/H2O")
    parser.add_argument("--out", type=Path, default=HERE / "h2o_cases.pt")
    args = parser.parse_args()
    sys.path.insert(0, str(args.h2o_repo / "h2o_hf"))
    from utils_real_drop.modify_llama import H2OKVCache_LayerWise

    generator = torch.Generator().manual_seed(0)
    total = PROMPT + DECODE
    queries = torch.randn(1, HEADS, total, DIM, generator=generator) * 2
    keys = torch.randn(1, HEADS, total, DIM, generator=generator)
    positions = torch.zeros(1, HEADS, total, DIM)   # values: the token's position in channel 0
    positions[..., 0] = torch.arange(total, dtype=torch.float32)
    cache = H2OKVCache_LayerWise(hh_size=HH, recent_size=RECENT)
    held_keys, held_values, kept = None, None, []
    for start, end in [(0, PROMPT), *[(t, t + 1) for t in range(PROMPT, total)]]:
        chunk_keys, chunk_values = keys[:, :, start:end], positions[:, :, start:end]
        held_keys = chunk_keys if held_keys is None else torch.cat([held_keys, chunk_keys], dim=2)
        held_values = chunk_values if held_values is None else torch.cat([held_values, chunk_values], dim=2)
        logits = queries[:, :, start:end] @ held_keys.transpose(2, 3) / math.sqrt(DIM)
        q_length, length = end - start, held_keys.shape[2]
        causal = torch.arange(length)[None, :] <= (length - q_length + torch.arange(q_length))[:, None]
        logits = logits + torch.zeros(q_length, length).masked_fill(~causal, torch.finfo(logits.dtype).min)
        weights = torch.nn.functional.softmax(logits, dim=-1, dtype=torch.float32)
        held_keys, held_values = cache((held_keys, held_values), weights.detach().clone())
        held_keys, held_values = held_keys.reshape(1, HEADS, -1, DIM), held_values.reshape(1, HEADS, -1, DIM)
        kept.append(held_values[0, :, :, 0].long().sort(dim=-1).values)
    torch.save(dict(queries=queries, keys=keys, prompt=PROMPT, hh_size=HH, recent_size=RECENT, kept=kept), args.out)
    print(f"wrote {args.out}: {len(kept)} steps")


if __name__ == "__main__":
    main()
