"""Reading one JSON object from a file, with errors that name the file."""

import json
from pathlib import Path

from .errors import AnalysisInputError


def load_json_object(path):
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise AnalysisInputError(path, None, f"cannot read: {error.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise AnalysisInputError(path, None, f"not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise AnalysisInputError(path, None, "expected a JSON object at the top level")
    return data
