"""The five pinned benchmark test sets, shipped inside the package and checked by sha256 at load.

Provenance and licences: MANIFEST.md beside this file. Files are read with importlib.resources, so
they load the same from a clone, an editable install or a wheel, with no network.
"""

import hashlib
import json
from importlib import resources

# set name -> sha256 of its test.jsonl (the bytes every published number of this package is computed on)
SHA256 = {
    "aime24": "af2b8bd2aa911b6333ad0df32f3ca05c7ae8ed10f1731f4372c8ae26990bf7ac",
    "amc23": "43707e1ca784602d8479de24ee8ce36609dbebc46dd152b0b12a46611aa898a4",
    "gsm8k": "9f098df7ff4522078d6ccec27a5c38a454790fdb51131bedfaa0e490070d5394",
    "math500": "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
    "olympiadbench": "bb8c1e38a16ea9eacb77530315a674d883f267fbff79183effc53681b4fcc416",
}
BENCHMARKS = tuple(SHA256)


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
