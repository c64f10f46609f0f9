"""The progress bar counts resumed problems from the start and shows live counts between problem ends."""

import io

from kvrescue_eval.model_adapters.lm_eval.progress import Progress


def test_resumed_problems_start_the_bar_and_live_counts_show_before_a_problem_ends():
    out = io.StringIO()
    progress = Progress(10, 4, interval=0.0, file=out)
    assert progress.bar.n == 4 and "(4 resumed)" in progress.bar.desc
    for role in ("base", "helper", "helper", "helper"):
        progress.on_event("decode", role=role, tokens=8)
        progress.on_event("commit", role=role)
    progress.on_event("abort", key=("p", 0), reason="entropy")
    shown = out.getvalue()                     # redrawn while no problem has finished
    assert "steps=4" in shown and "helper=75%" in shown and "early_exits=1" in shown and "tok/s=" in shown
    assert " 4/10" in shown
    progress.on_event("finish", key=("p", 0))
    progress.close()
    assert " 5/10" in out.getvalue()
