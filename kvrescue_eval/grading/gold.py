"""The gold answer of a benchmark document: the harness's `parse_ground_truth` for our five sets."""

from .extraction import harness_extract
from .normalization import strip_string


def _field(doc, name, dataset):
    if not isinstance(doc, dict) or name not in doc:
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"a {dataset} document needs the field {name!r}; got {keys}")
    return doc[name]


def _math500_solution(doc):
    return _field(doc, "solution", "math500")


def _gsm8k(doc):
    answer = str(_field(doc, "answer", "gsm8k"))
    if "####" not in answer:
        raise ValueError(f"a gsm8k answer holds its result after '####'; got {answer[-80:]!r}")
    return answer.split("####")[-1]


def _answer_field(dataset):
    return lambda doc: _field(doc, "answer", dataset)


def _olympiadbench(doc):
    final = _field(doc, "final_answer", "olympiadbench")
    if not isinstance(final, (list, tuple)) or not final:
        raise ValueError(f"olympiadbench final_answer must be a non-empty list; got {final!r}")
    return str(final[0]).strip("$")


RAW_GOLD = {
    "math500": _math500_solution,
    "aime24": _answer_field("aime24"),
    "amc23": _answer_field("amc23"),  # a float such as 27.0: str() then strip_string gives "27"
    "gsm8k": _gsm8k,
    "olympiadbench": _olympiadbench,
}


def gold_normalised(doc, dataset, *, keep_single_letters=False):
    raw = RAW_GOLD[dataset](doc)
    if dataset == "math500":
        # The harness's "math" branch: the answer extracted from the reference solution like a
        # prediction (its last \boxed{}), then normalised once more.
        raw = harness_extract(raw, keep_single_letters=keep_single_letters)
    return strip_string(raw, keep_single_letters=keep_single_letters)
