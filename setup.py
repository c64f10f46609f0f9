"""Packaging glue that pyproject.toml cannot express.

1. `tasks/` and `model_adapters/` live at the top of the repository but install as
   `kvrescue_eval.tasks` and `kvrescue_eval.model_adapters` (no generic top-level module).
2. A one-line `.pth` file installs the lm-eval discovery hook, so the plain `lm_eval` command
   finds our tasks and the `kvrescue` model (lm-eval 0.4.13 has no plugin discovery). It must
   land in site-packages for both `pip install .` and `pip install -e .`.
"""
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH_NAME = "kvrescue_eval_lm_eval_discovery.pth"
# Silent when the package itself is gone (an editable install whose checkout was deleted), so that every
# Python start does not print a traceback; any other import error still shows.
PTH_LINE = ("import sys; exec(\"try:\\n import kvrescue_eval.model_adapters.lm_eval.discovery as _kvr\\n"
            "except ModuleNotFoundError as e:\\n if not (e.name or '').startswith('kvrescue_eval'): raise\\n"
            "else:\\n _kvr.install()\")\n")

ROOTS = {"kvrescue_eval": "kvrescue_eval", "kvrescue_eval.tasks": "tasks",
         "kvrescue_eval.model_adapters": "model_adapters"}


def _packages():
    found = []
    for name, folder in ROOTS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(folder)
                  if not any(f"{name}.{sub}" == other for other in ROOTS)]
    return found


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / PTH_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(PTH_LINE)

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [str(Path(self.build_lib) / PTH_NAME)]

    def get_output_mapping(self):
        mapping = super().get_output_mapping()
        mapping[str(Path(self.build_lib) / PTH_NAME)] = PTH_NAME
        return mapping


class _StrategyWithPth:
    """Wraps setuptools' editable strategy so the editable wheel carries the hook's .pth too."""

    def __init__(self, inner):
        self.inner = inner

    def __enter__(self):
        self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)

    def __call__(self, wheel, files, mapping):
        self.inner(wheel, files, mapping)
        # Sorted after setuptools' own "__editable__.*.pth", so its finder is installed first.
        wheel.writestr(PTH_NAME, PTH_LINE)


class EditableWheelWithPth(editable_wheel):
    def _select_strategy(self, *args, **kwargs):
        return _StrategyWithPth(super()._select_strategy(*args, **kwargs))


setup(
    packages=_packages(),
    package_dir={name: folder for name, folder in ROOTS.items()},
    # Data folders below a package (benchmark sets, trained testbed weights, tokenizers) are not
    # packages themselves, hence the recursive patterns.
    package_data={"": [f"**/*.{ext}" for ext in ("yaml", "jsonl", "json", "md", "txt", "safetensors", "csv", "svg", "png", "js", "css")]},
    include_package_data=True,
    cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth},
)
