"""Write a set of files so that a failure leaves no half-written output behind."""

import os
import tempfile
from pathlib import Path


def write_files(files):
    """files: path -> str or bytes. Everything is rendered before this is called; each file is
    written to a temporary name in its folder and renamed into place only after all are written."""
    staged = []
    try:
        for path, content in files.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            data = content.encode("utf-8") if isinstance(content, str) else content
            handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            staged.append((temp, path))
            with os.fdopen(handle, "wb") as out:
                out.write(data)
    except BaseException:
        for temp, _ in staged:
            os.unlink(temp)
        raise
    for temp, path in staged:
        os.replace(temp, path)
