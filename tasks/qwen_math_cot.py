"""The zero-shot Qwen2.5-Math chain-of-thought conversation, and the benchmark docs that carry it.

The conversation is the one of the Qwen2.5-Math evaluation harness (prompt type "qwen25-math-cot"):
the system turn below, the problem as the user turn (the doc's `question`, else its `problem`,
stripped, as that harness reads it).

lm-eval renders it from the task config: `description` is the system turn and `doc_to_text` the
user turn. With `--apply_chat_template` a model receives them as chat messages; without it, as the
plain concatenation of the two (lm-eval puts no separator after a description). So that a model
can always recover the two turns exactly, every doc also carries them as `messages`.
"""

import logging

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
QUESTION_FIELDS = ("question", "problem")  # the first present wins, as in the Qwen2.5-Math harness


def question(doc):
    """The user turn of one doc."""
    for field in QUESTION_FIELDS:
        if doc.get(field):
            return doc[field].strip()
    raise KeyError(f"doc has none of the question fields {QUESTION_FIELDS}: keys {sorted(doc)}")


def conversation(doc):
    """The chat messages a model is asked to continue."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question(doc)}]


def load_docs(benchmark):
    """The `custom_dataset` of one task: the pinned test set, each doc with its `messages`."""
    import datasets

    from kvrescue_eval.tasks.data import load_benchmark

    rows = [{**row, "messages": conversation(row)} for row in load_benchmark(benchmark)]
    return {"test": datasets.Dataset.from_list(rows)}


def task_functions(benchmark):
    """The three functions a benchmark's YAML names (`utils.load_dataset`, `utils.gold`,
    `utils.process_results`), bound to that benchmark: each task's utils.py is one line of this."""
    from kvrescue_eval.tasks import seed_metrics

    def load_dataset(**metadata):
        from kvrescue_eval import grading

        if not grading.math_verify_available():
            logging.getLogger(__name__).warning(grading.MATH_VERIFY_ABSENT)
        return load_docs(benchmark)

    def gold(doc):
        from kvrescue_eval import grading

        return grading.parse_gold(doc, benchmark)

    def process_results(doc, results, plan=None):
        return seed_metrics.score_responses(doc, results, benchmark=benchmark, plan=plan)

    return load_dataset, gold, process_results
