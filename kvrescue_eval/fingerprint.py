"""Content fingerprints of model folders, for the run journal's identity.

A fingerprint is the SHA-256 of every file's content (weights, config, tokenizer), never of names,
sizes or modification times: two checkpoints with equal configs and sizes but different weights
(a re-trained model saved over the old one) must not share a journal.

Hashing a 7B checkpoint reads 15 GB (tens of seconds), a 72B one 145 GB (minutes), so it happens
once per file version:
- a file of the Hugging Face hub cache is a link to `blobs/<sha256 of its content>` (the hub names
  LFS blobs, i.e. weight files, by their SHA-256), so its name is its hash and nothing is read;
- any other file is hashed once and its hash remembered in `~/.cache/kvrescue_eval/content-hashes.json`
  under (real path, size, modification and change times, device, inode). The change time (ctime) is
  set by the kernel on every write and cannot be set back by a user, so a file rewritten in place,
  even with its old size and modification time restored, is hashed again.
"""

import hashlib
import json
import os
import re
from pathlib import Path

_HUB_BLOB = re.compile(r"[0-9a-f]{64}")
_SKIPPED = (".md", ".lock")  # model cards and hub lock files decide nothing
_CHUNK = 1 << 24


def cache_file() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "kvrescue_eval" / "content-hashes.json"


def file_sha256(path: Path, remembered: dict) -> str:
    real = Path(os.path.realpath(path))
    if real.parent.name == "blobs" and _HUB_BLOB.fullmatch(real.name):
        return real.name
    stat = real.stat()
    stamp = f"{real}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}|{stat.st_dev}|{stat.st_ino}"
    if stamp not in remembered:
        digest = hashlib.sha256()
        with open(real, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
        remembered[stamp] = digest.hexdigest()
    return remembered[stamp]


def json_sha256(value, digits: int = 64) -> str:
    """The first `digits` hex digits of the SHA-256 of `value` as JSON with sorted keys: the one content hash
    of journal identities, request keys and model folders (their stored values depend on its bytes)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()[:digits]


def folder_fingerprint(folder) -> dict:
    """{"sha256": hash over all files, "files": {relative path: sha256}} of a model folder or file."""
    folder = Path(folder)
    if not folder.exists():
        raise FileNotFoundError(f"cannot fingerprint {folder}: no such file or folder")
    files = [folder] if folder.is_file() else sorted(
        p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(_SKIPPED)
        and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    remembered = _read_remembered()
    before = len(remembered)
    hashes = {(p.name if p == folder else p.relative_to(folder).as_posix()): file_sha256(p, remembered) for p in files}
    if len(remembered) != before:
        _write_remembered(remembered)
    return {"sha256": json_sha256(hashes), "files": hashes}


def _read_remembered() -> dict:
    try:
        return json.loads(cache_file().read_text())
    except (OSError, ValueError):
        return {}


def _write_remembered(remembered: dict) -> None:
    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(remembered))
        os.replace(temporary, path)
    except OSError:
        pass  # only a cache: the next run hashes again
