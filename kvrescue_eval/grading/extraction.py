"""Which part of a completion is its answer: the Qwen2.5-Math harness's `extract_answer`.

Order: a Minerva "final answer is $...$. I hope", else the last `boxed` (braces matched, or
`\\boxed 5` up to the next "$"), else "The answer is ...", else "final answer is ...", else "答案是",
else the last number. The result is normalised by `strip_string` twice, as the harness does
(once inside `extract_answer`, once more in `run_execute`). First of all, a thinking model's response is
read after its think block (thinking.py; the harness predates think blocks).
"""

import re

from .normalization import strip_string
from .thinking import answer_part

# The harness's generation stops at these, and it cuts the completion there again before grading.
STOP_WORDS = ("</s>", "<|im_end|>", "<|endoftext|>")
_NUMBER = re.compile(r"-?\d*\.?\d+")
_LINE_BREAK = re.compile(r"\n\s*")


def last_boxed(text):
    """Content of the last `boxed`: up to the matching "}" (or the end), or `\\boxed 5` up to "$"."""
    tail = text.split("boxed")[-1]
    if not tail:
        return ""
    if tail[0] != "{":
        return tail.split("$")[0].strip()
    depth = 1
    for index in range(1, len(tail)):
        char = tail[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return tail[1:index]
    return tail[1:]


def answer_span(text):
    """The raw answer text, before normalisation; None when `boxed` is followed by nothing."""
    text = text.replace("\u043a\u0438", "")  # "ки", a step tag of some PRM training data
    if "final answer is $" in text and "$. I hope" in text:
        return text.split("final answer is $", 1)[1].split("$. I hope", 1)[0].strip()
    if "boxed" in text:
        return last_boxed(text) if text.split("boxed")[-1] else None
    for trigger in ("he answer is", "final answer is"):
        if trigger in text:
            return text.split(trigger)[-1].strip()
    if "答案是" in text:
        return text.split("答案是")[1].strip().split("\n\n")[0].strip()
    numbers = _NUMBER.findall(text.replace(",", ""))
    return numbers[-1] if numbers else ""


def has_boxed_answer(text):
    """Whether the harness takes this completion's answer from a non-empty \\boxed{} (the paper's
    Table 5 counts an answer only then: "boxed and correct")."""
    text = cut_at_stop_words(answer_part(text) or "").replace("\u043a\u0438", "")
    if "final answer is $" in text and "$. I hope" in text:
        return False
    return "boxed" in text and bool(text.split("boxed")[-1]) and bool(last_boxed(text).strip())


def cut_at_stop_words(text):
    text = text.strip()
    for word in STOP_WORDS:
        if word in text:
            text = text.split(word)[0].strip()
    return text


def harness_extract(text, *, keep_single_letters=False):
    """The harness's `extract_answer` for our five sets (it normalises once)."""
    span = answer_span(text)
    if span is None:
        return ""
    answer = _LINE_BREAK.sub("", span)
    if answer[:1] == ":":
        answer = answer[1:]
    if answer[-1:] == ".":
        answer = answer[:-1]
    if answer[-1:] == "/":
        answer = answer[:-1]
    return strip_string(answer, keep_single_letters=keep_single_letters)


def extract_normalised(text, *, keep_single_letters=False):
    """The harness's prediction for a completion: cut at stop words, extract, normalise again."""
    answer = harness_extract(cut_at_stop_words(answer_part(text) or ""), keep_single_letters=keep_single_letters)
    return strip_string(answer, keep_single_letters=keep_single_letters)
