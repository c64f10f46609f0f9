"""PortableKernels: the products and the functions it routes give their definitions' values, every other op
torch would run in MKL is refused, and a training step under it never calls MKL."""

import math
import os
import subprocess
import sys

import pytest
import torch

from kvrescue_eval.model_adapters.testbed.portable_kernels import PortableKernels


def test_matrix_products_give_their_definitions_values():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = torch.tensor([[5.0, 6.0], [7.0, 8.0]])
    with PortableKernels():
        assert torch.mm(a, b).tolist() == [[19.0, 22.0], [43.0, 50.0]]
        assert torch.mm(a, b.t()).tolist() == [[17.0, 23.0], [39.0, 53.0]]  # a strided operand
        assert torch.bmm(a[None], b[None]).tolist() == [[[19.0, 22.0], [43.0, 50.0]]]
        # addmm: beta * start + alpha * (a @ b) = 2 * 1 + 0.5 * 19
        assert torch.addmm(torch.ones(2, 2), a, b, beta=2, alpha=0.5)[0, 0].item() == 11.5
        # beta 0 ignores start, NaN included
        assert torch.addmm(torch.full((2, 2), math.nan), a, b, beta=0).tolist() == [[19.0, 22.0], [43.0, 50.0]]
        assert torch.baddbmm(torch.ones(1, 2, 2), a[None], b[None])[0].tolist() == [[20.0, 23.0], [44.0, 51.0]]
        linear = torch.nn.functional.linear(a, b, torch.tensor([1.0, -1.0]))  # a @ b.T + bias
        assert linear.tolist() == [[18.0, 22.0], [40.0, 52.0]]


def test_gradients_flow_through_the_routed_products():
    """d/da sum(a @ b) = ones @ b.T: each row of the gradient holds b's row sums."""
    a = torch.ones(2, 2, requires_grad=True)
    b = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    with PortableKernels():
        (a @ b).sum().backward()
    assert a.grad.tolist() == [[3.0, 7.0], [3.0, 7.0]]


def test_cos_sin_and_exp_are_the_double_precision_values_rounded_to_the_dtype():
    x = torch.tensor([0.0, 1.0, 1.0, 2.5, -3.0])
    with PortableKernels():
        results = {name: getattr(torch, name)(x) for name in ("cos", "sin", "exp")}
        in_place = x.clone().exp_()
    for name, result in results.items():
        expected = torch.tensor([getattr(math, name)(v) for v in x.tolist()], dtype=torch.float32)
        assert torch.equal(result, expected), name
    assert torch.equal(in_place, results["exp"])
    assert results["exp"][0].item() == 1.0 and results["cos"][0].item() == 1.0


@pytest.mark.parametrize("op", [
    lambda x: torch.sqrt(x), lambda x: x.sqrt_(), lambda x: torch._foreach_sqrt([x]), lambda x: torch.log(x),
    lambda x: torch.tanh(x), lambda x: torch.mv(x, x[0]), lambda x: torch.mm(x, x, out=torch.empty(4, 4)),
    lambda x: torch.nn.functional.scaled_dot_product_attention(x[None, None], x[None, None], x[None, None]),
], ids=["sqrt", "sqrt in place", "foreach sqrt", "log", "tanh", "mv", "mm into out", "fused attention"])
def test_every_other_op_that_would_run_in_mkl_is_refused(op):
    with PortableKernels(), pytest.raises(RuntimeError, match="would run in MKL"):
        op(torch.ones(4, 4))


def test_ops_on_integers_and_mkl_free_float_ops_run_as_they_are():
    with PortableKernels():
        assert torch.mm(torch.ones(2, 2, dtype=torch.long), torch.ones(2, 2, dtype=torch.long)).tolist() == [[2, 2]] * 2
        assert torch.softmax(torch.zeros(4), -1).tolist() == [0.25] * 4
        assert torch.rsqrt(torch.tensor([4.0])).item() == 0.5


TRAINING_STEP = """
import sys, torch
from kvrescue_eval.model_adapters.testbed.portable_kernels import PortableKernels
from kvrescue_eval.model_adapters.testbed.train import qwen2_config
from kvrescue_eval.model_adapters.testbed.specs import SPECS
from kvrescue_eval.model_adapters.testbed.tokenizer import build_tokenizer
from transformers import Qwen2ForCausalLM
if sys.argv[1] == "control":
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))
with PortableKernels():
    model = Qwen2ForCausalLM(qwen2_config(SPECS["base"], build_tokenizer()))
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    ids = torch.arange(64).reshape(2, 32)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
"""


def mkl_log(argument):
    env = {**os.environ, "MKL_VERBOSE": "1"}
    run = subprocess.run([sys.executable, "-c", TRAINING_STEP, argument], env=env, capture_output=True, text=True,
                         check=True)
    return [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("MKL_VERBOSE")]


def test_a_training_step_under_portable_kernels_calls_no_mkl():
    """MKL_VERBOSE=1 makes MKL log every BLAS call it runs (its vector math it does not log: the refusals above
    cover that). The control, one float product outside the mode, shows the log would see one."""
    assert mkl_log("portable") == []
    assert any("SGEMM" in line for line in mkl_log("control"))
