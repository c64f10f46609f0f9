"""The one Markdown table writer of the package (the report's tables, the leaderboard, the docs' result tables),
through pytablewriter.

Cells are written as given (already formatted text): every column is typed String, so pytablewriter neither
parses nor re-formats numbers. It pads the columns and escapes a "|" inside a cell. Compare tables by their cells
(tests/markdown_cells.py), not by their lines.
"""

from pytablewriter import MarkdownTableWriter
from pytablewriter.typehint import String


def markdown_table(header, rows):
    """Header and rows (sequences of cells, str() of each) as GitHub-flavoured Markdown lines, without a final
    newline."""
    header = [str(cell) for cell in header]
    writer = MarkdownTableWriter(headers=header, value_matrix=[[str(cell) for cell in row] for row in rows],
                                 type_hints=[String] * len(header), margin=1, flavor="github")
    return writer.dumps().rstrip("\n")
