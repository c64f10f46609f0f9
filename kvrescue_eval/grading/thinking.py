"""Responses of thinking models: the answer is what follows the think block.

A thinking model (DeepSeek-R1-Distill, Qwen3, QwQ) writes its reasoning inside "<think>" ... "</think>" and its
answer after it. The grader reads only what follows the last "</think>", so a \\boxed{} written while thinking
is not the answer. A response that opened a think block and never closed it (the trace ran into its context or
step limit) has no answer: it is graded as empty, and counted as `unfinished_thinking`. A response with neither
marker is not a thinking response and is read whole.
"""

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def answer_part(text: str) -> str | None:
    """The part of a response that holds its answer (None: a think block that never closed)."""
    if THINK_CLOSE in text:
        return text.rsplit(THINK_CLOSE, 1)[1]
    return None if THINK_OPEN in text else text


def unfinished_thinking(text: str) -> bool:
    """Whether the response opened a think block and never closed it."""
    return answer_part(text) is None
