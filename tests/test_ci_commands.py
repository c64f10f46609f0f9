"""CI, the Makefile and the README run the same tests: all of them (`-m ""`), while a plain pytest skips the
ones marked slow (pyproject's addopts)."""

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVERYTHING = 'python -m pytest -q -m "" --ignore=tests/vllm && python -m pytest -q -m "" tests/vllm'


def test_a_plain_pytest_deselects_the_slow_tests():
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert options["addopts"] == ["-m", "not slow"]
    assert any(marker.startswith("slow:") for marker in options["markers"])


def test_ci_make_test_and_the_readme_run_everything():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    make_test = re.search(r"^test:\n\t(.+)$", (REPO / "Makefile").read_text(), re.M).group(1)
    assert make_test == EVERYTHING
    assert EVERYTHING in ci and EVERYTHING in readme
    # .ci/run runs exactly the README's lines
    block = re.search(r"```\n(export VLLM_ENABLE_V1_MULTIPROCESSING.+?)```", readme, re.S).group(1)
    assert block.strip() in ci
    assert all("pytest" not in line or '-m ""' in line for line in ci.splitlines())
