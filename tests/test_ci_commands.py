"""CI, the Makefile and the README run the same tests: all of them (`-m ""`), while a plain pytest skips the
ones marked slow (pyproject's addopts)."""

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVERYTHING = ('python -m pytest -q -m "" -n 2 --dist loadfile --ignore=tests/vllm'
              ' && python -m pytest -q -m "" -n 2 --dist loadfile tests/vllm')


def test_a_plain_pytest_deselects_the_slow_tests():
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert options["addopts"] == ["-m", "not slow"]
    assert any(marker.startswith("slow:") for marker in options["markers"])


def test_ci_make_test_and_the_readme_run_everything():
    ci_lines = {line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()}
    readme = (REPO / "README.md").read_text()
    make_test = re.search(r"^test:\n\t(.+)$", (REPO / "Makefile").read_text(), re.M).group(1)
    assert make_test == EVERYTHING
    assert EVERYTHING in readme and EVERYTHING in (REPO / "docs" / "install.md").read_text()
    # .ci/run runs the README's commands, one a line
    block = re.search(r"```\n(export VLLM_ENABLE_V1_MULTIPROCESSING.+?)```", readme, re.S).group(1)
    commands = [part.strip() for part in block.replace("\\\n", " ").replace("\n", " && ").split("&&") if part.strip()]
    assert commands and all(" ".join(command.split()) in ci_lines for command in commands), commands
    assert all('-m ""' in line for line in ci_lines if "pytest" in line and not line.startswith("#"))
