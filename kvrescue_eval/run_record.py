"""The record of a `kvrescue` run, which lm-eval stores as `results["config"]["kvrescue"]`: one definition,
written by the model (model_adapters/lm_eval/run_info.py), read by the analysis (analysis/runs.py, reruns.py)
and built by the test fixtures.

A field marked `process` describes what one process did, not the experiment (a run and its identical rerun
differ in it: resumed problems, out-of-memory retries, cache statistics, batching, processes), or labels it
(the preset is spelled out in the other fields, the seed's source in `seed`). Records written by older versions
lack some fields: they read as the defaults here (the detector as on, which it was in every mode then).
"""

from dataclasses import asdict, dataclass, field, fields

from kvrescue_eval.run_modes import MODES


def _process(default=None, factory=None):
    if factory is not None:
        return field(default_factory=factory, metadata={"process": True})
    return field(default=default, metadata={"process": True})


class RecordError(ValueError):
    """A record field that cannot be read: `field` names it."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.field, self.message = name, message


@dataclass(frozen=True)
class RunRecord:
    # what was run
    preset: str | None = _process()
    base: str | None = None             # None when the mode does not decode with the base
    helper: str | None = None           # None when the mode uses no helper
    scorer: str | None = None           # None when one candidate per step needs no scorer
    prm: str | None = None              # the checkpoint the scorer reads, if it reads one
    mode: str = "rescue"
    n_base: int = 0
    n_helper: int = 0
    evictor: str | None = None          # None, and budget, buffer, window too, when the mode does not evict
    budget: int | None = None
    buffer: int | None = None
    window: int | None = None
    mix_lambda: float | None = None
    evictor_options: dict | None = None
    scorer_options: dict | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_steps: int | None = None
    max_step_tokens: int | None = None
    max_context: int | None = None
    seed: int | None = None
    seed_source: str | None = _process()  # "model_args", "lm_eval --seed" or "default"
    max_problems_in_flight: int | None = _process()
    device_map: str | None = _process()
    data_parallel_processes: int | None = _process()
    detector: str = "on"                # "on": base candidates were screened (early exit)
    detector_settings: dict | None = None
    # the detector settings (on or off) of the recorded base-candidate statistics: their window and gzip_chars,
    # the thresholds the report marks on their histograms (kvrescue_eval/candidate_records.py)
    candidate_detector: dict | None = None
    overlap: bool | None = None
    thinking: str | None = None         # "on": base and helper in thinking mode (model_arg thinking, resolved)
    # where and how it generated (lm_eval/run_info.py's execution_info)
    device: str | None = None
    device_requested: str | None = None
    dtype: str | None = None
    dtype_requested: str | None = None
    backends: dict | None = None        # role -> backend
    generation: dict | None = None      # task -> the generation kwargs used
    # what happened
    # backend's statistics name -> {role: what it measured} (e.g. "vllm": prefix-cache hits); older records'
    # `vllm_statistics` read as {"vllm": ...}
    backend_statistics: dict = _process(factory=dict)
    scorer_statistics: dict = _process(factory=dict)  # what the scorer reports (e.g. the PRM's window, its cuts)
    max_cache_slots: dict = _process(factory=dict)    # role -> most KV slots per row and KV head (transformers)
    totals: dict = _process(factory=dict)           # engine statistics summed over problems, finish reasons
    run: dict = _process(factory=dict)              # resumed / generated problems, retries, grader time-outs

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def process_fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.metadata.get("process"))

    @classmethod
    def from_json(cls, info) -> "RunRecord":
        """The record of a results file's `config.kvrescue`; RecordError names a field that cannot be read.
        Fields it does not know (a newer version's) are left out."""
        if not isinstance(info, dict):
            raise RecordError("", f"expected an object, got {type(info).__name__}")
        known = {f.name for f in fields(cls)}
        if "vllm_statistics" in info and "backend_statistics" not in info:
            info = {**info, "backend_statistics": {"vllm": info["vllm_statistics"]} if info["vllm_statistics"] else {}}
        record = cls(**{k: v for k, v in info.items() if k in known})
        if record.mode not in MODES:
            raise RecordError("mode", f"{record.mode!r} is not one of {', '.join(MODES)}")
        mode = MODES[record.mode]
        for name, used in (("base", mode.uses_base), ("helper", mode.uses_helper)):
            if used and not isinstance(getattr(record, name), str):
                raise RecordError(name, f"missing or not a str (got {getattr(record, name)!r})")
        count = "n_base" if mode.uses_base else "n_helper"
        if not isinstance(info.get(count), int) or isinstance(info.get(count), bool):
            raise RecordError(count, f"missing or not an int (got {info.get(count)!r})")
        if mode.evicts and (not isinstance(record.budget, int) or isinstance(record.budget, bool)):
            raise RecordError("budget", f"mode {record.mode} needs an integer eviction budget, got {record.budget!r}")
        if record.detector not in ("on", "off"):
            raise RecordError("detector", f"{record.detector!r} is not 'on' or 'off'")
        return record

    @property
    def n(self) -> int:
        """Candidates per step of the model the mode decodes with (the base's, else the helper's)."""
        return self.n_base if MODES[self.mode].uses_base else self.n_helper
