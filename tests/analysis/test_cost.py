"""The cost model reproduces the paper's appendix D numbers from the bundled Qwen2.5-Math configs."""

import json

import pytest

from kvrescue_eval.analysis.cost import GIB, KIB, CostReport, load_shape, shape_from_config
from kvrescue_eval.analysis.errors import AnalysisInputError
from kvrescue_eval.cli import main

H15, B7, B72 = (load_shape(name) for name in ("qwen2.5-math-1.5b", "qwen2.5-math-7b", "qwen2.5-math-72b"))


def test_kv_bytes_per_token():
    # 2 (K and V) * layers * kv heads * head dim * 2 bytes
    assert B7.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2 == 56 * KIB
    assert B72.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 320 * KIB
    assert H15.kv_bytes_per_token == 2 * 28 * 2 * 128 * 2 == 28 * KIB


def test_parameter_counts_by_hand():
    # per layer: q d*d, k and v 2*d*kv, o d*d, q/k/v biases d + 2kv, SwiGLU 3*d*I, two norms 2d; then the
    # embeddings (twice unless tied) and the final norm. These are the models' published sizes (7.61B, 1.54B, 72.7B).
    assert B7.parameters == 28 * (3584**2 * 2 + 2 * 3584 * 512 + 3584 + 1024 + 3 * 3584 * 18944 + 2 * 3584) \
        + 2 * 152064 * 3584 + 3584 == 7_615_616_512
    assert H15.parameters == 28 * (1536**2 * 2 + 2 * 1536 * 256 + 1536 + 512 + 3 * 1536 * 8960 + 2 * 1536) \
        + 151936 * 1536 + 1536 == 1_543_714_304
    assert B72.parameters == 80 * (8192**2 * 2 + 2 * 8192 * 1024 + 8192 + 2048 + 3 * 8192 * 29568 + 2 * 8192) \
        + 2 * 152064 * 8192 + 8192 == 72_706_203_648


def test_dense_decode_flops_per_token():
    assert round(2 * B7.parameters / 1e9, 1) == 15.2
    assert round(2 * B72.parameters / 1e9, 1) == 145.4


def test_attention_flops_per_context_token():
    assert B7.flops_per_context_token == 4 * 28 * 3584
    assert round(B7.flops_per_context_token / 1e6, 3) == 0.401
    assert round(B72.flops_per_context_token / 1e6, 2) == 2.62


def test_memory_ratio_at_8k_with_budget_512():
    assert CostReport(B7, None, 512, 128, 1, 8192, 0.0).memory_ratio == pytest.approx(8192 / 640) == 12.8


@pytest.mark.parametrize("base,full,rescue", [(B7, 1.75, 1.15), (B72, 10.0, 2.44)])
def test_memory_full_vs_rescue_at_4k(base, full, rescue):
    report = CostReport(base, H15, 512, 128, 8, 4096, 0.0)
    assert round(report.memory_full / GIB, 2) == full
    assert round(report.memory_rescue / GIB, 2) == rescue


# Eq. 15 by hand at alpha 2.9, B 512 (B' = 640 with the buffer of 128), l 4096:
# rho = (2 P_h + 4 L_h d_h l) / (2 P_b + (1 + alpha) 4 L_b d_b B'), helper 1.5B (28 layers, d 1536).
HELPER_FLOPS = 2 * 1_543_714_304 + 4 * 28 * 1536 * 4096  # 3,792,071,680
RHO_7B = HELPER_FLOPS / (2 * 7_615_616_512 + 3.9 * 4 * 28 * 3584 * 640)  # / 16,233,147,392 = 0.23360
RHO_72B = HELPER_FLOPS / (2 * 72_706_203_648 + 3.9 * 4 * 80 * 8192 * 640)  # / 151,955,521,536 = 0.024955


@pytest.mark.parametrize("base,rho", [(B7, RHO_7B), (B72, RHO_72B)])
def test_helper_fraction_is_eq_15(base, rho):
    assert CostReport(base, H15, 512, 128, 8, 4096, 2.9).helper_fraction == pytest.approx(rho, rel=1e-12)
    assert round(100 * RHO_7B, 2) == 23.36 and round(100 * RHO_72B, 1) == 2.5


def test_evicted_decode_flops_is_eq_13():
    # 2P + (1 + alpha) 4Ld min(l, B'): below B' the evicted base attends to the whole context
    assert CostReport(B7, None, 512, 128, 8, 4096, 2.9).evicted_decode_flops == \
        pytest.approx(2 * 7_615_616_512 + 3.9 * 401_408 * 640, rel=1e-12)
    assert CostReport(B7, None, 512, 128, 8, 300, 1.0).evicted_decode_flops == \
        pytest.approx(2 * 7_615_616_512 + 2 * 401_408 * 300, rel=1e-12)


def test_full_and_evicted_cost_meet_at_the_crossover():
    report = CostReport(B7, None, 64, 128, 8, 748.8, 2.9)  # l* = 3.9 * 192 = 748.8
    assert report.crossover == pytest.approx(748.8)
    assert B7.decode_flops(748.8) == pytest.approx(report.evicted_decode_flops, rel=1e-12)


def test_crossover():
    assert CostReport(B7, H15, 64, 128, 8, 4096, 0.5).crossover == pytest.approx(1.5 * 192)


def test_config_file_and_folder(tmp_path):
    config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 3, "intermediate_size": 128, "vocab_size": 100, "tie_word_embeddings": True,
              "torch_dtype": "float32"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    shape = load_shape(tmp_path)
    assert shape.kv_bytes_per_token == 2 * 3 * 2 * 16 * 4
    # per layer: q 64*64, k and v 64*32 each, o 64*64, MLP 3*64*128, two norms; tied embeddings, final norm
    assert shape.parameters == 3 * (64 * 64 * 2 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 100 * 64 + 64
    assert load_shape(tmp_path / "config.json") == shape


def test_bad_config_names_the_field(tmp_path):
    with pytest.raises(AnalysisInputError, match="'num_hidden_layers'"):
        shape_from_config({"hidden_size": 64, "num_attention_heads": 4}, "cfg.json")
    with pytest.raises(AnalysisInputError, match="bundled config"):
        load_shape(tmp_path / "missing")


def test_cost_command(capsys):
    assert main(["cost", "--base", "qwen2.5-math-7b", "--helper", "qwen2.5-math-1.5b", "--budget", "512",
                 "--json"]) == 0
    rows = {row["quantity"]: row["value"] for row in json.loads(capsys.readouterr().out)}
    assert rows["base KV per token"] == 56
    assert round(rows["KV-Rescue memory (evicted base + full helper), N=8"], 2) == 1.15
    assert rows["helper fraction rho (Eq. 15: helper / evicted-base decode FLOPs)"] == pytest.approx(100 * RHO_7B)
    assert main(["cost", "--base", "qwen2.5-math-7b", "--budget", "0"]) == 2
    capsys.readouterr()
    for base, printed in (("qwen2.5-math-7b", "23.36 %"), ("qwen2.5-math-72b", "2.496 %")):
        assert main(["cost", "--base", base, "--helper", "qwen2.5-math-1.5b", "--budget", "512"]) == 0
        assert printed in capsys.readouterr().out.split("helper fraction rho")[1].splitlines()[0]


def test_cost_takes_the_presets_hub_ids_and_the_papers_alpha(capsys):
    from kvrescue_eval.analysis.cost import PAPER_ALPHA
    from kvrescue_eval.model_adapters.settings.presets import PRESETS

    for preset in ("paper-7b", "paper-72b"):
        for role in ("base", "helper"):
            assert load_shape(PRESETS[preset][role]) == load_shape(PRESETS[preset][role].split("/")[1].removesuffix("-Instruct"))
    assert main(["cost", "--base", "Qwen/Qwen2.5-Math-7B-Instruct", "--helper", "Qwen/Qwen2.5-Math-1.5B-Instruct",
                 "--budget", "64", "--json"]) == 0
    rows = {row["quantity"]: row["value"] for row in json.loads(capsys.readouterr().out)}
    assert PAPER_ALPHA == 2.9
    assert rows["eviction crossover l* = (1 + alpha) B', alpha=2.9 (the paper's measured overhead)"] == \
        pytest.approx(3.9 * (64 + 128))
    assert main(["cost", "--base", "qwen2.5-math-7b", "--budget", "64"]) == 0
    assert "alpha = 2.9: the paper's measured eviction overhead" in capsys.readouterr().out
    assert main(["cost", "--base", "qwen2.5-math-7b", "--budget", "64", "--alpha", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "alpha = 0.5: given by --alpha" in out and "288" in out
    assert main(["cost", "--base", "Qwen/Qwen2.5-Math-8B", "--budget", "64"]) == 2
    assert "qwen/qwen2.5-math-7b-instruct" in capsys.readouterr().err


def test_the_model_is_a_positional_argument_too(capsys):
    assert main(["cost", "Qwen/Qwen2.5-Math-7B-Instruct", "--budget", "64", "--json"]) == 0
    positional = capsys.readouterr().out
    assert main(["cost", "--base", "Qwen/Qwen2.5-Math-7B-Instruct", "--budget", "64", "--json"]) == 0
    assert positional == capsys.readouterr().out
    assert main(["cost", "--budget", "64"]) == 2
    assert "name the base model once" in capsys.readouterr().err
    assert main(["cost", "qwen2.5-math-7b", "--base", "qwen2.5-math-72b", "--budget", "64"]) == 2
