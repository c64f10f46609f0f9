"""Our log lines in lm-eval's format, with their level: `2026-11-30:06:40:00 WARNING  [loading:13] ...`.

lm-eval formats only its own `lm_eval` logger; without a handler, Python prints a bare message for ours.
"""

import logging

FORMAT = "%(asctime)s %(levelname)-8s [%(module)s:%(lineno)d] %(message)s"
DATE_FORMAT = "%Y-%m-%d:%H:%M:%S"


def show_our_logs(level=logging.INFO) -> None:
    """Give the `kvrescue_eval` logger a formatted stderr handler, unless the program configured logging itself."""
    ours = logging.getLogger("kvrescue_eval")
    if ours.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT, datefmt=DATE_FORMAT))
    ours.addHandler(handler)
    ours.setLevel(level)
