"""AMC 12A/12B 2023: the pinned `amc23` set, graded as the Qwen2.5-Math harness grades `amc23`."""

from kvrescue_eval.tasks.qwen_math_cot import task_functions

load_dataset, gold, process_results = task_functions("amc23")
