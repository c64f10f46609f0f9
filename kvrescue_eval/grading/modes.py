"""The two grading modes: "qwen" reproduces the Qwen2.5-Math harness's verdicts, quirks included;
"strict" fixes the quirks (see comparison.py and unit_words.py)."""

from kvrescue_eval import benchmarks

from .comparison import QWEN, STRICT

RULES = {"qwen": QWEN, "strict": STRICT}


def check_mode(mode):
    if mode not in RULES:
        raise ValueError(f"grading mode must be one of {sorted(RULES)}; got {mode!r}")
    return mode


def check_dataset(dataset):
    if dataset not in benchmarks.TABLE:
        raise ValueError(f"dataset must be one of {list(benchmarks.names())} (the benchmark table, "
                         f"kvrescue_eval/benchmarks.py); got {dataset!r}")
    return dataset
