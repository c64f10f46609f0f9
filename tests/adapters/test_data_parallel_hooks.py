"""The LM's data-parallel hooks on torch.distributed (two gloo processes), and lm-eval's padding."""

import os
import socket
from types import SimpleNamespace

import torch
import torch.multiprocessing as mp

from kvrescue_eval.model_adapters.lm_eval.data_parallel import DataParallel
from kvrescue_eval.model_adapters.lm_eval.requests import data_parallel_padding


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, port, out):
    os.environ.update(WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    parallel = DataParallel.from_environment("cuda")          # no GPU: gloo on CPU
    gathered = parallel.all_gather(torch.tensor(10 + rank))   # 0-d, as lm-eval sends instance counts
    objects = parallel.gather_object({"rank": rank}, dst=0)
    parallel.barrier()
    out.put((parallel.rank, parallel.world_size, parallel.device, gathered.tolist(), objects))
    torch.distributed.destroy_process_group()


def test_two_gloo_processes_gather_in_rank_order():
    context = mp.get_context("spawn")
    out = context.Queue()
    port = _free_port()
    processes = [context.Process(target=_rank, args=(rank, port, out)) for rank in range(2)]
    for process in processes:
        process.start()
    results = sorted(out.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert results == [(0, 2, "cpu", [10, 11], [{"rank": 0}, {"rank": 1}]), (1, 2, "cpu", [10, 11], None)]


def test_a_single_process_is_rank_0_of_1_with_pass_through_hooks(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    parallel = DataParallel.from_environment("cpu")
    assert (parallel.rank, parallel.world_size, parallel.device) == (0, 1, "cpu")
    tensor = torch.tensor(3)
    assert parallel.all_gather(tensor) is tensor and parallel.gather_object("x") == ["x"]


def test_lm_eval_padding_is_an_instance_seen_more_often_than_its_repeats():
    a, b = SimpleNamespace(repeats=2), SimpleNamespace(repeats=2)
    # one rank's requests: a twice, b twice, then lm-eval pads by re-appending b `repeats` times
    assert data_parallel_padding([a, a, b, b, b, b]) == [False, False, False, False, True, True]
    assert data_parallel_padding([object(), object()]) == [False, False]   # no repeats known: never padding
