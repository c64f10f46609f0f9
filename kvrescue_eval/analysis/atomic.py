"""Write a set of files so that a failure leaves no half-written output behind, and unchanged files untouched.

Files get the permissions a plain `open(path, "w")` gives (0666 less the umask), not the 0600 of the
temporary files they are staged in.
"""

import os
import tempfile
from pathlib import Path


def write_files(files):
    """files: path -> str or bytes. Everything is rendered before this is called; each file is
    written to a temporary name in its folder and renamed into place only after all are written.
    A file that already holds exactly these bytes is left alone (its modification time too).
    Returns the paths written."""
    staged = []
    mode = 0o666 & ~_umask()
    try:
        for path, content in files.items():
            path = Path(path)
            data = content.encode("utf-8") if isinstance(content, str) else content
            if _holds(path, data):
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            staged.append((temp, path))
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.chmod(temp, mode)
    except BaseException:
        for temp, _ in staged:
            os.unlink(temp)
        raise
    for temp, path in staged:
        os.replace(temp, path)
    return [path for _, path in staged]


def _holds(path, data):
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def _umask():
    current = os.umask(0o022)  # reading the umask means setting it: put it back at once
    os.umask(current)
    return current
