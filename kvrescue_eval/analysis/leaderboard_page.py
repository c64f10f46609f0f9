"""The leaderboard as one static HTML page (leaderboards/index.html), written by `kvrescue-eval leaderboard build`.

Everything is inline (CSS, script, data): the page needs no network and no other file. The table is plain HTML
(readable without the script); the script (leaderboard_page.js) sorts it by any column, filters it by model,
evictor, budget and N, and draws two Pareto plots of the rows shown: mean pass@1 against KV memory per context
token, and against base tokens per problem. The paper's rows (kind `reference`) are marked, in the table and
as hollow markers. The same submissions give the same bytes (sorted data, no date), so a build with nothing
changed rewrites nothing.

KV memory per context token (KiB): the KV cache a trajectory holds at the protocol's context limit L, over L,
from the models' shapes (analysis/cost.py, known for bundled models and config.json paths): the full base
holds L slots, an evicted base min(L, budget + buffer), KV-Rescue adds the helper's full cache, the helper
alone is the helper's. Base tokens: the engine's mean per problem over the benchmarks (a run's engine_stats;
for the paper's rows, its Table 1, 7B and N = 8 only).
"""

import html
import json
from importlib import resources

from kvrescue_eval.analysis import paper
from kvrescue_eval.analysis.colours import model_colours
from kvrescue_eval.analysis.cost import KIB, load_shape
from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.analysis.submission import REFERENCE_NOTE, leaderboard_rows, not_ranked_reason

FILTERS = (("model", "model"), ("evictor", "evictor"), ("budget", "budget"), ("n", "N"))
MODES = ("rescue", "bon", "full", "helper")
SHAPES = {"rescue": "●", "bon": "■", "full": "▲", "helper": "◆"}


def _shape_bytes(model):
    try:
        return load_shape(model).kv_bytes_per_token
    except (AnalysisInputError, OSError, ValueError):
        return None


def kv_kib_per_token(setting, protocol):
    """KiB of KV cache per token of context at the protocol's context limit (None: a model's shape unknown)."""
    context = (protocol or {}).get("max_context") or paper.PROTOCOL["max_context"]
    mode = setting["mode"]
    base = _shape_bytes(setting["base"]) if mode != "helper" else 0
    helper = _shape_bytes(setting["helper"]) if mode in ("rescue", "helper") else 0
    if base is None or helper is None:
        return None
    if mode in ("rescue", "bon"):
        base *= min(context, setting["budget"] + (setting.get("buffer") or 0)) / context
    return round((base + helper) / KIB, 3)


def base_tokens(document):
    """Mean base tokens per problem over the benchmarks, or None."""
    if document["source"]["kind"] == "reference":
        return _paper_base_tokens(document["setting"])
    values = [entry["engine_stats"]["base_tokens"] for entry in document["benchmarks"].values()
              if isinstance(entry.get("engine_stats", {}).get("base_tokens"), (int, float))]
    return round(sum(values) / len(values), 1) if values else None


def _paper_base_tokens(setting):
    if paper.base_label(setting["base"]) != "7B" or setting["n"] != 8 or setting["mode"] not in ("rescue", "bon", "full"):
        return None
    budget = setting.get("budget") if setting["mode"] != "full" else None
    cells = [cell["base_tokens"] for (bench, b, mode), cell in paper.table1().items()
             if b == budget and mode == setting["mode"]]
    return round(sum(cells) / len(cells), 1) if cells else None


def page_rows(documents):
    """(benchmarks, rows): one JSON-ready row per submission, in the leaderboard's order."""
    benchmarks, ranked_rows = leaderboard_rows(documents)
    rows, rank = [], 0
    for order, (average, doc, means) in enumerate(ranked_rows):
        s = doc["setting"]
        reason = not_ranked_reason(doc)
        rank += reason is None
        rows.append({
            "order": order, "rank": rank if reason is None else None, "name": doc["name"],
            "source": doc["source"]["kind"], "citation": doc["source"].get("citation"),
            "model": s["helper"] if s["mode"] == "helper" else s["base"], "mode": s["mode"],
            "helper": s.get("helper") if s["mode"] == "rescue" else None, "evictor": s.get("evictor"),
            "budget": s.get("budget"), "n": s["n"], "detector": s.get("detector"),
            "benchmarks": {b: round(m, 4) for b, m in means.items()},
            "avg": None if average is None else round(average, 4), "ranked": reason is None, "why_not_ranked": reason,
            "kv_kib_per_token": kv_kib_per_token(s, doc.get("protocol")), "base_tokens": base_tokens(doc),
        })
    return benchmarks, rows


def _cell(value, kind=""):
    return f'<td class="{kind}">{html.escape("—" if value is None else str(value))}</td>'


def _percent(value):
    return None if value is None else f"{100 * value:.1f}"


def _table_row(row, benchmarks, colours):
    badge = ('<span class="badge">paper</span> ' if row["source"] == "reference" else "") + (
        "" if row["ranked"] else f'<span class="badge partial" title="{html.escape(row["why_not_ranked"])}">'
                                 "not ranked</span> ")
    cells = [_cell(row["rank"], "number"),
             f'<td>{badge}{html.escape(row["name"])}</td>',
             f'<td><span class="dot" style="background:{colours[row["model"]]}"></span>{html.escape(row["model"])}</td>',
             _cell(row["mode"]), _cell(row["helper"]), _cell(row["evictor"]), _cell(row["budget"], "number"),
             _cell(row["n"], "number"), _cell(row["detector"])]
    cells += [_cell(_percent(row["benchmarks"].get(b)), "number") for b in benchmarks]
    cells += [_cell(_percent(row["avg"]), "number"), _cell(row["kv_kib_per_token"], "number"),
              _cell(row["base_tokens"], "number")]
    kind = ' class="reference"' if row["source"] == "reference" else ""
    return f'<tr data-order="{row["order"]}"{kind}>' + "".join(cells) + "</tr>"


def _select(key, label, rows):
    values = sorted({row[key] for row in rows if row[key] is not None}, key=lambda v: (isinstance(v, str), v))
    options = "".join(f'<option value="{html.escape(str(v))}">{html.escape(str(v))}</option>' for v in values)
    return f'<label>{label} <select data-filter="{key}"><option value="">all</option>{options}</select></label>'


def _legend(colours, rows):
    models = "".join(f'<li><span class="swatch" style="background:{colour}"></span>{html.escape(model)}</li>'
                     for model, colour in colours.items())
    modes = "".join(f"<li>{SHAPES[m]} {m}</li>" for m in MODES if any(row["mode"] == m for row in rows))
    return (f'<div class="legend"><strong>model</strong><ul>{models}</ul><strong>mode</strong><ul>{modes}</ul>'
            "<ul><li>○ hollow: the paper's rows</li><li>- - Pareto front: no row is as good for less</li></ul></div>")


def _plot(plot_id, title, xlabel, unit):
    return (f'<svg id="{plot_id}" viewBox="0 0 520 330" role="img" aria-label="{html.escape(title)}" '
            f'data-title="{html.escape(title)}" data-xlabel="{html.escape(xlabel)}" data-unit="{html.escape(unit)}" '
            'data-empty="no row shown has this figure"></svg>')


def leaderboard_html(documents):
    benchmarks, rows = page_rows(documents)
    colours = model_colours(row["model"] for row in rows)
    asset = resources.files("kvrescue_eval.analysis")
    style = (asset / "leaderboard_page.css").read_text("utf-8")
    script = (asset / "leaderboard_page.js").read_text("utf-8")
    data = json.dumps({"benchmarks": benchmarks, "rows": rows, "colours": colours}, sort_keys=True,
                      ensure_ascii=False).replace("</", "<\\/")
    columns = ([("rank", "rank", True), ("name", "name", False), ("model", "model", False), ("mode", "mode", False),
                ("helper", "helper", False), ("evictor", "evictor", False), ("budget", "budget", True),
                ("n", "N", True), ("detector", "detector", False)] + [(b, b, True) for b in benchmarks]
               + [("avg", "avg", True), ("kv_kib_per_token", "KV KiB/token", True),
                  ("base_tokens", "base tokens", True)])
    header = "".join(f'<th data-key="{key}" data-numeric="{str(numeric).lower()}" aria-sort="none">{html.escape(label)}</th>'
                     for key, label, numeric in columns)
    controls = "".join(_select(key, label, rows) for key, label in FILTERS)
    return "\n".join([
        "<!doctype html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>kvrescue-eval leaderboard</title>", f"<style>\n{style}</style>", "</head>", "<body>",
        "<h1>kvrescue-eval leaderboard</h1>",
        '<p class="lead">pass@1 (%), boxed and correct (the paper\'s Table 5 metric), mean over seeds, averaged over the '
        "benchmarks a row reports. Ranked: every problem and the paper's step and context limits; the others are "
        f"marked <em>not ranked</em> (hover for why). Rows marked <span class=\"badge\">paper</span> are {REFERENCE_NOTE}. "
        "Click a column to sort.</p>",
        f'<div class="controls">{controls}'
        '<label><input type="checkbox" id="show-reference" checked> the paper\'s rows</label>'
        '<label><input type="checkbox" id="comparable-only"> ranked rows only</label><span id="shown"></span></div>',
        '<div class="plots">'
        + _plot("plot-memory", "Accuracy against KV memory", "KV memory per context token (KiB, log scale)", "KiB/token")
        + _plot("plot-tokens", "Accuracy against base tokens", "base tokens per problem", "base tokens")
        + _legend(colours, rows) + "</div>",
        f'<div class="table-scroll"><table id="leaderboard"><thead><tr>{header}</tr></thead><tbody>',
        *(_table_row(row, benchmarks, colours) for row in rows),
        "</tbody></table></div>",
        "<footer>Generated by <code>kvrescue-eval leaderboard build</code> from leaderboards/submissions/; do not "
        "edit. KV memory per context token: the KV cache one trajectory holds at the context limit, over that limit "
        "(models of known shape only). Base tokens: the paper's from its Table 1 (7B, N = 8).</footer>",
        f'<script type="application/json" id="leaderboard-data">{data}</script>',
        f"<script>\n{script}</script>", "</body>", "</html>", ""])
