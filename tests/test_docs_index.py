"""The docs' home page lists every page of the site's navigation, and the navigation every page in docs/."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def nav_pages() -> list[str]:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    return [page for entry in config["nav"] for page in entry.values()]


def test_the_home_page_lists_every_page_of_the_navigation():
    listed = set(re.findall(r"^\| \[[^]]+\]\(([\w-]+\.md)\)", (ROOT / "docs" / "index.md").read_text(encoding="utf-8"),
                            flags=re.M))
    assert listed == set(nav_pages()) - {"index.md"}


def test_every_page_is_in_the_navigation():
    assert {path.name for path in (ROOT / "docs").glob("*.md")} == set(nav_pages())
