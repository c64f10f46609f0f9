"""AMC 12A/12B 2023: the pinned `amc23` set, graded as the Qwen2.5-Math harness grades `amc23`."""

from kvrescue_eval.tasks import qwen_math_cot, seed_metrics

BENCHMARK = "amc23"


def load_dataset(**metadata):
    return qwen_math_cot.load_docs(BENCHMARK)


def gold(doc):
    from kvrescue_eval import grading

    return grading.parse_gold(doc, BENCHMARK)


def process_results(doc, results):
    return seed_metrics.score_responses(doc, results, benchmark=BENCHMARK)
