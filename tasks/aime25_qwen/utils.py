"""AIME 2025 I and II: the pinned `aime25` set, graded by its integer `answer` as the Qwen2.5-Math harness
grades `aime24`."""

from kvrescue_eval.tasks.qwen_math_cot import task_functions

load_dataset, gold, process_results = task_functions("aime25")
