"""The README's lists of registered things are the registries: the evictors of the `evictor` row, the presets of
the model_args table's columns, and the tasks of the task table (every task and group this package's YAML
files define). A name added to a registry without the README, or left in the README after removal, fails here."""

import re
from pathlib import Path

import yaml

from kvrescue_eval.eviction.registry import EVICTORS
from kvrescue_eval.model_adapters.settings.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]


def table_rows(first_cell: str) -> list[list[str]]:
    """The cells of README table rows whose first cell is `first_cell`."""
    return [row for row in rows(README) if row[0] == first_cell]


def backticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_the_evictor_row_lists_every_registered_evictor():
    (row,) = table_rows("`evictor`")
    listed = backticked(row[-1].split(":", 1)[1])
    assert sorted(listed) == sorted(EVICTORS), "README's evictor row and kvrescue_eval/eviction/registry.py differ"


def test_the_model_args_table_has_a_column_per_preset():
    (header,) = table_rows("argument")
    assert sorted(name for cell in header[2:-1] for name in backticked(cell)) == sorted(PRESETS)


def package_tasks() -> set[str]:
    names = set()
    for path in (ROOT / "tasks").rglob("*.yaml"):
        if path.name.startswith("_"):
            continue
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)  # `!function` read as text
        name = config.get("group") or config.get("task")
        if isinstance(name, str):
            names.add(name)
    return names


def test_the_task_table_lists_every_task_of_the_package():
    section = README.split("\n## Tasks\n", 1)[1].split("\n## ", 1)[0]
    listed = {backticked(row[0])[0] for row in rows(section) if backticked(row[0])}
    assert listed == package_tasks()
