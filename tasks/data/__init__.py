"""The pinned benchmark test sets, shipped inside the package and checked by sha256 at load.

Provenance and licences: MANIFEST.md beside this file. Files are read with importlib.resources, so
they load the same from a clone, an editable install or a wheel, with no network. Which sets there are, and
their pins, is the benchmark table (kvrescue_eval/benchmark_table.py); a row may name its file elsewhere (`data`).
"""

import hashlib
import json
from importlib import resources
from pathlib import Path

from kvrescue_eval import benchmark_table


class BenchmarkIntegrityError(RuntimeError):
    """A shipped test set does not have the pinned bytes."""


def load_benchmark(name):
    """The rows of one pinned test set, in file order, after checking the file's sha256."""
    row = benchmark_table.benchmark(name)
    resource = Path(row.data) if row.data else resources.files(__name__) / name / "test.jsonl"
    raw = resource.read_bytes()
    actual = hashlib.sha256(raw).hexdigest()
    if actual != row.sha256:
        raise BenchmarkIntegrityError(
            f"benchmark file {resource} has sha256 {actual}, expected {row.sha256}: "
            "the pinned data was modified or corrupted; reinstall the package")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
