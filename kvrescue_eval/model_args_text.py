"""lm-eval's `--model_args` text ("k1=v1,k2=v2"): the core's one parser and one formatter.

The core imports no lm-eval (.importlinter), so it cannot call lm-eval's `simple_parse_args_string`; `parse` splits
as that function does (at each ",", then at the first "="), but keeps every value as text: the analysis compares
the settings lm-eval recorded by their text, while lm-eval's parser casts "4" to 4 and "true" to True. The model
itself receives its model_args through lm-eval's own parser (`create_from_arg_string`).
"""


def value_text(value):
    """A value as lm_eval's command line spells it (Python's and YAML's true is lm-eval's `True`)."""
    return str(value) if not isinstance(value, bool) else ("True" if value else "False")


def join_model_args(pairs):
    """A dict or (key, value) pairs as "k1=v1,k2=v2"."""
    items = pairs.items() if isinstance(pairs, dict) else pairs
    return ",".join(f"{key}={value_text(value)}" for key, value in items)


def split_model_args(recorded):
    """lm-eval's model_args, as a command line's text or as the dict a results file records, as an ordered dict
    of text; a part without "=" is skipped."""
    if isinstance(recorded, dict):
        return {str(key): value_text(value) for key, value in recorded.items()}
    if isinstance(recorded, str):
        return dict(part.split("=", 1) for part in recorded.split(",") if "=" in part)
    return {}
