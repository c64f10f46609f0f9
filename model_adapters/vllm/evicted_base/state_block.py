"""One request's state block in one evicted layer: what the layer asks vLLM to allocate and how it reads it.

vLLM gives each request exactly one block per layer for its whole life (a `MambaSpec` with
`mamba_cache_mode="none"`, the way it holds Mamba state) and frees it when the request ends. The layer lays
out the block's bytes itself:

    keys    (kv_heads, slots, head_dim)    post-RoPE keys, slot 0 oldest, the first `count` in use
    values  (kv_heads, slots, head_dim)
    queries (q_heads, window, head_dim)    the last `window` post-RoPE queries, oldest first (zeros before)
    state   (kv_heads, slots) float32      per-slot evictor state (only for evictors with `observe`)
    valid   (kv_heads, slots) bool         which slots hold a token (only where head budgets vary: AdaKV)
    prompt  (kv_heads, slots) bool         which slots hold a prompt token (only for evictors that keep the
                                           prompt: NEEDS_PROMPT, e.g. randomattention)

`slots` = `EvictionSchedule.slots(layer)`: the widest head after a compression plus the buffer. How many
slots a block uses is a host integer the layer keeps (`count`), never read back from the device.
"""

from dataclasses import dataclass
from math import prod

import torch

from kvrescue_eval.eviction import EvictionSchedule


@dataclass(frozen=True)
class BlockLayout:
    kv_heads: int
    q_heads: int
    head_dim: int
    slots: int
    window: int
    dtype: torch.dtype
    stateful: bool
    head_holes: bool
    prompt_flags: bool = False

    @classmethod
    def of(cls, schedule: EvictionSchedule, layer: int, num_layers: int, *, kv_heads: int, q_heads: int,
           head_dim: int, dtype: torch.dtype) -> "BlockLayout":
        return cls(kv_heads, q_heads, head_dim, schedule.slots(layer, num_layers), schedule.window, dtype,
                   schedule.keeps_state, schedule.head_width(layer, num_layers) > schedule.layer_budget(layer, num_layers),
                   schedule.needs_prompt)

    def shapes(self) -> tuple[tuple[int, ...], ...]:
        shapes = [(self.kv_heads, self.slots, self.head_dim)] * 2 + [(self.q_heads, self.window, self.head_dim)]
        if self.stateful:
            shapes.append((self.kv_heads, self.slots))
        shapes += [(self.kv_heads, self.slots)] * (int(self.head_holes) + int(self.prompt_flags))
        return tuple(shapes)

    def dtypes(self) -> tuple[torch.dtype, ...]:
        dtypes = [self.dtype] * 3 + ([torch.float32] if self.stateful else [])
        return tuple(dtypes + [torch.bool] * (int(self.head_holes) + int(self.prompt_flags)))

    def nbytes(self) -> int:
        return sum(prod(shape) * torch.empty((), dtype=dtype).element_size()
                   for shape, dtype in zip(self.shapes(), self.dtypes()))

    def unpack(self, raw: torch.Tensor) -> "BlockViews":
        """Views of every block's parts on vLLM's raw allocation ((num_blocks, ..., page_bytes) int8 pages)."""
        pages = raw.reshape(raw.shape[0], -1)
        views, offset = [], 0
        for shape, dtype in zip(self.shapes(), self.dtypes()):
            size = prod(shape) * torch.empty((), dtype=dtype).element_size()
            views.append(pages[:, offset:offset + size].view(dtype).view(-1, *shape))
            offset += size
        keys, values, queries = views[:3]
        rest = iter(views[3:])
        state = next(rest) if self.stateful else None
        valid = next(rest) if self.head_holes else None
        prompt = next(rest) if self.prompt_flags else None
        return BlockViews(keys, values, queries, state, valid, prompt)


@dataclass(frozen=True)
class BlockViews:
    """Every block of one layer: index dim 0 by vLLM's block id."""

    keys: torch.Tensor
    values: torch.Tensor
    queries: torch.Tensor
    state: torch.Tensor | None
    valid: torch.Tensor | None
    prompt: torch.Tensor | None = None

    def reset(self, blocks: torch.Tensor) -> None:
        """A new request's blocks (vLLM reuses blocks without zeroing them): an empty query ring, no state,
        every slot valid. Keys, values and prompt flags beyond `count` are never read."""
        self.queries[blocks] = 0
        if self.state is not None:
            self.state[blocks] = 0
        if self.valid is not None:
            self.valid[blocks] = True

    def copy(self, source: int, destination: int) -> None:
        """Block `destination` becomes a copy of block `source` (a fork)."""
        for tensor in (self.keys, self.values, self.queries, self.state, self.valid, self.prompt):
            if tensor is not None:
                tensor[destination].copy_(tensor[source])
