"""Text from strangers' capsules made safe to show: on a terminal and in our own gemtext.

Titles, snippets, link labels, robots.txt files and error messages come from pages anyone
can write. On a terminal, control characters in them are commands, not text: ESC starts
sequences that clear the screen, retitle the window or plant OSC 8 hyperlinks that point
somewhere other than what they show; BEL rings; C1 controls (U+0080-U+009F, CSI U+009B
among them) do the same on terminals that read 8-bit controls; CR and DEL redraw the line.
In a Gemini client the same characters reach whatever terminal it runs in.

Bidirectional controls are subtler: the embeddings, overrides and isolates (U+202A-U+202E,
U+2066-U+2069) reorder everything up to their end mark or the end of the line, so a label
``evil\\u202egmi.txt`` reads as ``eviltxt.img`` and can flip the text we print after it (the
"Trojan Source" attack, CVE-2021-42574; rustc lints exactly these nine).

What happens to each kind of character, and why:

* Controls (C0 but where the layout keeps tab and newline, DEL, C1) become U+FFFD, the
  replacement character: the reader sees that the source held something we did not show,
  and the line keeps its length where the character stood.
* Bidi embeddings, overrides and isolates are removed. What remains reads in the order the
  author stored it, with the ordinary bidi rules of the characters themselves; a U+FFFD for
  each would litter the right-to-left titles that use these marks honestly.
* U+200E, U+200F and U+061C (the left-to-right, right-to-left and Arabic letter marks) are
  kept. They open no scope: each only settles the direction of the neutral characters next
  to it, so it cannot reorder a word, let alone the rest of the line, and Hebrew and Arabic
  authors need them to put punctuation on the right side.

For ``--json`` see :func:`json_text`: the data stays whole, only its spelling changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
CONTROLS = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0)]))
REPLACEMENT = "\ufffd"

_WHITESPACE = re.compile(r"\s+")
# Whitespace controls (TAB, LF, CR, NEL...) are left to _WHITESPACE on one line: a title
# with a line break in it reads best with a space there.
_LINE_TABLE = {ord(c): REPLACEMENT for c in CONTROLS if not c.isspace()} | dict.fromkeys(
    map(ord, BIDI_CONTROLS)
)
_HAS_HIDDEN = re.compile("[" + re.escape("".join(map(chr, _LINE_TABLE))) + "]")
_BLOCK_TABLE = {ord(c): REPLACEMENT for c in CONTROLS if c not in "\t\n"} | dict.fromkeys(
    map(ord, BIDI_CONTROLS)
)
# json.dumps escapes C0 itself (and an indented document needs its raw newlines).
_JSON_TABLE = {ord(c): f"\\u{ord(c):04x}" for c in CONTROLS[0x20:] + BIDI_CONTROLS}


def one_line(text: str | None) -> str:
    """A single-line field (title, URL, label, host): no line break, no control, no override.

    Runs of whitespace of any kind, line breaks included, become one space, and the ends
    are stripped, so the field can sit inside a line of ours or a gemtext line.
    """
    if not text:
        return ""
    if text.isprintable() and "  " not in text:
        # Nothing to replace: printable text holds no whitespace but the ASCII space, no
        # control and no format character (the bidi controls are format characters). A
        # results page shows some fifty fields, and this test is twenty times cheaper.
        return text.strip()
    if _HAS_HIDDEN.search(text) is not None:
        # Rare, and translate() is slow: a snippet usually has only line breaks to fold.
        text = text.translate(_LINE_TABLE)
    return _WHITESPACE.sub(" ", text).strip()


def text_block(text: str) -> str:
    """Text of many lines (a page body, a robots.txt): lines and tabs kept, nothing else.

    A CR ending a line goes with it; any other CR would send the cursor back to overwrite
    the line, so it is a control like the rest.
    """
    return text.replace("\r\n", "\n").translate(_BLOCK_TABLE)


def json_text(
    data: Any, *, indent: int | None = None, default: Callable[[Any], Any] | None = None
) -> str:
    """``data`` as JSON a terminal can show, without losing a character of it.

    ``--json`` is for programs, so titles and bodies must arrive exactly as stored, but
    people pipe it to a terminal too. ``json.dumps`` already writes C0 controls as
    ``\\u001b``-style escapes; DEL, C1 controls and bidi controls it writes raw (with
    ``ensure_ascii=False``, which keeps every other language readable). These get the same
    escape here: any JSON parser reads them back as the very same characters. Outside
    strings JSON is plain ASCII, so the substitution can only ever touch string contents.
    """
    encoded = json.dumps(data, ensure_ascii=False, indent=indent, default=default)
    return encoded.translate(_JSON_TABLE)
