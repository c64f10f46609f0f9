"""GSM8K test: the pinned `gsm8k` set, graded as the Qwen2.5-Math harness grades `gsm8k`."""

from kvrescue_eval.tasks import qwen_math_cot, seed_metrics

BENCHMARK = "gsm8k"


def load_dataset(**metadata):
    return qwen_math_cot.load_docs(BENCHMARK)


def gold(doc):
    from kvrescue_eval import grading

    return grading.parse_gold(doc, BENCHMARK)


def process_results(doc, results):
    return seed_metrics.score_responses(doc, results, benchmark=BENCHMARK)
