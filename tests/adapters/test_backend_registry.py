"""A backend is one sub-package plus one registry line: the complete toy backend in tests/adapters/relay_backend
(its library and tested range, its journal identity, its statistics, its retirement, its own model_arg),
registered through the public registry, runs rescue through lm-eval's entry point in a sweep worker with no other
file touched;
the vllm backend's tested range is the one `pip install ".[vllm]"` installs."""

import io
import json
from importlib import metadata

import pytest
from packaging.requirements import Requirement

from kvrescue_eval.environment import UnsupportedEnvironment
from kvrescue_eval.model_adapters import backends

ARGS = "preset=recall-cpu,helper_backend=relay,relay_note=seen,max_problems_in_flight=2"


def relay_lib(tmp_path, monkeypatch, version):
    """`relay-lib` VERSION installed (its metadata on sys.path)."""
    info = tmp_path / "site" / f"relay_lib-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: relay-lib\nVersion: {version}\n")
    monkeypatch.syspath_prepend(str(info.parent))


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(backends.BACKENDS, "relay", "relay_backend:RelayBackend")  # the backend's one line
    monkeypatch.setattr(backends, "_USED", set())  # a fresh process, as far as retiring goes


@pytest.mark.slow
def test_a_complete_backend_runs_rescue_through_lm_eval_and_everything_follows_it(registered, tmp_path, monkeypatch):
    from kvrescue_eval.model_adapters.lm_eval.sweep_worker import serve

    relay_lib(tmp_path, monkeypatch, "1.2.3")
    assert not backends.must_retire()
    out = tmp_path / "out"
    arm = {"argv": ["--model", "kvrescue", "--model_args", ARGS, "--tasks", "kv_recall", "--limit", "2", "--device",
                    "cpu", "--output_path", str(out)], "log": str(tmp_path / "arm.log"),
           "progress": str(tmp_path / "progress")}
    replies = io.StringIO()
    serve([json.dumps(arm) + "\n", json.dumps(arm) + "\n"], replies)  # a sweep worker offered two arms
    assert [json.loads(line) for line in replies.getvalue().splitlines()] == [{"exit": 0, "retire": True}]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    info = results["config"]["kvrescue"]
    assert info["mode"] == "rescue" and info["backends"] == {"base": "hf", "helper": "relay", "prm": "hf"}
    assert info["backend_statistics"] == {"relay_counts": {"helper": {"policies": 1}}}
    header = json.loads(next((out / "kvrescue-journals").glob("*.jsonl")).read_text().splitlines()[0])
    assert header["identity"]["backends"] == {"hf": {}, "relay": {"relay-lib": "1.2.3", "note": "seen"}}
    assert header["identity"]["model_args"]["relay_note"] == "seen"  # its option, a model_arg like any
    assert backends.must_retire()  # the relay backend's class says its process retires after use: one arm only


def test_a_backend_library_outside_its_range_is_refused_at_start_and_named_by_info(registered, tmp_path,
                                                                                   monkeypatch, capsys):
    from kvrescue_eval.commands import info
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    args = dict(base="testbed:base", helper="testbed:helper", prm="testbed:prm", helper_backend="relay",
                device="cpu")
    with pytest.raises(UnsupportedEnvironment, match=r"relay-lib is not installed; .*relay-lib==1\.2\.\*"):
        KVRescueLM(**args)  # a run on the backend needs its library
    relay_lib(tmp_path, monkeypatch, "1.3.0")
    with pytest.raises(UnsupportedEnvironment) as error:
        KVRescueLM(**args)
    assert ("relay-lib 1.3.0 is installed, but kvrescue-eval's relay backend supports relay-lib==1.2.* "
            "(the relay protocol of 1.2)") in str(error.value)
    assert info.run(None) == 1
    shown = capsys.readouterr()
    assert "relay backend: relay-lib 1.3.0 (supported: ==1.2.*; NOT SUPPORTED: the relay protocol of 1.2)" \
        in shown.out
    assert not backends.must_retire()  # refused before any backend was made


def test_the_vllm_extra_installs_the_range_the_vllm_backend_is_tested_with():
    from kvrescue_eval.model_adapters.vllm.backend import VLLMBackend

    extra = [Requirement(line) for line in metadata.requires("kvrescue-eval") if 'extra == "vllm"' in line]
    assert [(r.name, str(r.specifier)) for r in extra] == [("vllm", VLLMBackend.supported)] == [("vllm", "==0.32.*")]
    for version, accepted in (("0.32.0", True), ("0.32.3", True), ("0.33.0", False), ("0.31.1", False)):
        assert extra[0].specifier.contains(version) is accepted
