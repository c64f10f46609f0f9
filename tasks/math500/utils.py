"""MATH-500 (PRM800K test split of MATH): the pinned `math500` set, graded as the Qwen2.5-Math harness grades `math500`."""

from kvrescue_eval.tasks.qwen_math_cot import task_functions

load_dataset, gold, process_results = task_functions("math500")
