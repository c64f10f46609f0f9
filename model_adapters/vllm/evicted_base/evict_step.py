"""What one evicted layer does in one forward step, per request: append, attend, keep the query ring, observe,
compress. The same schedule and the same selections as the transformers evicting cache
(`model_adapters/hf/evicting_layer.py`), on vLLM's state blocks.

Requests that decode one token over a block that already holds some (`seen_before > 0`) go through
`decode_rows` together; every other request (a prompt, an appended chunk, a one-token prompt) through
`chunk_row`. Whether a request compresses is decided from host integers (its slot count, the tokens it had
seen), so neither path reads a value back from the device.
"""

import torch

from kvrescue_eval.eviction import CacheView, EvictionSchedule, output_projection_heads

from .state_block import BlockViews


def grouped_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None,
                      scaling: float) -> torch.Tensor:
    """sdpa over grouped KV heads: query (rows, q_heads, q, dim), keys/values (rows, kv_heads, L, dim), mask
    (rows, kv_heads or 1, q, L) bool or None; the query heads of a KV head stacked on the query axis (as the
    transformers evicting attention does). Returns (rows, q_heads, q, dim)."""
    rows, heads, q_length, dim = query.shape
    kv_heads = keys.shape[1]
    group = heads // kv_heads
    stacked = query.reshape(rows, kv_heads, group * q_length, dim)
    if mask is not None and q_length > 1:
        mask = mask.repeat(1, 1, group, 1)
    out = torch.nn.functional.scaled_dot_product_attention(stacked, keys, values, attn_mask=mask, scale=scaling)
    return out.view(rows, heads, q_length, -1)


def _rows(slots: torch.Tensor, blocks: list[int], block_index: torch.Tensor, width: int) -> torch.Tensor:
    """The first `width` slots of the blocks (blocks, kv_heads, width, dim): a view where the block ids are
    consecutive (one row always is), else a copy. Advanced indexing copied them at every step, the largest cost
    of a decode step over 576 slots on CPU (docs/performance.md, Long contexts)."""
    first = blocks[0]
    if blocks == list(range(first, first + len(blocks))):
        return slots[first:first + len(blocks), :, :width]
    return slots[:, :, :width].index_select(0, block_index)


class LayerStep:
    """One layer's schedule and place (`layer` of `num_layers`), applied to its blocks; `out_proj`: the layer's
    o_proj weight (hidden, q_heads * head_dim), which value-aware evictors read (None: not handed)."""

    def __init__(self, schedule: EvictionSchedule, layer: int, num_layers: int, scaling: float,
                 out_proj: torch.Tensor | None = None):
        self.schedule, self.layer, self.num_layers, self.scaling = schedule, layer, num_layers, scaling
        self.out_proj = out_proj

    def _where(self) -> tuple[int, int]:
        return self.layer, self.num_layers

    # -- decode: one token per request, batched -----------------------------------------------------------
    def decode_rows(self, views: BlockViews, blocks: list[int], counts: list[int], query: torch.Tensor,
                    key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        """query (B, q_heads, dim), key/value (B, kv_heads, dim) of one new token per request. Returns the
        attention output (B, q_heads, dim) and the requests' slot counts after the step."""
        device, rows = query.device, len(blocks)
        block_index = torch.tensor(blocks, dtype=torch.long).to(device, non_blocking=True)
        count_index = torch.tensor(counts, dtype=torch.long).to(device, non_blocking=True)
        heads = torch.arange(key.shape[1], device=device)
        at = (block_index[:, None], heads[None, :], count_index[:, None])
        views.keys[at], views.values[at] = key, value
        if views.state is not None:
            views.state[at] = 0.0
        if views.valid is not None:
            views.valid[at] = True
        if views.prompt is not None:
            views.prompt[at] = False
        width = max(counts) + 1
        keys, values = _rows(views.keys, blocks, block_index, width), _rows(views.values, blocks, block_index, width)
        mask = None
        if len(set(counts)) > 1 or views.valid is not None:
            mask = (torch.arange(width, device=device)[None, :] <= count_index[:, None])[:, None, None, :]
            if views.valid is not None:
                mask = mask & views.valid[block_index, :, None, :width]
        out = grouped_attention(query[:, :, None], keys, values, mask, self.scaling)[:, :, 0]
        ring = views.queries[block_index]
        views.queries[block_index] = torch.cat([ring[:, :, 1:], query[:, :, None]], dim=2)
        new_counts = [count + 1 for count in counts]
        groups: dict[int, list[int]] = {}
        for row, count in enumerate(new_counts):
            groups.setdefault(count, []).append(row)
        for count, members in groups.items():
            picked = slice(None) if len(members) == rows else torch.tensor(members, device=device)
            member_blocks = block_index[picked]
            if self.schedule.keeps_state:
                valid = None if views.valid is None else views.valid[member_blocks, :, :count]
                views.state[member_blocks, :, :count] = self.schedule.observe(
                    views.state[member_blocks, :, :count], query[picked][:, :, None], keys[picked][:, :, :count], valid)
            if self.schedule.compresses(count, 1, *self._where()):
                kept = self._compress(views, member_blocks, count)
                for row in members:
                    new_counts[row] = kept
        return out, new_counts

    # -- a chunk of one request (a prompt or an appended chunk) ------------------------------------------
    def chunk_row(self, views: BlockViews, block: int, count: int, seen_before: int, query: torch.Tensor,
                  key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, int]:
        """query (q_heads, T, dim), key/value (kv_heads, T, dim) of the request's T new tokens; `count`: slots
        its block holds (0 for a new request). Returns the output (q_heads, T, dim) and the new count."""
        device, q_length = query.device, query.shape[1]
        length = count + q_length
        keys = torch.cat([views.keys[block, :, :count], key], dim=1)[None]
        values = torch.cat([views.values[block, :, :count], value], dim=1)[None]
        valid = None
        if views.valid is not None:
            valid = torch.cat([views.valid[block, :, :count], key.new_ones(key.shape[0], q_length, dtype=torch.bool)],
                              dim=1)[None]
        out = self._chunk_attention(query, keys, values, count, valid)
        prompt = None
        if views.prompt is not None:   # a request's first chunk is its prompt (chunked prefill is refused)
            prompt = torch.cat([views.prompt[block, :, :count], key.new_full((key.shape[0], q_length), seen_before == 0,
                                                                              dtype=torch.bool)], dim=1)[None]
        window = self.schedule.window
        ring = (views.queries[block] if seen_before > 0 else query.new_zeros(query.shape[0], window, query.shape[2]))
        views.queries[block] = (torch.cat([ring[:, q_length:], query], dim=1) if q_length < window
                                else query[:, -window:])
        state = None
        if self.schedule.keeps_state:
            state = torch.cat([views.state[block, :, :count], key.new_zeros(key.shape[0], q_length, dtype=torch.float32)],
                              dim=1)[None]
            state = self.schedule.observe(state, query[None], keys, valid)
        if self.schedule.compresses(length, seen_before, *self._where()):
            return out, self._select_and_write(views, torch.tensor([block], device=device), keys, values, state, valid,
                                               views.queries[block][None], prompt)
        views.keys[block, :, count:length], views.values[block, :, count:length] = key, value
        if prompt is not None:
            views.prompt[block, :, count:length] = prompt[0, :, count:]
        if state is not None:
            views.state[block, :, :length] = state[0]
        if views.valid is not None:
            views.valid[block, :, count:length] = True
        return out, length

    def _chunk_attention(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, count: int,
                         valid: torch.Tensor | None) -> torch.Tensor:
        """Causal attention of a chunk's queries (q_heads, T, dim) over the `count` kept slots and the chunk.
        A prompt (count 0, every slot valid) takes sdpa's own causal kernel: a (T, T) mask per query head
        would be 3 GB for a 32K-token prompt with 3 query heads per KV head, and the masked kernel 3x slower."""
        if count == 0 and valid is None:
            return torch.nn.functional.scaled_dot_product_attention(query[None], keys, values, is_causal=True,
                                                                    enable_gqa=True, scale=self.scaling)[0]
        q_length, device = query.shape[1], query.device
        slots = torch.arange(count + q_length, device=device)
        own = count + torch.arange(q_length, device=device)
        mask = (slots[None, :] <= own[:, None])[None, None]
        if valid is not None:
            mask = mask & valid[:, :, None, :] | (slots[None, :] == own[:, None])[None, None]
        return grouped_attention(query[None], keys, values, mask, self.scaling)[0]

    # -- compression ----------------------------------------------------------------------------------
    def _compress(self, views: BlockViews, blocks: torch.Tensor, count: int) -> int:
        """Compress blocks that each hold `count` slots, in place."""
        state = None if views.state is None else views.state[blocks, :, :count]
        valid = None if views.valid is None else views.valid[blocks, :, :count]
        prompt = None if views.prompt is None else views.prompt[blocks, :, :count]
        return self._select_and_write(views, blocks, views.keys[blocks, :, :count], views.values[blocks, :, :count],
                                      state, valid, views.queries[blocks], prompt)

    def _select_and_write(self, views: BlockViews, blocks: torch.Tensor, keys, values, state, valid, queries,
                          prompt=None) -> int:
        """The schedule's selection over (rows, kv_heads, L) slots, written to the blocks' first columns."""
        out_proj = None if self.out_proj is None else output_projection_heads(self.out_proj, queries.shape[1])
        kept = self.schedule.select(CacheView(queries, keys, self.schedule.window, values, state, valid, *self._where(),
                                              prompt, out_proj))
        index = kept.index
        width = index.shape[-1]

        def take(slots):
            return slots.gather(2, index[..., None].expand(-1, -1, -1, slots.shape[-1]))

        views.keys[blocks, :, :width], views.values[blocks, :, :width] = take(keys), take(values)
        if prompt is not None:
            views.prompt[blocks, :, :width] = prompt.gather(2, index)
        if views.valid is not None:
            kept_valid = valid.gather(2, index) if kept.valid is None else kept.valid & valid.gather(2, index)
            views.valid[blocks, :, :width] = kept_valid
            views.valid[blocks, :, width:] = True
        if state is not None:
            kept_state = state.gather(2, index)
            if views.valid is not None:
                kept_state = kept_state.masked_fill(~views.valid[blocks, :, :width], 0.0)
            views.state[blocks, :, :width] = kept_state
        return width
