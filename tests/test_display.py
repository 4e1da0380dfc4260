"""The one place text from capsules is made safe to show: lines, blocks and JSON."""

from __future__ import annotations

import json
import re

import hypothesis
from hypothesis import strategies as st

from sextant.display import json_text, one_line, text_block

# Written out here rather than imported, so the tests say what "safe" means on their own.
CONTROLS_BUT_LAYOUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
ALPHABET = "ab é\t\n\r\x00\x07\x1b\x1f\x7f\x85\x9b\xa0\u2028\u2029\u3000\u200b\u200f·" + BIDI


def test_one_line_turns_controls_into_a_visible_mark_and_drops_bidi_controls():
    hostile = "  Title\x1b[2J\r\n=> gemini://x/\tflip\u202eevil\u2066iso\u2069\x9b31m\x07  "
    assert one_line(hostile) == "Title\ufffd[2J => gemini://x/ flipeviliso\ufffd31m\ufffd"
    assert one_line(None) == one_line("") == ""
    assert one_line("\u202e") == ""


def test_one_line_keeps_the_direction_marks_right_to_left_authors_need():
    title = "\u05e9\u05dc\u05d5\u05dd!\u200f and \u200eabc"
    assert one_line(title) == title


def test_text_block_keeps_lines_and_tabs_and_nothing_else():
    body = "line one\r\n\tindented \x1b]0;title\x07\rover\u2066written\nend\x85"
    shown = "line one\n\tindented \ufffd]0;title\ufffd\ufffdoverwritten\nend\ufffd"
    assert text_block(body) == shown


@hypothesis.given(st.text(alphabet=st.sampled_from(ALPHABET)))
def test_one_line_takes_its_shortcut_only_where_it_changes_nothing(value: str) -> None:
    cleaned = one_line(value)
    assert not CONTROLS_BUT_LAYOUT.search(cleaned)
    assert not any(mark in cleaned for mark in BIDI + "\t\n\r\u2028\u2029")
    assert "  " not in cleaned
    assert cleaned == cleaned.strip()
    # The same text by the long way round, whatever the shortcut decided.
    spaced = "".join(
        "" if c in BIDI else "\ufffd" if CONTROLS_BUT_LAYOUT.match(c) and not c.isspace() else c
        for c in value
    )
    assert cleaned == " ".join(spaced.split())


@hypothesis.given(st.text(alphabet=st.sampled_from(ALPHABET)))
def test_text_block_leaves_only_newline_and_tab_of_the_controls(value: str) -> None:
    block = text_block(value)
    assert not CONTROLS_BUT_LAYOUT.search(block)
    assert not any(mark in block for mark in BIDI)
    assert block.count("\n") == value.count("\n")


@hypothesis.given(
    st.recursive(
        st.none() | st.integers() | st.text(alphabet=st.sampled_from(ALPHABET + '"\\{}[]')),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=8,
    ),
    st.sampled_from([None, 2]),
)
def test_json_text_is_safe_to_print_and_reads_back_the_same(data: object, indent) -> None:
    encoded = json_text(data, indent=indent)
    assert json.loads(encoded) == data
    unsafe = CONTROLS_BUT_LAYOUT.search(encoded)
    assert unsafe is None, encoded
    assert not any(mark in encoded for mark in BIDI + "\t\r")
