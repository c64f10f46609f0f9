"""Committed prefixes kept as KV caches per trajectory, and batched forwards of new tokens after them.

A scorer turns each candidate into token ids (the full rendered input, tokenized at once so the
ids are exactly those of the whole string) and names the part it wants cached: the longest prefix
shared with the committed trajectory. Only the rest of each row runs through the model, after the
cached keys and values, in batches of rows of one trajectory that share the prefix without a copy (their
new tokens right-padded), so each row computes exactly what it would alone.
"""

from dataclasses import dataclass, field
from typing import Callable, Hashable, Sequence

import torch


@dataclass
class Prefix:
    ids: list[int] = field(default_factory=list)
    layers: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # (1, heads, len, dim)

    def truncated(self, length: int) -> "Prefix":
        if length >= len(self.ids):
            return self
        if length == 0:
            return Prefix()
        return Prefix(self.ids[:length], [(k[:, :, :length], v[:, :, :length]) for k, v in self.layers])


@dataclass
class ScoredRow:
    """One input row of a scorer's forward pass: a cached context and the tokens to run after it."""
    prefix: Prefix        # cached context (may be empty)
    new_ids: list[int]    # tokens to run after it (at least one)


def common_prefix_length(*sequences: Sequence[int]) -> int:
    length = min(len(s) for s in sequences)
    first = sequences[0]
    for i in range(length):
        if any(s[i] != first[i] for s in sequences[1:]):
            return i
    return length


class PrefixCache:
    """`model(input_ids, attention_mask, position_ids, past_key_values, use_cache)` must return an
    object with `.logits` (batch, tokens, classes) and `.past_key_values` (a transformers Cache)."""

    def __init__(self, model, *, max_batch_rows: int = 16, max_batch_tokens: int = 4096):
        if max_batch_rows < 1 or max_batch_tokens < 1:
            raise ValueError(f"max_batch_rows ({max_batch_rows}) and max_batch_tokens ({max_batch_tokens}) "
                             f"must be >= 1")
        self.model = model
        self.max_batch_rows = max_batch_rows
        self.max_batch_tokens = max_batch_tokens
        self.prefixes: dict[Hashable, Prefix] = {}

    def __len__(self):
        return len(self.prefixes)

    def release(self, key: Hashable) -> None:
        self.prefixes.pop(key, None)

    def prefix(self, key: Hashable, ids: Sequence[int]) -> Prefix:
        """The cached prefix of `key` made to hold exactly `ids`: the part shared with what is cached
        is kept (any divergence drops the rest), the remainder is computed in one forward."""
        ids = list(ids)
        cached = self.prefixes.get(key, Prefix())
        kept = cached.truncated(common_prefix_length(cached.ids, ids))
        if len(kept.ids) < len(ids):
            kept = self._extend(kept, ids[len(kept.ids):])
        self.prefixes[key] = kept
        return kept

    def _extend(self, prefix: Prefix, new_ids: list[int]) -> Prefix:
        device = self._device()
        past = len(prefix.ids)
        with torch.inference_mode():
            out = self.model(
                input_ids=torch.tensor([new_ids], device=device),
                attention_mask=torch.ones(1, past + len(new_ids), dtype=torch.long, device=device),
                position_ids=torch.arange(past, past + len(new_ids), device=device)[None],
                past_key_values=_cache_from(prefix.layers), use_cache=True)
        layers = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        return Prefix(prefix.ids + new_ids, layers)

    def run(self, rows: Sequence[ScoredRow], reduce: Callable[[int, torch.Tensor], object]) -> list:
        """`reduce(i, logits)` of every row, where `logits` (len(new_ids), classes) are the model's
        outputs at the row's new tokens. A batch holds rows of one trajectory (one prefix), by similar
        length: they share the cached keys and values without a copy. Mixing trajectories would copy
        every prefix into a left-padded batch and attend over the padding, while a trajectory's
        candidates alone already make a prefill-sized, compute-bound batch."""
        if any(not row.new_ids for row in rows):
            raise ValueError("every row needs at least one new token to run")
        results = [None] * len(rows)
        first_seen: dict[int, int] = {}
        for i, row in enumerate(rows):
            first_seen.setdefault(id(row.prefix), i)
        order = sorted(range(len(rows)), key=lambda i: (first_seen[id(rows[i].prefix)], len(rows[i].new_ids)))
        for chunk in self._chunks(order, rows):
            for i, logits in zip(chunk, self._forward([rows[i] for i in chunk])):
                results[i] = reduce(i, logits)
        return results

    def _chunks(self, order: list[int], rows: Sequence[ScoredRow]):
        chunk = []
        for i in order:
            longest = max([len(rows[j].new_ids) for j in chunk] + [len(rows[i].new_ids)])
            if chunk and (rows[chunk[0]].prefix is not rows[i].prefix or len(chunk) + 1 > self.max_batch_rows
                          or (len(chunk) + 1) * longest > self.max_batch_tokens):
                yield chunk
                chunk = []
            chunk.append(i)
        if chunk:
            yield chunk

    def _forward(self, rows: list[ScoredRow]) -> list[torch.Tensor]:
        """Logits at the new tokens of rows that share one prefix (new tokens right-padded)."""
        device, prefix = self._device(), rows[0].prefix
        past, width = len(prefix.ids), max(len(row.new_ids) for row in rows)
        input_ids = torch.zeros(len(rows), width, dtype=torch.long, device=device)
        mask = torch.zeros(len(rows), past + width, dtype=torch.long, device=device)
        for b, row in enumerate(rows):
            input_ids[b, :len(row.new_ids)] = torch.tensor(row.new_ids, device=device)
            mask[b, :past + len(row.new_ids)] = 1
        positions = torch.arange(past, past + width, device=device).expand(len(rows), -1)
        layers = [(k.expand(len(rows), -1, -1, -1), v.expand(len(rows), -1, -1, -1)) for k, v in prefix.layers]
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                             past_key_values=_cache_from(layers), use_cache=True)
        return [out.logits[b, :len(row.new_ids)] for b, row in enumerate(rows)]

    def _device(self):
        return next(self.model.parameters()).device


def _cache_from(layers):
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers) if layers else DynamicCache()
