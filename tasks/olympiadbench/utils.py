"""OlympiadBench, OE_TO_maths_en_COMP: the pinned `olympiadbench` set, graded as the Qwen2.5-Math harness grades `olympiadbench`."""

from kvrescue_eval.tasks.qwen_math_cot import task_functions

load_dataset, gold, process_results = task_functions("olympiadbench")
