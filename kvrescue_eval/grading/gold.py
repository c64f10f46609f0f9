"""The gold answer of a benchmark document: the harness's `parse_ground_truth`, by the gold rule that the
benchmark table (kvrescue_eval/benchmark_table.py) names for each benchmark."""

from kvrescue_eval import benchmark_table

from .extraction import harness_extract
from .normalization import strip_string


def _field(doc, name, dataset):
    if not isinstance(doc, dict) or name not in doc:
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"a {dataset} document needs the field {name!r}; got {keys}")
    return doc[name]


def _solution_boxed(doc, dataset):
    return _field(doc, "solution", dataset)


def _after_hashes(doc, dataset):
    answer = str(_field(doc, "answer", dataset))
    if "####" not in answer:
        raise ValueError(f"a {dataset} answer holds its result after '####'; got {answer[-80:]!r}")
    return answer.split("####")[-1]


def _answer(doc, dataset):
    return _field(doc, "answer", dataset)  # amc23's is a float such as 27.0: str() then strip_string gives "27"


def _final_answer_first(doc, dataset):
    final = _field(doc, "final_answer", dataset)
    if not isinstance(final, (list, tuple)) or not final:
        raise ValueError(f"{dataset} final_answer must be a non-empty list; got {final!r}")
    return str(final[0]).strip("$")


# gold rule -> (raw gold of a document, whether the raw gold is a solution to extract the answer from)
GOLD_RULES = {
    "answer": (_answer, False),                           # the `answer` field (aime24, amc23)
    "after_hashes": (_after_hashes, False),               # `answer` after "####" (gsm8k)
    "final_answer_first": (_final_answer_first, False),   # `final_answer[0]` without `$` (olympiadbench)
    # The harness's "math" branch: the answer extracted from the reference `solution` like a prediction
    # (its last \boxed{}), then normalised once more (math500).
    "solution_boxed": (_solution_boxed, True),
}


def raw_gold(doc, dataset):
    """The gold answer of a document as its benchmark's rule reads it, before normalisation."""
    read, _ = GOLD_RULES[benchmark_table.benchmark(dataset).gold]
    return read(doc, dataset)


def gold_normalised(doc, dataset, *, keep_single_letters=False):
    raw = raw_gold(doc, dataset)
    if GOLD_RULES[benchmark_table.benchmark(dataset).gold][1]:
        raw = harness_extract(raw, keep_single_letters=keep_single_letters)
    return strip_string(raw, keep_single_letters=keep_single_letters)
