"""The leaderboard page (`kvrescue-eval leaderboard build` writes index.html), checked in a real headless Chromium:
it renders, its table sorts by a clicked column, its filters hide rows, its Pareto plots show the rows shown, and
the paper's rows are marked. Also without a browser: the page needs no network, and a rebuild with nothing changed
rewrites no file (page, table or plot).

Chromium and its driver are Debian's (`apt-get install chromium chromium-driver`, .ci/run installs them); Selenium
drives them with SE_OFFLINE set, so it never looks for a driver on the network.
"""

import json
import os
import re
import shutil
import tempfile

import pytest

from kvrescue_eval.analysis.cost import KIB
from kvrescue_eval.analysis.leaderboard_page import kv_kib_per_token
from kvrescue_eval.cli import main

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(not (CHROMIUM and DRIVER) and not os.environ.get("CI"),
                                   reason="headless Chromium not installed (apt-get install chromium chromium-driver)")
SYNTHETIC_BASE = "org/Base-7B"


@pytest.fixture(scope="module")
def leaderboard(grid, tmp_path_factory):
    """The paper's 40 rows and the 6 submissions of the synthetic grid (4 problems each: not ranked)."""
    folder = tmp_path_factory.mktemp("leaderboard")
    assert main(["report", str(grid), "--out", str(folder / "report"), "--no-plots", "--submission",
                 "--submissions-dir", str(folder / "submissions")]) == 0
    assert main(["leaderboard", "paper", "--dir", str(folder)]) == 0
    assert main(["leaderboard", "build", "--dir", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def browser():
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1400",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def shown_rows(driver):
    return [tr for tr in driver.find_elements("css selector", "#leaderboard tbody tr") if tr.is_displayed()]


def column(driver, name):
    headers = [th.text.strip(" ▲▼") for th in driver.find_elements("css selector", "#leaderboard th")]
    index = headers.index(name)
    return [tr.find_elements("tag name", "td")[index].text for tr in shown_rows(driver)]


def numbers(cells):
    return [float(c.replace(",", "")) for c in cells if c != "—"]


@needs_browser
def test_the_page_renders_sorts_filters_and_plots(leaderboard, browser):
    browser.get((leaderboard / "index.html").as_uri())
    assert browser.find_element("tag name", "body").get_attribute("data-ready") == "true"   # the script ran
    assert len(shown_rows(browser)) == 46
    references = browser.find_elements("css selector", "#leaderboard tbody tr.reference")
    assert len(references) == 40 and all("paper" in tr.text for tr in references)

    # sorted by the average, best first; a click on it turns the order round
    averages = numbers(column(browser, "avg"))
    assert averages == sorted(averages, reverse=True) and len(averages) == 46
    avg_header = browser.find_element("css selector", "th[data-key=avg]")
    avg_header.click()
    assert avg_header.get_attribute("aria-sort") == "ascending"
    assert numbers(column(browser, "avg")) == sorted(averages)
    browser.find_element("css selector", "th[data-key=budget]").click()    # numbers: largest first
    budgets = numbers(column(browser, "budget"))
    assert budgets == sorted(budgets, reverse=True) and budgets[0] == 512

    # both plots show points: the paper's rows have a KV memory figure (shapes of the Qwen models are known) and
    # the paper's Table 1 base tokens (7B, N = 8); the synthetic runs report base tokens only
    memory, tokens = (browser.find_element("id", name) for name in ("plot-memory", "plot-tokens"))
    assert memory.size["width"] > 300 and memory.size["height"] > 200
    assert int(memory.get_attribute("data-points")) > 0
    assert len(memory.find_elements("css selector", ".point")) == int(memory.get_attribute("data-points"))
    assert memory.find_elements("css selector", "polyline.pareto")
    paper_tokens = int(tokens.get_attribute("data-points"))

    # filtering by model keeps that model's rows only; the plots follow the filter
    from selenium.webdriver.support.ui import Select
    Select(browser.find_element("css selector", "select[data-filter=model]")).select_by_value(SYNTHETIC_BASE)
    assert {cells for cells in column(browser, "model")} == {SYNTHETIC_BASE}
    assert len(shown_rows(browser)) == 5                     # rescue x2, bon x2, full (the helper is its own model)
    assert int(memory.get_attribute("data-points")) == 0     # an unknown model has no KV memory figure
    assert 0 < int(tokens.get_attribute("data-points")) != paper_tokens
    browser.get_screenshot_as_png()  # renders to pixels without error


def test_the_page_needs_no_network_and_marks_the_papers_rows(leaderboard):
    page = (leaderboard / "index.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page
    data = json.loads(re.search(r'<script type="application/json" id="leaderboard-data">(.*?)</script>', page,
                                re.S).group(1))
    assert sum(row["source"] == "reference" for row in data["rows"]) == 40


def test_kv_memory_per_context_token_follows_the_cost_model():
    # Qwen2.5-Math-7B: 28 layers x 4 KV heads x 128 x 2 (keys, values) x 2 bytes = 57,344 B = 56 KiB per token;
    # the 1.5B helper: 28 x 2 x 128 x 2 x 2 = 28 KiB. At 4096 tokens an evicted base holds 64 + 128 slots.
    base, helper = "Qwen/Qwen2.5-Math-7B-Instruct", "Qwen/Qwen2.5-Math-1.5B-Instruct"
    protocol = {"max_context": 4096}
    assert kv_kib_per_token({"mode": "full", "base": base}, protocol) == 56
    assert kv_kib_per_token({"mode": "bon", "base": base, "budget": 64, "buffer": 128}, protocol) == \
        pytest.approx(56 * 192 / 4096, abs=1e-3)
    assert kv_kib_per_token({"mode": "rescue", "base": base, "helper": helper, "budget": 64, "buffer": 128},
                            protocol) == pytest.approx(56 * 192 / 4096 + 28, abs=1e-3)
    assert kv_kib_per_token({"mode": "helper", "base": None, "helper": helper}, protocol) == 28
    assert kv_kib_per_token({"mode": "full", "base": "org/Unknown"}, protocol) is None
    assert KIB == 1024


def test_a_rebuild_with_nothing_changed_rewrites_nothing(leaderboard, capsys):
    files = ("index.html", "LEADERBOARD.md", "leaderboard.png", "leaderboard.svg")
    before = {name: ((leaderboard / name).read_bytes(), (leaderboard / name).stat().st_mtime_ns) for name in files}
    capsys.readouterr()
    assert main(["leaderboard", "build", "--dir", str(leaderboard)]) == 0
    assert "nothing changed" in capsys.readouterr().err
    assert {name: ((leaderboard / name).read_bytes(), (leaderboard / name).stat().st_mtime_ns) for name in files} == before


def test_the_committed_page_and_table_are_what_build_writes(tmp_path):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2] / "leaderboards"
    shutil.copytree(repo / "submissions", tmp_path / "submissions")
    assert main(["leaderboard", "build", "--dir", str(tmp_path), "--no-plots"]) == 0
    for name in ("index.html", "LEADERBOARD.md"):
        assert (tmp_path / name).read_text() == (repo / name).read_text(), f"rebuild {name}: make leaderboard"
