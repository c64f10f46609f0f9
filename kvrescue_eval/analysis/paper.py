"""The KV-Rescue paper's reported numbers (arXiv:2608.15797), as shipped in analysis/reference/*.csv.

Nothing here was reproduced by this project: every value is "reported by the paper, not reproduced here".
Accuracies and rates are returned as fractions (the CSVs hold percentages). Table 5's metric is "boxed
and correct" (our exact_match_boxed); its stds are population stds over 5 seeds (AIME24, AMC23).

The paper's models: base Qwen2.5-Math-7B-Instruct or -72B-Instruct, helper Qwen2.5-Math-1.5B-Instruct,
PRM Qwen2.5-Math-PRM-7B, R-KV (buffer 128), max 1024 steps of at most 512 tokens, context 4096. The
mode names are this project's (the paper's b2n is rescue, full-KV full, small full-KV helper).
"""

import csv
import io
from functools import lru_cache
from importlib import resources

from kvrescue_eval import benchmark_table
from kvrescue_eval.analysis.recovery import recovery

CITATION = "arXiv:2608.15797"
NOTE = "reported by the paper, not reproduced here"
BASES = {"7B": "Qwen/Qwen2.5-Math-7B-Instruct", "72B": "Qwen/Qwen2.5-Math-72B-Instruct"}
HELPER = "Qwen/Qwen2.5-Math-1.5B-Instruct"
PRM = "Qwen/Qwen2.5-Math-PRM-7B"
EVICTOR, BUFFER = "rkv", 128
PROTOCOL = {"max_steps": 1024, "max_step_tokens": 512, "max_context": 4096}
BENCHMARKS = ("math500", "aime24", "amc23", "gsm8k", "olympiadbench")  # the columns of its tables
# Its protocol on them is the benchmark table's (kvrescue_eval/benchmark_table.py): every problem, 5 seeds on
# AIME24 and AMC23, one on the others.
SEEDS = {name: benchmark_table.benchmark(name).seeds for name in BENCHMARKS}
PROBLEMS = {name: benchmark_table.benchmark(name).problems for name in BENCHMARKS}
TABLE2_METHODS = {"full": "full", "bon": "bon", "+ interleaving": "interleaving", "+ early exit": "rescue"}


def _rows(name):
    text = (resources.files("kvrescue_eval.analysis.reference") / name).read_text("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def _fraction(text):
    return None if text in ("", None) else float(text) / 100


def _budget(text):
    return None if text in ("", "full") else int(text)


@lru_cache(maxsize=None)
def table5():
    """{(base label, n, mode, budget): {benchmark: (mean, std or None)}}: Table 5, fractions."""
    cells = {}
    for row in _rows("paper_table5_accuracy.csv"):
        key = (row["base"], int(row["n"]), row["mode"], _budget(row["budget"]))
        cells[key] = {bench: (_fraction(row[bench]), _fraction(row.get(f"{bench}_std"))) for bench in BENCHMARKS}
    return cells


@lru_cache(maxsize=None)
def table1():
    """{(benchmark, budget or None for full-KV, mode): {steps, output_tokens, base_tokens, helper_tokens}}:
    Table 1 (7B, N=8), means per problem; mode "bon", "rescue" or "full"."""
    cells = {}
    for row in _rows("paper_table1_decode_cost.csv"):
        bench, budget = row["benchmark"].lower(), _budget(row["budget"])
        for mode, suffix in (("bon", "bon"), ("rescue", "kvr")):
            if row[f"steps_{suffix}"] == "":
                continue
            values = {"steps": float(row[f"steps_{suffix}"]), "output_tokens": float(row[f"out_len_{suffix}"]),
                      "base_tokens": float(row[f"base_tok_{suffix}"])}
            if mode == "rescue":
                values["helper_tokens"] = float(row["helper_tok_kvr"])
            cells[(bench, budget, "full" if budget is None else mode)] = values
    return cells


@lru_cache(maxsize=None)
def table2():
    """{(budget or None, method): {accuracy, degeneration_rate, base_tokens, steps, early_exit_rate}}:
    Table 2 (MATH500, 7B, N=8); methods are our Table 2 labels (full, bon, + interleaving, + early exit)."""
    methods = {paper: ours for ours, paper in TABLE2_METHODS.items()}
    cells = {}
    for row in _rows("paper_table2_ablation.csv"):
        cells[(_budget(row["budget"]), methods[row["method"]])] = {
            "accuracy": _fraction(row["accuracy"]), "degeneration_rate": _fraction(row["degenerated_pct"]),
            "base_tokens": float(row["base_tokens"]), "steps": float(row["steps"]),
            "early_exit_rate": _fraction(row["early_exit_pct"])}
    return cells


def base_label(model):
    """"7B" or "72B" for the paper's base models, "helper" for its helper, else None."""
    if model == HELPER:
        return "helper"
    return next((label for label, name in BASES.items() if name == model), None)


def papers_detector(mode):
    """The paper uses early exit in KV-Rescue only."""
    return "on" if mode == "rescue" else "off"


def table5_cell(setting, benchmark):
    """(mean, std) the paper reports for this setting and benchmark, or None. A helper-alone run is matched
    with the paper's small full-KV row at the same N (the same in its 7B and 72B blocks). The detector must
    be the paper's: Table 5 has no rescue row without early exit (Table 2's "+ interleaving" is one)."""
    if benchmark not in BENCHMARKS or setting.evictor not in (None, EVICTOR):
        return None
    if setting.detector != papers_detector(setting.mode):
        return None
    if setting.mode == "helper" or (setting.mode == "full" and base_label(setting.base) == "helper"):
        if base_label(setting.base) != "helper":
            return None
        key = ("7B", setting.n, "helper", None)
    else:
        label = base_label(setting.base)
        if label not in BASES or (setting.mode == "rescue" and setting.helper != HELPER):
            return None
        key = (label, setting.n, setting.mode, setting.budget)
    cell = table5().get(key)
    return cell[benchmark] if cell else None


def table5_recovery(label, n, budget, benchmark):
    """Recovery from Table 5."""
    rescue, bon, full = (table5()[(label, n, mode, b)][benchmark][0]
                         for mode, b in (("rescue", budget), ("bon", budget), ("full", None)))
    return recovery(rescue=rescue, bon=bon, full=full)


def interleaving_recovery(budget):
    """Recovery of the Table 2 row "+ interleaving" (rescue without early exit; MATH500, 7B, N=8)."""
    rows = table2()
    inter, bon, full = (rows.get((b, m)) for b, m in ((budget, "+ interleaving"), (budget, "bon"), (None, "full")))
    if inter is None or bon is None:
        return None
    return recovery(rescue=inter["accuracy"], bon=bon["accuracy"], full=full["accuracy"])


def mean_recovery(n, budget, labels=tuple(BASES), benchmarks=BENCHMARKS):
    values = [table5_recovery(label, n, budget, bench) for label in labels for bench in benchmarks]
    return sum(values) / len(values)


def settings():
    """(n values, budgets) of Table 5."""
    keys = table5().keys()
    return sorted({k[1] for k in keys}), sorted({k[3] for k in keys if k[3] is not None})


def reference_submissions():
    """Table 5 as 40 leaderboard submissions of kind "reference" (metric: boxed and correct)."""
    documents = []
    for (label, n, mode, budget), benchmarks in table5().items():
        base = HELPER if mode == "helper" else BASES[label]
        name = f"paper-table5_{label}-block_{mode}" + (f"_{EVICTOR}_B{budget}" if budget else "") + f"_N{n}"
        documents.append({
            "schema_version": 2,
            "name": name,
            "source": {"kind": "reference", "note": NOTE, "citation": CITATION, "table": "Table 5"},
            "setting": {"base": base, "helper": HELPER if mode in ("rescue", "helper") else None,
                        "prm": PRM if n > 1 or mode == "rescue" else None, "mode": mode,
                        "evictor": EVICTOR if budget else None, "budget": budget,
                        "buffer": BUFFER if budget else None, "n": n,
                        "detector": "on" if mode == "rescue" else "off"},
            "protocol": {**PROTOCOL, "limit": None},
            "benchmarks": {bench: {"num_problems": PROBLEMS[bench],
                                   "pass_at_1": {"boxed": {"mean": round(mean, 6),
                                                           "std": None if std is None else round(std, 6),
                                                           "num_seeds": SEEDS[bench]}}}
                           for bench, (mean, std) in benchmarks.items()},
        })
    return documents
