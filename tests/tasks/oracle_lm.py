"""Test-only lm-eval models that answer from the gold answer (registered only inside the tests).

`oracle` model_args:
  answer=gold       every response is the boxed gold answer
  answer=wrong      every response boxes a number that is no gold answer
  answer=staircase  seed j of doc d is right iff d <= j (per-seed accuracies are easy to hand-compute)
  stats=1           responses are TextWithStats with steps = 100 * (seed + 1), output_tokens = doc_id

It also checks that what lm-eval hands it is the Qwen2.5-Math conversation of the doc, both as
chat messages (with --apply_chat_template) and as plain text (without), and raises otherwise.
"""

import json
from collections import Counter

from lm_eval.api.model import LM

from kvrescue_eval import benchmark_table
from kvrescue_eval.grading.extraction import last_boxed
from kvrescue_eval.grading.gold import raw_gold
from kvrescue_eval.stats import TextWithStats
from kvrescue_eval.tasks import qwen_math_cot

WRONG = "-987654321"


class OracleLM(LM):
    def __init__(self, answer="gold", stats=0, **kwargs):
        super().__init__()
        if answer not in ("gold", "wrong", "staircase"):
            raise ValueError(f"answer={answer!r}; valid: gold, wrong, staircase")
        self.answer = answer
        self.with_stats = bool(int(stats))
        self.seen = Counter()

    @property
    def tokenizer_name(self):
        return "oracle"

    def apply_chat_template(self, chat_history, add_generation_prompt=True):
        return json.dumps(chat_history)

    def generate_until(self, requests, disable_tqdm=False):
        return [self._respond(request) for request in requests]

    def _respond(self, request):
        context, _gen_kwargs = request.args
        doc = request.doc
        self._check_conversation(context, doc)
        seed = self.seen[(request.task_name, request.doc_id)]
        self.seen[(request.task_name, request.doc_id)] += 1
        # The gold as the data writes it (a normalised gold may have lost what strict mode checks);
        # for math500 that is the last \boxed{} of the reference solution, which the box below repeats.
        benchmark = benchmark_table.of_task(request.task_name)
        gold = raw_gold(doc, benchmark.name)
        if benchmark.gold == "solution_boxed":
            gold = last_boxed(gold)
        right = self.answer == "gold" or (self.answer == "staircase" and request.doc_id <= seed)
        text = f"We compute step by step.\n\nThe final answer is $\\boxed{{{gold if right else WRONG}}}$."
        if not self.with_stats:
            return text
        return TextWithStats(text, {"steps": 100 * (seed + 1), "output_tokens": request.doc_id}, "eos")

    @staticmethod
    def _check_conversation(context, doc):
        messages = qwen_math_cot.conversation(doc)
        if context.startswith("["):
            received = json.loads(context)
        else:
            received = context
            messages = messages[0]["content"] + messages[1]["content"]
        if received != messages or doc["messages"] != qwen_math_cot.conversation(doc):
            raise AssertionError(f"prompt is not the Qwen2.5-Math conversation: {context!r}")

    def loglikelihood(self, requests, disable_tqdm=False):
        raise NotImplementedError("the oracle only generates")

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError("the oracle only generates")
