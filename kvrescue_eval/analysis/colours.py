"""One colour per model, the same in every figure and on the leaderboard page (matplotlib's tab10 cycle)."""

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")


def model_colours(models):
    """model -> colour, by sorted name (so a model keeps its colour whatever else is shown beside it)."""
    return {model: PALETTE[index % len(PALETTE)] for index, model in enumerate(sorted(set(models)))}
