"""The progress bar counts problems against their exact number (resumed ones from the start), shows the committed
steps moving before any problem ends, labels each data-parallel rank, and writes the lines a sweep reads."""

import io
import json
from types import SimpleNamespace

from kvrescue_eval.model_adapters.lm_eval.progress import PROGRESS_VARIABLE, Progress


def finished(steps):
    return SimpleNamespace(stats={"steps": steps})


def last_line(out: io.StringIO) -> str:
    return out.getvalue().split("\r")[-1]


def test_the_bar_moves_during_the_first_problem_with_tokens_per_second():
    out = io.StringIO()
    progress = Progress(3, 0, interval=0.0, file=out)
    for role in ("base", "helper", "helper", "helper"):
        progress.on_event("decode", role=role, tokens=8)
        progress.on_event("commit", role=role)
    progress.on_event("abort", key=("p", 0), reason="entropy")
    shown = last_line(out)
    assert "0/3" in shown and "steps=4" in shown and "helper=75%" in shown and "early_exits=1" in shown
    progress.on_event("finish", key=("p", 0), result=finished(4))
    shown = last_line(out)
    assert progress.bar.total == 3 and " 1/3 " in shown and "33%" in shown
    progress.close()


def test_no_total_is_estimated_and_no_separator_is_doubled():
    out = io.StringIO()
    progress = Progress(8, 0, interval=0.0, file=out)
    for _ in range(30):                       # a long first problem: the total stays the 8 problems
        progress.on_event("commit", role="base")
    progress.on_event("finish", key=("p", 0), result=finished(30))
    progress.on_event("finish", key=("p", 1), result=finished(1))
    progress.close()
    assert progress.bar.total == 8 and "2/8" in last_line(out) and "25%" in last_line(out)
    assert ": :" not in out.getvalue() and "kvrescue: problems: " in last_line(out)


def test_resumed_problems_and_their_steps_start_the_bar():
    out = io.StringIO()
    progress = Progress(10, 4, resumed_steps=20, interval=0.0, file=out)
    assert progress.bar.n == 4 and progress.bar.total == 10 and "problems, 4 resumed" in progress.bar.desc
    progress.on_event("commit", role="base")
    assert "steps=21" in last_line(out)
    progress.close()


def test_each_rank_labels_its_bar_and_takes_its_own_line():
    bars = [Progress(2, 0, rank=rank, world_size=2, interval=0.0, file=io.StringIO()) for rank in (0, 1)]
    assert [bar.bar.desc.split(":")[0] for bar in bars] == ["kvrescue rank 0/2", "kvrescue rank 1/2"]
    assert [bar.bar.pos for bar in bars] != [bars[0].bar.pos] * 2
    for bar in bars:
        bar.close()


def test_a_sweep_reads_the_progress_lines(tmp_path, monkeypatch):
    record = tmp_path / "progress.jsonl"
    monkeypatch.setenv(PROGRESS_VARIABLE, str(record))
    progress = Progress(2, 0, interval=0.0, file=io.StringIO())
    progress.on_event("decode", role="base", tokens=5)
    progress.on_event("commit", role="base")
    progress.on_event("finish", key=("p", 0), result=finished(1))
    progress.close()
    last = json.loads(record.read_text().splitlines()[-1])
    assert {k: last[k] for k in ("rank", "problems", "done", "steps", "tokens")} == \
        {"rank": 0, "problems": 2, "done": 1, "steps": 1, "tokens": 5}
