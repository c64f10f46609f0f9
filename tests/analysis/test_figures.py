"""Report figures readable at any number of runs: a title, no axis that spans one point, the legend outside the
axes, one colour per model; the same analysis gives the same bytes."""

import pytest

from kvrescue_eval.analysis.comparisons import analyse
from kvrescue_eval.analysis.plots import figure5, figure5_figure, figure6_figure
from kvrescue_eval.analysis.runs import read_runs
from synthetic_lm_eval_runs import kvrescue_info, write_run

pytest.importorskip("matplotlib")


def one_rescue_run(tmp_path):
    """The README's main job: a single rescue run, every answer wrong (the y values are all 0)."""
    write_run(tmp_path / "runs", {"math500": [[0], [0], [0]]}, model_info=kvrescue_info("rescue"),
              stats={"math500": {"steps": 7.0, "helper_steps": 4.0}})
    return analyse(read_runs([tmp_path / "runs"]))


def boxes_overlap(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("make", [figure5_figure, figure6_figure])
def test_one_run_gives_readable_axes_a_title_and_a_legend_beside_them(tmp_path, make):
    figure = make(one_rescue_run(tmp_path))
    figure.canvas.draw()
    (ax,) = [ax for ax in figure.axes if ax.get_visible()]
    low, high = ax.get_ylim()
    assert high - low >= 10                        # percent: not -0.04 to 0.04 around a single value
    left, right = ax.get_xlim()
    assert right / left > 1.5                      # one budget (64): a range around it
    assert left < 64 < right
    assert (figure._suptitle and figure._suptitle.get_text()) or ax.get_title()
    (legend,) = figure.legends
    renderer = figure.canvas.get_renderer()
    assert not boxes_overlap(legend.get_window_extent(renderer), ax.get_window_extent(renderer))


def test_one_colour_per_model(tmp_path):
    for base in ("org/Base-7B", "org/Other-7B"):
        for mode in ("rescue", "bon", "full"):
            write_run(tmp_path / "runs" / base.split("/")[1] / mode, {"math500": [[1], [0]]},
                      model_info=kvrescue_info(mode, base=base))
    figure = figure5_figure(analyse(read_runs([tmp_path / "runs"])))
    (ax,) = [ax for ax in figure.axes if ax.get_visible()]
    colours = {}
    for line in ax.get_lines():
        model = "Other-7B" if "Other-7B" in line.get_label() else "Base-7B"
        colours.setdefault(model, set()).add(line.get_color())
    assert all(len(c) == 1 for c in colours.values()) and colours["Base-7B"] != colours["Other-7B"]


def test_the_same_analysis_gives_the_same_bytes(tmp_path):
    analysis = one_rescue_run(tmp_path)
    assert figure5(analysis) == figure5(analysis)
