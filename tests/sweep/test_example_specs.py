"""The sweep specs the docs run ship as files: each loads under the spec schema, the spec docs/sweep.md shows is
the file, and every `kvrescue-eval sweep FILE` command of the README and the docs names a file of the repository."""

import re
from pathlib import Path

import pytest

from kvrescue_eval.sweep.spec import load

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_each_example_spec_loads(path):
    spec = load(path)
    assert spec.blocks and spec.tasks


def test_the_spec_shown_in_the_docs_is_the_file():
    page = (ROOT / "docs" / "sweep.md").read_text(encoding="utf-8")
    shown = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert shown == (ROOT / "examples" / "recall.yaml").read_text(encoding="utf-8")


def test_every_sweep_command_of_the_docs_names_a_file_that_exists():
    named = {name for page in PAGES for name in re.findall(r"kvrescue-eval sweep ([\w./-]+\.ya?ml)",
                                                           page.read_text(encoding="utf-8"))}
    assert named and all((ROOT / name).is_file() for name in named), sorted(named)
