"""The testbed's Fig. 3: histograms of the detector's two statistics over base candidates, coherent against degenerate (a measurement script: it drives the engine and the backends, a layer above the testbed).

`python benchmarks/testbed_candidate_histograms.py --preset recall-deep-cpu --json OUT.json
[--png OUT.png]` runs evicted best-of-N (the preset's base, evictor and budget; the detector off, so every
candidate runs to its end) on the test problems, records every base candidate's per-token entropies and
text, and sorts them as the paper does: **coherent** (the step ended: step separator or EOS) or
**degenerate** (it ran on to the step cap). For each it computes the two statistics the detector checks:

- entropy: the largest moving average of the per-token entropy over `detector_window` tokens (the mean of
  all of them for a candidate shorter than the window);
- gzip: the gzip ratio of the candidate's last `detector_gzip_chars` characters (all of them if shorter).

The detector's thresholds are read off these histograms, in the valley between the two modes (Fig. 3).
"""

import argparse
import json
from pathlib import Path

from kvrescue_eval.detector import gzip_ratio
from kvrescue_eval.engine.engine import Engine, Problem
from kvrescue_eval.tasks.kv_recall.utils import conversation, read_split

from kvrescue_eval.model_adapters.backends import build_components
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

SEPARATOR = "\n\n"
MAX_GEN_TOKS = 512  # tasks/kv_recall/kv_recall.yaml, as the lm_eval runs cap a trajectory
BINS = {"entropy": [i / 4 for i in range(25)], "gzip": [i / 20 for i in range(41)]}  # nats 0-6; ratio 0-2


class RecordingPolicy:
    """A token-level policy that records, for every candidate row it forks, the tokens and entropies decoded."""

    def __init__(self, policy):
        self.policy, self.live, self.finished = policy, {}, []

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def fork(self, key, seeds):
        rows = self.policy.fork(key, seeds)
        for row in rows:
            if row in self.live:  # a row id reused: its previous candidate is over
                self.finished.append(self.live.pop(row))
            self.live[row] = ([], [])
        return rows

    def decode(self, rows):
        tokens, entropies = self.policy.decode(rows)
        for row, token, entropy in zip(rows, tokens, entropies):
            self.live[row][0].append(token)
            self.live[row][1].append(float(entropy))
        return tokens, entropies

    def candidates(self):
        return self.finished + list(self.live.values())


def candidate_statistics(tokens, entropies, text, eos_ids, window, gzip_chars):
    ended = bool(tokens) and (tokens[-1] in eos_ids or SEPARATOR in text)
    averages = [sum(entropies[i:i + window]) / window for i in range(len(entropies) - window + 1)]
    entropy = max(averages) if averages else sum(entropies) / max(1, len(entropies))
    body = text.removesuffix(SEPARATOR)
    return {"degenerate": not ended, "tokens": len(tokens), "entropy": entropy,
            "gzip": gzip_ratio(body, gzip_chars) if body else None}


def histogram(values, edges):
    counts = [0] * (len(edges) - 1)
    for value in values:
        index = min(max(0, next((i for i, e in enumerate(edges[1:]) if value < e), len(counts) - 1)), len(counts) - 1)
        counts[index] += 1
    return counts


def record(preset, limit, overrides):
    settings = parse_model_args({"preset": preset, "mode": "bon", "detector": "off", **overrides})
    base, helper, scorer, config = build_components(settings)
    recording = RecordingPolicy(base)
    docs = read_split("test")[:limit]
    problems = [Problem(f"kv{i}", conversation(d), max_new_tokens=MAX_GEN_TOKS) for i, d in enumerate(docs)]
    Engine(recording, helper, scorer, config).run(problems)
    detector = parse_model_args({"preset": preset}).engine.detector
    eos_ids = set(base.eos_token_ids)
    return detector, [candidate_statistics(tokens, entropies, base.decode_text(tokens), eos_ids, detector.window,
                                           detector.gzip_chars) for tokens, entropies in recording.candidates()]


def summary(preset, limit, detector, candidates):
    groups = {"coherent": [c for c in candidates if not c["degenerate"]],
              "degenerate": [c for c in candidates if c["degenerate"]]}
    return {"preset": preset, "problems": limit, "candidates": len(candidates),
            "window": detector.window, "guard": detector.guard, "gzip_chars": detector.gzip_chars,
            "entropy_threshold": detector.entropy_threshold, "gzip_threshold": detector.gzip_threshold,
            "counts": {name: len(group) for name, group in groups.items()},
            "tokens": {name: sum(c["tokens"] for c in group) / max(1, len(group)) for name, group in groups.items()},
            "edges": BINS,
            "histograms": {stat: {name: histogram([c[stat] for c in group if c[stat] is not None], BINS[stat])
                                  for name, group in groups.items()} for stat in BINS}}


def draw(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for axis, stat, threshold, unit in ((axes[0], "entropy", result["entropy_threshold"], "nats"),
                                        (axes[1], "gzip", result["gzip_threshold"], "ratio")):
        edges = result["edges"][stat]
        for name, color in (("coherent", "tab:blue"), ("degenerate", "tab:red")):
            axis.stairs(result["histograms"][stat][name], edges, fill=True, alpha=0.5, color=color, label=name)
        axis.axvline(threshold, color="black", linestyle="--", label=f"threshold {threshold}")
        axis.set_yscale("symlog")
        axis.set_xlabel(f"{stat} ({unit})" if stat == "gzip" else
                        f"moving-average entropy over {result['window']} tokens ({unit})")
        axis.set_ylabel("base candidates")
        axis.legend()
    figure.suptitle(f"{result['preset']}: evicted base candidates, {result['problems']} problems")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="recall-deep-cpu")
    parser.add_argument("--limit", type=int, default=200, help="first test problems")
    parser.add_argument("--model_args", default="", help="overrides, KEY=VALUE,... (budget=..., evictor=...)")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--png", type=Path)
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.model_args.split(",") if item)
    detector, candidates = record(args.preset, args.limit, overrides)
    result = summary(args.preset, args.limit, detector, candidates)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("candidates", "counts", "tokens")}))
    for stat in BINS:
        for name, counts in result["histograms"][stat].items():
            print(f"{stat:8}{name:11}", " ".join(f"{c}" for c in counts))
    if args.png:
        draw(result, args.png)


if __name__ == "__main__":
    main()
