"""The progress bar moves with every committed step (before any problem ends), counts resumed problems and their
steps from the start, estimates its total once a problem has ended, labels each data-parallel rank, and writes
the lines a sweep reads."""

import io
import json
from types import SimpleNamespace

from kvrescue_eval.model_adapters.lm_eval.progress import PROGRESS_VARIABLE, Progress


def finished(steps):
    return SimpleNamespace(stats={"steps": steps})


def test_the_bar_moves_during_the_first_problem_with_tokens_per_second():
    out = io.StringIO()
    progress = Progress(3, 0, interval=0.0, file=out)
    for role in ("base", "helper", "helper", "helper"):
        progress.on_event("decode", role=role, tokens=8)
        progress.on_event("commit", role=role)
    progress.on_event("abort", key=("p", 0), reason="entropy")
    assert progress.bar.n == 4 and progress.bar.total is None     # no problem ended: no estimate yet
    shown = out.getvalue()
    assert "problems 0/3" in shown and "helper=75%" in shown and "early_exits=1" in shown and "tok/s=" in shown
    assert " 4step" in shown.replace(" [", "")   # tqdm's count of steps without a total
    progress.on_event("finish", key=("p", 0), result=finished(4))
    # one problem of 4 steps ended: 3 problems x 4 steps
    assert progress.bar.total == 12 and "problems 1/3" in out.getvalue()
    progress.close()


def test_resumed_problems_and_their_steps_start_the_bar():
    progress = Progress(10, 4, resumed_steps=20, interval=0.0, file=io.StringIO())
    assert progress.bar.n == 20 and "problems 4/10, 4 resumed" in progress.bar.desc
    assert progress.bar.total == 50                                # 20 steps / 4 problems x 10 problems
    for _ in range(40):                                            # slower problems: never below what is done
        progress.on_event("commit", role="base")
    assert progress.bar.n == 60 and progress.bar.total == 50       # the estimate only changes when one ends
    progress.on_event("finish", key=("p", 1), result=finished(40))
    assert progress.bar.total == 120                               # 60 steps / 5 problems x 10
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
    assert {k: last[k] for k in ("rank", "problems", "done", "steps", "total_steps", "tokens")} == \
        {"rank": 0, "problems": 2, "done": 1, "steps": 1, "total_steps": 2, "tokens": 5}
