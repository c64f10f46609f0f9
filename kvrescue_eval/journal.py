"""The run journal: finished problems on disk, one JSON line each, so a crashed run can resume.

Layout (JSON Lines, UTF-8):

    {"journal": "kvrescue", "format": 1, "identity": {...}, "info": {...}}     the header
    {"run": {...}}                                                           one per process that opened it
    {"key": [...], "result": {...}}                                          one per finished problem

`identity` holds everything that decides a result (model arguments, model fingerprints, library
versions). Opening a journal whose identity differs is refused with the differing fields named:
entries of two settings are never mixed and a journal is never overwritten. `info` and the run
lines are informative only (when and how it was written).

Every line is flushed and fsynced before `record` returns, so after a crash at most the line being
written is lost. A last line without its newline, or one that is not JSON, is such a torn write: it
is reported, moved aside to PATH.torn and truncated away, and the problem is computed again. A bad
line anywhere else is not explained by a crash and is an error. An exclusive lock (flock) keeps a
second process from writing the same journal at the same time.
"""

import fcntl
import json
import logging
import os
from pathlib import Path
from typing import Hashable

FORMAT = 1
MAGIC = "kvrescue"
logger = logging.getLogger(__name__)


class JournalError(RuntimeError):
    """A journal that cannot be used as it is (foreign settings, corruption, in use)."""


def differences(recorded, current, prefix: str = "", show=None) -> list[str]:
    """Dotted names of the fields that differ between two JSON-like values, with both values
    (`show(name, recorded, current)` words one difference; default: as a journal refusal says it)."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        out = []
        for name in sorted(set(recorded) | set(current), key=str):
            out += differences(recorded.get(name), current.get(name), f"{prefix}.{name}" if prefix else str(name),
                               show)
        return out
    if recorded == current:
        return []
    if show is not None:
        return [show(prefix or "identity", recorded, current)]
    return [f"{prefix or 'identity'}: journal has {recorded!r}, this run has {current!r}"]


def key_of(line_key) -> Hashable:
    """A journal key (JSON list, nested lists) as the hashable tuple the engine uses."""
    return tuple(key_of(part) for part in line_key) if isinstance(line_key, list) else line_key


_HEADER_START = json.dumps({"journal": MAGIC}).encode("ascii")[:-1]  # b'{"journal": "kvrescue"'


def check_path(path) -> Path:
    """Refuses, before anything is loaded or fingerprinted, a journal path that cannot be one: a folder,
    a path under a file, a place this process cannot write, or an existing file that is not a journal of
    this format. Reads at most the file's first line; the identity is checked when the journal is opened."""
    path = Path(path)
    if path.is_dir():
        raise JournalError(f"journal {path} is a folder; give model_arg journal=PATH a file name (e.g. "
                           f"{path / 'journal.jsonl'})")
    folder = next((parent for parent in path.parents if parent.exists()), Path("."))
    if not folder.is_dir():
        raise JournalError(f"journal {path}: {folder} is a file, not a folder; choose another journal=PATH")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise JournalError(f"journal {path}: {'the file' if path.exists() else folder} is not writable by this "
                           f"process; choose another journal=PATH")
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as handle:
            first = handle.readline()
        try:
            header = json.loads(first)
        except ValueError:
            header = None
        if isinstance(header, dict) and header.get("journal") == MAGIC:
            if header.get("format") != FORMAT:
                raise JournalError(f"journal {path} has format {header.get('format')!r}; this version reads "
                                   f"format {FORMAT}: use another journal=PATH")
        elif first.endswith(b"\n") or not _HEADER_START.startswith(first[:len(_HEADER_START)]):
            # (a header torn by a crash, the start of one without its newline, is dropped when opened)
            raise JournalError(f"{path} is not a kvrescue journal (first line: {first[:120]!r}); "
                               f"choose another model_arg journal=PATH")
    return path


class Journal:
    """An open journal: `entries` maps problem keys to recorded results; `record` appends one."""

    def __init__(self, path, identity: dict, info: dict | None = None, run: dict | None = None):
        self.path = check_path(path)
        self.identity = json.loads(json.dumps(identity))  # as it will read back
        self.entries: dict[Hashable, dict] = {}
        self.torn: str | None = None  # what was dropped from a torn last line, if anything
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a+b")
        try:
            fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.close()
            raise JournalError(f"journal {self.path} is in use by another process; wait for it to end, "
                               f"or give this run its own model_arg journal=PATH") from None
        try:
            self._load()
            if not self._has_header:
                self._append({"journal": MAGIC, "format": FORMAT, "identity": self.identity, "info": info or {}})
                _fsync_folder(self.path.parent)  # the new file's name is on disk too
            self._append({"run": run or {}})
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return len(self.entries)

    def get(self, key: Hashable) -> dict | None:
        return self.entries.get(key)

    def record(self, key: Hashable, result: dict) -> None:
        """Append a finished problem; on return it is on disk (flushed and fsynced)."""
        self._append({"key": key, "result": result})
        self.entries[key] = result

    def close(self) -> None:
        if not self.file.closed:
            self.file.close()  # releases the lock

    # -- internals -------------------------------------------------------------------------------
    def _append(self, line: dict) -> None:
        # ASCII escapes: a lone surrogate in a decoded text cannot break the write
        self.file.write((json.dumps(line, allow_nan=False) + "\n").encode("ascii"))
        self.file.flush()
        os.fsync(self.file.fileno())

    def _load(self) -> None:
        self.file.seek(0)
        data = self.file.read()
        self._has_header = False
        lines = data.split(b"\n")  # the last element is b"" when the file ends with a newline
        last_line = len(lines) - 1 if lines[-1] == b"" else len(lines)
        good_end = 0
        for number, raw in enumerate(lines, start=1):
            last = number == len(lines)
            if last and not raw:
                break
            try:
                if last:
                    raise ValueError("no newline at the end")
                line = json.loads(raw)
            except ValueError:
                if number < last_line:
                    raise JournalError(f"journal {self.path}: line {number} is not valid JSON and is not the last "
                                       f"line, so a crash does not explain it; move the file away to start over "
                                       f"(it is never overwritten)") from None
                self._drop_torn_tail(data[good_end:], good_end, number)
                break
            self._take(line, number)
            good_end += len(raw) + 1

    def _take(self, line: dict, number: int) -> None:
        if number == 1:
            if line.get("journal") != MAGIC:
                raise JournalError(f"{self.path} is not a kvrescue journal (first line: {str(line)[:120]}); "
                                   f"choose another model_arg journal=PATH")
            if line.get("format") != FORMAT:
                raise JournalError(f"journal {self.path} has format {line.get('format')!r}; this version reads "
                                   f"format {FORMAT}: use another journal=PATH")
            changed = differences(line.get("identity"), self.identity)
            if changed:
                raise JournalError(
                    f"journal {self.path} was written under different settings, so its results cannot be "
                    f"reused (they are never mixed or overwritten):\n  " + "\n  ".join(changed) +
                    "\nRun with the journal's settings to resume it, or give this run another journal=PATH.")
            self._has_header = True
        elif "key" in line:
            self.entries.setdefault(key_of(line["key"]), line["result"])

    def _drop_torn_tail(self, tail: bytes, offset: int, number: int) -> None:
        aside = self.path.with_name(self.path.name + ".torn")
        with open(aside, "ab") as out:
            out.write(tail + b"\n")
        self.file.truncate(offset)
        self.torn = tail.decode("utf-8", errors="replace")
        logger.warning("journal %s: the last line (line %d, %d bytes) is torn, the process died while writing "
                       "it; ignored (kept in %s), that problem is computed again", self.path, number, len(tail),
                       aside)


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
