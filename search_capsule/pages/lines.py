"""Safe gemtext lines built from text we do not control (titles, snippets, hosts, rules).

Gemtext gives meaning to the *start* of a line (spec section 5.4: ``=>``, ``#``, ``* ``,
``>``, three backticks) and to line breaks, so text from crawled pages must never bring its
own: a title containing a newline and ``=> gemini://evil`` would otherwise forge a link on
our results page. Every builder here collapses line breaks, and text lines that would start
with markup get a leading space, which the spec reads as an ordinary text line.
"""

from __future__ import annotations

import re
from datetime import datetime

from sextant.display import BIDI_CONTROLS, CONTROLS, one_line, text_block

_MARKUP_STARTS = ("=>", "#", "* ", ">", "```")
# A link line's URL ends at the first blank (section 5.4.2), so blanks inside it are
# encoded; controls and bidi controls too, since clients show the URL (as UTF-8 bytes,
# the way RFC 3987 maps an IRI to a URI, so the link still leads to the same place).
_URL_UNSAFE = re.compile("[\\s" + re.escape(CONTROLS + BIDI_CONTROLS) + "]")
TOGGLE = "```"


def text(value: str) -> str:
    """A text line that can never be read as markup, whatever ``value`` starts with."""
    line = one_line(value)
    return " " + line if line.startswith(_MARKUP_STARTS) else line


def heading(value: str, level: int = 1) -> str:
    return "#" * level + " " + one_line(value)


def item(value: str) -> str:
    return "* " + one_line(value)


def quote(value: str) -> str:
    return "> " + one_line(value)


def link(url: str, label: str | None = None) -> str:
    target = safe_url(url)
    words = one_line(label)
    return f"=> {target} {words}" if words else f"=> {target}"


def safe_url(url: str) -> str:
    """``url`` with no blank or control in it: one token that leads to the same place."""
    return _URL_UNSAFE.sub(_percent_encoded, url)


def _percent_encoded(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8"))


def preformatted(body: str, alt: str = "") -> list[str]:
    """A preformatted block whose content cannot close the block early."""
    lines = [TOGGLE + one_line(alt)]
    for raw in text_block(body).splitlines():
        # Only a line *starting* with the toggle ends a block (section 5.4.3).
        lines.append(" " + raw if raw.startswith(TOGGLE) else raw)
    lines.append(TOGGLE)
    return lines


def human_size(size: int | None) -> str:
    """Bytes for people, in SI units like most Gemini clients show them."""
    if size is None:
        return "size unknown"
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if value < 1000 or unit == "GB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def day(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d") if moment else "never"


def minute(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "never"


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    word = singular if count == 1 else plural_form or singular + "s"
    return f"{count:,} {word}"


def document(lines: list[str]) -> str:
    return "\n".join(lines).rstrip("\n") + "\n"
