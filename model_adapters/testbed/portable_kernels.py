"""Training arithmetic that does not depend on the CPU running it: nothing runs in MKL.

torch's CPU build hands float matrix products (SGEMM) and the vector math of float tensors (`sqrt`, `exp`,
`log`, `cos`, `sin`, `tanh`, ...: ATen/cpu/vml.h) to Intel's MKL, which picks its code by CPU vendor as well as
instruction set: even on its reproducible path (MKL_CBWR=COMPATIBLE) the base trained other weights on an Intel
Xeon than on an AMD EPYC (docs/testbed.md, "Reproducing the weights"). Inside `PortableKernels`:

- matrix products (mm, addmm, bmm, baddbmm) run in numpy's OpenBLAS with its kernels pinned to one core type
  (`PINNED_KERNELS`: OPENBLAS_CORETYPE=Haswell, AVX2 with FMA; that core type's blocking sizes are fixed when
  OpenBLAS is built, not read from the CPU);
- `cos`, `sin` and `exp` go element by element through Python's `math` (glibc's double-precision functions),
  rounded to the tensor's dtype;
- every other op that would run in MKL (`MKL_BOUND`, in-place and foreach forms included) is refused, so a
  model or loss that starts calling one fails at once instead of training CPU-dependent weights.

torch's own kernels run in their plain build (ATEN_CPU_CAPABILITY=default): without vector extensions they sum
in the same order whatever the CPU offers. Attention must be eager (matrix products and a softmax): torch's
fused CPU attention calls MKL's SGEMM directly. AdamW must be `fused=True`: its square root is then torch's own
(`std::sqrt`, exact), where the unfused one calls MKL's `sqrt`.
"""

import functools
import math

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# Read when torch and numpy load their libraries: train.py restarts itself with them set.
PINNED_KERNELS = {"ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1"}

# Float ops that torch 2.13's CPU build runs in MKL: the vector math of ATen/cpu/vml.h, BLAS calls beyond the
# products routed here, the fused attention and the linear algebra (LAPACK).
MKL_BOUND = frozenset({
    "acos", "asin", "atan", "cos", "erf", "erfc", "erfinv", "exp", "log", "log10", "log2", "sin", "sqrt", "tan",
    "tanh", "trunc", "mv", "addmv", "dot", "vdot", "addr", "addbmm",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
})
aten = torch.ops.aten
PRODUCTS = (aten.mm.default, aten.bmm.default)
SCALED_SUMS = (aten.addmm.default, aten.baddbmm.default)  # beta * start + alpha * product
ELEMENTWISE = {aten.cos.default: math.cos, aten.sin.default: math.sin, aten.exp.default: math.exp}
IN_PLACE = {getattr(aten, f"{op.overloadpacket.__name__}_").default: f for op, f in ELEMENTWISE.items()}  # cos_, ...
ROUTED = tuple(op.overloadpacket.__name__ for op in (*PRODUCTS, *SCALED_SUMS, *ELEMENTWISE))
REFUSED = MKL_BOUND | set(ROUTED)  # any other form of a routed op (out=, foreach) would still run in MKL


def matrix_product(a, b):
    """a @ b (batched when 3-D) in OpenBLAS."""
    return torch.from_numpy(np.matmul(a.detach().contiguous().numpy(), b.detach().contiguous().numpy()))


def scaled_sum(start, product, beta, alpha):
    """beta * start + alpha * product, as addmm and baddbmm define it (beta 0 ignores start, NaN included)."""
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        return product
    return (start if beta == 1 else start * beta) + product


def elementwise(function, x):
    """`function` of every element in double precision, rounded to x's dtype. Each distinct value is computed
    once (rotary embeddings repeat the same angles in every row of a batch)."""
    values, where = torch.unique(x.detach(), return_inverse=True)
    results = torch.tensor([function(v) for v in values.double().tolist()], dtype=x.dtype)
    return results[where]


def is_float(value):
    return isinstance(value, torch.Tensor) and value.is_floating_point()


class PortableKernels(TorchDispatchMode):
    """While active, the CPU float ops torch would run in MKL run as the module docstring says, or raise. It sees
    the ops called, not those an op's own kernel calls inside it: that a training step calls no MKL is checked
    apart (MKL_VERBOSE, and the same losses under every MKL branch: benchmarks/mkl_branches.py)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not any(is_float(leaf) for leaf in tree_leaves((args, kwargs))):
            return func(*args, **kwargs)
        if func in PRODUCTS:
            return matrix_product(*args)
        if func in SCALED_SUMS:
            start, a, b = args
            return scaled_sum(start, matrix_product(a, b), kwargs.get("beta", 1), kwargs.get("alpha", 1))
        if func in ELEMENTWISE:
            return elementwise(ELEMENTWISE[func], args[0])
        if func in IN_PLACE:
            return args[0].copy_(elementwise(IN_PLACE[func], args[0]))
        op = func.overloadpacket.__name__.removeprefix("_foreach_")
        if op.removesuffix("_") in REFUSED:
            raise RuntimeError(f"{func} would run in MKL, whose results depend on the CPU's vendor; PortableKernels "
                               f"routes {', '.join(ROUTED)} (not their out= or foreach forms); use eager attention "
                               "and AdamW(fused=True)")
        return func(*args, **kwargs)


def portably(function):
    """`function` run inside `PortableKernels`."""
    @functools.wraps(function)
    def run(*args, **kwargs):
        with PortableKernels():
            return function(*args, **kwargs)
    return run
