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

_BREAKS = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_MARKUP_STARTS = ("=>", "#", "* ", ">", "```")
# A link line's URL ends at the first blank (section 5.4.2), so blanks inside it are encoded.
_URL_BLANKS = re.compile(r"[\s\x00-\x1f\x7f]")
TOGGLE = "```"


def clean(text: str | None) -> str:
    """One line of plain text: whitespace runs and control characters become one space."""
    if not text:
        return ""
    if text.isprintable() and "  " not in text:
        # Nothing to replace: printable text has no whitespace but the ASCII space (every
        # other kind is a separator or a control character). A results page cleans some
        # fifty strings, and this test is twenty times cheaper than the substitution.
        return text.strip()
    return _BREAKS.sub(" ", text).strip()


def text(value: str) -> str:
    """A text line that can never be read as markup, whatever ``value`` starts with."""
    line = clean(value)
    return " " + line if line.startswith(_MARKUP_STARTS) else line


def heading(value: str, level: int = 1) -> str:
    return "#" * level + " " + clean(value)


def item(value: str) -> str:
    return "* " + clean(value)


def quote(value: str) -> str:
    return "> " + clean(value)


def link(url: str, label: str | None = None) -> str:
    target = _URL_BLANKS.sub(lambda m: f"%{ord(m.group()):02X}", url)
    words = clean(label)
    return f"=> {target} {words}" if words else f"=> {target}"


def preformatted(body: str, alt: str = "") -> list[str]:
    """A preformatted block whose content cannot close the block early."""
    lines = [TOGGLE + clean(alt)]
    for raw in body.splitlines():
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
