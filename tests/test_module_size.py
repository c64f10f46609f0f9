"""No module of model_adapters/ is over 300 lines (the project's rule: the adapters read as well as the core)."""

from pathlib import Path

ADAPTERS = Path(__file__).resolve().parents[1] / "model_adapters"
LIMIT = 300


def test_no_adapter_module_is_over_300_lines():
    sizes = {path.relative_to(ADAPTERS).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in ADAPTERS.rglob("*.py")}
    assert len(sizes) > 40  # every sub-package's modules were found
    over = {name: lines for name, lines in sizes.items() if lines > LIMIT}
    assert not over, f"over {LIMIT} lines: {over}: split them"
