"""What every backend's policy does alike with a tokenizer: render a problem's prompt into token ids, and
tell whether two tokenizers give the same ids (then steps pass between models as ids).

A prompt is a conversation, a list of `{"role", "content"}` messages, rendered by the model's own chat
template with a generation prompt. Two marks change that (lm_eval/requests.py sets them):
- `PLAIN_TEXT`: a conversation of one user message so marked is the prompt itself, a string lm-eval
  rendered without a chat template; it is tokenized as lm-eval's own `hf` model tokenizes a context
  (special tokens added unless the text starts with the tokenizer's BOS);
- `CONTINUE`: a last assistant message so marked is continued (a task's `gen_prefix`): the template
  renders it open, without a generation prompt, as transformers' `continue_final_message`.
"""

import hashlib
import json

PLAIN_TEXT = "plain_text"
CONTINUE = "continue_final_message"


def tokenizer_fingerprint(tokenizer) -> str:
    """Equal for tokenizers that map text to the same ids (vocabulary and special tokens)."""
    payload = json.dumps([sorted(tokenizer.get_vocab().items()), type(tokenizer).__name__,
                          tokenizer.all_special_tokens], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def render_prompt(tokenizer, conversation) -> list[int]:
    """The prompt's token ids: plain text as it is, else the model's own chat template (plain text joined
    by blank lines when it has none)."""
    conversation = list(conversation)
    if len(conversation) == 1 and conversation[0].get(PLAIN_TEXT):
        text = conversation[0]["content"]
        bos = getattr(tokenizer, "bos_token", None)
        return tokenizer(text, add_special_tokens=not (bos and text.startswith(bos)))["input_ids"]
    messages = [{"role": m["role"], "content": m["content"]} for m in conversation]
    continued = bool(conversation) and conversation[-1].get(CONTINUE, False)
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=not continued,
                                             continue_final_message=continued, tokenize=False)
    else:
        text = "".join(f"{m['content']}\n\n" for m in messages)
        text = text.removesuffix("\n\n") if continued else text
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def problem_turns(system: str | None, question: str) -> list[dict]:
    """The turns a scorer renders before the steps: the problem's system turn as its task wrote it (none
    when it has none: the scorer's chat template then applies its own default) and the user turn."""
    system_turn = [] if system is None else [{"role": "system", "content": system}]
    return [*system_turn, {"role": "user", "content": question}]
