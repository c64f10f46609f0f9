"""Rows, the batches that hold them, and the one owner that joins and splits them (the transformers policy's
bookkeeping, in the spirit of nano-vllm's `Sequence` and block manager).

A `Row` is one sequence of a problem: its committed state, or one candidate of the current step. A
`RowBatch` stacks the caches of some rows in one cache (row i is batch row i) with their next-token
logits. `RowTable` owns every candidate row: each lives in exactly one batch, which is either
  - a decoding batch: the rows that take the next token together (one for all problems, or one per
    problem), kept across tokens, or
  - a waiting batch of its problem: forked and not decoded yet, or finished and waiting for commit.
Rows leave a batch lazily (`drop` only marks them); a decoding batch whose rows changed is rebuilt once,
at the next decode, from its staying rows and the joining ones in a single copy (`EvictingCache.gather`).
No two batches share mutable state.
"""

import weakref
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
    # A weak reference: a batch holds its rows, and a row pointing back strongly would make a cycle that only
    # the cyclic garbage collector frees, so every replaced batch (its cache!) would outlive its last use.
    _batch: "weakref.ref[RowBatch] | None" = field(default=None, repr=False)

    @property
    def batch(self) -> "RowBatch | None":
        return self._batch() if self._batch is not None else None

    @batch.setter
    def batch(self, batch: "RowBatch") -> None:
        self._batch = weakref.ref(batch)


class RowBatch:
    def __init__(self, rows: list[Row], cache, logits: torch.Tensor):
        self.rows, self.cache, self.logits = rows, cache, logits   # logits (len(rows), vocab), float32
        self.dropped: set[int] = set()     # ids of rows gone from here; their slots stay until a rebuild
        for row in rows:
            row.batch = self

    @property
    def live(self) -> list[Row]:
        return [row for row in self.rows if id(row) not in self.dropped]

    def _positions(self, rows) -> list[int]:
        place = {id(row): i for i, row in enumerate(self.rows)}
        return [place[id(row)] for row in rows]

    def copy_state(self, rows: list[Row]):
        """(cache, logits): a copy of `rows`' state, in that order."""
        positions = self._positions(rows)
        return self.cache.select(positions), self.logits[device_index(positions, self.logits.device)]

    def take(self, rows: list[Row]) -> "RowBatch":
        """A new batch holding copies of `rows`' state; the rows move to it (drop them here)."""
        return RowBatch(list(rows), *self.copy_state(rows))

    def drop(self, rows: list[Row]) -> None:
        self.dropped.update(id(row) for row in rows)

    @classmethod
    def gather(cls, parts: list[tuple["RowBatch", list[Row]]]) -> "RowBatch":
        """One batch of, in order, the given rows of each part, built in one copy (or the part itself when
        it is the only one and keeps all its rows)."""
        if len(parts) == 1 and parts[0][1] == parts[0][0].rows and not parts[0][0].dropped:
            return parts[0][0]
        positions = [batch._positions(rows) for batch, rows in parts]
        cache = type(parts[0][0].cache).gather([(batch.cache, p) for (batch, _), p in zip(parts, positions)])
        logits = torch.cat([batch.logits[device_index(p, batch.logits.device)] for (batch, _), p in zip(parts, positions)])
        return cls([row for _, rows in parts for row in rows], cache, logits)


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
        parts: dict[Hashable, list] = {}
        changed = set()
        for group, batch in self.decoding.items():
            live = batch.live
            done = [row for row in live if id(row) not in wanted]
            if done:
                self._finish(batch, done)
            staying = [row for row in live if id(row) in wanted]
            parts[group] = [(batch, staying)] if staying else []
            if len(staying) != len(batch.rows):
                changed.add(group)
        for key, batches in self.waiting.items():
            for batch in list(batches):
                starting = [row for row in batch.live if id(row) in wanted]
                if not starting:
                    continue
                if len(starting) == len(batch.live):
                    batches.remove(batch)       # the whole batch starts (and may become the decoding batch)
                else:
                    batch.drop(starting)
                group = None if self.batch_problems else key
                parts.setdefault(group, []).append((batch, starting))
                changed.add(group)
        for group in changed:
            if parts[group]:
                self.decoding[group] = RowBatch.gather(parts[group])
                for row in self.decoding[group].rows:
                    row.status = DECODING
            else:
                del self.decoding[group]
        return list({id(self.rows[h].batch): self.rows[h].batch for h in handles}.values())

    def _finish(self, batch: RowBatch, rows: list[Row]) -> None:
        by_problem: dict[Hashable, list[Row]] = {}
        for row in rows:
            by_problem.setdefault(row.key, []).append(row)
        batch.drop(rows)
        for key, finished in by_problem.items():
            self.waiting.setdefault(key, []).append(batch.take(finished))
            for row in finished:
                row.status = FINISHED

    def copy_state(self, handle):
        """(cache, logits) of one row, copied (the row stays where it is)."""
        row = self.rows[handle]
        return row.batch.copy_state([row])

    def remove(self, handles) -> None:
        """Forget rows (abort)."""
        for handle in handles:
            row = self.rows.pop(handle)
            row.batch.drop([row])
            if not row.batch.live:
                self._forget(row.batch)

    def remove_problem(self, key) -> None:
        """Forget every row of problem `key`."""
        for batch in list(self.decoding.values()):
            batch.drop([row for row in batch.rows if row.key == key])
            if not batch.live:
                self._forget(batch)
        self.waiting.pop(key, None)
        for handle in [h for h, row in self.rows.items() if row.key == key]:
            del self.rows[handle]

    def _forget(self, batch: RowBatch) -> None:
        self.decoding = {group: b for group, b in self.decoding.items() if b is not batch}
        for batches in self.waiting.values():
            if batch in batches:
                batches.remove(batch)
