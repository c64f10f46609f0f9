"""Figures 3, 5 and 6 of the paper and the leaderboard plot, rendered to PNG and SVG bytes.

Readable whatever the number of runs: every figure has a title; one colour per model (analysis/colours.py),
one line style per mode (and in the leaderboard plot one line width per N); the legend sits outside the axes, beside them, so it never covers data; an axis never
spans a single point (one budget gets a range around it, one accuracy a range of at least 10 points).
The same data give the same bytes (no date, fixed SVG ids), so rebuilding with nothing changed rewrites nothing.

matplotlib is imported here, inside the functions, so the rest of the package never needs it.
"""

import io
import math
from collections import defaultdict

from kvrescue_eval.analysis.colours import model_colours

MODE_STYLES = {"rescue": {"marker": "o", "linestyle": "-"}, "bon": {"marker": "s", "linestyle": "--"},
               "full": {"linestyle": ":"}, "helper": {"linestyle": "-."}}
MIN_PERCENT_SPAN = 10.0


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("plots need matplotlib: pip install matplotlib (or pass --no-plots)") from None
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "kvrescue-eval"  # stable element ids: the same figure, the same bytes
    import matplotlib.pyplot as plt
    return plt


def rendered(figure):
    """PNG and SVG bytes of a figure, which is then closed."""
    out = {}
    for fmt in ("png", "svg"):
        buffer = io.BytesIO()
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        figure.savefig(buffer, format=fmt, bbox_inches="tight", metadata=metadata, dpi=110)
        out[fmt] = buffer.getvalue()
    _pyplot().close(figure)
    return out


def short(model):
    return (model or "").split("/")[-1]


def plot_vs_budget(ax, lines, levels, ylabel):
    """Fractions (drawn as %) against the KV budget. `lines`: label -> ({budget: value}, style);
    `levels`: label -> (value, style), drawn as horizontal lines. Styles carry their colour."""
    values = []
    for label, (points, style) in sorted(lines.items()):
        budgets = sorted(points)
        ax.plot(budgets, [100 * points[b] for b in budgets], label=label, **style)
        values += [100 * points[b] for b in budgets]
    for label, (value, style) in sorted(levels.items()):
        ax.axhline(100 * value, label=label, **style)
        values.append(100 * value)
    _budget_axis(ax, {b for points, _ in lines.values() for b in points})
    _percent_axis(ax, values)
    ax.set_ylabel(ylabel)
    ax.grid(True, color="#e6e6e6", linewidth=0.6)


def _percent_axis(ax, values):
    if not values:
        ax.set_ylim(0, 100)
        return
    low, high = min(values), max(values)
    if high - low < MIN_PERCENT_SPAN:
        middle = (low + high) / 2
        low, high = middle - MIN_PERCENT_SPAN / 2, middle + MIN_PERCENT_SPAN / 2
        if low < 0:
            low, high = 0, MIN_PERCENT_SPAN
        if high > 100:
            low, high = 100 - MIN_PERCENT_SPAN, 100
    pad = (high - low) * 0.08
    ax.set_ylim(max(low - pad, -1), min(high + pad, 101))


def _budget_axis(ax, budgets):
    from matplotlib.ticker import NullFormatter
    ax.set_xscale("log", base=2)
    if budgets:
        ticks = sorted(budgets)
        ax.set_xticks(ticks, [str(b) for b in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(ticks[0] / 1.4, ticks[-1] * 1.4)  # one budget: a range around it, not a point
    ax.set_xlabel("KV budget B (slots)")


def _legend_beside(figure, axes):
    """One legend for the figure, right of the axes (outside the data), entries of every panel once."""
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        figure.legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.0, 0.95),
                      fontsize=8, frameon=False)


def _axes_grid(plt, count):
    columns = min(count, 3)
    rows = (count + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False,
                                layout="constrained")
    flat = [ax for row in axes for ax in row]
    for ax in flat[count:]:
        ax.set_visible(False)
    return figure, flat[:count]


def _label(setting):
    parts = [short(setting.base), setting.evictor or "", f"N={setting.n}"]
    if setting.helper:
        parts.append("helper " + short(setting.helper))
    return " ".join(p for p in parts if p)


def _styled(mode, colour, **extra):
    return {**MODE_STYLES[mode], "color": colour, **extra}


def figure5(analysis):
    """Figure 5 as PNG and SVG bytes."""
    return rendered(figure5_figure(analysis))


def figure5_figure(analysis):
    """pass@1 vs budget per benchmark: rescue and bon as lines, full and helper alone as levels."""
    plt = _pyplot()
    benchmarks = sorted({c.rescue.benchmark for c in analysis.comparisons})
    colours = model_colours([c.setting.base for c in analysis.cells]
                            + [c.setting.helper for c in analysis.cells if c.setting.helper])
    figure, axes = _axes_grid(plt, max(len(benchmarks), 1))
    for ax, bench in zip(axes, benchmarks):
        points, levels = defaultdict(dict), {}
        for comp in (c for c in analysis.comparisons if c.rescue.benchmark == bench):
            s = comp.rescue.setting
            points["rescue", s.base, s.n, _label(s)][s.budget] = comp.rescue.accuracy.mean
            if comp.bon:
                points["bon", s.base, s.n, _label(comp.bon.setting)][s.budget] = comp.bon.accuracy.mean
            if comp.full:
                base = comp.full.setting.base
                levels[f"full: {short(base)} N={s.n}"] = (comp.full.accuracy.mean,
                                                           _styled("full", colours[base], linewidth=_width(s.n)))
            if comp.helper:
                name = comp.helper.setting.helper or comp.helper.setting.base
                levels[f"helper alone: {short(name)} N={s.n}"] = (
                    comp.helper.accuracy.mean, _styled("helper", colours[name], linewidth=_width(s.n)))
        lines = {f"{mode}: {label}": (values, _styled(mode, colours[base], linewidth=_width(n)))
                 for (mode, base, n, label), values in points.items()}
        plot_vs_budget(ax, lines, levels, f"{analysis.metric} (%)")
        ax.set_title(bench, fontsize=10)
    figure.suptitle(f"Accuracy against the KV budget ({analysis.metric}; the paper's Figure 5)", fontsize=11)
    _legend_beside(figure, axes)
    return figure


def figure6(analysis):
    """Figure 6 as PNG and SVG bytes."""
    return rendered(figure6_figure(analysis))


def figure6_figure(analysis):
    """Share of committed steps that came from the helper vs budget: a colour per model, a marker per benchmark."""
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
    rescue = [c for c in analysis.cells if c.setting.mode == "rescue" and c.stats.get("steps")]
    colours = model_colours(c.setting.base for c in rescue)
    markers = {bench: "osD^v<>px*"[i % 10] for i, bench in enumerate(sorted({c.benchmark for c in rescue}))}
    lines = defaultdict(dict)
    for cell in rescue:
        lines[(cell.benchmark, cell.setting.base, _label(cell.setting))][cell.setting.budget] = (
            cell.stats.get("helper_steps", 0) / cell.stats["steps"])
    plot_vs_budget(ax, {f"{bench}: {label}": (points, {"marker": markers[bench], "color": colours[base]})
                        for (bench, base, label), points in lines.items()},
                   {}, "helper share of committed steps (%)")
    ax.set_title("Steps taken from the helper (the paper's Figure 6)", fontsize=11)
    _legend_beside(figure, [ax])
    return figure


def figure3(histograms):
    """Figure 3 as PNG and SVG bytes."""
    return rendered(figure3_figure(histograms))


OUTCOME_COLOURS = {"coherent": "tab:blue", "degenerate": "tab:red", "aborted": "tab:orange"}
STATISTIC_LABELS = {"entropy": "largest moving-average entropy over {window} tokens (nats)",
                    "gzip": "gzip ratio of the last {gzip_chars} characters"}


def figure3_figure(histograms):
    """Per run and task (analysis/candidate_histograms.py), the histograms of the two statistics by outcome, the
    run's thresholds as dashed lines; counts on a symmetric-log axis, so a small mode stays visible."""
    from kvrescue_eval.analysis.candidate_histograms import BINS

    plt = _pyplot()
    figure, axes = plt.subplots(len(histograms), 2, figsize=(10, 3.2 * len(histograms)), squeeze=False,
                                layout="constrained")
    for row, entry in zip(axes, histograms):
        detector = entry.detector or {}
        for ax, statistic in zip(row, BINS):
            for outcome, records in entry.records.items():
                if records:
                    ax.stairs(entry.counts(statistic, outcome), BINS[statistic], fill=True, alpha=0.45,
                              color=OUTCOME_COLOURS[outcome], label=outcome)
            if entry.threshold(statistic) is not None:
                ax.axvline(entry.threshold(statistic), color="black", linestyle="--", label="detector threshold")
            ax.set_yscale("symlog", linthresh=1)
            ax.set_xlabel(STATISTIC_LABELS[statistic].format(window=detector.get("window", "?"),
                                                             gzip_chars=detector.get("gzip_chars", "?")), fontsize=8)
            ax.set_ylabel("base candidates")
            s = entry.run.setting
            budget = f" B={s.budget}" if s.budget else ""
            ax.set_title(f"{entry.task}: {_label(s)}{budget} {s.mode}, detector {s.detector}", fontsize=9)
    figure.suptitle("Base candidates, coherent against degenerate (the paper's Figure 3)", fontsize=11)
    _legend_beside(figure, [ax for row in axes for ax in row])
    return figure


def _width(n):
    """Thicker lines for more candidates: N = 1 and N = 8 of one model and mode stay apart."""
    return min(1.0 + 0.45 * math.log2(max(n, 1)), 3.0)


def leaderboard_plot(documents):
    """The leaderboard plot as PNG and SVG bytes."""
    return rendered(leaderboard_figure(documents))


def leaderboard_figure(documents):
    """Average pass@1 vs budget, one line per (source, mode, base, N); full and helper alone as levels. A colour
    per model, a line style per mode, a line width per N, hollow markers for the paper's rows; identical levels
    drawn once."""
    from kvrescue_eval.analysis.submission import leaderboard_rows, not_ranked_reason

    plt = _pyplot()
    _, rows = leaderboard_rows(documents)
    ranked = [(average, doc) for average, doc, _ in rows if average is not None and not_ranked_reason(doc) is None]
    model = {id(doc): doc["setting"]["helper"] if doc["setting"]["mode"] == "helper" else doc["setting"]["base"]
             for _, doc in ranked}
    colours = model_colours(model.values())
    lines, levels = {}, {}
    for average, doc in ranked:
        s, reference = doc["setting"], doc["source"]["kind"] == "reference"
        label = f"{s['mode']} {short(model[id(doc)])} N={s['n']}" + (" (paper)" if reference else "")
        style = _styled(s["mode"], colours[model[id(doc)]], linewidth=_width(s["n"]))
        if reference and "marker" in style:
            style["markerfacecolor"] = "white"
        if s.get("budget"):
            lines.setdefault(f"{label} {s.get('evictor')}", ({}, style))[0][s["budget"]] = average
        else:
            levels[label] = (average, style)
    figure, ax = plt.subplots(figsize=(7.5, 4.6), layout="constrained")
    plot_vs_budget(ax, lines, levels, "mean pass@1, boxed and correct (%)")
    ax.set_title("kvrescue-eval leaderboard: accuracy against the KV budget", fontsize=11)
    _legend_beside(figure, [ax])
    return figure
