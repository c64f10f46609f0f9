"""OlympiadBench, OE_TO_maths_en_COMP: the pinned `olympiadbench` set, graded as the Qwen2.5-Math harness grades `olympiadbench`."""

from kvrescue_eval.tasks import qwen_math_cot, seed_metrics

BENCHMARK = "olympiadbench"


def load_dataset(**metadata):
    return qwen_math_cot.load_docs(BENCHMARK)


def gold(doc):
    from kvrescue_eval import grading

    return grading.parse_gold(doc, BENCHMARK)


def process_results(doc, results):
    return seed_metrics.score_responses(doc, results, benchmark=BENCHMARK)
