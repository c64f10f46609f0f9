"""Which floating-point results of the testbed's training change with MKL's code branch (`MKL_CBWR`).

torch's CPU wheel runs its float matrix products in MKL (SGEMM, which `MKL_VERBOSE=1` logs) and, unlogged, the
vector math of `torch.sqrt`, `exp`, `log` and `tanh` (MKL's VML). One process per branch, one thread, with
train.py's `PINNED_KERNELS`; each prints the sha256 (first 12 hex digits) of those functions over a fixed input,
of three AdamW steps unfused and fused (no matrix product; the unfused update takes its square root in MKL), and
with `--train-steps S` the losses the base's run of train.py logs up to step S (its own code, its spec with
`steps=S`). Until commit a29669f train.py ran in MKL, pinned to `MKL_CBWR=COMPATIBLE`, and the losses changed
with the branch (docs/results/testbed_training_intel_mkl_branches.log); it now runs under
model_adapters/testbed/portable_kernels.py, which calls no MKL, and they should not
(docs/results/testbed_training_portable_mkl_branches.log). Both runs:

    python benchmarks/mkl_branches.py --train-steps 250 --processes 1
"""

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kvrescue_eval.model_adapters.testbed.portable_kernels import PINNED_KERNELS

BRANCHES = ("COMPATIBLE", "SSE4_2", "AVX", "AVX2", "AVX2,STRICT", "AVX512", "AVX512_E1")
FUNCTIONS = ("sqrt", "exp", "log", "tanh", "cos", "sin")
ADAMW = ("adamw", "adamw fused")
# oneMKL's MKL_CBWR code branches; it runs AUTO, silently, for a value it does not know.
KNOWN_BRANCHES = ("AUTO", "COMPATIBLE", "SSE4_1", "SSE4_2", "AVX", "AVX2", "AVX2_E1", "AVX512", "AVX512_E1",
                  "AVX512_E2", "AVX512_E3", "AVX512_E4", "AVX512_E5", "AVX10")


def mkl_branch(value: str) -> str:
    branch, _, strict = value.partition(",")
    if branch not in KNOWN_BRANCHES or strict not in ("", "STRICT"):
        raise argparse.ArgumentTypeError(f"unknown MKL_CBWR value {value!r}; valid: one of "
                                         f"{', '.join(KNOWN_BRANCHES)}, optionally followed by ',STRICT'")
    return value


def digest(tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().numpy().tobytes()).hexdigest()[:12]


def function_digests() -> dict:
    import torch

    x = torch.linspace(-50, 50, 1_000_003, dtype=torch.float32)
    inputs = {"sqrt": x.abs(), "log": x.abs() + 1}
    return {name: digest(getattr(torch, name)(inputs.get(name, x))) for name in FUNCTIONS}


def adamw_digest(fused: bool) -> str:
    import torch

    torch.manual_seed(0)
    parameter = torch.nn.Parameter(torch.randn(200_000))
    optimizer = torch.optim.AdamW([parameter], lr=1e-3, fused=fused)
    for _ in range(3):
        parameter.grad = torch.randn_like(parameter) * 1e-3
        optimizer.step()
    return digest(parameter)


def base_losses(steps: int) -> dict:
    """{step: loss} as train.py's base run logs them, stopped after `steps` steps."""
    import torch

    from kvrescue_eval.model_adapters.testbed import train
    from kvrescue_eval.model_adapters.testbed.specs import SPECS

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(SPECS["base"].threads)
    lines = []
    with tempfile.TemporaryDirectory() as out:
        train.train_lm("base", train.build_tokenizer(), *train.training_problems(), Path(out), lines.append,
                       spec=dataclasses.replace(SPECS["base"], steps=steps))
    return {line.split()[1]: line.split()[3] for line in lines if line.startswith("step ")}


def child(train_steps: int) -> None:
    result = {"functions": function_digests(), "adamw": adamw_digest(False), "adamw fused": adamw_digest(True)}
    if train_steps:
        result["losses"] = base_losses(train_steps)
    print(json.dumps(result))


def run_branch(branch: str, train_steps: int) -> dict:
    env = {**os.environ, **PINNED_KERNELS, "MKL_CBWR": branch, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--child", "--train-steps", str(train_steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-steps", type=int, default=0, help="also train the base this many steps (0: no)")
    parser.add_argument("--branch", action="append", dest="branches", type=mkl_branch,
                        help=f"an MKL_CBWR value; may repeat (default: {' '.join(BRANCHES)})")
    parser.add_argument("--processes", type=int, default=1, help="branches at once")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.train_steps)
    branches = args.branches or list(BRANCHES)
    with ThreadPoolExecutor(args.processes) as pool:
        results = dict(zip(branches, pool.map(lambda b: run_branch(b, args.train_steps), branches)))
    print("# branch      " + "  ".join(f"{name:<12}" for name in (*FUNCTIONS, *ADAMW)))
    for branch, result in results.items():
        cells = [result["functions"][name] for name in FUNCTIONS] + [result[name] for name in ADAMW]
        print(f"{branch:<13} " + "  ".join(cells))
    if args.train_steps:
        steps = list(next(iter(results.values()))["losses"])
        print("# branch      " + "  ".join(f"step {step:<5}" for step in steps))
        for branch, result in results.items():
            print(f"{branch:<13} " + "  ".join(f"{result['losses'][step]:<10}" for step in steps))


if __name__ == "__main__":
    main()
