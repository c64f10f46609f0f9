"""The progress bar of a `kvrescue` run, live between problem ends.

A problem can take minutes, so the bar is redrawn from the engine's per-token events at least every
`interval` seconds, not only when a problem ends: problems done (resumed ones counted from the start
and named), committed steps, generated tokens per second (all candidates of both models), the share
of committed steps that came from the helper, early exits, and tqdm's ETA (from this run's rate).
"""

import time

from tqdm import tqdm


class Progress:
    def __init__(self, total: int, resumed: int, *, disable: bool = False, interval: float = 2.0, file=None):
        desc = f"kvrescue problems ({resumed} resumed)" if resumed else "kvrescue problems"
        self.bar = tqdm(total=total, initial=resumed, desc=desc, disable=disable, mininterval=interval, file=file)
        self.interval = interval
        self.steps = self.helper_steps = self.early_exits = self.tokens = 0
        self.started = self.shown = time.monotonic()

    def on_event(self, kind: str, **info) -> None:
        if kind == "decode":
            self.tokens += info["tokens"]
        elif kind == "commit":
            self.steps += 1
            self.helper_steps += info["role"] == "helper"
        elif kind == "abort":
            self.early_exits += 1
        elif kind == "finish":
            self.bar.update(1)
        now = time.monotonic()
        if now - self.shown >= self.interval:
            self.shown = now
            self.bar.set_postfix(self.postfix(now), refresh=True)

    def postfix(self, now: float) -> dict:
        elapsed = max(now - self.started, 1e-9)
        return {"steps": self.steps, "tok/s": f"{self.tokens / elapsed:.1f}",
                "helper": f"{self.helper_steps / self.steps:.0%}" if self.steps else "-",
                "early_exits": self.early_exits}

    def close(self) -> None:
        self.bar.set_postfix(self.postfix(time.monotonic()), refresh=False)
        self.bar.close()
