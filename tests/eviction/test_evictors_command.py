"""`kvrescue-eval evictors` lists every registered evictor with its options, defaults and reference."""

import json

from kvrescue_eval.cli import main


def test_lists_every_evictor_with_options_defaults_references_and_needs(capsys):
    assert main(["evictors", "--json"]) == 0
    rows = {row["name"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert len(rows) >= 10
    assert {"rkv", "snapkv", "streamingllm", "knorm", "tova", "h2o", "keydiff", "pyramidkv", "adakv",
            "criticalkv"} <= set(rows)
    assert rows["streamingllm"]["options"] == {"sinks": 4}
    assert rows["rkv"]["options"] == {"pool_kernel": 7, "mix_lambda": 0.1}
    assert rows["adakv"]["options"]["alpha_safeguard"] == 0.2 and rows["adakv"]["needs"] == ["head budgets"]
    assert rows["h2o"]["needs"] == ["per-slot state"] and rows["pyramidkv"]["needs"] == ["layer budgets"]
    assert rows["criticalkv"]["needs"] == ["values and the output projection"]
    assert "arXiv:2502.03805" in rows["criticalkv"]["reference"]
    assert rows["randomattention"]["needs"] == ["prompt slots"] and rows["randomattention"]["options"] == {
        "random_seed": 0}
    assert "arXiv 2609.03430" in rows["randomattention"]["reference"]
    assert "arXiv:2306.14048" in rows["h2o"]["reference"]


def test_text_output_names_the_count(capsys):
    assert main(["evictors"]) == 0
    out = capsys.readouterr().out
    assert "streamingllm  sinks=4" in out and out.rstrip().endswith("(its options are model_args too)")
