"""Running the engine through out-of-memory errors: halve the problems in flight and retry.

When a forward pass (decode, prefill, append or scoring) runs out of memory, the problems that had
finished keep their results; every unfinished problem is released from every policy and the scorer
(its caches freed), `max_problems_in_flight` is halved, and the unfinished problems run again from
their start. A row's random stream depends only on (seed, problem key, role, step, candidate index),
so the retry draws the same tokens (with `batch_problems`, up to the float rounding of a different
batch; see `HFPolicy`). When one problem alone does not fit, `ProblemTooLarge` is raised; the results
finished before it were already handed to `on_event("finish", ...)` (the journal keeps them).

Failure points can be injected (tests, drills): `Faults.parse("base.decode@40:oom,finish@3:sigkill")`
raises an out-of-memory error in the 40th call of the base policy's `decode`, and kills the process
with SIGKILL when the 3rd problem has finished (after the event's other listeners ran). The lm-eval
model reads such a plan from the environment variable KVRESCUE_FAULTS.
"""

import logging
import os
import signal
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import torch

from kvrescue_eval.engine.engine import Engine, Problem, Result

logger = logging.getLogger(__name__)
FAULTS_ENV = "KVRESCUE_FAULTS"


class ProblemTooLarge(RuntimeError):
    """Even one problem in flight runs out of memory."""


def is_out_of_memory(error: BaseException) -> bool:
    """Out of memory on an accelerator (torch.OutOfMemoryError) or in host RAM."""
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(error, RuntimeError) and any(
        text in str(error) for text in ("out of memory", "can't allocate memory", "Failed to allocate"))


def free_accelerator_memory() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class RetryingRun:
    """`run(problems)` like `Engine.run`, surviving out-of-memory errors (see the module docstring).

    `retries` counts the retries; `max_problems_in_flight` is the value the run ended with."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.retries = 0
        self.max_problems_in_flight = engine.config.max_problems_in_flight

    def run(self, problems: Sequence[Problem]) -> list[Result]:
        engine, listener = self.engine, self.engine.on_event
        finished: dict = {}

        def on_event(kind, **info):
            if kind == "finish":
                finished[info["key"]] = info["result"]
            listener(kind, **info)

        engine.on_event = on_event
        try:
            while True:
                unfinished = [p for p in problems if p.key not in finished]
                engine.config = replace(engine.config, max_problems_in_flight=self.max_problems_in_flight)
                try:
                    engine.run(unfinished)
                    break
                except Exception as error:
                    if not is_out_of_memory(error):
                        raise
                    reason = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
                    if self.max_problems_in_flight == 1:
                        self._release([p for p in problems if p.key not in finished])
                        raise ProblemTooLarge(
                            f"out of memory with a single problem in flight ({reason}); {len(finished)} "
                            f"problem(s) finished before it (kept in the journal, if one is used). This problem "
                            f"does not fit: lower max_context, max_step_tokens or n, or use a device with more "
                            f"memory") from error
                # out of the except block: the traceback's frames, and the tensors they held, are gone
                unfinished = [p for p in problems if p.key not in finished]
                self._release(unfinished)
                self.max_problems_in_flight //= 2
                self.retries += 1
                logger.warning("out of memory (%s): %d problem(s) finished and kept; retrying the other %d with "
                               "max_problems_in_flight=%d (retry %d)", reason, len(finished), len(unfinished),
                               self.max_problems_in_flight, self.retries)
        finally:
            engine.on_event = listener
        return [finished[p.key] for p in problems]

    def _release(self, unfinished: list[Problem]) -> None:
        """Forget every unfinished problem in every policy and the scorer (started or not), freeing its caches."""
        engine = self.engine
        for problem in unfinished:
            for policy in engine.policies.values():
                policy.release(problem.key)
            if engine.scorer is not None:
                engine.scorer.release(problem.key)
        free_accelerator_memory()


# -- injectable failure points ---------------------------------------------------------------------
@dataclass
class Fault:
    point: str        # "base.decode", "helper.decode", "base.start", ..., "scorer.score", or "finish"
    at: int           # on the at-th call (1-based)
    action: str       # "oom": raise torch.OutOfMemoryError; "sigkill": kill this process


ACTIONS = ("oom", "sigkill")


class Faults:
    """A plan of failures: each fires once, on the chosen call of its point."""

    def __init__(self, faults: Sequence[Fault] = ()):
        self.faults = list(faults)
        self.calls: dict[str, int] = {}

    @classmethod
    def parse(cls, spec: str | None) -> "Faults":
        faults = []
        for item in filter(None, (part.strip() for part in (spec or "").split(","))):
            point, _, rest = item.partition("@")
            at, _, action = rest.partition(":")
            action = action or "oom"
            if not point or not at.isdigit() or int(at) < 1 or action not in ACTIONS:
                raise ValueError(f"bad fault {item!r}: expected POINT@N[:ACTION] with N >= 1 and ACTION in "
                                 f"{ACTIONS}, e.g. base.decode@40:oom or finish@3:sigkill")
            faults.append(Fault(point, int(at), action))
        return cls(faults)

    @classmethod
    def from_environment(cls) -> "Faults":
        return cls.parse(os.environ.get(FAULTS_ENV))

    def __bool__(self):
        return bool(self.faults)

    def hit(self, point: str) -> None:
        """Count a call of `point` and fire the fault planned for this call, if any."""
        self.calls[point] = count = self.calls.get(point, 0) + 1
        for fault in self.faults:
            if fault.point == point and fault.at == count:
                logger.warning("injected fault: %s at call %d of %s", fault.action, count, point)
                if fault.action == "sigkill":
                    os.kill(os.getpid(), signal.SIGKILL)
                raise torch.OutOfMemoryError(f"injected out-of-memory error at call {count} of {point}")

    def wrap(self, target, name: str, methods: Sequence[str]):
        """`target` (a policy or scorer) with `methods` counted as points `name.method`."""
        if target is None or not any(f.point.startswith(name + ".") for f in self.faults):
            return target
        return _Faulty(target, self, name, frozenset(methods))

    def listener(self, on_event: Callable[..., None]) -> Callable[..., None]:
        """`on_event` followed by the "finish" point."""
        def listen(kind, **info):
            on_event(kind, **info)
            if kind == "finish":
                self.hit("finish")
        return listen


class _Faulty:
    def __init__(self, target, faults: Faults, name: str, methods: frozenset):
        self._target, self._faults, self._name, self._methods = target, faults, name, methods

    def __getattr__(self, attribute):
        value = getattr(self._target, attribute)
        if attribute not in self._methods:
            return value

        def call(*args, **kwargs):
            self._faults.hit(f"{self._name}.{attribute}")
            return value(*args, **kwargs)
        return call


POLICY_METHODS = ("start", "fork", "decode", "propose", "append", "commit")
SCORER_METHODS = ("score",)
