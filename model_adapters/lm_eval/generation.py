"""A request's generation kwargs as the engine applies them: sampling, the trajectory's token cap, stop strings.

lm-eval hands every request its task's `generation_kwargs` (`--gen_kwargs` merged in). They are read
through lm-eval's own `normalize_gen_kwargs`, as its models read them (the token-cap aliases become
`max_gen_toks`, 256 when none is given; no temperature, or `do_sample=False`, means greedy). Then:
- `temperature`, `top_p`, `top_k`: the task's values, unless the model_args (or the preset) set them,
  which win (a warning once per task names what they overrode); a top_p / top_k the task does not give
  is the model_args' (defaults: the paper's 0.95 / 20). Temperature 0 is greedy (`do_sample` false);
- `max_gen_toks`: the trajectory's token cap, in tokens of the primary model (beside the model_arg
  `max_context`, which caps prompt + trajectory);
- `until`: stop strings; the response is cut before the first one, as lm-eval's models cut theirs;
- anything else (`num_beams`, `repetition_penalty`, ...) cannot apply to step-wise sampling: a warning
  once per task names it (with the honoured name it is closest to, for a misspelling) and it is ignored.
What each task was generated with is recorded in `config.kvrescue.generation`.
"""

import difflib
from dataclasses import dataclass

from kvrescue_eval.engine.sampling import SamplingParams

SAMPLING = ("temperature", "top_p", "top_k")
TOKEN_CAPS = ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens")  # lm-eval's aliases
HONOURED = ("until", "do_sample", *SAMPLING, *TOKEN_CAPS)


@dataclass(frozen=True)
class Generation:
    sampling: SamplingParams
    max_new_tokens: int
    stop: tuple[str, ...]
    overridden: tuple = ()  # (name, the task's value, the model_args' value used instead)
    ignored: tuple = ()     # (name, value) of kwargs that cannot apply

    def record(self) -> dict:
        """The values used, as lm-eval names them (config.kvrescue.generation and the results' gen_kwargs)."""
        s = self.sampling
        return {"do_sample": s.temperature > 0, "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k,
                "max_gen_toks": self.max_new_tokens, "until": list(self.stop)}

    def key(self) -> tuple:
        """What decides a result besides the prompt (part of a journal entry's key)."""
        s = self.sampling
        return (s.temperature, s.top_p, s.top_k, self.max_new_tokens, self.stop)


def generation_of(gen_kwargs, args, set_by_model_args, task: str | None = None) -> Generation:
    """The generation of one request: `args` the Settings, `set_by_model_args` the sampling names the
    user's model_args or preset gave."""
    from lm_eval.defaults import DEFAULT_MAX_GEN_TOKS
    from lm_eval.models.utils import normalize_gen_kwargs

    given = dict(gen_kwargs or {})
    normalized = normalize_gen_kwargs(given, DEFAULT_MAX_GEN_TOKS)
    asked = {"temperature": float(normalized["temperature"]) if normalized.get("do_sample") else 0.0,
             "top_p": given.get("top_p"), "top_k": given.get("top_k")}
    used, overridden = {}, []
    for name in SAMPLING:
        ours = getattr(args.sampling, name)
        if name in set_by_model_args:
            used[name] = ours
            if asked[name] is not None and _number(asked[name]) != ours:
                overridden.append((name, asked[name], ours))
        else:
            used[name] = ours if asked[name] is None else _number(asked[name])
    where = f"task {task}" if task else "the request"
    try:
        sampling = SamplingParams(float(used["temperature"]), float(used["top_p"]), int(used["top_k"]))
    except (TypeError, ValueError) as error:
        raise ValueError(f"generation kwargs of {where} ({given}): {error}") from None
    cap = normalized["max_gen_toks"]
    if cap < 1:
        raise ValueError(f"generation kwarg max_gen_toks={cap} of {where} must be an integer >= 1")
    until = normalized["until"]
    if not all(isinstance(stop, str) for stop in until):
        raise ValueError(f"generation kwarg until={until!r} of {where} must be a string or a list of strings")
    ignored = tuple((name, value) for name, value in given.items() if name not in HONOURED)
    return Generation(sampling, cap, tuple(until), tuple(overridden), ignored)


def warnings_of(generation: Generation, task: str | None, args=None) -> list[str]:
    """What to tell the user about a task's generation kwargs (once per task); `args`: the run's Settings."""
    where = f"task {task}" if task else "a request"
    lines = [f"{where} asks for {name}={asked!r}; kvrescue samples with its model_arg {name}={used!r} "
             f"(leave {name} out of --model_args to follow the task)" for name, asked, used in generation.overridden]
    for name, value in generation.ignored:
        close = difflib.get_close_matches(name, HONOURED, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"{where} sets generation kwarg {name}={value!r}{hint}, which the kvrescue model cannot apply "
                     f"(it honours {', '.join(HONOURED[:5])} and max_gen_toks): ignored")
    context = args.engine.max_context if args is not None else None
    if args is not None and args.thinking == "on" and generation.max_new_tokens < context:
        lines.append(f"{where} caps a trajectory at max_gen_toks={generation.max_new_tokens} tokens, below "
                     f"max_context={context}: longer thinking traces are cut there (and count as unfinished_thinking);"
                     f" for the whole context pass --gen_kwargs max_gen_toks={context}")
    return lines


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value
