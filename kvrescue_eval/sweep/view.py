"""What a sweep shows while it runs: one bar over the arms, one bar per slot for the arm it runs.

A slot's bar follows the `kvrescue` model's progress lines (model_adapters/progress.py writes them to the
arm's progress file): problems done of the arm's problems (summed over data-parallel ranks), committed steps
and tokens per second; a line per finished arm says what it did.
"""

import json

from tqdm import tqdm


class ArmProgress:
    """The newest progress line of each rank of one arm, read from its file as it grows."""

    def __init__(self, path):
        self.path, self.offset, self.ranks = path, 0, {}

    def read(self):
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except OSError:
            return
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            try:
                record = json.loads(line)
                self.ranks[record["rank"]] = record
            except (ValueError, KeyError, TypeError):
                continue

    def totals(self):
        ranks = list(self.ranks.values())
        elapsed = max((r["elapsed"] for r in ranks), default=0.0)
        return {"problems": sum(r["problems"] for r in ranks), "done": sum(r["done"] for r in ranks),
                "steps": sum(r["steps"] for r in ranks),
                "tok/s": sum(r["tokens"] for r in ranks) / elapsed if elapsed else 0.0}


class SweepView:
    def __init__(self, total, skipped, slot_labels, *, disable=False, file=None):
        self.overall = tqdm(total=total, initial=skipped, desc="sweep", unit="arm", position=0, disable=disable,
                            file=file, dynamic_ncols=True)
        self.counts = {"ran": 0, "skipped": skipped, "failed": 0}
        self.bars = {label: tqdm(total=None, desc=f"{label}: waiting", unit="problem", position=index + 1,
                                 disable=disable, file=file, dynamic_ncols=True, leave=False)
                     for index, label in enumerate(slot_labels)}
        self.running = {}
        self._postfix()

    def started(self, label, arm_name, progress_path):
        bar = self.bars[label]
        bar.reset(total=None)
        bar.set_description(f"{label}: {arm_name}", refresh=True)
        self.running[label] = ArmProgress(progress_path)

    def poll(self):
        for label, progress in self.running.items():
            progress.read()
            if not progress.ranks:
                continue
            totals, bar = progress.totals(), self.bars[label]
            if totals == getattr(progress, "shown", None):
                continue
            progress.shown = totals
            bar.total, bar.n = totals["problems"], totals["done"]
            bar.set_postfix({"steps": totals["steps"], "tok/s": f"{totals['tok/s']:.1f}"}, refresh=True)

    def ended(self, label, line, kind):
        self.running.pop(label, None)
        self.bars[label].set_description(f"{label}: waiting", refresh=False)
        self.counts[kind] += 1
        self.overall.update(1)
        self._postfix()
        self.overall.write(line)

    def note(self, line):
        self.overall.write(line)

    def _postfix(self):
        self.overall.set_postfix(self.counts, refresh=True)

    def close(self):
        for bar in self.bars.values():
            bar.close()
        self.overall.close()
