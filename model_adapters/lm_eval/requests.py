"""lm-eval's requests as the engine's problems: what the model receives, each problem's key, its
generation limits, and which requests are lm-eval's data-parallel padding.

What the model receives is what lm-eval says it sent (the context of `req.args`, as `--write_out` and
the samples' `arguments` show it):
- with `--apply_chat_template`, lm-eval passes the messages it built (system instruction and task
  description as the system turn, few-shot turns, the doc, and a task's `gen_prefix` as an open
  assistant turn) to our `apply_chat_template`, which hands them back as JSON: each model renders them
  with its own chat template, continuing the assistant turn when there is a prefix;
- without it, the context is the prompt lm-eval rendered as plain text, tokenized as it is;
- except for this package's own tasks: their docs carry the conversation (`doc["messages"]`), and when
  lm-eval's plain prompt is exactly its turns concatenated (no few-shot, no prefix; a `--system_instruction`
  lengthens the system turn, as it does with `--apply_chat_template`) the model renders that conversation
  with its chat template (the Qwen2.5-Math protocol needs it), and the request's arguments are rewritten to
  show it (`show_model_input`).
"""

import json
from collections import Counter

from kvrescue_eval.engine.engine import Problem
from kvrescue_eval.fingerprint import json_sha256

from ..prompts import CONTINUE, PLAIN_TEXT

CONVERSATION_MARKER = "kvrescue-conversation"
GENERATION_PROMPT = "add_generation_prompt"


def handed_conversation(messages, add_generation_prompt: bool = True) -> str:
    """What our `apply_chat_template` returns to lm-eval: the messages as JSON (false
    `add_generation_prompt`, lm-eval's way of saying a prefix continues the last assistant turn)."""
    payload = {CONVERSATION_MARKER: [dict(message) for message in messages]}
    if not add_generation_prompt:
        payload[GENERATION_PROMPT] = False
    return json.dumps(payload)


def data_parallel_padding(requests) -> list[bool]:
    """Which requests are lm-eval's data-parallel padding: under several ranks it re-appends the last
    Instance `repeats` more times, so an Instance seen more often than its `repeats` is padding."""
    seen = Counter()
    out = []
    for request in requests:
        seen[id(request)] += 1
        repeats = getattr(request, "repeats", None)
        out.append(repeats is not None and seen[id(request)] > repeats)
    return out


def problems_of(requests, generations) -> list[Problem]:
    """One problem per request, keyed by (hash of its conversation, repeat index by counting), with the
    sampling, token cap and stop strings of its generation settings (lm_eval/generation.py)."""
    seen = Counter()
    problems = []
    for request, generation in zip(requests, generations):
        conversation = conversation_of(request)
        prompt_id = json_sha256(conversation, 16)
        problems.append(Problem((prompt_id, seen[prompt_id]), conversation, generation.max_new_tokens,
                                generation.stop, generation.sampling))
        seen[prompt_id] += 1
    return problems


def conversation_of(request) -> list[dict]:
    """The prompt of a request as the policies render it (model_adapters/prompts.py)."""
    context = request.args[0]
    handed = _handed(context)
    if handed is not None:
        return handed
    own = own_conversation(request)
    if own is not None:
        return own
    return [{"role": "user", "content": context, PLAIN_TEXT: True}]


def own_conversation(request) -> list[dict] | None:
    """The doc's own conversation when lm-eval's plain prompt is exactly its turns concatenated, or its turns
    after a system turn that `--system_instruction` lengthened (with_system_instruction)."""
    doc = getattr(request, "doc", None)
    if not isinstance(doc, dict) or not doc.get("messages"):
        return None
    messages = [{"role": m["role"], "content": m["content"]} for m in doc["messages"]]
    prompt = request.args[0]
    if "".join(m["content"] for m in messages) == prompt:
        return messages
    return with_system_instruction(messages, prompt)


def with_system_instruction(messages, prompt) -> list[dict] | None:
    """The conversation lm-eval builds with `--apply_chat_template`, recovered from its plain prompt.

    With `--system_instruction I`, lm-eval's system turn is I joined to the task's description (our tasks'
    system turn) by the task's fewshot delimiter; in plain mode it glues that turn to the user turn. The plain
    prompt is then that system turn followed by the other turns, nothing between them; the system turn is
    what precedes the other turns, and it ends with the task's own system turn."""
    if not messages or messages[0]["role"] != "system" or not isinstance(prompt, str):
        return None
    system, rest = messages[0]["content"], "".join(m["content"] for m in messages[1:])
    if not prompt.endswith(rest):
        return None
    lengthened = prompt[:len(prompt) - len(rest)]
    if lengthened == system or not lengthened.endswith(system):
        return None
    return [{"role": "system", "content": lengthened}, *messages[1:]]


def show_model_input(requests) -> None:
    """Rewrite the arguments of the requests answered from their doc's own conversation so that the
    samples' `arguments` and `--write_out` show that conversation (as our apply_chat_template hands it)."""
    for request in requests:
        if _handed(request.args[0]) is None and (own := own_conversation(request)) is not None:
            request.arguments = (handed_conversation(own), *request.args[1:])


def _handed(context) -> list[dict] | None:
    try:
        payload = json.loads(context)
    except (TypeError, ValueError):
        return None
    if not isinstance(payload, dict) or CONVERSATION_MARKER not in payload:
        return None
    messages = [{"role": m["role"], "content": m["content"]} for m in payload[CONVERSATION_MARKER]]
    if payload.get(GENERATION_PROMPT, True) is False and messages and messages[-1]["role"] == "assistant":
        messages[-1][CONTINUE] = True
    return messages
