"""The PRM's window: which committed steps a PRM reads when question and trajectory exceed what it reads.

The rule (docs/thinking.md): the PRM always reads the question (the problem's system and user turns) and the
candidate, and the latest committed steps that fit with them in `window` tokens. The oldest `d` steps are
dropped, `d` the fewest whose tokens reach the excess rounded up to a multiple of a quarter window, then one
more at a time while the input still does not fit. The rounding keeps `d`, and so the steps the PRM reads,
unchanged while the trajectory grows by up to a quarter window: the PRM's prefix cache recomputes the kept
steps once per quarter window of growth, not at every step, and the PRM reads at least about three quarters
of its window. The longest candidate (in its own tokens) decides for all candidates of a step, so they are
scored on the same steps. When the question and a candidate alone exceed the window, every step is dropped
and that input is scored as it is.
"""

from typing import Callable

SLIDE_SHARE = 4  # the window slides in multiples of window // SLIDE_SHARE tokens


def dropped_steps(length: Callable[[int], int], step_tokens: Callable[[int], int], steps: int, window: int) -> int:
    """How many of the oldest `steps` committed steps the PRM does not read: `length(d)` is the input's tokens
    without the oldest d steps, `step_tokens(i)` what step i adds to it."""
    excess = length(0) - window
    if excess <= 0:
        return 0
    quantum = max(1, window // SLIDE_SHARE)
    target = -(-excess // quantum) * quantum
    dropped = tokens = 0
    while dropped < steps and tokens < target:
        tokens += step_tokens(dropped)
        dropped += 1
    while dropped < steps and length(dropped) > window:
        dropped += 1
    return dropped
