"""A full-KV model on vLLM as a step-level policy (kvrescue_eval.engine.policy.StepPolicy).

State per problem: the committed trajectory as token ids (the rendered prompt, then every committed
step). A step's N candidates are N requests of one `LLM.generate` call (with every other problem's
requests of that call): the committed ids as the prompt, so vLLM's automatic prefix caching reuses
the KV of the previous step; stop at "\n\n" (kept in the output), at EOS or at the token cap; each
candidate with its own seed from the engine's (seed, problem, role, step, index) stream, so a
trajectory does not depend on what else is in flight. Temperature 0 is greedy.

A candidate's tokens are vLLM's output ids (an EOS removed) and its text is their decoding, exactly
as the token-level engine forms them.
"""

from typing import Sequence

from kvrescue_eval.engine.config import STEP_SEPARATOR
from kvrescue_eval.engine.policy import StepCandidate, StepRequest
from kvrescue_eval.engine.sampling import SamplingParams

from ..step_trajectories import TokenTrajectories
from .engine import VLLM_CALL


class VLLMStepPolicy(TokenTrajectories):
    def __init__(self, llm, sampling: SamplingParams, name: str = "helper", tokenizer=None, thinking: bool = False):
        # The model's own transformers tokenizer (vLLM wraps its copy in another class)
        tokenizer = tokenizer or _load_tokenizer(llm.llm_engine.model_config.tokenizer)
        super().__init__(tokenizer, sampling, eos_token_ids(llm, tokenizer), name, thinking)
        self.llm = llm
        self.prompt_tokens = self.cached_prompt_tokens = 0  # over all requests: vLLM's prefix-cache hits

    def propose(self, requests: Sequence[StepRequest]) -> list[list[StepCandidate]]:
        from vllm.inputs import TokensPrompt

        prompts, params = [], []
        for request in requests:
            ids = list(self.committed[request.key])
            for seed in request.seeds:
                prompts.append(TokensPrompt(prompt_token_ids=ids))
                params.append(self._params(self.sampling_of[request.key], seed, request.max_tokens))
        with VLLM_CALL:
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        self.prompt_tokens += sum(len(p["prompt_token_ids"]) for p in prompts)
        self.cached_prompt_tokens += sum(out.num_cached_tokens or 0 for out in outputs)
        candidates = iter(self._candidate(out.outputs[0]) for out in outputs)
        return [[next(candidates) for _ in request.seeds] for request in requests]

    def _params(self, s: SamplingParams, seed: int, max_tokens: int):
        from vllm import SamplingParams as VLLMSamplingParams

        return VLLMSamplingParams(
            n=1, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=seed, max_tokens=max_tokens,
            stop=[STEP_SEPARATOR], include_stop_str_in_output=True, stop_token_ids=sorted(self.eos_token_ids),
            skip_special_tokens=False)

    def _candidate(self, completion) -> StepCandidate:
        return self.candidate(completion.token_ids, completion.finish_reason)

    # -- run statistics ------------------------------------------------------------------------------
    def statistics(self) -> dict:
        """Prompt tokens sent and, of those, found in vLLM's prefix cache (vLLM's own per-request
        `num_cached_tokens`), over this policy's life; and their ratio."""
        return {"prompt_tokens": self.prompt_tokens, "cached_prompt_tokens": self.cached_prompt_tokens,
                "prefix_cache_hit_rate": self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else None}


def eos_token_ids(llm, tokenizer) -> frozenset:
    """EOS ids of the model's generation config and of its tokenizer (as the transformers policy has)."""
    ids = set()
    config = llm.llm_engine.model_config.try_get_generation_config() or {}
    configured = config.get("eos_token_id")
    for value in (configured, tokenizer.eos_token_id):
        if value is not None:
            ids.update(value if isinstance(value, (list, tuple)) else [value])
    return frozenset(int(i) for i in ids)


def _load_tokenizer(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)
