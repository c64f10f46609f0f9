"""The two grading modes: "qwen" reproduces the Qwen2.5-Math harness's verdicts, quirks included;
"strict" fixes the quirks (see comparison.py and unit_words.py)."""

from .comparison import QWEN, STRICT

RULES = {"qwen": QWEN, "strict": STRICT}
DATASETS = ("math500", "aime24", "amc23", "gsm8k", "olympiadbench")


def check_mode(mode):
    if mode not in RULES:
        raise ValueError(f"grading mode must be one of {sorted(RULES)}; got {mode!r}")
    return mode


def check_dataset(dataset):
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {list(DATASETS)}; got {dataset!r}")
    return dataset
