"""model_args of the http backend are checked before anything loads or any server is asked."""

import pytest

from kvrescue_eval.model_adapters.settings.model_args import parse_model_args
from kvrescue_eval.model_adapters.settings.serve_line import serve_command

RECALL = dict(preset="recall-cpu", device="cpu")


def test_http_roles_need_their_url_and_the_base_stays_in_process():
    with pytest.raises(ValueError, match=r"helper_backend=http needs helper_url=URL .*kvrescue-eval serve helper"):
        parse_model_args(dict(RECALL, helper_backend="http"))
    with pytest.raises(ValueError, match=r"base_backend='http' is invalid; valid: hf or vllm"):
        parse_model_args(dict(RECALL, base_backend="http", helper_url="http://127.0.0.1:1"))
    with pytest.raises(ValueError, match=r"helper_url='localhost:8001' is invalid; valid: a URL"):
        parse_model_args(dict(RECALL, helper_backend="http", helper_url="localhost:8001"))
    settings = parse_model_args(dict(RECALL, helper_backend="http", helper_url="http://127.0.0.1:8001",
                                     prm_backend="http", prm_url="http://127.0.0.1:8002"))
    assert settings.backends == {"base": "hf", "helper": "http", "prm": "http"} and settings.overlaps


def test_serve_prints_the_pooling_server_of_the_prm_and_the_generating_server_of_the_helper():
    prm = serve_command("prm", "recall-cpu", 8002, {})
    assert prm[prm.index("--served-model-name") + 1] == "testbed:prm" and prm[prm.index("--port") + 1] == "8002"
    assert prm[prm.index("--runner") + 1] == "pooling" and "--no-enable-prefix-caching" in prm
    assert '"step_tag_id"' in prm[prm.index("--pooler-config") + 1]
    helper = serve_command("helper", "recall-cpu", 8001, {"vllm_kv_cache_memory_bytes": "268435456"})
    assert "--runner" not in helper and helper[helper.index("--kv-cache-memory-bytes") + 1] == "268435456"
    assert helper[helper.index("--served-model-name") + 1] == "testbed:helper"
