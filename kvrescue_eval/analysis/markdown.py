"""The one Markdown table writer of the package: the report's tables, the leaderboard, the docs' result tables.

Cells are written as given (already formatted text), unpadded, so that a table's lines stay comparable as text
(the tests and the docs match rows like `| 64 | 41.7 ± 11.8 |`). A "|" inside a cell is escaped.
"""


def markdown_table(header, rows):
    """Header and rows (sequences of cells, str() of each) as GitHub-flavoured Markdown lines, without a final
    newline."""
    lines = [_line(header), "|" + "---|" * len(header)]
    lines += [_line(row) for row in rows]
    return "\n".join(lines)


def _line(cells):
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"
