"""Preallocated KV slots of one layer for a batch of rows, with the row algebra (`gather`: select and join).

Tensors (device): keys/values (batch, kv_heads, capacity, dim), `positions` (batch, kv_heads,
capacity) the token position each slot holds (-1: none), `valid` (batch, kv_heads, capacity), and
`state` (batch, kv_heads, capacity) float32 when the evictor keeps per-slot state (else None). Columns
[0, width) are in use. Host integers the code already knows (never read back from the device):
`width`, `counts[r]` (slots holding a token), `seen[r]` (tokens the row has seen), `prompts[r]` (tokens of
the row's first chunk, its prompt: the slots whose position is below it hold prompt tokens). Columns from
`width` on are marked valid ahead of use, so appending a chunk writes keys and values only.

Layout invariant between forward passes: row r holds its tokens in the last `counts[r]` columns of
[0, width), in ascending position order, and width = max(counts). Where head budgets vary
(`head_holes`), a head may hold fewer tokens than counts[r]: its empty columns are the leading ones of
those counts[r]. So appending is a column slice
write, selecting rows trims leading columns by host arithmetic, and no validity is ever read back.
Inside a forward pass a padded chunk (a 2-D attention_mask) may leave holes; `right_align` restores
the invariant after attention (the only place that reads counts back: padded chunks are prompts,
never the decode loop).

Columns at or beyond `width` are never read, so storage is allocated without clearing it; the empty
columns a row has inside [0, width) are masked and hold finite values (zeros, or copies of its slots),
so a masked slot can never turn an attention output into NaN.

Capacity: `bound` slots when the layer evicts (budget + buffer; a longer prompt grows it until its
first compression), else grown in steps of `GROWTH` slots.
"""

import torch

GROWTH = 256


def device_index(values, device) -> torch.Tensor:
    """A LongTensor of host ints on `device`; on CUDA through pinned memory and a non-blocking copy, so the
    host never waits for the device."""
    host = torch.tensor(list(values), dtype=torch.long)
    if torch.device(device).type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


class SlotStore:
    def __init__(self, keys, values, positions, valid, state, width: int, counts: list[int], seen: list[int],
                 bound: int | None, head_holes: bool = False):
        self.key_slots, self.value_slots, self.position_slots, self.valid_slots = keys, values, positions, valid
        self.state_slots = state
        self.width, self.counts, self.seen, self.bound, self.head_holes = width, counts, seen, bound, head_holes
        self.prompts = [0] * len(counts)

    @classmethod
    def empty(cls, batch, kv_heads, key_dim, value_dim, dtype, device, bound: int | None, capacity: int = 0,
              stateful: bool = False, head_holes: bool = False):
        """`stateful`: keep a float32 state per slot; `head_holes`: heads may hold different numbers of tokens."""
        capacity = cls._capacity_for(bound, capacity)
        return cls(torch.empty(batch, kv_heads, capacity, key_dim, dtype=dtype, device=device),
                   torch.empty(batch, kv_heads, capacity, value_dim, dtype=dtype, device=device),
                   torch.full((batch, kv_heads, capacity), -1, dtype=torch.long, device=device),
                   torch.ones(batch, kv_heads, capacity, dtype=torch.bool, device=device),
                   torch.zeros(batch, kv_heads, capacity, dtype=torch.float32, device=device) if stateful else None,
                   0, [0] * batch, [0] * batch, bound, head_holes)

    @staticmethod
    def _capacity_for(bound: int | None, needed: int) -> int:
        return max(bound, needed) if bound is not None else -(-max(needed, 1) // GROWTH) * GROWTH

    # -- views -----------------------------------------------------------------------------------
    @property
    def batch(self) -> int:
        return self.key_slots.shape[0]

    @property
    def capacity(self) -> int:
        return self.key_slots.shape[2]

    @property
    def device(self):
        return self.key_slots.device

    @property
    def keys(self):
        return self.key_slots[:, :, :self.width]

    @property
    def values(self):
        return self.value_slots[:, :, :self.width]

    @property
    def positions(self):
        return self.position_slots[:, :, :self.width]

    @property
    def valid(self):
        return self.valid_slots[:, :, :self.width]

    @property
    def state(self):
        return None if self.state_slots is None else self.state_slots[:, :, :self.width]

    def all_valid(self) -> bool:
        """Every slot in use holds a token, known from host ints (never where head budgets vary)."""
        return not self.head_holes and all(count == self.width for count in self.counts)

    def nbytes(self) -> int:
        """Bytes of the slot storage (keys, values, positions, validity, state) at its full capacity."""
        tensors = (self.key_slots, self.value_slots, self.position_slots, self.valid_slots, self.state_slots)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    # -- a forward pass --------------------------------------------------------------------------
    def append(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Write a chunk of q tokens into columns [width, width + q) of every row."""
        q_length = keys.shape[2]
        self._reserve(self.width + q_length)
        columns = slice(self.width, self.width + q_length)
        self.key_slots[:, :, columns] = keys
        self.value_slots[:, :, columns] = values
        if self.state_slots is not None:
            self.state_slots[:, :, columns] = 0.0
        self.width += q_length
        self.counts = [count + q_length for count in self.counts]
        self.seen = [seen + q_length for seen in self.seen]

    def mark_prompts(self, seen_before: list[int]) -> None:
        """After a chunk (and its padding): rows that had seen nothing before it took it as their prompt."""
        self.prompts = [seen if before == 0 else prompt
                        for seen, before, prompt in zip(self.seen, seen_before, self.prompts)]

    def prompt_slots(self, rows: list[int], slots: torch.Tensor) -> torch.Tensor:
        """(rows, kv_heads, count) bool: which of `slots` (column indices per row and head) of rows `rows` hold
        a token of the row's prompt (position below its prompt length; -1 holds none)."""
        positions = self.position_slots[device_index(rows, self.device), :, :self.width].gather(2, slots)
        return (positions >= 0) & (positions < device_index([self.prompts[r] for r in rows], self.device)[:, None, None])

    def mark_padding(self, chunk_valid: torch.Tensor) -> None:
        """The last chunk's token validity (batch, q): pad tokens hold no slot and are not seen. Reads the
        per-row counts back to the host (padded chunks are prompts, not the decode loop)."""
        q_length = chunk_valid.shape[1]
        self.valid_slots[:, :, self.width - q_length:self.width] = chunk_valid[:, None, :]
        for row, pad in enumerate((~chunk_valid).sum(-1).tolist()):
            self.counts[row] -= pad
            self.seen[row] -= pad

    def write_positions(self, position_ids: torch.Tensor) -> None:
        """Positions (batch or 1, q) of the last chunk's tokens, as the model's rotary embedding used them."""
        q_length = position_ids.shape[-1]
        self.position_slots[:, :, self.width - q_length:self.width] = position_ids.expand(self.batch, q_length)[:, None]

    def mask(self, q_length: int) -> torch.Tensor | None:
        """Boolean (batch, kv_heads, q, width) attention mask of the last chunk's queries over the slots in use:
        valid slots, causal inside the chunk, and every query sees its own slot (pad queries, whose output
        is unused, never produce NaN). None when nothing needs masking (one query, every slot valid)."""
        width = self.width
        if q_length == 1:   # a decode step: its own slot is the newest, valid one
            return None if self.all_valid() else self.valid[:, :, None, :]
        slots = torch.arange(width, device=self.device)
        last = width - q_length + torch.arange(q_length, device=self.device)
        causal = slots[None, :] <= last[:, None]
        own = slots[None, :] == last[:, None]
        return causal[None, None] & self.valid[:, :, None, :] | own[None, None]

    # -- rearranging slots -----------------------------------------------------------------------
    def rearrange(self, index: torch.Tensor, counts: list[int], keep: torch.Tensor | None = None) -> None:
        """Row r, KV head h keeps the slots index[r, h] (ascending; the last counts[r] are its tokens), moved
        to columns [0, index.shape[-1]). `keep` (batch, kv_heads, width) bool: entries to empty although
        their slot holds a token (False), where head budgets vary."""
        width = index.shape[-1]

        def take(slots, dim):
            return slots[:, :, :self.width].gather(2, index[..., None].expand(-1, -1, -1, dim))

        keys, values = take(self.key_slots, self.key_slots.shape[-1]), take(self.value_slots, self.value_slots.shape[-1])
        positions = self.position_slots[:, :, :self.width].gather(2, index)
        state = None if self.state_slots is None else self.state_slots[:, :, :self.width].gather(2, index)
        valid = (torch.arange(width, device=self.device)[None, :] >= (
            width - device_index(counts, self.device))[:, None])[:, None, :] & self.valid.gather(2, index)
        if keep is not None:
            valid &= keep
        if self.bound is not None and self.capacity > self.bound >= width:  # after a prompt longer than the bound
            self._reallocate(self.bound)
        self.key_slots[:, :, :width] = keys
        self.value_slots[:, :, :width] = values
        self.position_slots[:, :, :width] = positions.masked_fill_(~valid, -1)
        if state is not None:
            self.state_slots[:, :, :width] = state.masked_fill_(~valid, 0.0)
        self.valid_slots[:, :, :width] = valid
        self.valid_slots[:, :, width:] = True
        self.width, self.counts = width, list(counts)

    def right_align(self) -> None:
        """Restore the layout invariant after a padded chunk: each row's tokens in its last columns."""
        steps = torch.arange(self.width, device=self.device)
        order = torch.argsort(self.valid.long() * self.width + steps, dim=-1)   # holes first, then tokens
        width = max(self.counts, default=0)
        self.rearrange(order[:, :, self.width - width:], self.counts)

    def _reserve(self, needed: int) -> None:
        if needed > self.capacity:
            self._reallocate(self._capacity_for(self.bound, needed))

    def _reallocate(self, capacity: int) -> None:
        keep = min(capacity, self.capacity)

        def moved(slots):
            out = slots.new_empty(slots.shape[:2] + (capacity,) + slots.shape[3:])
            out[:, :, :keep] = slots[:, :, :keep]
            return out

        self.key_slots, self.value_slots, self.position_slots = (
            moved(self.key_slots), moved(self.value_slots), moved(self.position_slots))
        if self.state_slots is not None:
            self.state_slots = moved(self.state_slots)
        valid = self.valid_slots.new_ones(self.batch, self.valid_slots.shape[1], capacity)
        valid[:, :, :keep] = self.valid_slots[:, :, :keep]
        self.valid_slots = valid

    # -- rows ------------------------------------------------------------------------------------
    @staticmethod
    def gather(parts: list[tuple["SlotStore", list[int] | None]]) -> "SlotStore":
        """One new store with, in order, the rows `indices` of each (store, indices) part (None: all its
        rows), in one copy. Each part is right-aligned at the new width (the largest count selected) and
        left-padded with empty columns."""
        parts = [(store, list(range(store.batch)) if indices is None else list(indices)) for store, indices in parts]
        counts = [store.counts[i] for store, indices in parts for i in indices]
        width = max(counts, default=0)
        first = parts[0][0]
        out = SlotStore.empty(len(counts), first.key_slots.shape[1], first.key_slots.shape[-1],
                              first.value_slots.shape[-1], first.key_slots.dtype, first.device, first.bound, width,
                              first.state_slots is not None, first.head_holes)
        start = 0
        for store, indices in parts:
            if not indices:
                continue
            part = max(store.counts[i] for i in indices)   # the columns these rows use
            columns, source_columns = slice(width - part, width), slice(store.width - part, store.width)
            for offset, first, count, step in _runs(indices):
                rows = slice(start + offset, start + offset + count)
                source = slice(first, first + (count if step else 1))   # step 0: one row, broadcast
                out.key_slots[rows, :, columns] = store.key_slots[source, :, source_columns]
                out.value_slots[rows, :, columns] = store.value_slots[source, :, source_columns]
                out.position_slots[rows, :, columns] = store.position_slots[source, :, source_columns]
                out.valid_slots[rows, :, columns] = store.valid_slots[source, :, source_columns]
                if out.state_slots is not None:
                    out.state_slots[rows, :, columns] = store.state_slots[source, :, source_columns]
            rows, empty = slice(start, start + len(indices)), slice(0, width - part)
            out.key_slots[rows, :, empty] = 0
            out.value_slots[rows, :, empty] = 0
            out.valid_slots[rows, :, empty] = False
            start += len(indices)
        out.width, out.counts = width, counts
        out.seen = [store.seen[i] for store, indices in parts for i in indices]
        out.prompts = [store.prompts[i] for store, indices in parts for i in indices]
        return out


def _runs(indices: list[int]) -> list[tuple[int, int, int, int]]:
    """`indices` as maximal runs (offset in indices, first row, count, step): consecutive rows (step 1) or
    one row repeated (step 0), so `gather` copies each run through slices, without a temporary."""
    runs: list[tuple[int, int, int, int]] = []
    for offset, index in enumerate(indices):
        if runs:
            run_offset, first, count, step = runs[-1]
            if count == 1 and index in (first, first + 1):
                runs[-1] = (run_offset, first, 2, index - first)
                continue
            if count > 1 and index == first + step * count:
                runs[-1] = (run_offset, first, count + 1, step)
                continue
        runs.append((offset, index, 1, 1))
    return runs
