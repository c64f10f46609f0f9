"""Markdown tables read back as cells, so that tests compare what a table says, not how its writer pads it.

A table is its consecutive lines that start with "|"; a line's cells are what lies between unescaped "|",
stripped, with an escaped "\\|" read back as "|". The header's separator line (`| --- | :-: |`) is left out.
"""

import re

_BAR = re.compile(r"(?<!\\)\|")
_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


def row_cells(line):
    """One table line's cells."""
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|") and len(line) > 1):
        raise ValueError(f"not a Markdown table line (it starts and ends with '|'): {line!r}")
    return [cell.strip().replace("\\|", "|") for cell in _BAR.split(line[1:-1])]


def tables(text):
    """Every table of a Markdown text, in order: a list of rows (header first), each a list of cells."""
    found, current = [], None
    for line in text.splitlines():
        if not line.strip().startswith("|"):
            current = None
            continue
        if current is None:
            current = []
            found.append(current)
        if not _SEPARATOR.match(line.strip()):
            current.append(row_cells(line))
    return found


def records(table):
    """A table's rows below its header as dicts, header cell -> cell."""
    header, *rows = table
    return [dict(zip(header, row, strict=True)) for row in rows]


def table_under(text, heading):
    """The records of the first table after the first line that starts with `heading` (e.g. "### Fig. 1(a)")."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        raise ValueError(f"no line starts with {heading!r}")
    return records(tables("\n".join(lines[start + 1:]))[0])


def rows_headed(text, *columns):
    """The records of every table whose header starts with `columns`, in order."""
    return [row for table in tables(text) if table[0][:len(columns)] == list(columns) for row in records(table)]
