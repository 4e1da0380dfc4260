"""Turn the query component of a request into the text the user typed.

Gemini clients send input as the URL's query, percent-encoded UTF-8 (spec section 3.2.1):
a space arrives as ``%20``. A ``+`` is a literal plus: the web-form convention of ``+`` for
space does not exist in Gemini, and a query like ``c++`` must reach the index intact.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from sextant import urls
from sextant.errors import InvalidURL, MalformedRequest

# Line breaks and tabs typed into a multi-line prompt are just spaces to a search; other
# control characters (NUL, ESC...) are never typed by a person and are refused.
_BLANK_CONTROLS = re.compile(r"[\t\n\r\v\f]+")
_OTHER_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")


def decode(query: str | None) -> str | None:
    """The decoded input, ``None`` when the URL has no query, ``""`` when it is blank.

    Raises :class:`~sextant.errors.MalformedRequest` (a 59) when the bytes are not UTF-8
    or contain control characters, with a message that says so without echoing them.
    """
    if query is None:
        return None
    try:
        value = unquote_to_bytes(query).decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedRequest("the query is not valid percent-encoded UTF-8") from None
    value = _BLANK_CONTROLS.sub(" ", value)
    if _OTHER_CONTROLS.search(value):
        raise MalformedRequest("the query contains control characters")
    return value.strip()


def typed_url(raw: str) -> str:
    """The canonical form of a URL a person typed into a prompt.

    People type ``example.org`` or ``example.org:1966/page`` without a scheme; those mean
    gemini://. A gemini URL is normalized like every URL in the store (so lookups match);
    another scheme (``https://...``) is kept with its scheme lower-cased, the form the store
    records for links to other protocols. Raises :class:`~sextant.errors.InvalidURL`.
    """
    text = raw.strip()
    if not text:
        raise InvalidURL("the URL is empty")
    scheme = urls.scheme_of(text)
    if not scheme or ("." in scheme and "://" not in text):
        # No scheme, or "host.example:1965/..." whose host looks like a scheme to RFC 3986.
        text = "gemini://" + text.removeprefix("//")
        scheme = "gemini"
    if scheme == "gemini":
        return urls.normalize(text)
    if "://" not in text and scheme in ("http", "https", "gopher", "spartan", "titan"):
        raise InvalidURL(f"{scheme}: URLs need a host (expected {scheme}://host/...)")
    return urls.resolve("gemini://localhost/", text)
