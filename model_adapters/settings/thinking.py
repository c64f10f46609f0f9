"""Model_arg `thinking` resolved against the models' own tokenizers, before any weights load (docs/thinking.md).

Base and helper think together or not at all: steps pass between them, so both must render the same thinking
mode and read the same think markers (one tokenizer family, prompts.thinking_family); a pair that does not is
refused here, naming both models.
"""

from dataclasses import replace

from ..model_files.locate import model_folder
from ..prompts import resolve_thinking, response_opening, thinking_family
from .tree import Settings


def policy_roles(settings: Settings) -> list[str]:
    """The roles whose models decode, the primary one (its tokens measure the trajectory) first."""
    n_base, n_helper = settings.counts
    return ["base"] * bool(n_base) + ["helper"] * bool(n_helper)


def resolved_thinking(settings: Settings) -> tuple[Settings, str]:
    """(the settings with `thinking` "on" or "off", the text the primary model's prompt opened its answer with);
    a ValueError for a model that cannot do what was asked or a pair of different families."""
    from transformers import AutoTokenizer

    tokenizers = {role: AutoTokenizer.from_pretrained(model_folder(getattr(settings, role)))
                  for role in policy_roles(settings)}
    thinking = {role: resolve_thinking(settings.thinking, tokenizer, getattr(settings, role))
                for role, tokenizer in tokenizers.items()}
    if len(set(thinking.values())) > 1 or (any(thinking.values()) and
                                           len({thinking_family(t) for t in tokenizers.values()}) > 1):
        described = "; ".join(f"{role} {getattr(settings, role)!r}: thinking {'on' if thinking[role] else 'off'}, "
                              f"(style, <think> id, </think> id) = {thinking_family(t)}" for role, t in tokenizers.items())
        raise ValueError(f"model_arg thinking={settings.thinking}: base and helper must think alike, with one "
                         f"tokenizer family ({described}); valid: a base and helper of one family, or thinking=off "
                         f"where both can")
    on = any(thinking.values())
    primary = next(iter(tokenizers.values()))
    return replace(settings, thinking="on" if on else "off"), response_opening(primary, on)
