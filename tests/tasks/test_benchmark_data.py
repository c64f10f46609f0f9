import hashlib
import json
from pathlib import Path

import pytest

from kvrescue_eval import benchmark_table
from kvrescue_eval.tasks import data

SHARED = Path("/work/shared/data/benchmarks")
ROWS = {"aime24": 30, "amc23": 40, "gsm8k": 1319, "math500": 500, "olympiadbench": 675, "aime25": 30}  # MANIFEST.md
# The published answers of AIME 2025 I (problems 1-15) and II (16-30), as the MAA released them.
AIME25_ANSWERS = [70, 588, 16, 117, 279, 504, 821, 77, 62, 81, 259, 510, 204, 60, 735,
                  468, 49, 82, 106, 336, 293, 237, 610, 149, 907, 113, 19, 248, 104, 240]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_set_loads_all_rows_in_file_order(name):
    rows = data.load_benchmark(name)
    assert len(rows) == ROWS[name] == benchmark_table.benchmark(name).problems
    shipped = Path(data.__file__).parent / name / "test.jsonl"
    assert rows[0] == json.loads(shipped.read_text(encoding="utf-8").splitlines()[0])


def test_aime25_golds_are_the_published_answers():
    from kvrescue_eval import grading

    assert [grading.parse_gold(doc, "aime25") for doc in data.load_benchmark("aime25")] == list(map(str, AIME25_ANSWERS))


@pytest.mark.skipif(not SHARED.exists(), reason="the shared pinned copy exists only on the build machines")
@pytest.mark.parametrize("name", sorted(set(ROWS) - {"aime25"}))  # AIME 2025 came later, from public copies (MANIFEST)
def test_shipped_files_are_byte_identical_to_the_pinned_source(name):
    shipped = (Path(data.__file__).parent / name / "test.jsonl").read_bytes()
    assert shipped == (SHARED / name / "test.jsonl").read_bytes()


def test_unknown_set_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"'aime2024'.*math500, aime24, amc23, gsm8k, olympiadbench"):
        data.load_benchmark("aime2024")


def test_modified_file_fails_naming_file_and_both_hashes(tmp_path, monkeypatch):
    (tmp_path / "amc23").mkdir()
    original = (Path(data.__file__).parent / "amc23" / "test.jsonl").read_bytes()
    tampered = original.replace(b"27.0", b"28.0", 1)
    (tmp_path / "amc23" / "test.jsonl").write_bytes(tampered)
    monkeypatch.setattr(data.resources, "files", lambda package: tmp_path)
    with pytest.raises(data.BenchmarkIntegrityError) as error:
        data.load_benchmark("amc23")
    message = str(error.value)
    assert str(tmp_path / "amc23" / "test.jsonl") in message
    assert hashlib.sha256(tampered).hexdigest() in message
    assert benchmark_table.benchmark("amc23").sha256 in message
