"""A `--num_fewshot` that a task cannot honour is a WARNING naming the task, not an INFO line.

lm-eval 0.4.13 never overrides a task whose config pins `num_fewshot: 0` (all of this package's tasks: the
Qwen2.5-Math protocol is zero-shot), says so at INFO level among many INFO lines, and still prints the
requested value in the results' header ("num_fewshot: 1"). The filter below, on lm-eval's evaluator logger,
raises that one line to WARNING and says what the header will show; it changes no other record and no result.
"""

import logging

IGNORED_FEWSHOT = "num_fewshot has been set to 0 for %s in its config. Manual configuration will be ignored."


class FewshotIgnoredIsAWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == IGNORED_FEWSHOT and record.levelno < logging.WARNING:
            record.msg = ("--num_fewshot is ignored for task %s: its config pins num_fewshot 0, so it runs "
                          "zero-shot (the results' header still prints the requested value)")
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True


def install(logger: logging.Logger) -> None:
    if not any(isinstance(f, FewshotIgnoredIsAWarning) for f in logger.filters):
        logger.addFilter(FewshotIgnoredIsAWarning())
