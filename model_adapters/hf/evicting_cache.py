"""A transformers cache that evicts KV slots as R-KV does (or keeps everything, with `budget=None`).

    use_evicting_attention(model)                                     # evicting_attention.py
    cache = EvictingCache(num_layers, EvictionSchedule("rkv", budget=128))   # None: a full cache
    logits = model(input_ids, past_key_values=cache, position_ids=cache.next_positions(q)).logits

Every layer holds its rows in preallocated slots (`kv_slots.SlotStore`: budget + buffer per row, so the
memory bound is allocated once), with, per slot, the token's logical position and whether it holds a
token (rows of different lengths batched together are left-padded with empty slots). RoPE is applied
before caching, so a kept key keeps its position; the next token's position is the number of tokens
the row has seen (`lengths`), not the physical size. When a row holds budget + buffer slots (or at
prefill, when its prompt is longer than the budget) it is compressed in place to `budget` slots per KV
head after the step's attention, by its `kvrescue_eval.eviction.EvictionSchedule` (when, to how many
slots, which: the evictor sees the last `window` post-RoPE queries, the keys, values, per-slot state and,
where head budgets vary, per-head validity). Slot counts are host integers the code already knows, so
neither decoding nor compressing reads a value back from the device. The attention wrapper lives in `evicting_attention.py`.

Rows: `fork(n)` repeats each row n times (repeat_interleave), `select(rows)` keeps rows, and
`EvictingCache.gather([(cache, rows), ...])` joins rows of caches of different lengths in one copy. They return new caches
and never share mutable state with the source.
"""

import torch
from transformers.cache_utils import Cache

from kvrescue_eval.eviction import EvictionSchedule

from .evicting_layer import EvictingLayer, host_ints
from .kv_slots import device_index

__all__ = ["EvictingCache", "EvictingLayer"]


class EvictingCache(Cache):
    """One `EvictingLayer` per model layer; `schedule=None` keeps every slot (a plain full cache)."""

    def __init__(self, num_layers: int, schedule: EvictionSchedule | None = None, layers=None):
        self.schedule = schedule
        super().__init__(layers=layers if layers is not None else
                         [EvictingLayer(schedule, layer=i, num_layers=num_layers) for i in range(num_layers)])

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        if self.schedule is not None and any(layer._awaiting_attention for layer in self.layers):
            raise RuntimeError("the model does not use the evicting attention (no eviction would happen): "
                               "switch it with evicting_attention.use_evicting_attention(model)")
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    @property
    def batch_size(self) -> int:
        first = self.layers[0]
        return first.store.batch if first.is_initialized else 0

    @property
    def lengths(self) -> torch.Tensor:
        """Tokens seen per row (batch,): the logical lengths (empty before the first forward pass)."""
        first = self.layers[0]
        return torch.tensor(first.store.seen if first.is_initialized else [], dtype=torch.long)

    @property
    def physical_size(self) -> int:
        """Slots in use per row and KV head, the largest over layers."""
        return max((layer.store.width for layer in self.layers if layer.is_initialized), default=0)

    def next_positions(self, q_length: int) -> torch.Tensor:
        """position_ids (batch, q_length) for the next chunk of every row ((1, q_length) when empty)."""
        first = self.layers[0]
        if not first.is_initialized:
            return torch.arange(q_length)[None]
        return device_index(first.store.seen, first.device)[:, None] + torch.arange(q_length, device=first.device)

    def nbytes(self) -> int:
        return sum(layer.nbytes() for layer in self.layers)

    def fork(self, repeats: int) -> "EvictingCache":
        """Each row repeated `repeats` times, consecutively (torch.repeat_interleave)."""
        return self.select([row for row in range(self.batch_size) for _ in range(repeats)])

    def select(self, rows) -> "EvictingCache":
        """A new cache with the rows `rows` (host ints or a tensor of indices, in that order)."""
        if not self.layers[0].is_initialized:
            return EvictingCache(len(self.layers), self.schedule)
        return EvictingCache.gather([(self, rows)])

    @classmethod
    def gather(cls, parts: list[tuple["EvictingCache", list[int] | None]]) -> "EvictingCache":
        """In one copy, the rows `indices` of each (cache, indices) part (None: all its rows), in order."""
        schedules = {cache.schedule for cache, _ in parts}
        if len(schedules) != 1 or len({len(cache.layers) for cache, _ in parts}) != 1:
            raise ValueError(f"joining rows needs caches of one eviction schedule and layer count, got {schedules}")
        parts = [(cache, None if indices is None else host_ints(indices)) for cache, indices in parts]
        layers = [EvictingLayer.gather([(cache.layers[i], indices) for cache, indices in parts])
                  for i in range(len(parts[0][0].layers))]
        return cls(0, parts[0][0].schedule, layers=layers)
