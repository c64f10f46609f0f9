"""The `detector` model_args: on by default in rescue only (as in the paper), off in the baselines, and its
thresholds reach the engine. The base model here is incoherent (uniform over more than e^7 tokens, never a
newline): with the paper's detector every base candidate is aborted after its 25th token."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))

from tiny_models import incoherent_model, newline_or_eos_ids, tiny_model, tiny_tokenizer, with_filler_tokens  # noqa: E402

from kvrescue_eval.detector import DetectorConfig  # noqa: E402

STEP_TOKENS = 30  # > 25: the step cap is reached only when nothing aborts the candidate
MESSAGES = [{"role": "user", "content": "What is 2 + 3?"}]


class Request:
    def __init__(self, context):
        self.args = (context, {"until": []})
        self.doc = None


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    tokenizer = with_filler_tokens(tiny_tokenizer(), 1800)
    assert math.log(len(tokenizer) - len(newline_or_eos_ids(tokenizer))) > 7.0
    paths = {}
    for name, model in (("incoherent", incoherent_model(tokenizer)), ("helper", tiny_model(tokenizer, seed=3, scale=20.0))):
        paths[name] = tmp_path_factory.mktemp(name)
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.save_pretrained(paths[name])
        tokenizer.save_pretrained(paths[name])
    return {name: str(path) for name, path in paths.items()}


def run(folders, **args):
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    settings = dict(base=folders["incoherent"], helper=folders["helper"], scorer="helper-logprob", n=2, budget=16,
                    buffer=8, max_steps=2, max_step_tokens=STEP_TOKENS, device="cpu", temperature=0.8, top_p=1.0,
                    top_k=0)
    lm = KVRescueLM(**{**settings, **args})
    (response,) = lm.generate_until([Request(lm.apply_chat_template(MESSAGES))], disable_tqdm=True)
    return response, lm.get_model_info()["kvrescue"]


@pytest.mark.parametrize("mode", ["bon", "full"])
def test_baselines_never_abort_a_candidate_by_default(folders, mode):
    response, info = run(folders, mode=mode)
    steps = response.stats["steps"]
    assert response.stats["early_exits"] == 0
    assert response.stats["base_tokens"] == STEP_TOKENS * 2 * steps   # every candidate ran to the step cap
    assert (info["detector"], info["detector_settings"]) == ("off", None)


def test_rescue_uses_the_papers_detector_by_default(folders):
    response, info = run(folders)
    steps = response.stats["steps"]
    assert response.stats["early_exit_entropy"] == 2 * steps
    assert response.stats["base_tokens"] == 25 * 2 * steps            # aborted at the first check after the guard
    assert info["detector"] == "on"
    assert info["detector_settings"] == {"entropy_threshold": 7.0, "window": 12, "guard": 24,
                                         "gzip_threshold": 0.18, "gzip_chars": 800}


def test_detector_on_in_bon_aborts_and_thresholds_reach_the_engine(folders):
    response, info = run(folders, mode="bon", detector="on", detector_guard=4, detector_window=3)
    assert response.stats["early_exit_entropy"] == 2 * response.stats["steps"]
    assert response.stats["base_tokens"] == 5 * 2 * response.stats["steps"]
    assert info["detector_settings"]["guard"] == 4 and info["detector_settings"]["window"] == 3


def test_rescue_without_detector_commits_what_a_detector_that_never_fires_commits(folders):
    off, off_info = run(folders, detector="off")
    never, _ = run(folders, detector_entropy_threshold=1e9, detector_gzip_threshold=0)  # a ratio is never < 0
    default, _ = run(folders)
    assert off_info["detector"] == "off"
    assert str(off) == str(never) and off.stats == never.stats
    assert off.stats["early_exits"] == 0
    assert default.stats["early_exits"] > 0   # the paper's thresholds do fire on this base: the comparison has teeth


def test_effective_detector_per_mode():
    from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

    common = {"base": "b", "helper": "h", "scorer": "helper-logprob"}
    assert parse_model_args({**common, "mode": "rescue"}).detector == DetectorConfig()
    for mode in ("bon", "full", "helper"):
        assert parse_model_args({**common, "mode": mode}).detector is None
    assert parse_model_args({**common, "mode": "rescue", "detector": False}).detector is None
    assert parse_model_args({**common, "mode": "full", "detector": "ON"}).detector == DetectorConfig()
    tuned = parse_model_args({**common, "detector_entropy_threshold": "5.5", "detector_gzip_chars": 400})
    assert tuned.detector == DetectorConfig(entropy_threshold=5.5, gzip_chars=400)


@pytest.mark.parametrize("args, names", [
    (dict(detector="maybe"), ["detector='maybe'", "on, off"]),
    (dict(detector="on", mode="helper", n=1), ["detector=on", "mode helper", "detector=off"]),
    (dict(detector_window=0), ["detector_window=0", ">= 1"]),
    (dict(detector_guard=-1), ["detector_guard=-1", ">= 0"]),
    (dict(detector_gzip_chars=2.5), ["detector_gzip_chars=2.5", "integer"]),
    (dict(detector_entropy_threshold="high"), ["detector_entropy_threshold='high'", "number"]),
    (dict(detector_gzip_threshold=-0.1), ["detector_gzip_threshold=-0.1", ">= 0"]),
    (dict(detector_entropy_threshold=float("nan")), ["detector_entropy_threshold=nan", ">= 0"]),
])
def test_bad_detector_args_name_the_argument_and_the_valid_values(args, names):
    from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

    with pytest.raises(ValueError) as error:
        parse_model_args({"base": "b", "helper": "h", "scorer": "helper-logprob", **args})
    for name in names:
        assert name in str(error.value)
