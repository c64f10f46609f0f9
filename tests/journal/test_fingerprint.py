"""Model fingerprints hash file content: equal names, sizes and times do not make equal models."""

import hashlib
import os
import time

import pytest

from kvrescue_eval import fingerprint
from kvrescue_eval.fingerprint import folder_fingerprint


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def model(folder, weights: bytes):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "README.md").write_text("a model card")
    return folder


def test_the_fingerprint_is_the_sha256_of_every_files_content(tmp_path):
    folder = model(tmp_path / "m", b"\x01" * 64)
    print_ = folder_fingerprint(folder)
    assert print_["files"] == {"config.json": hashlib.sha256(b'{"hidden_size": 8}').hexdigest(),
                               "model.safetensors": hashlib.sha256(b"\x01" * 64).hexdigest()}  # README.md skipped
    assert folder_fingerprint(folder) == print_   # second time from the remembered hashes


def test_same_size_and_modification_time_but_other_weights_differ(tmp_path):
    folder = model(tmp_path / "m", b"\x01" * 64)
    weights = folder / "model.safetensors"
    first = folder_fingerprint(folder)
    stat = weights.stat()
    time.sleep(0.05)  # file timestamps tick in milliseconds: let the rewrite get a new change time
    weights.write_bytes(b"\x02" * 64)             # rewritten in place, same size ...
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ... and its old modification time
    second = folder_fingerprint(folder)
    assert second["files"]["model.safetensors"] == hashlib.sha256(b"\x02" * 64).hexdigest()
    assert second["sha256"] != first["sha256"]
    assert folder_fingerprint(model(tmp_path / "copy", b"\x02" * 64))["sha256"] == second["sha256"]


def test_hub_cache_blobs_are_named_by_their_sha256_and_not_read(tmp_path, monkeypatch):
    content = b"weights of a hub model"
    digest = hashlib.sha256(content).hexdigest()
    blobs, snapshot = tmp_path / "models--org--m" / "blobs", tmp_path / "models--org--m" / "snapshots" / "abc"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (blobs / digest).write_bytes(content)
    (snapshot / "model.safetensors").symlink_to(blobs / digest)
    monkeypatch.setattr(fingerprint, "_CHUNK", None)  # reading any file would now fail
    assert folder_fingerprint(snapshot)["files"] == {"model.safetensors": digest}


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        folder_fingerprint(tmp_path / "nonexistent")


def test_json_sha256_hashes_the_sorted_json_text_keys_in_any_order():
    """Journals written before keep their keys only if these are the bytes hashed: json.dumps's default
    separators, keys sorted (sha256sum of the literal text, computed by hand)."""
    text_sha256 = "78ebeaf16648b52fc518415bb39b050b83fb3944e65612a126741e55ba9904a4"  # '{"a": 2, "b": [1, "x"]}'
    assert fingerprint.json_sha256({"b": [1, "x"], "a": 2}) == text_sha256
    assert fingerprint.json_sha256({"a": 2, "b": [1, "x"]}, 16) == text_sha256[:16]
