"""`qwen-prm` on a vLLM server (prm_backend=http): the in-process vLLM scorer's exact input (vllm_prm.py: the
rendered trajectory through the candidate's own "<extra_0>", as token ids) sent to the server's pooling endpoint
(`POST /pooling`, task token_classify; the server runs `--runner pooling` with the step tag as its pooler's
`step_tag_id`: `kvrescue-eval serve prm` starts it so), all distinct candidates of the ready requests in one
request, and a candidate's reward the positive label's probability at its tag, as `qwen-prm` computes it."""

from typing import Hashable, Sequence

from kvrescue_eval.engine.scoring import ScoreRequest

from ..http.server import Server, ServerError, field_of
from .qwen_prm import QwenPRMScorer, resolve_checkpoint, step_tag_id


class HTTPQwenPRMScorer(QwenPRMScorer):
    name = "qwen-prm-http"

    def __init__(self, server: Server, tokenizer, window: int = 0, context_length: int = 0):  # noqa: no cache
        self.server, self.tokenizer = server, tokenizer
        self.step_tag_id = step_tag_id(tokenizer)
        self.use_prefix_cache = False
        self._set_window(window, context_length)

    def _score_distinct(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        inputs = [self._through_last_tag(self.encode(self.render(r.system, r.question, [*r.steps, candidate])))
                  for r in requests for candidate in r.candidates]
        if not inputs:
            return [[] for _ in requests]
        self.server.check()
        body = {"model": self.server.model, "input": inputs, "task": "token_classify"}
        data = field_of(self.server, self.server.run([("POST", "/pooling", body)])[0], "data")
        if len(data) != len(inputs):
            raise ServerError(f"prm server {self.server.url}/pooling answered {len(data)} results for {len(inputs)} "
                              f"inputs")
        rewards = iter(float(field_of(self.server, item, "data", -1, 1)) for item in data)
        return [[next(rewards) for _ in r.candidates] for r in requests]

    def release(self, key: Hashable) -> None:
        pass  # nothing is kept per trajectory


def load_http_qwen_prm(path: str, server, prm_window: int = 0) -> HTTPQwenPRMScorer:
    """`path`: the checkpoint (its tokenizer renders the input here, its config gives the context length);
    `server`: the prm role's Server; `prm_window`: the PRM's window (qwen_prm.py)."""
    from transformers import AutoConfig, AutoTokenizer

    folder = resolve_checkpoint(path)
    context = AutoConfig.from_pretrained(folder).max_position_embeddings
    return HTTPQwenPRMScorer(server, AutoTokenizer.from_pretrained(folder), prm_window, context)
