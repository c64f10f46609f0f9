"""The two grading modes: "qwen" reproduces the Qwen2.5-Math harness's verdicts, quirks included;
"strict" fixes the quirks (see comparison.py and unit_words.py)."""

from kvrescue_eval import benchmark_table

from .comparison import QWEN, STRICT

RULES = {"qwen": QWEN, "strict": STRICT}


def check_mode(mode):
    if mode not in RULES:
        raise ValueError(f"grading mode must be one of {sorted(RULES)}; got {mode!r}")
    return mode


def check_dataset(dataset):
    if dataset not in benchmark_table.TABLE:
        raise ValueError(f"dataset must be one of {list(benchmark_table.names())} (the benchmark table, "
                         f"kvrescue_eval/benchmark_table.py); got {dataset!r}")
    return dataset
