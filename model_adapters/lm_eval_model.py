"""The lm-eval model `kvrescue`: KV-Rescue and its baselines behind `lm_eval --model kvrescue`.

    lm_eval --model kvrescue --model_args preset=paper-7b --tasks math500

The engine works on the conversation, never on a rendered string, so `--apply_chat_template` makes
no difference: each model renders its own chat template. The conversation of a request is, in
order: the messages our `apply_chat_template` handed lm-eval (with `--apply_chat_template`), the
doc's `messages` field (our tasks carry it), else the context as one user turn. Generation settings
come from model_args; a task's `generation_kwargs` are not used (steps end at "\n\n", a problem
at EOS, `max_steps` or `max_context`).
"""

import hashlib
import json
import logging
from collections import Counter

from lm_eval.api.model import LM

from kvrescue_eval.engine.scheduler import Engine, Problem
from kvrescue_eval.stats import FINISH_REASONS, STAT_KEYS, TextWithStats

from .model_args import parse_model_args

logger = logging.getLogger(__name__)
CONVERSATION_MARKER = "kvrescue-conversation"


class KVRescueLM(LM):
    def __init__(self, **model_args):
        super().__init__()
        self.args = parse_model_args(model_args)  # fails on bad input before loading anything
        from .hf_loading import build_components

        self.base, self.helper, self.scorer, self.config = build_components(self.args)
        self.totals = Counter()
        self.finish_reasons = Counter()

    # -- lm-eval interface -----------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        from tqdm import tqdm

        self._warn_about_ignored_settings(requests)
        seen = Counter()
        problems = []
        for request in requests:
            conversation = conversation_of(request)
            prompt_id = hashlib.sha256(json.dumps(conversation, sort_keys=True).encode("utf-8")).hexdigest()[:16]
            problems.append(Problem((prompt_id, seen[prompt_id]), conversation))  # repeat index by counting
            seen[prompt_id] += 1
        bar = tqdm(total=len(problems), desc="kvrescue problems", disable=disable_tqdm)
        live = {"steps": 0, "helper_steps": 0, "early_exits": 0}

        def on_event(kind, **info):
            if kind == "commit":
                live["steps"] += 1
                live["helper_steps"] += info["role"] == "helper"
            elif kind == "abort":
                live["early_exits"] += 1
            elif kind == "finish":
                bar.update(1)
            bar.set_postfix(live, refresh=False)

        results = Engine(self.base, self.helper, self.scorer, self.config, on_event=on_event).run(problems)
        bar.close()
        responses = []
        for result in results:
            self.totals.update({key: result.stats[key] for key in STAT_KEYS + ("aborted_commits",)})
            self.finish_reasons[result.finish_reason] += 1
            responses.append(TextWithStats(result.text, result.stats, result.finish_reason))
        return responses

    def _warn_about_ignored_settings(self, requests) -> None:
        ours = {"temperature": self.args.temperature, "top_p": self.args.top_p, "top_k": self.args.top_k}
        differing = sorted({f"{name}={kwargs[name]}" for request in requests for kwargs in [request.args[1] or {}]
                            for name in ours if name in kwargs and kwargs[name] != ours[name]})
        if differing:
            logger.warning("the task asks for %s; kvrescue samples with its model_args %s (set them there)",
                           ", ".join(differing), ours)

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(_GENERATES_ONLY)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(_GENERATES_ONLY)

    # -- chat templates: hand the conversation through lm-eval untouched ---------------------------
    @property
    def tokenizer_name(self) -> str:
        return CONVERSATION_MARKER

    def chat_template(self, chat_template=False) -> str:
        return CONVERSATION_MARKER

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True) -> str:
        return json.dumps({CONVERSATION_MARKER: list(chat_history)})

    # -- run information (lm-eval stores it in results["config"]) --------------------------------
    def get_model_info(self) -> dict:
        a = self.args
        n_base, n_helper = a.counts
        totals = {key: int(self.totals[key]) for key in STAT_KEYS + ("aborted_commits",)}
        totals["problems"] = int(sum(self.finish_reasons.values()))
        totals["finish_reasons"] = {reason: int(self.finish_reasons[reason]) for reason in FINISH_REASONS}
        return {"kvrescue": {
            "preset": a.preset, "base": a.base if n_base else None, "helper": a.helper if n_helper else None,
            "scorer": a.scorer if self.scorer is not None else None,
            "prm": a.prm if self.scorer is not None and a.scorer == "qwen-prm" else None,
            "mode": a.mode, "n_base": n_base, "n_helper": n_helper,
            "evictor": a.evictor if a.evicts else None, "budget": a.budget if a.evicts else None,
            "buffer": a.buffer if a.evicts else None, "window": a.window if a.evicts else None,
            "mix_lambda": a.mix_lambda if a.evicts and a.evictor == "rkv" else None,
            "temperature": a.temperature, "top_p": a.top_p, "top_k": a.top_k, "max_steps": a.max_steps,
            "max_step_tokens": a.max_step_tokens, "max_context": a.max_context, "seed": a.seed,
            "max_problems_in_flight": a.max_problems_in_flight, "dtype": a.dtype,
            "backends": a.backends, "vllm_statistics": self._vllm_statistics(),
            "totals": totals}}

    def _vllm_statistics(self) -> dict:
        """Per vLLM policy, its prefix-cache figures (model_adapters/vllm_policy.py)."""
        return {p.name: p.statistics() for p in (self.base, self.helper) if hasattr(p, "statistics")}


_GENERATES_ONLY = ("the kvrescue model generates only (generate_until): loglikelihood requests "
                   "(multiple-choice and perplexity tasks) are not supported; use a generative task")


def conversation_of(request) -> list[dict]:
    context = request.args[0]
    try:
        handed = json.loads(context)
        if isinstance(handed, dict) and CONVERSATION_MARKER in handed:
            return handed[CONVERSATION_MARKER]
    except (TypeError, ValueError):
        pass
    doc = getattr(request, "doc", None)
    if isinstance(doc, dict) and doc.get("messages"):
        return [dict(role=m["role"], content=m["content"]) for m in doc["messages"]]
    return [{"role": "user", "content": context}]
