"""A run's mode: the rows of the paper's Table 5 (rescue, bon, full, helper), the one meaning of "mode" outside the
grader (whose modes, "qwen" and "strict", are kvrescue_eval/grading/modes.py).

Its readers: the run record (run_record.py), the settings tree and model_args that build a run's engine from its
mode, the sweep's arms and the analysis. The engine itself knows no mode: it gets N base and N helper candidates.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Mode:
    """A row of the paper's Table 5: which models propose candidates, whether the base's cache evicts, and
    whether the detector screens base candidates by default (the paper uses early exit in KV-Rescue only)."""
    name: str = field(kw_only=False)
    uses_base: bool
    uses_helper: bool
    evicts: bool
    early_exit: bool
    summary: str


# The one table of modes, read by the run record, model_args and the settings tree, the sweep and the analysis.
MODES = {mode.name: mode for mode in (
    Mode("rescue", uses_base=True, uses_helper=True, evicts=True, early_exit=True,
         summary="N base (evicted KV) + N helper (full KV) candidates, the scorer picks"),
    Mode("bon", uses_base=True, uses_helper=False, evicts=True, early_exit=False,
         summary="evicted best-of-N: N base candidates, no helper"),
    Mode("full", uses_base=True, uses_helper=False, evicts=False, early_exit=False,
         summary="best-of-N of the base with its full KV cache"),
    Mode("helper", uses_base=False, uses_helper=True, evicts=False, early_exit=False,
         summary="the helper alone, best-of-N, full KV"),
)}
