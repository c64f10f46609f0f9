"""Rows, the batches that hold them, and the one owner that joins and splits them (the transformers policy's
bookkeeping, in the spirit of nano-vllm's `Sequence` and block manager).

A `Row` is one sequence of a problem: its committed state, or one candidate of the current step. A
`RowBatch` stacks the caches of some rows in one cache (row i is batch row i) with their next-token
logits. `RowTable` owns every candidate row: each lives in exactly one batch, which is either
  - a decoding batch: the rows that take the next token together (one for all problems, or one per
    problem), kept across tokens and changed only when rows start, finish, commit or abort, or
  - a waiting batch of its problem: forked and not decoded yet, or finished and waiting for commit.
Every row operation builds new cache tensors (`EvictingCache.select` / `concat`); no two batches
share mutable state.
"""

from dataclasses import dataclass, field
from typing import Hashable

import torch

from .kv_slots import device_index

FORKED, DECODING, FINISHED = "forked", "decoding", "finished"


@dataclass(eq=False)
class Row:
    key: Hashable                          # its problem
    handle: Hashable | None                # the engine's handle (None: a committed state)
    length: int                            # tokens seen
    generator: torch.Generator | None = None   # its random stream (candidates)
    status: str = FORKED
    tokens: list[int] = field(default_factory=list)   # tokens drawn in this step
    batch: "RowBatch | None" = field(default=None, repr=False)


class RowBatch:
    def __init__(self, rows: list[Row], cache, logits: torch.Tensor):
        self.rows, self.cache, self.logits = rows, cache, logits   # logits (len(rows), vocab), float32
        for row in rows:
            row.batch = self

    def __len__(self) -> int:
        return len(self.rows)

    def _positions(self, rows) -> list[int]:
        place = {id(row): i for i, row in enumerate(self.rows)}
        return [place[id(row)] for row in rows]

    def copy_state(self, rows: list[Row]):
        """(cache, logits): a copy of `rows`' state, in that order."""
        positions = self._positions(rows)
        return self.cache.select(positions), self.logits[device_index(positions, self.logits.device)]

    def take(self, rows: list[Row]) -> "RowBatch":
        """A new batch holding copies of `rows`' state; the rows move to it (drop them here afterwards)."""
        return RowBatch(list(rows), *self.copy_state(rows))

    def drop(self, rows: list[Row]) -> None:
        """Remove `rows` from this batch (their state here is discarded)."""
        gone = {id(row) for row in rows}
        keep = [i for i, row in enumerate(self.rows) if id(row) not in gone]
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        self.cache = self.cache.select(keep) if keep else None
        self.logits = self.logits[device_index(keep, self.logits.device)]

    @classmethod
    def join(cls, batches: list["RowBatch"]) -> "RowBatch":
        if len(batches) == 1:
            return batches[0]
        cache = type(batches[0].cache).concat([batch.cache for batch in batches])
        return cls([row for batch in batches for row in batch.rows], cache, torch.cat([b.logits for b in batches]))


class RowTable:
    def __init__(self, batch_problems: bool):
        self.batch_problems = batch_problems
        self.rows: dict[Hashable, Row] = {}              # handle -> row
        self.decoding: dict[Hashable, RowBatch] = {}     # None (all problems) or problem key -> batch
        self.waiting: dict[Hashable, list[RowBatch]] = {}

    def add(self, batch: RowBatch) -> None:
        """Newly forked rows (they wait until they are first decoded)."""
        for row in batch.rows:
            self.rows[row.handle] = row
        self.waiting.setdefault(batch.rows[0].key, []).append(batch)

    def decode_batches(self, handles) -> list[RowBatch]:
        """Make `handles` exactly the decoding rows and return the batches that hold them: decoding rows
        not asked for have finished (they wait for commit), asked-for rows not decoding yet join."""
        wanted = {id(self.rows[handle]) for handle in handles}
        for group, batch in list(self.decoding.items()):
            done = [row for row in batch.rows if id(row) not in wanted]
            if done:
                self._finish(batch, done)
            if not batch.rows:
                del self.decoding[group]
        joining: dict[Hashable, list[RowBatch]] = {}
        for key, batches in self.waiting.items():
            for batch in list(batches):
                starting = [row for row in batch.rows if id(row) in wanted]
                if not starting:
                    continue
                if len(starting) == len(batch):
                    batches.remove(batch)
                else:
                    rest, batch = batch, batch.take(starting)
                    rest.drop(starting)
                joining.setdefault(None if self.batch_problems else key, []).append(batch)
        for group, batches in joining.items():
            current = [self.decoding[group]] if group in self.decoding else []
            self.decoding[group] = RowBatch.join(current + batches)
            for row in self.decoding[group].rows:
                row.status = DECODING
        return list({id(self.rows[h].batch): self.rows[h].batch for h in handles}.values())

    def _finish(self, batch: RowBatch, rows: list[Row]) -> None:
        by_problem: dict[Hashable, list[Row]] = {}
        for row in rows:
            by_problem.setdefault(row.key, []).append(row)
        for key, finished in by_problem.items():
            parked = batch.take(finished)
            for row in finished:
                row.status = FINISHED
            self.waiting.setdefault(key, []).append(parked)
        batch.drop(rows)

    def copy_state(self, handle):
        """(cache, logits) of one row, copied (the row stays where it is)."""
        row = self.rows[handle]
        return row.batch.copy_state([row])

    def remove(self, handles) -> None:
        """Forget rows (abort)."""
        for handle in handles:
            row = self.rows.pop(handle)
            batch = row.batch
            batch.drop([row])
            if not batch.rows:
                self._forget(batch)

    def remove_problem(self, key) -> None:
        """Forget every row of problem `key`."""
        for batch in list(self.decoding.values()):
            batch.drop([row for row in batch.rows if row.key == key])
            if not batch.rows:
                self._forget(batch)
        for batch in self.waiting.pop(key, []):
            for row in batch.rows:
                self.rows.pop(row.handle, None)
        for handle in [h for h, row in self.rows.items() if row.key == key]:
            del self.rows[handle]

    def _forget(self, batch: RowBatch) -> None:
        self.decoding = {group: b for group, b in self.decoding.items() if b is not batch}
        for batches in self.waiting.values():
            if batch in batches:
                batches.remove(batch)
