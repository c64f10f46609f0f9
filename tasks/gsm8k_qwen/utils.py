"""GSM8K test: the pinned `gsm8k` set, graded as the Qwen2.5-Math harness grades `gsm8k`."""

from kvrescue_eval.tasks.qwen_math_cot import task_functions

load_dataset, gold, process_results = task_functions("gsm8k")
