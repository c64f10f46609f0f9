"""The one-line .pth hook that setup.py installs into site-packages."""

import ast
import subprocess
import sys
from pathlib import Path

SETUP = Path(__file__).resolve().parents[1] / "setup.py"


def pth_line():
    tree = ast.parse(SETUP.read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "PTH_LINE" for t in node.targets)]
    return ast.literal_eval(value)


def run(code, *flags):
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_line_is_one_import_line_as_site_requires():
    line = pth_line()
    assert line.startswith("import ") and line.endswith("\n") and line.count("\n") == 1


def test_installs_the_lm_eval_finder():
    probe = pth_line() + ("from kvrescue_eval.model_adapters.lm_eval.discovery import _LmEvalFinder\n"
                          "print(sum(isinstance(f, _LmEvalFinder) for f in sys.meta_path))\n")
    result = run(probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"  # once, even though site already ran the installed copy


def test_silent_when_the_package_is_gone():
    """An editable install whose checkout was deleted must not print a traceback at every Python start."""
    result = run(pth_line() + "print('started')\n", "-S")  # -S: no site-packages, so no kvrescue_eval
    assert result.returncode == 0 and result.stdout == "started\n" and result.stderr == ""


BROKEN_DEPENDENCY = """
import sys
class MissingDependency:
    def find_spec(self, name, path=None, target=None):
        if name == "kvrescue_eval.model_adapters.lm_eval.discovery":
            raise ModuleNotFoundError("No module named 'somedep'", name="somedep")
sys.modules.pop("kvrescue_eval.model_adapters.lm_eval.discovery", None)
sys.meta_path.insert(0, MissingDependency())
"""


def test_other_import_errors_still_show():
    result = run(BROKEN_DEPENDENCY + pth_line())
    assert result.returncode != 0 and "No module named 'somedep'" in result.stderr
