"""Each base token's full-vocabulary entropy before temperature, from inside vLLM: a logits processor.

vLLM reports no entropy, and the degeneration detector needs it for every token of every candidate. The
processor (`logits_processors=[EntropyProcessor]` when the engine starts) sees each step's logits before
temperature, top-p and top-k (it is not argmax-invariant, so vLLM applies it first, also in greedy steps),
computes the entropy of every row that carries a row handle (`SamplingParams(extra_args={ROW_ARG: handle})`),
and leaves the logits unchanged. The entropies stay on the device until the policy reads them with the
step's tokens (`take`), so the step adds no host read of its own.

Processors live where vLLM's model runner runs; the policy reads them in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0).
"""

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

from kvrescue_eval.engine.sampling import entropy

ROW_ARG = "kvrescue_row"
_STEPS: list = []     # (entropies on the device, {handle: batch index}) of the steps not yet taken


class EntropyProcessor(LogitsProcessor):
    def __init__(self, vllm_config, device, is_pin_memory):
        self.rows: dict[int, str] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _, _ in batch_update.added:
            handle = ((params.extra_args or {}) if params is not None else {}).get(ROW_ARG)
            if handle is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = handle
        for first, second, direction in batch_update.moved:
            a, b = self.rows.pop(first, None), self.rows.pop(second, None)
            if a is not None:
                self.rows[second] = a
            if b is not None and direction.name == "SWAP":
                self.rows[first] = b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if self.rows:
            rows = {handle: index for index, handle in self.rows.items() if index < logits.shape[0]}
            _STEPS.append((entropy(logits.float()), rows))
        return logits


def take() -> dict[str, float]:
    """handle -> entropy of every row decoded since the last call (one host read per step)."""
    steps = list(_STEPS)
    _STEPS.clear()
    entropies: dict[str, float] = {}
    for values, rows in steps:
        host = values.tolist()
        entropies.update({handle: host[index] for handle, index in rows.items()})
    return entropies
