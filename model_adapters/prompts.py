"""What every backend's policy does alike with a tokenizer: render a problem's prompt into token ids, and
tell whether two tokenizers give the same ids (then steps pass between models as ids).

A prompt is a conversation, a list of `{"role", "content"}` messages, rendered by the model's own chat
template with a generation prompt. Two marks change that (lm_eval/requests.py sets them):
- `PLAIN_TEXT`: a conversation of one user message so marked is the prompt itself, a string lm-eval
  rendered without a chat template; it is tokenized as lm-eval's own `hf` model tokenizes a context
  (special tokens added unless the text starts with the tokenizer's BOS);
- `CONTINUE`: a last assistant message so marked is continued (a task's `gen_prefix`): the template
  renders it open, without a generation prompt, as transformers' `continue_final_message`.

Thinking mode (model_arg `thinking`, docs/thinking.md) renders the generation prompt as each family documents it:
- `SWITCH` (Qwen3): the chat template takes `enable_thinking`; on, it ends with the assistant header and the model
  writes "<think>" itself; off, the template closes an empty think block;
- `FORCED` (DeepSeek-R1-Distill, QwQ): "<think>" is one token of the vocabulary and the assistant turn must open
  with "<think>\n" (the model cards' instruction); the opening is appended when the template does not write it.
"""

import hashlib
import json

PLAIN_TEXT = "plain_text"
CONTINUE = "continue_final_message"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
FORCED_OPENING = THINK_OPEN + "\n"
SWITCH, FORCED = "enable_thinking", "forced <think> opening"


def tokenizer_fingerprint(tokenizer) -> str:
    """Equal for tokenizers that map text to the same ids (vocabulary and special tokens)."""
    payload = json.dumps([sorted(tokenizer.get_vocab().items()), type(tokenizer).__name__,
                          tokenizer.all_special_tokens], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def render_prompt(tokenizer, conversation, thinking: bool = False) -> list[int]:
    """The prompt's token ids: plain text as it is, else the model's own chat template (plain text joined
    by blank lines when it has none), in thinking mode or not (`thinking` as `resolve_thinking` decided)."""
    conversation = list(conversation)
    if len(conversation) == 1 and conversation[0].get(PLAIN_TEXT):
        text = conversation[0]["content"]
        bos = getattr(tokenizer, "bos_token", None)
        return tokenizer(text, add_special_tokens=not (bos and text.startswith(bos)))["input_ids"]
    return tokenizer(render_text(tokenizer, conversation, thinking), add_special_tokens=False)["input_ids"]


def render_text(tokenizer, conversation, thinking: bool = False) -> str:
    """A conversation as the text of the model's chat template (see `render_prompt`)."""
    messages = [{"role": m["role"], "content": m["content"]} for m in conversation]
    continued = bool(conversation) and conversation[-1].get(CONTINUE, False)
    if not getattr(tokenizer, "chat_template", None):
        text = "".join(f"{m['content']}\n\n" for m in messages)
        return text.removesuffix("\n\n") if continued else text
    style = thinking_style(tokenizer)
    switch = {"enable_thinking": thinking} if style == SWITCH else {}
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=not continued,
                                         continue_final_message=continued, tokenize=False, **switch)
    if thinking and style == FORCED and not continued and not text.endswith(FORCED_OPENING):
        text += FORCED_OPENING
    return text


def thinking_style(tokenizer) -> str | None:
    """SWITCH, FORCED or None (no thinking mode), read from the chat template and the vocabulary."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if not isinstance(template, str):  # several named templates: the default one
        template = dict(template).get("default", "")
    if "enable_thinking" in template:
        return SWITCH
    return FORCED if THINK_OPEN in tokenizer.get_vocab() else None


def resolve_thinking(mode: str, tokenizer, name: str) -> bool:
    """Whether model `name` runs in thinking mode under model_arg thinking=on|off|auto (auto: on when its chat
    template has a thinking mode); a ValueError when the model cannot do what was asked."""
    style = thinking_style(tokenizer)
    if mode == "auto":
        return style is not None
    if mode == "on" and style is None:
        raise ValueError(f"model_arg thinking=on: model {name!r} has no thinking mode (its chat template takes no "
                         f"enable_thinking and {THINK_OPEN!r} is not a token of its vocabulary); valid: thinking=off "
                         f"or auto")
    if mode == "off" and style == FORCED:
        raise ValueError(f"model_arg thinking=off: model {name!r} always thinks (its assistant turn opens with "
                         f"{THINK_OPEN!r}, and its template has no enable_thinking switch); valid: thinking=on or auto")
    return mode == "on"


def thinking_family(tokenizer) -> tuple:
    """What two models must share to think together: the style and the ids of the think markers."""
    vocab = tokenizer.get_vocab()
    return thinking_style(tokenizer), vocab.get(THINK_OPEN), vocab.get(THINK_CLOSE)


def response_opening(tokenizer, thinking: bool) -> str:
    """The text the prompt put into the assistant turn for the model (FORCED_OPENING in forced thinking, else
    ""): a response carries it, so that a think block the model never closed is seen as open."""
    return FORCED_OPENING if thinking and thinking_style(tokenizer) == FORCED else ""


def problem_turns(system: str | None, question: str) -> list[dict]:
    """The turns a scorer renders before the steps: the problem's system turn as its task wrote it (none
    when it has none: the scorer's chat template then applies its own default) and the user turn."""
    system_turn = [] if system is None else [{"role": "system", "content": system}]
    return [*system_turn, {"role": "user", "content": question}]
