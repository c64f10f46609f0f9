"""Figures 5 and 6 of the paper from an analysis, rendered to PNG and SVG bytes.

matplotlib is imported here, inside the functions, so the rest of the package never needs it.
"""

import io
from collections import defaultdict


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("plots need matplotlib: pip install matplotlib (or pass --no-plots)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _render(figure):
    out = {}
    for fmt in ("png", "svg"):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=fmt, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else None)
        out[fmt] = buffer.getvalue()
    return out


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
        lines = defaultdict(dict)
        levels = {}
        for comp in (c for c in analysis.comparisons if c.rescue.benchmark == bench):
            s = comp.rescue.setting
            lines[("rescue", _label(s))][s.budget] = comp.rescue.accuracy.mean
            if comp.bon:
                lines[("bon", _label(comp.bon.setting))][s.budget] = comp.bon.accuracy.mean
            if comp.full:
                levels[("full", comp.full.setting.base.split("/")[-1])] = comp.full.accuracy.mean
            if comp.helper:
                name = (comp.helper.setting.helper or comp.helper.setting.base).split("/")[-1]
                levels[("helper", name)] = comp.helper.accuracy.mean
        for (mode, label), points in sorted(lines.items()):
            budgets = sorted(points)
            ax.plot(budgets, [100 * points[b] for b in budgets], marker="o" if mode == "rescue" else "s",
                    linestyle="-" if mode == "rescue" else "--", label=f"{mode}: {label}")
        for index, ((mode, label), value) in enumerate(sorted(levels.items())):
            ax.axhline(100 * value, color=f"C{len(lines) + index}", linestyle=":" if mode == "full" else "-.",
                       label=f"{mode}: {label}")
        _budget_axis(ax, {b for points in lines.values() for b in points})
        ax.set_title(bench)
        ax.set_ylabel(f"{analysis.metric} (%)")
        ax.legend(fontsize=6)
    out = _render(figure)
    plt.close(figure)
    return out


def figure6(analysis):
    """Share of committed steps that came from the helper vs budget, one line per benchmark."""
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(5.5, 3.8))
    lines = defaultdict(dict)
    for cell in analysis.cells:
        stats = cell.stats
        if cell.setting.mode == "rescue" and stats.get("steps"):
            lines[(cell.benchmark, _label(cell.setting))][cell.setting.budget] = stats.get("helper_steps", 0) / stats["steps"]
    for (bench, label), points in sorted(lines.items()):
        budgets = sorted(points)
        ax.plot(budgets, [100 * points[b] for b in budgets], marker="o", label=f"{bench} ({label})")
    _budget_axis(ax, {b for points in lines.values() for b in points})
    ax.set_ylabel("helper share of committed steps (%)")
    if lines:
        ax.legend(fontsize=6)
    out = _render(figure)
    plt.close(figure)
    return out
