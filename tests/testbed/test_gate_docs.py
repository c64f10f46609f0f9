"""docs/testbed.md's "CI gate" section states the thresholds that the gate applies (GATES["testbed"])."""

import re
from pathlib import Path

from kvrescue_eval.analysis.gate import GATES
from markdown_cells import rows_headed

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testbed.md"


def section():
    text = DOCS.read_text()
    start = text.index("## CI gate\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_the_docs_table_is_the_gate_spec():
    rows = {row["criterion"]: row["threshold"] for row in rows_headed(section(), "criterion", "threshold")}
    spec = GATES["testbed"]
    low, high = spec.helper_share
    assert rows["recovery (A_rescue - A_bon) / (A_full - A_bon)"] == f">= **{spec.min_recovery:g}**"
    assert rows["margin: A_rescue - max(A_helper alone, A_bon)"] == f">= **{spec.min_margin:g}**"
    assert rows["helper share of committed steps (helper_steps / steps)"] == f"in **[{low:.0%}, {high:.0%}]**"
    assert rows["base tokens per problem, rescue / bon"] == f"<= **{spec.max_base_token_ratio:g}**"


def test_the_gate_sweep_uses_the_named_gate():
    from kvrescue_eval.sweep.spec import load

    spec = load("recovery-gate")
    assert spec.check == {"gate": "testbed", "arms_any_scorer": True}
    script = (DOCS.parents[1] / ".ci" / "recovery-gate").read_text()
    assert "kvrescue-eval sweep recovery-gate" in script
    assert not re.search(r"--(min-recovery|min-margin|helper-share|max-base-token-ratio)\b", script.split("set -eu")[1])
