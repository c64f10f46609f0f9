"""The five pinned benchmark test sets, shipped inside the package and checked by sha256 at load.

Provenance and licences: MANIFEST.md beside this file. Files are read with importlib.resources, so
they load the same from a clone, an editable install or a wheel, with no network.
"""

import hashlib
import json
from importlib import resources

from kvrescue_eval.benchmarks import BENCHMARKS, DATA_SHA256 as SHA256


class BenchmarkIntegrityError(RuntimeError):
    """A shipped test set does not have the pinned bytes."""


def load_benchmark(name):
    """The rows of one pinned test set, in file order, after checking the file's sha256."""
    if name not in SHA256:
        raise ValueError(f"unknown benchmark {name!r}; valid names: {', '.join(BENCHMARKS)}")
    resource = resources.files(__name__) / name / "test.jsonl"
    raw = resource.read_bytes()
    actual = hashlib.sha256(raw).hexdigest()
    if actual != SHA256[name]:
        raise BenchmarkIntegrityError(
            f"benchmark file {resource} has sha256 {actual}, expected {SHA256[name]}: "
            "the pinned data was modified or corrupted; reinstall the package")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
