"""A transformers cache that evicts KV slots as R-KV does (or keeps everything, with `budget=None`).

    cache = make_evicting_cache(model, budget=128, method="rkv")     # also switches model's attention
    logits = model(input_ids, past_key_values=cache, position_ids=cache.next_positions(q)).logits

Every layer holds its rows in preallocated slots (`kv_slots.SlotStore`: budget + buffer per row, so the
memory bound is allocated once), with, per slot, the token's logical position and whether it holds a
token (rows of different lengths batched together are left-padded with empty slots). RoPE is applied
before caching, so a kept key keeps its position; the next token's position is the number of tokens
the row has seen (`lengths`), not the physical size. When a row holds budget + buffer slots (or at
prefill, when its prompt is longer than the budget) it is compressed in place to `budget` slots per KV
head after the step's attention, scored by its evictor (`kvrescue_eval.eviction.select_kept`) on its last `window`
post-RoPE queries. Slot counts are host integers the code already knows, so neither decoding nor
compressing reads a value back from the device. The attention wrapper lives in `evicting_attention.py`.

Rows: `fork(n)` repeats each row n times (repeat_interleave), `select(rows)` keeps rows,
`EvictingCache.concat([...])` joins groups of different lengths, `split(sizes)` undoes it, and
`EvictingCache.gather([(cache, rows), ...])` does any mix of these in one copy. They return new caches
and never share mutable state with the source.
"""

from dataclasses import dataclass, field

import torch
from transformers.cache_utils import Cache, DynamicLayer

from .evicting_attention import announce_mask_sizes, hand_over, use_evicting_attention
from .kv_slots import SlotStore, device_index


@dataclass(frozen=True)
class EvictionPolicy:
    budget: int
    # A name of kvrescue_eval.eviction.EVICTORS (built with pool_kernel and mix_lambda where it has them), or an
    # evictor object, used as it is (model_args builds one with all its options).
    method: object = field(default="rkv", compare=False)
    buffer: int = 128
    window: int = 8
    pool_kernel: int = 7
    mix_lambda: float = 0.1
    compress_prompt: bool = True
    evictor: object = field(init=False, compare=False, repr=False)
    evictor_key: str = field(init=False, repr=False)  # equal policies evict alike: the evictor's repr

    def __post_init__(self):
        from kvrescue_eval.eviction import EVICTORS, build_evictor

        for name in ("budget", "buffer", "window", "pool_kernel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1 (R-KV uses 8), got {self.window}")
        if self.budget <= self.window:
            raise ValueError(f"budget must be larger than window, got budget={self.budget} <= window={self.window}")
        if self.buffer < 1:
            raise ValueError(f"buffer must be >= 1 (slots added between compressions; default 128), got {self.buffer}")
        if isinstance(self.method, str) and self.method not in EVICTORS:
            raise ValueError(f"unknown eviction method {self.method!r}; valid methods: {', '.join(sorted(EVICTORS))}")
        evictor = (build_evictor(self.method, pool_kernel=self.pool_kernel, mix_lambda=self.mix_lambda)
                   if isinstance(self.method, str) else self.method)
        object.__setattr__(self, "evictor", evictor)
        object.__setattr__(self, "evictor_key", repr(evictor))

    @property
    def max_slots(self) -> int:
        return self.budget + self.buffer


class EvictingLayer(DynamicLayer):
    """One layer of the cache: the preallocated slots (`kv_slots.SlotStore`), the last `window` post-RoPE
    queries of every row (batch, q_heads, window, dim; chronological), and the compression schedule.

    Each row follows its own schedule, as if it were alone: it is compressed after the step's attention
    when it holds budget + buffer slots (or, in its first chunk, more than the budget). Every decision
    uses host integers, so a decode step and a compression never wait for the device."""

    is_croppable = False

    def __init__(self, policy: EvictionPolicy | None = None, store: SlotStore | None = None, queries=None):
        super().__init__()
        self.policy, self.store, self.queries = policy, store, queries
        self._awaiting_attention = False
        self._seen_before = self._chunk_valid = None
        if store is not None:
            self._expose()

    def _expose(self) -> None:
        """Point transformers' `keys`/`values` at the slots in use."""
        store = self.store
        self.keys, self.values = store.keys, store.values
        self.dtype, self.device, self.is_initialized = store.key_slots.dtype, store.device, True

    @property
    def positions(self) -> torch.Tensor:
        """(batch, kv_heads, physical) token position of every slot in use (-1: holds none)."""
        return self.store.positions

    @property
    def valid(self) -> torch.Tensor:
        return self.store.valid

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        batch, heads = key_states.shape[:2]
        bound = self.policy.max_slots if self.policy is not None else None
        self.store = SlotStore.empty(batch, heads, key_states.shape[-1], value_states.shape[-1], key_states.dtype,
                                     key_states.device, bound, key_states.shape[2])
        self._expose()

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self._seen_before = self.store.seen
        self.store.append(key_states, value_states)
        self._expose()
        self._awaiting_attention = True
        hand_over(self)
        return self.keys, self.values

    def record_chunk(self, q_length: int, chunk_valid: torch.Tensor | None, position_ids: torch.Tensor | None) -> None:
        """Called by the attention wrapper: which of the chunk's tokens are real, at which positions."""
        before = self._seen_before
        if position_ids is not None and position_ids.shape[0] == 1 and len(set(before)) > 1:
            raise ValueError(f"rows of this batch have seen different numbers of tokens ({before}): "
                             "pass per-row position_ids=cache.next_positions(q_length) to the forward call")
        self._chunk_valid = chunk_valid
        if chunk_valid is not None:
            self.store.mark_padding(chunk_valid)
        if position_ids is None:   # the models we serve always pass them; their default, from each row's count
            position_ids = device_index(before, self.device)[:, None] + torch.arange(q_length, device=self.device)
        self.store.write_positions(position_ids)

    def slot_mask(self, q_length: int) -> torch.Tensor | None:
        return self.store.mask(q_length)

    def after_attention(self, query: torch.Tensor) -> None:
        """Called by the attention wrapper once this step's attention is done: capture, maybe evict."""
        self._awaiting_attention = False
        chunk_valid, self._chunk_valid = self._chunk_valid, None
        if self.policy is None:
            if chunk_valid is not None:
                self.store.right_align()
            return
        self._capture_queries(query, chunk_valid)
        policy, counts = self.policy, self.store.counts
        need = [row for row, count in enumerate(counts)
                if count >= policy.max_slots or (policy.compress_prompt and self._seen_before[row] == 0
                                                 and count > policy.budget)]
        if need or chunk_valid is not None:
            self._compress(need, holes=chunk_valid is not None)
        self._expose()

    def _capture_queries(self, query: torch.Tensor, chunk_valid: torch.Tensor | None) -> None:
        """Keep each row's last `window` real queries, oldest first (a row that has seen fewer holds zeros
        before them; it cannot be compressed before it has seen more than the budget)."""
        window, q_length = self.policy.window, query.shape[2]
        ring = self.queries if self.queries is not None else query.new_zeros(query.shape[:2] + (window, query.shape[3]))
        if chunk_valid is None:
            self.queries = (torch.cat([ring[:, :, q_length:], query], dim=2) if q_length < window
                            else query[:, :, -window:].contiguous())
            return
        queries = torch.cat([ring, query], dim=2)
        valid = torch.cat([chunk_valid.new_ones(chunk_valid.shape[0], window), chunk_valid], dim=-1)
        order = torch.where(valid, torch.arange(valid.shape[-1], device=valid.device), -1)
        newest = order.topk(window, dim=-1).indices.sort(dim=-1).values
        self.queries = queries.gather(2, newest[:, None, :, None].expand(-1, queries.shape[1], -1, queries.shape[3]))

    def _compress(self, need: list[int], holes: bool) -> None:
        """Rows in `need` keep `budget` slots per KV head, chosen by the evictor on their last `window`
        queries; every row's tokens end right-aligned in the first max(counts) columns."""
        store, budget = self.store, self.policy.budget
        batch, heads, width = store.batch, store.key_slots.shape[1], store.width
        needed = set(need)
        counts = [min(count, budget) if row in needed else count for row, count in enumerate(store.counts)]
        new_width = max(counts)
        steps = torch.arange(width, device=store.device)
        order = (torch.argsort(store.valid.long() * width + steps, dim=-1) if holes   # holes first, then tokens
                 else steps.expand(batch, width))
        index = order[:, None, width - new_width:].expand(batch, heads, new_width).clone()
        for count in sorted({store.counts[row] for row in need}):
            rows = [row for row in need if store.counts[row] == count]
            picked = slice(None) if len(rows) == batch else device_index(rows, store.device)
            slots = order[picked, None, width - count:].expand(-1, heads, count)
            keys = store.key_slots[picked, :, :width].gather(2, slots[..., None].expand(-1, -1, -1, store.key_slots.shape[-1]))
            chosen = slots.gather(2, self._kept(self.queries[picked], keys))
            index[picked] = torch.nn.functional.pad(chosen, (new_width - budget, 0))
        store.rearrange(index, counts)

    def _kept(self, queries, keys) -> torch.Tensor:
        from kvrescue_eval.eviction import select_kept

        return select_kept(self.policy.evictor, queries, keys, budget=self.policy.budget, window=self.policy.window)

    def get_seq_length(self) -> int:
        """The logical length: tokens seen (the longest row's, in a batch of different lengths)."""
        return max(self.store.seen, default=0) if self.is_initialized else 0

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        physical = self.store.width if self.is_initialized else 0
        sizes = physical + query_length, self.get_seq_length() - physical
        announce_mask_sizes(*sizes)
        return sizes

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("an evicting cache cannot be cropped; fork it (cache.fork) before trying tokens")

    # Rows. All of these build new tensors: a cache made from another never shares mutable state.
    def rows(self, indices) -> "EvictingLayer":
        """A new layer with the rows `indices` (host ints, in that order)."""
        if not self.is_initialized:
            return EvictingLayer(self.policy)
        return EvictingLayer.gather([(self, _host_ints(indices))])

    @staticmethod
    def gather(parts: list[tuple["EvictingLayer", list[int] | None]]) -> "EvictingLayer":
        """One new layer with, in order, the rows `indices` of each (layer, indices) part (None: all its
        rows); narrower parts are left-padded with empty slots."""
        if not all(layer.is_initialized for layer, _ in parts):
            raise ValueError("joining rows needs caches that have seen at least one forward pass")
        queries = None
        if all(layer.queries is not None for layer, _ in parts):
            queries = torch.cat([layer.queries if indices is None else layer.queries[device_index(indices, layer.device)]
                                 for layer, indices in parts])
        return EvictingLayer(parts[0][0].policy, SlotStore.gather([(layer.store, indices) for layer, indices in parts]),
                             queries)

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._assign(self.rows([row for row in range(self.store.batch) for _ in range(repeats)]))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self._assign(self.rows(indices))

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.batch_select_indices(beam_idx)

    def _assign(self, other: "EvictingLayer") -> None:
        self.__dict__.update(other.__dict__)

    def nbytes(self) -> int:
        """Bytes held by this layer: its slot storage (keys, values, positions, validity) at full capacity,
        not the query window."""
        return self.store.nbytes() if self.is_initialized else 0


def _host_ints(indices) -> list[int]:
    """Row indices as host ints (a tensor from transformers' API is read once; our own callers pass lists)."""
    return indices.tolist() if isinstance(indices, torch.Tensor) else [int(i) for i in indices]


class EvictingCache(Cache):
    """One `EvictingLayer` per model layer; `policy=None` keeps every slot (a plain full cache)."""

    def __init__(self, num_layers: int, policy: EvictionPolicy | None = None, layers=None):
        self.policy = policy
        super().__init__(layers=layers if layers is not None else [EvictingLayer(policy) for _ in range(num_layers)])

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        if self.policy is not None and any(layer._awaiting_attention for layer in self.layers):
            raise RuntimeError("the model does not use the evicting attention (no eviction would happen): "
                               "build the cache with make_evicting_cache(model), which switches it")
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
            return EvictingCache(len(self.layers), self.policy)
        return EvictingCache.gather([(self, rows)])

    def split(self, sizes: list[int]) -> list["EvictingCache"]:
        """Consecutive groups of `sizes` rows, each trimmed to its own physical length."""
        if sum(sizes) != self.batch_size:
            raise ValueError(f"split sizes {sizes} sum to {sum(sizes)}, the cache has {self.batch_size} rows")
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return [self.select(range(start, start + size)) for start, size in zip(starts, sizes)]

    @classmethod
    def concat(cls, caches: list["EvictingCache"]) -> "EvictingCache":
        """The rows of all `caches` in one batch, whatever their lengths (empty slots are never attended)."""
        return cls.gather([(cache, None) for cache in caches])

    @classmethod
    def gather(cls, parts: list[tuple["EvictingCache", list[int] | None]]) -> "EvictingCache":
        """In one copy, the rows `indices` of each (cache, indices) part (None: all its rows), in order."""
        policies = {cache.policy for cache, _ in parts}
        if len(policies) != 1 or len({len(cache.layers) for cache, _ in parts}) != 1:
            raise ValueError(f"joining rows needs caches of one policy and layer count, got {policies}")
        parts = [(cache, None if indices is None else _host_ints(indices)) for cache, indices in parts]
        layers = [EvictingLayer.gather([(cache.layers[i], indices) for cache, indices in parts])
                  for i in range(len(parts[0][0].layers))]
        return cls(0, parts[0][0].policy, layers=layers)


def make_evicting_cache(model, *, budget: int | None, method: str = "rkv", buffer: int = 128, window: int = 8,
                        pool_kernel: int = 7, mix_lambda: float = 0.1, compress_prompt: bool = True,
                        attention: str | None = None) -> EvictingCache:
    """An empty cache for `model`, whose attention is switched to the evicting wrapper (see
    `evicting_attention.use_evicting_attention`). `budget=None`: no eviction (a full cache)."""
    policy = None if budget is None else EvictionPolicy(budget, method, buffer, window, pool_kernel, mix_lambda,
                                                        compress_prompt)
    use_evicting_attention(model, attention)
    return EvictingCache(model.config.get_text_config(decoder=True).num_hidden_layers, policy)
