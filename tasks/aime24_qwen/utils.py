"""AIME 2024 I and II: the pinned `aime24` set, graded as the Qwen2.5-Math harness grades `aime24`."""

from kvrescue_eval.tasks.qwen_math_cot import task_functions

load_dataset, gold, process_results = task_functions("aime24")
