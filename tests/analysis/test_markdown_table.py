"""The package's Markdown table writer (kvrescue_eval/analysis/markdown.py) keeps every cell as the text it is
given: a Markdown parser (Python-Markdown's tables extension, the one mkdocs uses) reads back exactly those
cells, numbers in any format included, and a "|" inside a cell is a character of the cell, not a column break."""

from html.parser import HTMLParser

import markdown

from kvrescue_eval.analysis.markdown import markdown_table
from markdown_cells import tables

HEADER = ["N", "x|y", "value"]
ROWS = [["007", "a|b", "1e5"], ["1,024", "", "nan"], ["0.100", "—", "41.7 ± 11.8"], ["-0", "True", "2026-12-03"]]


class CellReader(HTMLParser):
    """The text of each <th>/<td> of an HTML table, row by row."""

    def __init__(self):
        super().__init__()
        self.rows, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("th", "td"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self.rows[-1].append(self.cell)
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def parsed(text):
    reader = CellReader()
    reader.feed(markdown.markdown(text, extensions=["tables"]))
    return reader.rows


def test_a_markdown_parser_reads_back_the_cells_as_given():
    assert parsed(markdown_table(HEADER, ROWS)) == [HEADER] + ROWS


def test_cells_that_are_not_text_are_written_as_their_str():
    assert parsed(markdown_table(["rank", "budget"], [[1, None], [2, 64]])) == [["rank", "budget"], ["1", "None"],
                                                                               ["2", "64"]]


def test_a_table_without_rows_is_its_header():
    # Python-Markdown shows a header-only table with one empty body row; the lines hold the header alone
    assert tables(markdown_table(["a", "b"], [])) == [[["a", "b"]]]


def test_the_tests_cell_reader_reads_what_the_parser_reads():
    text = markdown_table(HEADER, ROWS)
    assert tables(text) == [parsed(text)]
