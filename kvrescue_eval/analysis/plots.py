"""Figures 5 and 6 of the paper from an analysis, rendered to PNG and SVG bytes.

matplotlib is imported here, inside the functions, so the rest of the package never needs it.
"""

import io
from collections import defaultdict

MODE_STYLES = {"rescue": {"marker": "o", "linestyle": "-"}, "bon": {"marker": "s", "linestyle": "--"},
               "full": {"linestyle": ":"}, "helper": {"linestyle": "-."}}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("plots need matplotlib: pip install matplotlib (or pass --no-plots)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def rendered(figure):
    """PNG and SVG bytes of a figure, which is then closed."""
    out = {}
    for fmt in ("png", "svg"):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=fmt, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else None)
        out[fmt] = buffer.getvalue()
    _pyplot().close(figure)
    return out


def plot_vs_budget(ax, lines, levels, ylabel):
    """Fractions (drawn as %) against the KV budget: `lines` maps a label to ({budget: value}, plot style),
    `levels` a label to (value, line style), drawn as horizontal lines."""
    for label, (points, style) in sorted(lines.items()):
        budgets = sorted(points)
        ax.plot(budgets, [100 * points[b] for b in budgets], label=label, **style)
    for index, (label, (value, style)) in enumerate(sorted(levels.items())):
        ax.axhline(100 * value, color=f"C{len(lines) + index}", label=label, **style)
    _budget_axis(ax, {b for points, _ in lines.values() for b in points})
    ax.set_ylabel(ylabel)
    if lines or levels:
        ax.legend(fontsize=6)


def _label(setting):
    parts = [setting.base.split("/")[-1], setting.evictor or "", f"N={setting.n}"]
    if setting.helper:
        parts.append("helper " + setting.helper.split("/")[-1])
    return " ".join(p for p in parts if p)


def _budget_axis(ax, budgets):
    from matplotlib.ticker import NullFormatter
    ax.set_xscale("log", base=2)
    if budgets:
        ax.set_xticks(sorted(budgets), [str(b) for b in sorted(budgets)])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("KV budget B (slots)")


def _axes_grid(plt, count):
    columns = min(count, 3)
    rows = (count + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[count:]:
        ax.set_visible(False)
    return figure, flat


def figure5(analysis):
    """pass@1 vs budget per benchmark: rescue and bon as lines, full and helper alone as levels."""
    plt = _pyplot()
    benchmarks = sorted({c.rescue.benchmark for c in analysis.comparisons})
    figure, axes = _axes_grid(plt, max(len(benchmarks), 1))
    for ax, bench in zip(axes, benchmarks):
        points, levels = defaultdict(dict), {}
        for comp in (c for c in analysis.comparisons if c.rescue.benchmark == bench):
            s = comp.rescue.setting
            points["rescue", _label(s)][s.budget] = comp.rescue.accuracy.mean
            if comp.bon:
                points["bon", _label(comp.bon.setting)][s.budget] = comp.bon.accuracy.mean
            if comp.full:
                levels[f"full: {comp.full.setting.base.split('/')[-1]}"] = (comp.full.accuracy.mean, MODE_STYLES["full"])
            if comp.helper:
                name = (comp.helper.setting.helper or comp.helper.setting.base).split("/")[-1]
                levels[f"helper: {name}"] = (comp.helper.accuracy.mean, MODE_STYLES["helper"])
        lines = {f"{mode}: {label}": (values, MODE_STYLES[mode]) for (mode, label), values in points.items()}
        plot_vs_budget(ax, lines, levels, f"{analysis.metric} (%)")
        ax.set_title(bench)
    return rendered(figure)


def figure6(analysis):
    """Share of committed steps that came from the helper vs budget, one line per benchmark."""
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(5.5, 3.8))
    lines = defaultdict(dict)
    for cell in analysis.cells:
        stats = cell.stats
        if cell.setting.mode == "rescue" and stats.get("steps"):
            lines[(cell.benchmark, _label(cell.setting))][cell.setting.budget] = stats.get("helper_steps", 0) / stats["steps"]
    plot_vs_budget(ax, {f"{bench} ({label})": (points, {"marker": "o"}) for (bench, label), points in lines.items()},
                   {}, "helper share of committed steps (%)")
    return rendered(figure)


def leaderboard_plot(documents):
    """Average pass@1 vs budget, one line per (source, mode, base, N); full/helper as levels."""
    from kvrescue_eval.analysis.submission import leaderboard_rows, not_ranked_reason

    plt = _pyplot()
    _, rows = leaderboard_rows(documents)
    lines, levels = defaultdict(lambda: ({}, {"marker": "o"})), {}
    for average, doc, _ in rows:
        if average is None or not_ranked_reason(doc) is not None:
            continue
        s = doc["setting"]
        label = f"{s['mode']} {s['base'].split('/')[-1]} N={s['n']}" + (" (paper)" if doc["source"]["kind"] == "reference" else "")
        if s.get("budget"):
            lines[label + f" {s.get('evictor')}"][0][s["budget"]] = average
        else:
            levels[label] = (average, {"linestyle": ":"})
    figure, ax = plt.subplots(figsize=(6, 4))
    plot_vs_budget(ax, dict(lines), levels, "mean pass@1, boxed and correct (%)")
    return rendered(figure)
