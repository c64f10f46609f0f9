"""A batching background worker: the engine's off-critical-path calls (step-level policies, scorers).

Work items are queued with `submit` (each gets a Future) and handed over with `dispatch`: everything
queued since the last call goes to the wrapped function in ONE call (one vLLM batch for all the
problems that are ready), on the worker's own thread. With `background=False` the same calls run in
the caller's thread inside `dispatch`, in series with the rest of the engine (the reference timing,
and the same results).
"""

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Sequence


class BatchWorker:
    def __init__(self, call: Callable[[Sequence], list], *, name: str, background: bool = True):
        self.call, self.name, self.background = call, name, background
        self._queued: list[tuple[object, Future]] = []
        self._ready: list[tuple[object, Future]] = []   # dispatched, not yet taken by the thread
        self._lock = threading.Lock()
        self._running = False
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"kvrescue-{name}") if background else None
        self.calls = 0                                    # batched calls made
        self.items = 0                                    # items served

    def submit(self, item) -> Future:
        future = Future()
        self._queued.append((item, future))
        return future

    def dispatch(self) -> None:
        """Hand over what is queued: to the thread (returns at once) or, in series, run it here."""
        if not self._queued:
            return
        batch, self._queued = self._queued, []
        if not self.background:
            self._run(batch)
            return
        with self._lock:
            self._ready += batch
            start, self._running = not self._running, True
        if start:
            self._executor.submit(self._drain)

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch, self._ready = self._ready, []
                if not batch:
                    self._running = False
                    return
            self._run(batch)

    def _run(self, batch) -> None:
        try:
            results = self.call([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"{self.name} returned {len(results)} results for {len(batch)} requests")
        except BaseException as error:  # the engine's thread re-raises it from the future
            for _, future in batch:
                future.set_exception(error)
            return
        self.calls += 1
        self.items += len(batch)
        for (_, future), result in zip(batch, results):
            future.set_result(result)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
