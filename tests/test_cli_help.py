"""`kvrescue-eval ... --help` prints its usage for every command and subcommand (argparse %-formats each option's
help, so one literal percent sign breaks the whole page)."""

import argparse

import pytest

from kvrescue_eval.cli import build_parser, main


def command_paths(parser, path=()):
    """The words that reach every parser under PARSER (argparse lists subcommands only on its actions)."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from command_paths(sub, path + (name,))


def help_page(words, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*words, "--help"])
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("words", list(command_paths(build_parser())), ids=" ".join)
def test_every_help_page_prints(words, capsys):
    assert help_page(words, capsys).startswith(" ".join(("usage: kvrescue-eval", *words)))


def test_the_check_page_gives_the_testbed_gate_and_fractions_in_percent(capsys):
    page = help_page(["check"], capsys)
    assert "testbed: recovery >= 0.8" in page and "helper share of committed steps in [15%, 70%]" in page
    assert "(0.8 = 80%)" in page
