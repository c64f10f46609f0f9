"""kv_recall: recall rows of a table and code each value by a fixed rule, the CPU testbed of KV-Rescue.

The doc's conversation is a system turn (the task's `description`) and the user turn (the table); docs
also carry it as `messages`, as the math tasks do. A response is right when its non-empty steps, split at
blank lines, are exactly the expected steps, in order: for every pair "key = value" then "value -> code",
then "key = end" (generate.py).

Degeneration: the paper counts a sample as degenerated when it is wrong and ran to at least 256 steps, a
quarter of its 1024-step cap and about ten times a normal solution. A kv_recall answer has 9 to 17 steps
and the testbed caps trajectories at 64, so here a sample is degenerated when it is wrong and ran to at
least DEGENERATION_FACTOR times the steps of its answer (18 to 34): it went on long after the table was done.
"""

import operator

from kvrescue_eval import STEP_SEPARATOR
from kvrescue_eval.stats import carries_statistics
from kvrescue_eval.tasks import seed_metrics
from kvrescue_eval.tasks.kv_recall.generate import read_split

DEGENERATION_FACTOR = 2


def conversation(doc):
    return [{"role": "system", "content": doc["system"]}, {"role": "user", "content": doc["question"]}]


def load_dataset(**metadata):
    import datasets

    rows = [{**doc, "messages": conversation(doc)} for doc in read_split("test")]
    return {"test": datasets.Dataset.from_list(rows)}


def target(doc):
    from kvrescue_eval.tasks.kv_recall.generate import answer

    return answer(doc)


def response_steps(text):
    return [step.strip() for step in str(text).split(STEP_SEPARATOR) if step.strip()]


def step_accuracy(text, expected):
    steps = response_steps(text)
    return sum(i < len(steps) and steps[i] == step for i, step in enumerate(expected)) / len(expected)


def passed(text, expected):
    return int(response_steps(text) == list(expected))


def process_results(doc, results, plan=None):
    (responses,) = results  # the K repeats of the one request of this doc
    metrics = {
        "pass_at_1": [passed(r, doc["steps"]) for r in responses],
        "step_accuracy": [step_accuracy(r, doc["steps"]) for r in responses],
    }
    if len(responses) > 1:
        metrics["pass_at_1" + seed_metrics.SEED_STD_SUFFIX] = metrics["pass_at_1"]
    # maj@k votes on the answer itself: the response's steps, equal when identical.
    answers = [tuple(response_steps(r)) for r in responses]
    metrics.update(seed_metrics.over_repeats(plan, metrics, {"pass_at_1": (answers, operator.eq)}))
    if responses and all(map(carries_statistics, responses)):
        metrics.update(seed_metrics.engine_statistics(responses, metrics["pass_at_1"]))
        metrics["degenerated"] = [degenerated(r.stats["steps"], right, doc["steps"])
                                  for r, right in zip(responses, metrics["pass_at_1"])]
    return metrics


def degenerated(steps, right, expected):
    """Wrong, and at least DEGENERATION_FACTOR times as many committed steps as the answer has."""
    return int(not right and steps >= DEGENERATION_FACTOR * len(expected))
