"""Settings as one tree of typed objects: model_args land on the fields of the core's objects by name and prefix,
each object checks its own fields, a backend's options come with it, and a misspelt name gets the closest one."""

from dataclasses import dataclass

import pytest

from kvrescue_eval.detector import DetectorConfig
from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.sampling import SamplingParams
from kvrescue_eval.eviction import RKV, EvictionSchedule
from kvrescue_eval.model_adapters.backend_base import Backend
from kvrescue_eval.model_adapters.backends import BACKENDS
from kvrescue_eval.model_adapters.settings.model_args import model_args_of, parse_model_args
from kvrescue_eval.model_adapters.settings.tree import RoleBackends

MODELS = dict(base="/nonexistent/base", helper="/nonexistent/helper", scorer="helper-logprob")


def test_the_recall_preset_as_a_tree():
    # presets.py's recall-cpu: budget 64, buffer 16, n 4, max_steps 64, max_step_tokens 64, 32 in flight, the
    # testbed PRM; detector: the paper's window and guard in tokens (12 after 24), 3.0 nats, gzip 0.6 over 128
    # characters; the rest the paper's defaults (window 8, 0.8 / 0.95 / 20, ...)
    settings = parse_model_args({"preset": "recall-cpu"})
    assert settings.sampling == SamplingParams(0.8, 0.95, 20)
    assert settings.engine == EngineConfig(n_base=4, n_helper=4, max_steps=64, max_step_tokens=64, max_context=4096,
                                           max_problems_in_flight=32, seed=0,
                                           detector=DetectorConfig(entropy_threshold=3.0, window=12, guard=24,
                                                                   gzip_threshold=0.6, gzip_chars=128))
    assert settings.eviction == EvictionSchedule(RKV(), budget=64, buffer=16, window=8)
    assert settings.eviction.evictor == RKV(pool_kernel=7, mix_lambda=0.1)
    assert settings.backends_of == RoleBackends(base="hf", helper="hf", prm=None)
    assert (settings.base, settings.helper, settings.prm, settings.scorer) == ("testbed:base", "testbed:helper",
                                                                       "testbed:prm", "qwen-prm")


def test_prefixed_model_args_land_on_their_objects_and_read_back():
    settings = parse_model_args({**MODELS, "detector_guard": "3", "vllm_max_model_len": "2048", "helper_backend": "vllm",
                                 "top_k": "0", "window": 4, "budget": 20})
    assert settings.engine.detector.guard == 3 and settings.backend_options["vllm"].max_model_len == 2048
    assert settings.sampling.top_k == 0 and (settings.eviction.budget, settings.eviction.window) == (20, 4)
    flat = model_args_of(settings)
    assert (flat["detector_guard"], flat["vllm_max_model_len"], flat["top_k"], flat["budget"]) == (3, 2048, 0, 20)
    again = parse_model_args({k: v for k, v in flat.items() if v is not None and k not in (
        "evictor_options", "scorer_options", "n_base", "n_helper", "detector", "preset")})
    assert again == settings  # model_args_of gives back what parse_model_args takes


def test_the_core_objects_check_their_fields_and_the_message_names_the_model_arg():
    with pytest.raises(ValueError, match=r"model_arg\(s\) top_p=1.5: top_p must be in \(0, 1\]"):
        parse_model_args({**MODELS, "top_p": 1.5})
    with pytest.raises(ValueError, match=r"max_step_tokens=0: engine max_step_tokens=0 is invalid; valid: an integer >= 1"):
        parse_model_args({**MODELS, "max_step_tokens": 0})
    with pytest.raises(ValueError, match=r"detector_gzip_chars=0: detector gzip_chars=0 is invalid; valid: an integer >= 1"):
        parse_model_args({**MODELS, "detector_gzip_chars": 0})


@pytest.mark.parametrize("args, hint", [
    ({"budgett": 64}, "budgett: did you mean budget?"),
    ({"detector_windw": 4}, "detector_windw: did you mean detector_window?"),
    ({"vllm_max_model_lenght": 4}, "did you mean vllm_max_model_len?"),
    ({"mode": "rescu"}, "(did you mean rescue?)"),
    ({"evictor": "snapkb"}, "(did you mean snapkv?)"),
    ({"scorer": "helper-logprb"}, "(did you mean helper-logprob?)"),
    ({"helper_backend": "vlm"}, "(did you mean vllm?)"),
    ({"dtype": "bfloat61"}, "(did you mean bfloat16?)"),
])
def test_a_misspelt_name_or_value_gets_the_closest_valid_one(args, hint):
    with pytest.raises(ValueError) as error:
        parse_model_args({**MODELS, **args})
    assert hint in str(error.value)


@dataclass(frozen=True)
class LaneOptions:
    lanes: int = 1

    def __post_init__(self):
        if self.lanes < 1:
            raise ValueError(f"lanes must be >= 1, got {self.lanes}")


class LaneBackend(Backend):
    """A backend with options of its own (never loaded here: parsing only)."""
    title, options, beside = "lanes", LaneOptions, False
    device_map, spread = False, "lane_lanes=N"


def test_a_backends_options_are_model_args_with_its_name_as_prefix(monkeypatch):
    monkeypatch.setitem(BACKENDS, "lane", LaneBackend)
    assert parse_model_args({**MODELS, "helper_backend": "lane", "lane_lanes": "3"}).backend_options["lane"] == \
        LaneOptions(lanes=3)
    with pytest.raises(ValueError, match=r"lane_lanes=0: lanes must be >= 1"):
        parse_model_args({**MODELS, "helper_backend": "lane", "lane_lanes": 0})
    with pytest.raises(ValueError, match=r"\['lane_lanes'\] set lanes engine settings but no role runs on lanes"):
        parse_model_args({**MODELS, "lane_lanes": 2})


def test_device_map_is_refused_for_a_role_whose_backend_places_its_models_itself(monkeypatch):
    """device_map places the main model (the base; the helper in mode helper) with accelerate; on a backend that
    spreads models its own way it would do nothing, so parsing refuses it, naming that way and the backends that
    accept it."""
    monkeypatch.setitem(BACKENDS, "lane", LaneBackend)
    with pytest.raises(ValueError) as error:
        parse_model_args({**MODELS, "base_backend": "lane", "device_map": "auto"})
    message = str(error.value)
    assert "device_map='auto' cannot place the base on base_backend=lane" in message
    assert "(lane_lanes=N)" in message and "base_backend=hf for accelerate's placement" in message
    with pytest.raises(ValueError, match="cannot place the helper on helper_backend=lane"):
        parse_model_args({**MODELS, "mode": "helper", "helper_backend": "lane", "device_map": "auto"})
    # the base on transformers is placed by accelerate, whatever the helper runs on
    assert parse_model_args({**MODELS, "helper_backend": "lane", "device_map": "auto"}).device_map == "auto"
    assert parse_model_args({**MODELS, "mode": "full", "n": 1, "device_map": "balanced"}).device_map == "balanced"


def test_the_72b_preset_is_spread_by_vllm_and_refuses_device_map():
    with pytest.raises(ValueError) as error:
        parse_model_args({"preset": "paper-72b", "device_map": "auto"})
    message = str(error.value)
    assert "cannot place the base on base_backend=vllm" in message
    assert "vllm_tensor_parallel_size=N" in message and "base_backend=hf for accelerate's placement" in message
    spread = parse_model_args({"preset": "paper-72b", "vllm_tensor_parallel_size": 4})
    assert spread.backend_options["vllm"].tensor_parallel_size == 4 and spread.device_map is None
    placed = parse_model_args({"preset": "paper-72b", "base_backend": "hf", "device_map": "auto"})
    assert placed.backends == {"base": "hf", "helper": "vllm", "prm": "vllm"} and placed.device_map == "auto"
