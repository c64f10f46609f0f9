"""One layer of an `EvictingCache` (see evicting_cache.py): its slots, its query ring and its schedule."""

import torch
from transformers.cache_utils import DynamicLayer

from kvrescue_eval.eviction import CacheView, EvictionSchedule, output_projection_heads

from .evicting_attention import announce_mask_sizes, hand_over
from .kv_slots import SlotStore, device_index


class EvictingLayer(DynamicLayer):
    """One layer (`layer` of `num_layers`) of the cache: the preallocated slots (`kv_slots.SlotStore`), the
    last `window` post-RoPE queries of every row (batch, q_heads, window, dim; chronological), and the
    compression schedule.

    Each row follows its own schedule, as if it were alone: it is compressed after the step's attention
    when it holds `schedule.slots(layer)` slots (or, in its first chunk, more than the layer's budget).
    Every decision uses host integers, so a decode step and a compression never wait for the device."""

    is_croppable = False

    def __init__(self, schedule: EvictionSchedule | None = None, store: SlotStore | None = None, queries=None,
                 layer: int = 0, num_layers: int = 1):
        super().__init__()
        self.schedule, self.store, self.queries = schedule, store, queries
        self.layer, self.num_layers = layer, num_layers
        self._awaiting_attention = False
        self._seen_before = self._chunk_valid = self._out_proj = None
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

    def _where(self) -> tuple[int, int]:
        return self.layer, self.num_layers

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        batch, heads = key_states.shape[:2]
        schedule = self.schedule
        bound = schedule.slots(*self._where()) if schedule is not None else None
        self.store = SlotStore.empty(
            batch, heads, key_states.shape[-1], value_states.shape[-1], key_states.dtype, key_states.device, bound,
            key_states.shape[2], stateful=schedule is not None and schedule.keeps_state,
            head_holes=schedule is not None and schedule.head_width(*self._where()) > schedule.layer_budget(*self._where()))
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
        self.store.mark_prompts(before)

    def slot_mask(self, q_length: int) -> torch.Tensor | None:
        return self.store.mask(q_length)

    def after_attention(self, query: torch.Tensor, out_proj: torch.Tensor | None = None) -> None:
        """Called by the attention wrapper once this step's attention is done: capture, maybe evict.
        `out_proj`: the layer's o_proj weight (hidden, q_heads * value_dim), which value-aware evictors read."""
        self._out_proj = out_proj
        self._awaiting_attention = False
        chunk_valid, self._chunk_valid = self._chunk_valid, None
        if self.schedule is None:
            if chunk_valid is not None:
                self.store.right_align()
            return
        self._capture_queries(query, chunk_valid)
        schedule, store = self.schedule, self.store
        if schedule.keeps_state:
            valid = None if store.all_valid() else store.valid
            store.state_slots[:, :, :store.width] = schedule.observe(store.state, query, store.keys, valid)
        need = [row for row, count in enumerate(store.counts)
                if schedule.compresses(count, self._seen_before[row], *self._where())]
        if need or chunk_valid is not None:
            self._compress(need, holes=chunk_valid is not None)
        self._expose()

    def _capture_queries(self, query: torch.Tensor, chunk_valid: torch.Tensor | None) -> None:
        """Keep each row's last `window` real queries, oldest first (a row that has seen fewer holds zeros
        before them; it cannot be compressed before it has seen more than the budget)."""
        window, q_length = self.schedule.window, query.shape[2]
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
        """Rows in `need` keep what the schedule selects from their slots (keys, values, state, validity and
        last `window` queries); every row's tokens end right-aligned in the first max(counts) columns."""
        store, schedule = self.store, self.schedule
        batch, heads, width = store.batch, store.key_slots.shape[1], store.width
        needed = set(need)
        counts = [schedule.kept_width(count, *self._where()) if row in needed else count
                  for row, count in enumerate(store.counts)]
        new_width = max(counts)
        steps = torch.arange(width, device=store.device)
        order = (torch.argsort(store.valid.long() * width + steps, dim=-1) if holes   # holes first, then tokens
                 else steps.expand(batch, heads, width))
        index = order[:, :, width - new_width:].clone()
        keep = torch.ones(batch, heads, new_width, dtype=torch.bool, device=store.device) if store.head_holes else None
        for count in sorted({store.counts[row] for row in need}):
            rows = [row for row in need if store.counts[row] == count]
            picked = slice(None) if len(rows) == batch else device_index(rows, store.device)
            slots = order[picked, :, width - count:]
            kept = schedule.select(self._view(picked, slots, rows))
            pad = new_width - kept.width
            index[picked] = torch.nn.functional.pad(slots.gather(2, kept.index), (pad, 0))
            if keep is not None and kept.valid is not None:
                keep[picked] = torch.nn.functional.pad(kept.valid, (pad, 0), value=True)
        store.rearrange(index, counts, keep)

    def _view(self, picked, slots: torch.Tensor, rows: list[int]) -> CacheView:
        """The slots `slots` (rows, heads, count) of rows `rows` (`picked` on the device), as the evictor sees them."""
        store = self.store

        def take(tensor):
            return tensor[picked, :, :store.width].gather(2, slots[..., None].expand(-1, -1, -1, tensor.shape[-1]))

        state = None if store.state_slots is None else store.state_slots[picked, :, :store.width].gather(2, slots)
        valid = store.valid_slots[picked, :, :store.width].gather(2, slots) if store.head_holes else None
        prompt = store.prompt_slots(rows, slots) if self.schedule.needs_prompt else None
        out_proj = (output_projection_heads(self._out_proj, self.queries.shape[1])
                    if self.schedule.reads_values and self._out_proj is not None else None)
        return CacheView(self.queries[picked], take(store.key_slots), self.schedule.window, take(store.value_slots),
                         state, valid, *self._where(), prompt, out_proj)

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
            return EvictingLayer(self.schedule, layer=self.layer, num_layers=self.num_layers)
        return EvictingLayer.gather([(self, host_ints(indices))])

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
        first = parts[0][0]
        return EvictingLayer(first.schedule, SlotStore.gather([(layer.store, indices) for layer, indices in parts]),
                             queries, first.layer, first.num_layers)

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


def host_ints(indices) -> list[int]:
    """Row indices as host ints (a tensor from transformers' API is read once; our own callers pass lists)."""
    return indices.tolist() if isinstance(indices, torch.Tensor) else [int(i) for i in indices]
