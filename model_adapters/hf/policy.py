"""The engine's policy interface on a transformers causal LM (base with eviction, or full-KV helper).

State per problem: the committed state (a `Row` in a `RowBatch` of one: its cache and the logits of the
next token). Candidate rows are owned by a `RowTable` (see `rows.py`): forked rows wait until their
first decode, then join the decoding batch; rows the engine stops asking for (finished) move out to wait
for commit, abort or append. The decoding batch persists across tokens.

`batch_problems=False`: one decoding batch, so one forward pass, per problem and token, so a problem's
numbers never depend on what else is in flight and continuous batching gives bit-identical
trajectories to running it alone. `batch_problems=True`: the rows of all problems go through one
forward pass (their caches concatenated, shorter ones left-padded with empty slots, each row evicting on
its own schedule), which is faster (weights are read once per token); a row's logits then differ from
running alone by float rounding only (tested < 1e-5 in float32), which can flip a sampled token only
when a uniform draw falls within that distance of a cumulative-probability boundary.

A decode step reads the device once (the sampled tokens' candidates and entropies, in `sample`); the
tokens go back through a non-blocking copy.
"""

import itertools
from typing import Callable, Hashable, Sequence

import torch

from kvrescue_eval.engine.sampling import SamplingParams, make_generator, sample_rows

from ..prompts import render_prompt, tokenizer_fingerprint
from .kv_slots import device_index
from .rows import Row, RowBatch, RowTable


def eos_ids(model, tokenizer) -> frozenset:
    ids = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if value is not None:
            ids.update(value if isinstance(value, (list, tuple)) else [value])
    return frozenset(int(i) for i in ids)


class HFPolicy:
    """A transformers model as an engine policy. `new_cache()` returns an empty
    `model_adapters.hf.evicting_cache.EvictingCache` (budget=None for full KV); the policy uses its row
    operations `fork`, `select`, `gather` and `next_positions`."""

    def __init__(self, model, tokenizer, sampling: SamplingParams, new_cache: Callable[[], object],
                 name: str = "policy", batch_problems: bool = False, thinking: bool = False):
        self.model, self.tokenizer, self.sampling, self.new_cache, self.name = (
            model.eval(), tokenizer, sampling, new_cache, name)
        self.thinking = thinking  # prompts in thinking mode (prompts.render_prompt)
        self.max_cache_slots = 0  # the most slots per row and KV head any forward pass left in a cache
        self.batch_problems = batch_problems
        self.device = next(model.parameters()).device
        self.tokenizer_key = tokenizer_fingerprint(tokenizer)
        self.eos_token_ids = eos_ids(model, tokenizer)
        self.committed: dict[Hashable, RowBatch] = {}
        self.sampling_of: dict[Hashable, SamplingParams] = {}  # each problem's own (start)
        self.table = RowTable(batch_problems)
        self._handles = itertools.count()

    # -- committed state -------------------------------------------------------------------------
    @torch.inference_mode()
    def start(self, key, conversation, sampling=None) -> int:
        ids = render_prompt(self.tokenizer, conversation, self.thinking)
        self.sampling_of[key] = sampling or self.sampling
        cache = self.new_cache()
        self.committed[key] = RowBatch([Row(key, None, len(ids))], cache, self._forward(cache, [ids]))
        return len(ids)

    def length(self, key) -> int:
        return self.committed[key].rows[0].length

    @torch.inference_mode()
    def append(self, key, text: str, token_ids: Sequence[int] | None = None) -> list[int]:
        self.table.remove_problem(key)
        ids = list(token_ids) if token_ids is not None else self.tokenizer(
            text, add_special_tokens=False)["input_ids"]
        if ids:
            state = self.committed[key]
            state.logits = self._forward(state.cache, [ids])
            state.rows[0].length += len(ids)
        return ids

    def commit(self, key, handle) -> None:
        row = self.table.rows[handle]
        cache, logits = self.table.copy_state(handle)
        self.committed[key] = RowBatch([Row(key, None, row.length)], cache, logits)
        self.table.remove_problem(key)

    def release(self, key) -> None:
        self.table.remove_problem(key)
        self.committed.pop(key, None)
        self.sampling_of.pop(key, None)

    def decode_text(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    # -- candidate rows --------------------------------------------------------------------------
    def fork(self, key, seeds: Sequence[int]) -> list:
        state = self.committed[key]
        length = state.rows[0].length
        rows = [Row(key, next(self._handles), length, make_generator(seed)) for seed in seeds]
        self.table.add(RowBatch(rows, state.cache.fork(len(seeds)), state.logits.repeat(len(seeds), 1)))
        return [row.handle for row in rows]

    @torch.inference_mode()
    def decode(self, handles: Sequence) -> tuple[list[int], list[float]]:
        drawn = {}
        for batch in self.table.decode_batches(handles):
            tokens, entropies = sample_rows(batch.logits, [self.sampling_of[row.key] for row in batch.rows],
                                            [row.generator for row in batch.rows])
            batch.logits = self._forward(batch.cache, [[token] for token in tokens])
            for row, token, entropy in zip(batch.rows, tokens, entropies):
                row.length += 1
                row.tokens.append(token)
                drawn[row.handle] = token, entropy
        return [drawn[h][0] for h in handles], [drawn[h][1] for h in handles]

    def abort(self, handles: Sequence) -> None:
        self.table.remove(handles)

    # -- internals -------------------------------------------------------------------------------
    def _forward(self, cache, batch_ids: list[list[int]]) -> torch.Tensor:
        width = len(batch_ids[0])
        input_ids = device_index([i for ids in batch_ids for i in ids], self.device).view(len(batch_ids), width)
        positions = cache.next_positions(width) if cache.get_seq_length() else None
        out = self.model(input_ids=input_ids, past_key_values=cache, position_ids=positions, use_cache=True,
                         logits_to_keep=1)
        self.max_cache_slots = max(self.max_cache_slots, cache.physical_size)
        return out.logits[:, -1].float()
