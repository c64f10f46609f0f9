"""lm-eval's `--use_cache DIR` with the kvrescue model: greedy responses are served from it, sampled runs refused.

lm-eval's CachingLM keys a response on the request's arguments (context, gen_kwargs) as it looks it up, and
stores the response after the model answered, under the arguments as they are then. For this package's own
tasks the model rewrites the arguments to show the conversation it renders (requests.show_model_input), so
CachingLM's own entry sits under a key that no later lookup computes. The model therefore stores every greedy
response itself, under the arguments lm-eval will look up, through the cache hook lm-eval hands every model
(`LM.set_cache_hook`; its `dbdict` is None when the run has no `--use_cache`).

A sampled response is never cached: the repeats (seeds) of a problem have equal arguments, so one cached answer
would answer every seed. CachingLM skips only requests whose `do_sample` kwarg is true, while a kvrescue run
samples whenever its temperature is above 0 (the model_args' sampling wins over the task's kwargs), so a
sampled run with `--use_cache` is refused before anything loads. The run journal resumes sampled and greedy runs
alike, with or without `--use_cache` (docs/resume.md).
"""

GENERATE = "generate_until"


class CacheRefused(ValueError):
    """--use_cache on a run that samples."""


def caching(lm) -> bool:
    return getattr(getattr(lm, "cache_hook", None), "dbdict", None) is not None


def refuse_sampled(lm, requests, generations) -> None:
    if not caching(lm):
        return
    sampled = sorted({getattr(r, "task_name", None) or "?" for r, g in zip(requests, generations)
                      if g.sampling.temperature > 0})
    if sampled:
        temperatures = sorted({g.sampling.temperature for g in generations if g.sampling.temperature > 0})
        raise CacheRefused(
            f"--use_cache cannot serve a sampled run (task {', '.join(sampled)} samples at temperature "
            f"{', '.join(map(str, temperatures))}): lm-eval's cache keys a response on the request's arguments, "
            "which every repeat (seed) of a problem shares, so a rerun would answer every seed with one response. "
            "The run journal already resumes an interrupted or repeated run (docs/resume.md): drop --use_cache, "
            "or run greedy (--gen_kwargs temperature=0,do_sample=False, and no temperature in --model_args); "
            "nothing was loaded")


def store_greedy(lm, arguments, generations, responses) -> None:
    """Each greedy response under the arguments lm-eval looked it up with (`arguments`: before any rewrite)."""
    if not caching(lm):
        return
    for args, generation, response in zip(arguments, generations, responses):
        if generation.sampling.temperature == 0:
            lm.cache_hook.add_partial(GENERATE, args, response)
