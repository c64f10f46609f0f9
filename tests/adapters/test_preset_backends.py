"""docs/gpu.md and docs/model.md say, role by role, which library runs each preset's base, helper and scorer: their
tables are the presets (a preset added, or a role moved to another backend, without the docs fails here)."""

import importlib
from pathlib import Path

from kvrescue_eval.model_adapters.backends import backend_class
from kvrescue_eval.model_adapters.settings import presets
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args
from kvrescue_eval.model_adapters.vllm import engine
from markdown_cells import rows_headed

DOCS = Path(__file__).resolve().parents[2] / "docs"
WHERE = "vLLM where installed, else transformers"


def role_table(page: str) -> dict[str, list[str]]:
    roles = ("base runs on", "helper runs on", "scorer runs on")
    return {row["preset"].strip("`"): [row[role] for role in roles]
            for row in rows_headed((DOCS / page).read_text(), "preset", *roles)}


def presets_without_vllm(monkeypatch) -> dict:
    """The presets as a machine without vLLM reads them (presets.py chooses at import); this machine's after."""
    monkeypatch.setattr(engine, "vllm_available", lambda: False)
    try:
        return importlib.reload(presets).PRESETS
    finally:
        monkeypatch.undo()
        importlib.reload(presets)


def libraries(preset: str, elsewhere: dict) -> list[str]:
    """What runs the base, the helper and the scorer, as the tables write it; `elsewhere`: the presets without vLLM."""
    settings = parse_model_args({"preset": preset})
    chosen = [settings.backends_of.base, settings.backends_of.helper, settings.scorer_backend]
    keys = ("base_backend", "helper_backend", "prm_backend")
    follows_installation = any(presets.PRESETS[preset].get(key) != elsewhere[preset].get(key) for key in keys)
    return [WHERE if follows_installation else backend_class(name).title for name in chosen]


def test_the_role_tables_are_the_presets(monkeypatch):
    elsewhere = presets_without_vllm(monkeypatch)
    for page in ("gpu.md", "model.md"):
        table = role_table(page)
        assert set(table) == set(presets.PRESETS), page
        for preset, cells in table.items():
            written = [WHERE if cell.startswith(WHERE) else cell.split(" (")[0] for cell in cells]
            assert written == libraries(preset, elsewhere), (page, preset)
