"""The engine's policy interface on a transformers causal LM (base with eviction, or full-KV helper).

State per problem: the committed cache with the logits of the next token. Candidate rows live in
row groups: rows of one problem forked together, with equal logical lengths, decoded in one batched
forward pass per group. When some rows of a group finish, the group is split (finished rows are
parked with their cache until commit), so a group stays rectangular and eviction stays per row.

`batch_problems=False`: one forward pass per problem and token, so a problem's numbers never depend
on what else is in flight and continuous batching gives bit-identical trajectories to running it
alone. `batch_problems=True`: the groups of all problems go through one forward pass (their caches
concatenated, shorter ones left-padded with masked slots, each row evicting on its own schedule),
which is faster (weights are read once per token); a row's logits then differ from running alone by
float rounding only (tested < 1e-5 in float32), which can flip a sampled token only when a uniform
draw falls within that distance of a cumulative-probability boundary. The joined cache persists
across tokens: groups are copied in when they start decoding and out when they stop (rows end,
commit, abort), not joined and split around every forward pass.
"""

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import torch

from kvrescue_eval.engine.sampling import SamplingParams, make_generator, sample


@dataclass(eq=False)
class RowGroup:
    key: Hashable
    rows: list            # row handles, one per batch row of `cache`
    cache: object         # a transformers Cache with batch = len(rows); None while in the joined batch
    logits: torch.Tensor  # (len(rows), vocab) next-token logits
    length: int           # logical length (tokens seen) of every row


def tokenizer_fingerprint(tokenizer) -> str:
    """Equal for tokenizers that map text to the same ids (vocabulary and special tokens)."""
    payload = json.dumps([sorted(tokenizer.get_vocab().items()), type(tokenizer).__name__,
                          tokenizer.all_special_tokens], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def render_prompt(tokenizer, conversation) -> list[int]:
    """The model's own chat template with a generation prompt; plain text when it has none."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(list(conversation), add_generation_prompt=True, tokenize=False)
    else:
        text = "".join(f"{m['content']}\n\n" for m in conversation)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def eos_ids(model, tokenizer) -> frozenset:
    ids = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if value is not None:
            ids.update(value if isinstance(value, (list, tuple)) else [value])
    return frozenset(int(i) for i in ids)


class HFPolicy:
    """A transformers model as an engine policy. `new_cache()` returns an empty
    `model_adapters.evicting_cache.EvictingCache` (budget=None for full KV); the policy uses its row
    operations `fork`, `select` and `next_positions`."""

    def __init__(self, model, tokenizer, sampling: SamplingParams, new_cache: Callable[[], object],
                 name: str = "policy", batch_problems: bool = False):
        self.model, self.tokenizer, self.sampling, self.new_cache, self.name = (
            model.eval(), tokenizer, sampling, new_cache, name)
        self.batch_problems = batch_problems
        self.device = next(model.parameters()).device
        self.tokenizer_key = tokenizer_fingerprint(tokenizer)
        self.eos_token_ids = eos_ids(model, tokenizer)
        self.committed: dict[Hashable, RowGroup] = {}
        self.groups: dict[Hashable, list[RowGroup]] = {}   # candidate row groups per problem
        self.group_of: dict[Hashable, RowGroup] = {}       # row -> its group
        self.generators: dict[Hashable, torch.Generator] = {}
        self._row_ids = itertools.count()
        self._joined: list[RowGroup] = []   # batch_problems: groups whose rows live in `_joined_cache`, in order
        self._joined_cache = None

    # -- committed state -------------------------------------------------------------------------
    @torch.inference_mode()
    def start(self, key, conversation) -> int:
        ids = render_prompt(self.tokenizer, conversation)
        cache = self.new_cache()
        self.committed[key] = RowGroup(key, [None], cache, self._forward([ids], cache), len(ids))
        self.groups[key] = []
        return len(ids)

    def length(self, key) -> int:
        return self.committed[key].length

    @torch.inference_mode()
    def append(self, key, text: str, token_ids: Sequence[int] | None = None) -> list[int]:
        self._drop_rows(key)
        ids = list(token_ids) if token_ids is not None else self.tokenizer(
            text, add_special_tokens=False)["input_ids"]
        if ids:
            state = self.committed[key]
            state.logits = self._forward([ids], state.cache)
            state.length += len(ids)
        return ids

    def next_token_logits(self, key) -> torch.Tensor:
        """(vocab,) logits of the token after the committed state (float32)."""
        return self.committed[key].logits[0]

    def cache_of(self, key):
        """The committed cache of a problem (batch 1)."""
        return self.committed[key].cache

    def commit(self, key, row) -> None:
        group = self.group_of[row]
        self._leave([group])
        cache, logits = self._take(group, [group.rows.index(row)])
        self.committed[key] = RowGroup(key, [None], cache, logits, group.length)
        self._drop_rows(key)

    def release(self, key) -> None:
        self._drop_rows(key)
        self.committed.pop(key, None)
        self.groups.pop(key, None)

    def decode_text(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    # -- candidate rows --------------------------------------------------------------------------
    def fork(self, key, seeds: Sequence[int]) -> list:
        state = self.committed[key]
        cache = state.cache.fork(len(seeds))
        rows = [next(self._row_ids) for _ in seeds]
        group = RowGroup(key, rows, cache, state.logits.repeat(len(seeds), 1), state.length)
        self.groups[key].append(group)
        for row, seed in zip(rows, seeds):
            self.group_of[row] = group
            self.generators[row] = make_generator(seed)
        return rows

    @torch.inference_mode()
    def decode(self, rows: Sequence) -> tuple[list[int], list[float]]:
        wanted = set(rows)
        groups = []
        for group in {id(self.group_of[r]): self.group_of[r] for r in rows}.values():
            groups.append(self._park_finished(group, wanted) if any(r not in wanted for r in group.rows) else group)
        if self.batch_problems:
            return self._decode_joined(groups, rows)
        out = {}
        for group in groups:  # one forward pass per problem
            tokens, entropies = sample(group.logits, self.sampling, [self.generators[r] for r in group.rows])
            group.logits = self._forward([[t] for t in tokens], group.cache)
            group.length += 1
            out.update({r: (t, e) for r, t, e in zip(group.rows, tokens, entropies)})
        return [out[r][0] for r in rows], [out[r][1] for r in rows]

    def _decode_joined(self, groups: list[RowGroup], rows: Sequence) -> tuple[list[int], list[float]]:
        """One token for every row of `groups` in one forward pass over the persistent joined cache."""
        self._leave([g for g in self._joined if not any(g is x for x in groups)])
        new = [g for g in groups if not any(g is x for x in self._joined)]
        if new:
            parts = ([self._joined_cache] if self._joined else []) + [g.cache for g in new]
            self._joined_cache = parts[0] if len(parts) == 1 else type(parts[0]).concat(parts)
            self._joined += new
            for group in new:
                group.cache = None
        batch = self._joined
        members = [r for group in batch for r in group.rows]
        tokens, entropies = sample(torch.cat([g.logits for g in batch]), self.sampling,
                                   [self.generators[r] for r in members])
        logits = self._forward([[t] for t in tokens], self._joined_cache)
        for group, part in zip(batch, logits.split([len(g.rows) for g in batch])):
            group.logits = part
            group.length += 1
        out = {r: (t, e) for r, t, e in zip(members, tokens, entropies)}
        return [out[r][0] for r in rows], [out[r][1] for r in rows]

    def _leave(self, groups: list[RowGroup], keep_cache: bool = True) -> None:
        """Take these groups out of the joined batch (those in it), each with its own copy of its rows."""
        spans, start = {}, 0
        for group in self._joined:
            spans[id(group)] = torch.arange(start, start + len(group.rows), device=self.device)
            start += len(group.rows)
        leaving = {id(g) for g in groups if id(g) in spans}
        if not leaving:
            return
        for group in self._joined:
            if id(group) in leaving and keep_cache:  # the whole batch is handed over without a copy
                group.cache = (self._joined_cache if len(self._joined) == 1
                               else self._joined_cache.select(spans[id(group)]))
        self._joined = [g for g in self._joined if id(g) not in leaving]
        self._joined_cache = (self._joined_cache.select(torch.cat([spans[id(g)] for g in self._joined]))
                              if self._joined else None)

    def abort(self, rows: Sequence) -> None:
        for row in rows:
            self._leave([self.group_of[row]])
            group = self.group_of.pop(row)
            self.generators.pop(row, None)
            keep = [i for i, r in enumerate(group.rows) if r != row]
            if keep:
                group.cache = group.cache.select(torch.tensor(keep, device=self.device))
                group.logits = group.logits[keep]
                group.rows = [group.rows[i] for i in keep]
            else:
                self.groups[group.key].remove(group)

    # -- internals -------------------------------------------------------------------------------
    def _forward(self, batch_ids: list[list[int]], cache) -> torch.Tensor:
        input_ids = torch.tensor(batch_ids, dtype=torch.long, device=self.device)
        positions = cache.next_positions(input_ids.shape[1]) if cache.get_seq_length() else None
        out = self.model(input_ids=input_ids, past_key_values=cache, position_ids=positions, use_cache=True,
                         logits_to_keep=1)
        return out.logits[:, -1].float()

    def _take(self, group: RowGroup, indices: list[int]):
        """A copy of some rows of a group: (cache, logits)."""
        return group.cache.select(torch.tensor(indices, device=self.device)), group.logits[indices].clone()

    def _park_finished(self, group: RowGroup, wanted: set) -> RowGroup:
        """Split `group` into the rows still decoding (returned) and the finished rows (parked)."""
        self._leave([group])
        live = [i for i, r in enumerate(group.rows) if r in wanted]
        done = [i for i, r in enumerate(group.rows) if r not in wanted]
        cache, logits = self._take(group, done)
        parked = RowGroup(group.key, [group.rows[i] for i in done], cache, logits, group.length)
        group.cache = group.cache.select(torch.tensor(live, device=self.device))
        group.logits = group.logits[live]
        group.rows = [group.rows[i] for i in live]
        self.groups[group.key].append(parked)
        for row in parked.rows:
            self.group_of[row] = parked
        return group

    def _drop_rows(self, key) -> None:
        self._leave(self.groups.get(key, []), keep_cache=False)
        for group in self.groups.get(key, []):
            for row in group.rows:
                self.group_of.pop(row, None)
                self.generators.pop(row, None)
        if key in self.groups:
            self.groups[key] = []
