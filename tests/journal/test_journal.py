"""The run journal: entries survive reopening, a torn last line is reported and ignored, a journal of
other settings is refused naming the differing fields, and a second writer is kept out."""

import json
import logging

import pytest

from kvrescue_eval.journal import Journal, JournalError, check_path, differences

IDENTITY = {"model_args": {"budget": 64, "n": 8, "seed": 0}, "versions": {"torch": "2.13.0"},
            "models": {"base": {"sha256": "aa", "files": {"model.safetensors": "aa"}}}}


def result(text):
    return {"text": text, "stats": {"steps": 2}, "finish_reason": "eos", "sources": ["base", "helper"]}


def write_two(path):
    with Journal(path, IDENTITY) as journal:
        journal.record(("p1", 0), result("first"))
        journal.record(("p1", 1), result("second"))


def test_entries_survive_reopening_keyed_by_prompt_hash_and_repeat(tmp_path):
    path = tmp_path / "run" / "journal.jsonl"
    write_two(path)
    with Journal(path, IDENTITY) as journal:
        assert len(journal) == 2 and journal.torn is None
        assert journal.get(("p1", 0)) == result("first")
        assert journal.get(("p1", 1)) == result("second")
        assert journal.get(("p2", 0)) is None
        journal.record(("p2", 0), result("third"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["identity"] == IDENTITY
    assert sum("run" in line for line in lines) == 2        # one run line per opening, header written once
    assert [line["key"] for line in lines if "key" in line] == [["p1", 0], ["p1", 1], ["p2", 0]]


@pytest.mark.parametrize("tail", [
    b'{"key": ["p2", 0], "result": {"text": "thi',   # died mid-line: no newline, not JSON
    b'{"key": ["p2", 0], "result": {"text": "third", "stats": {}, "finish_reason": "eos"}}',  # no newline yet
    b'{"key": ["p2", 0], "res\x00\x00\x00\n',         # zero-filled block after power loss, newline written
])
def test_a_torn_last_line_is_reported_ignored_and_set_aside(tmp_path, caplog, tail):
    path = tmp_path / "journal.jsonl"
    write_two(path)
    intact = path.read_bytes()
    path.write_bytes(intact + tail)
    with caplog.at_level(logging.WARNING), Journal(path, IDENTITY) as journal:
        assert journal.torn is not None
        assert set(journal.entries) == {("p1", 0), ("p1", 1)}     # the torn problem is computed again
        journal.record(("p2", 0), result("third"))
    assert "torn" in caplog.text and "line 5" in caplog.text
    assert tail.rstrip(b"\n") in (tmp_path / "journal.jsonl.torn").read_bytes()   # kept, not lost
    with Journal(path, IDENTITY) as journal:    # the journal is whole again: the new entry follows the good lines
        assert journal.torn is None and journal.get(("p2", 0)) == result("third")


def test_a_torn_header_starts_the_journal_over(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"journal": "kvrescue", "format": 1, "ident')
    with Journal(path, IDENTITY) as journal:
        assert len(journal) == 0 and journal.torn is not None
        journal.record(("p1", 0), result("first"))
    with Journal(path, IDENTITY) as journal:
        assert journal.get(("p1", 0)) == result("first")


def test_a_bad_line_before_the_last_is_an_error_not_a_crash_to_ignore(tmp_path):
    path = tmp_path / "journal.jsonl"
    write_two(path)
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:-5]    # line 3 of 4 damaged: no crash leaves that
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(JournalError, match="line 3 is not valid JSON"):
        Journal(path, IDENTITY)
    assert path.read_text() == "\n".join(lines) + "\n"   # never rewritten


@pytest.mark.parametrize("change, named", [
    ({"model_args": {**IDENTITY["model_args"], "budget": 128}}, "model_args.budget: journal has 64, this run has 128"),
    ({"versions": {"torch": "2.14.0"}}, "versions.torch: journal has '2.13.0', this run has '2.14.0'"),
    ({"models": {"base": {"sha256": "bb", "files": {"model.safetensors": "bb"}}}},
     "models.base.files.model.safetensors: journal has 'aa'"),
])
def test_a_journal_of_other_settings_is_refused_naming_the_field(tmp_path, change, named):
    path = tmp_path / "journal.jsonl"
    write_two(path)
    before = path.read_bytes()
    with pytest.raises(JournalError) as error:
        Journal(path, {**IDENTITY, **change})
    assert named in str(error.value) and "another journal=PATH" in str(error.value)
    assert path.read_bytes() == before   # neither mixed nor overwritten


def test_a_file_that_is_not_a_journal_is_refused(tmp_path):
    path = tmp_path / "results.json"
    path.write_text('{"results": {}}\n')
    with pytest.raises(JournalError, match="not a kvrescue journal"):
        Journal(path, IDENTITY)
    assert path.read_text() == '{"results": {}}\n'


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "is a folder"),
    (lambda p: p.write_text('{"results": {}}\n'), "not a kvrescue journal"),
    (lambda p: p.write_text('{"results": {}}'), "not a kvrescue journal"),  # one line, no newline: no torn write
    (lambda p: p.write_text('{"journal": "kvrescue", "format": 2, "identity": {}}\n'), "has format 2"),
])
def test_check_path_refuses_what_cannot_be_a_journal_reading_only_its_first_line(tmp_path, make, message):
    path = tmp_path / "journal.jsonl"
    make(path)
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(JournalError, match=message):
        check_path(path)
    with pytest.raises(JournalError, match=message):
        Journal(path, IDENTITY)
    assert (path.read_bytes() if path.is_file() else None) == before


def test_check_path_refuses_a_path_under_a_file_and_accepts_new_and_torn_ones(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(JournalError, match="is a file, not a folder"):
        check_path(tmp_path / "file" / "journal.jsonl")
    assert check_path(tmp_path / "new" / "journal.jsonl") == tmp_path / "new" / "journal.jsonl"
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"journal": "kvr')  # the process died writing the header: dropped when opened
    assert check_path(torn) == torn
    with Journal(torn, IDENTITY) as journal:
        assert journal.torn == '{"journal": "kvr'


def test_a_second_writer_is_kept_out_until_the_first_closes(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal(path, IDENTITY):
        with pytest.raises(JournalError, match="in use by another process"):
            Journal(path, IDENTITY)
    Journal(path, IDENTITY).close()


def test_differences_name_nested_fields_added_and_removed():
    assert differences({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "d": 3}}) == [
        "a.c: journal has 2, this run has None", "a.d: journal has None, this run has 3"]
    assert differences(IDENTITY, json.loads(json.dumps(IDENTITY))) == []


def test_any_decoded_text_round_trips_even_a_lone_surrogate(tmp_path):
    text = "x = \\pi \u2713 \U0001F600 \ud800 end\n\n"
    with Journal(tmp_path / "journal.jsonl", IDENTITY) as journal:
        journal.record(("p", 0), result(text))
    with Journal(tmp_path / "journal.jsonl", IDENTITY) as journal:
        assert journal.get(("p", 0))["text"] == text
