"""lm-eval's requests as the engine's problems: each request's conversation, its key, and which requests
are lm-eval's data-parallel padding."""

import hashlib
import json
from collections import Counter

from kvrescue_eval.engine.scheduler import Problem

CONVERSATION_MARKER = "kvrescue-conversation"


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


def problems_of(requests) -> list[Problem]:
    """One problem per request, keyed by (hash of its conversation, repeat index by counting)."""
    seen = Counter()
    problems = []
    for request in requests:
        conversation = conversation_of(request)
        prompt_id = hashlib.sha256(json.dumps(conversation, sort_keys=True).encode("utf-8")).hexdigest()[:16]
        problems.append(Problem((prompt_id, seen[prompt_id]), conversation))
        seen[prompt_id] += 1
    return problems


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
