"""`qwen-prm-vllm`: the `qwen-prm` step rewards computed by vLLM's pooling runner.

vLLM serves Qwen2.5-Math-PRM checkpoints natively (`Qwen2ForProcessRewardModel`, step pooling): each
prompt yields, per "<extra_0>" in it, the 2-label probabilities at that tag. The input is exactly
`qwen-prm`'s (chat template, steps joined and ended by "<extra_0>", through the candidate's own tag),
sent as token ids, and a candidate's reward is the positive label's probability at its tag, the
last one. All distinct candidate texts of all ready requests go in one `encode` call. vLLM keeps no
prefix cache for pooling models, so every call reads the whole trajectory again.
"""

from typing import Hashable, Sequence

from kvrescue_eval.engine.scoring import ScoreRequest

from ..vllm.engine import VLLM_CALL
from .qwen_prm import QwenPRMScorer, resolve_checkpoint, step_tag_id
from .qwen_prm_model import decoder_type

VLLM_DECODERS = ("qwen2",)  # vLLM 0.32 serves the layout as `Qwen2ForProcessRewardModel` only


class VLLMQwenPRMScorer(QwenPRMScorer):
    name = "qwen-prm-vllm"

    def __init__(self, llm, tokenizer, window: int = 0):  # noqa: super().__init__ would build a transformers cache
        self.llm, self.tokenizer = llm, tokenizer
        self.step_tag_id = step_tag_id(tokenizer)
        self.use_prefix_cache = False
        self._set_window(window, llm.llm_engine.model_config.max_model_len)

    def _score_distinct(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=self._through_last_tag(
                       self.encode(self.render(r.system, r.question, [*r.steps, candidate]))))
                   for r in requests for candidate in r.candidates]
        with VLLM_CALL:
            outputs = iter(self.llm.encode(prompts, pooling_task="token_classify", use_tqdm=False) if prompts else [])
        return [[float(next(outputs).outputs.data[-1][1]) for _ in r.candidates] for r in requests]

    def release(self, key: Hashable) -> None:
        pass  # nothing is kept per trajectory


def load_vllm_qwen_prm(path: str, prm_window: int = 0, **engine_kwargs) -> VLLMQwenPRMScorer:
    """`path`: a checkpoint folder or hub id; `prm_window`: the PRM's window (qwen_prm.py); `engine_kwargs`: vLLM
    `LLM(...)` settings (dtype, memory, ...)."""
    from transformers import AutoTokenizer
    from vllm.config import PoolerConfig

    from ..vllm.engine import start_llm

    folder = resolve_checkpoint(path)
    if (decoder := decoder_type(folder)) not in VLLM_DECODERS:
        raise ValueError(f"{folder}: vLLM serves the Qwen2.5-Math-PRM layout on decoders of model_type "
                         f"{', '.join(VLLM_DECODERS)} only; this PRM's is {decoder!r}: score with prm_backend=hf")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    llm = start_llm(str(folder), runner="pooling", enable_prefix_caching=False,
                    pooler_config=PoolerConfig(step_tag_id=step_tag_id(tokenizer)), **engine_kwargs)
    return VLLMQwenPRMScorer(llm, tokenizer, prm_window)
