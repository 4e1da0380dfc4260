"""Gemini's wire grammar: request lines, response headers and the MIME types in their meta.

Sans-IO on purpose: the crawler, our capsules and the tests all feed bytes in and get values
out, so every quirk of real servers is handled (and tested) once, here, without sockets.

References are to the Gemini protocol specification (geminiprotocol.net, v0.16.1 section
numbers, which the later v0.24 text keeps in substance): §2 requests, §3.1 response headers,
§3.2 status codes and Appendix 1, §3.3 response bodies (MIME defaults), §5.2 MIME parameters.

Tolerance policy: we *read* what real capsules send when the intent is unambiguous (LF-only
line ends, trailing blanks, a tab for the space, a missing meta, a one-digit status, a BOM)
and *write* only the strict form, so our own servers never add to the mess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from urllib.parse import urlsplit

from sextant.errors import InvalidURL, MalformedHeader, MalformedRequest

MAX_META_BYTES = 1024
MAX_REQUEST_BYTES = 1024
# How much a reader should buffer before deciding the header line will never end:
# two status digits, the space, the longest meta, CRLF.
MAX_HEADER_BYTES = 2 + 1 + MAX_META_BYTES + 2

DEFAULT_MIME = "text/gemini; charset=utf-8"

_BOM = b"\xef\xbb\xbf"
# C0 controls (tab excepted), DEL and C1 controls. Tab is allowed in meta because the spec
# does not forbid it and prompts may contain one; NUL, CR, LF, ESC... never mean anything
# good in a header and could smuggle a second line or terminal escapes into our logs.
_META_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# In a URL not even a tab is acceptable (RFC 3986 has no place for it).
_URL_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_BLANKS = " \t"


class Family(IntEnum):
    """The first digit of a status (§3.2): what a client must do with the response."""

    INPUT = 1
    SUCCESS = 2
    REDIRECT = 3
    TEMPORARY_FAILURE = 4
    PERMANENT_FAILURE = 5
    CLIENT_CERTIFICATE = 6


class Status(IntEnum):
    """Every status code the specification names (Appendix 1)."""

    INPUT = 10
    SENSITIVE_INPUT = 11
    SUCCESS = 20
    REDIRECT_TEMPORARY = 30
    REDIRECT_PERMANENT = 31
    TEMPORARY_FAILURE = 40
    SERVER_UNAVAILABLE = 41
    CGI_ERROR = 42
    PROXY_ERROR = 43
    SLOW_DOWN = 44
    PERMANENT_FAILURE = 50
    NOT_FOUND = 51
    GONE = 52
    PROXY_REQUEST_REFUSED = 53
    BAD_REQUEST = 59
    CLIENT_CERTIFICATE_REQUIRED = 60
    CERTIFICATE_NOT_AUTHORISED = 61
    CERTIFICATE_NOT_VALID = 62


def family(code: int) -> Family:
    """The family of any code in 10..69.

    §3.2 tells clients to handle a code they do not know (say 25 or 47) by its first digit,
    so unknown codes are fine; a code outside 10..69 has no family and is the server's bug.
    """
    if isinstance(code, bool) or not isinstance(code, int) or not 10 <= code <= 69:
        raise MalformedHeader(f"status {code!r} is outside 10-69")
    return Family(code // 10)


def _excerpt(raw: bytes | str, limit: int = 60) -> str:
    """A short printable rendering of what the server sent, for error messages and logs."""
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "backslashreplace")
    shown = text[:limit].encode("unicode_escape").decode("ascii")
    return shown + ("..." if len(text) > limit else "")


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    """A valid response header: constructing one validates it, so ``encode`` never emits junk.

    ``meta`` is stored without surrounding spaces/tabs: the spec gives them no meaning
    (§3.1: one space separates status and meta), servers add them by mistake, and keeping
    them would make a header compare unequal to itself after a round trip.
    """

    status: int
    meta: str

    def __post_init__(self) -> None:
        family(self.status)  # validates the range, raising MalformedHeader
        if not isinstance(self.meta, str):
            raise MalformedHeader(f"meta must be text, not {type(self.meta).__name__}")
        meta = self.meta.strip(_BLANKS)
        if _META_CONTROL.search(meta):
            raise MalformedHeader(f"meta contains a control character: {_excerpt(meta)}")
        try:
            size = len(meta.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise MalformedHeader(f"meta is not encodable as UTF-8: {_excerpt(meta)}") from exc
        if size > MAX_META_BYTES:
            raise MalformedHeader(f"meta is {size} bytes; §3.1 allows at most {MAX_META_BYTES}")
        object.__setattr__(self, "status", int(self.status))
        object.__setattr__(self, "meta", meta)

    @property
    def family(self) -> Family:
        return family(self.status)

    @classmethod
    def parse(cls, line: bytes) -> ResponseHeader:
        """Parse one header line, with or without its terminator.

        Grammar (§3.1): ``<STATUS><SPACE><META><CR><LF>``, STATUS two digits, META UTF-8 of at
        most 1024 bytes. What we accept beyond it, and why:

        - ``\\n`` alone (or a stray ``\\r``) as terminator: common, and unambiguous.
        - A UTF-8 BOM before the status: editors put it into static header files.
        - A tab instead of the space, extra blanks around meta: stripped.
        - No meta at all (``51``, ``20``): meta is ``""``; for 2x that means
          ``text/gemini; charset=utf-8`` (§3.3, see :meth:`MimeType.parse`).
        - A one-digit status (``2 text/gemini``): read as the first code of that family
          (``20``). §3.2 already has clients act on the first digit alone, and such a server
          clearly means "success", so refusing would only lose a page.

        What we refuse with :class:`MalformedHeader` (§3.1: "the client SHOULD close the
        connection and disregard the response header"):

        - Three or more digits (``200 OK``): an HTTP server on the port, not Gemini.
        - A non-digit status, nothing after the digits but a non-blank (``20text/gemini``),
          a code outside 10..69, an empty line.
        - Meta longer than 1024 bytes.
        - Meta that is not UTF-8. We do not decode with replacement: for a redirect the meta
          is a URL and a guessed one would send us somewhere the server never named.
        - Control characters (NUL, ESC, a CR mid-line...): they can only be corruption or an
          attempt to forge a second line.
        """
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        line = line.removeprefix(_BOM)
        if not line.strip(b" \t"):
            raise MalformedHeader("empty response header")
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedHeader(f"header is not valid UTF-8: {_excerpt(line)}") from exc
        if _META_CONTROL.search(text):
            raise MalformedHeader(f"header contains a control character: {_excerpt(text)}")

        digits = text[: len(text) - len(text.lstrip("0123456789"))]
        rest = text[len(digits) :]
        if not digits:
            raise MalformedHeader(f"status is not a number: {_excerpt(text)}")
        if rest and rest[0] not in _BLANKS:
            raise MalformedHeader(f"status must be followed by a space: {_excerpt(text)}")
        if len(digits) == 1:
            status = int(digits) * 10
        elif len(digits) == 2:
            status = int(digits)
        else:
            raise MalformedHeader(
                f"status {digits} has {len(digits)} digits (an HTTP server?): {_excerpt(text)}"
            )
        return cls(status, rest)

    def encode(self) -> bytes:
        """The strict wire form. The space is always written, even before an empty meta,
        because many clients split the line on its first space and choke without one."""
        return f"{self.status:02d} {self.meta}\r\n".encode()


_LEADING_NUMBER = re.compile(r"[ \t]*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")


def slow_down_seconds(meta: str, *, default: float = 60.0, cap: float = 3600.0) -> float:
    """How long a 44 SLOW DOWN asks us to wait (Appendix 1: meta is an integer of seconds).

    A leading number is taken even when words follow (``"30 seconds"``) and fractions are
    accepted; anything unreadable means ``default``. The result is clamped to ``[0, cap]``:
    a capsule asking for a day (or a negative wait) must not stall or confuse the crawler.
    """
    match = _LEADING_NUMBER.match(meta)
    value = float(match.group(1)) if match else default
    return min(max(value, 0.0), cap)


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z\-]+")


def _quote_param(value: str) -> str:
    """Quote only what a naive ``split(";")`` / ``split("=", 1)`` reader would misread.

    RFC 2045 would quote ``lang=en,fr`` too (a comma is a tspecial), but Gemini's own
    spec writes such lists bare (§5.2) and many clients never unquote, so bare it stays.
    """
    if value and not any(char in value for char in ' \t;"\\'):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _parse_params(text: str) -> tuple[tuple[str, str], ...]:
    """Parameters after the essence, RFC 2045 style (``; name=value``, value maybe quoted).

    Never raises: RFC 2045 §5.1 says to ignore parameters one does not understand, and one
    garbled parameter is no reason to lose a page whose type is perfectly clear.
    """
    params: list[tuple[str, str]] = []
    pos, end = 0, len(text)
    while pos < end:
        if text[pos] in "; \t":
            pos += 1
            continue
        stop = pos
        while stop < end and text[stop] not in "=;":
            stop += 1
        name = text[pos:stop].strip(_BLANKS).lower()
        if stop >= end or text[stop] == ";":  # a name without "=": meaningless, skip it
            pos = stop
            continue
        pos = stop + 1
        while pos < end and text[pos] in _BLANKS:
            pos += 1
        if pos < end and text[pos] == '"':
            chars: list[str] = []
            pos += 1
            while pos < end and text[pos] != '"':
                if text[pos] == "\\" and pos + 1 < end:
                    pos += 1
                chars.append(text[pos])
                pos += 1
            value = "".join(chars)
            semicolon = text.find(";", pos)
            pos = end if semicolon < 0 else semicolon
        else:
            semicolon = text.find(";", pos)
            stop = end if semicolon < 0 else semicolon
            value = text[pos:stop].strip(_BLANKS)
            pos = stop
        if _TOKEN.fullmatch(name):
            params.append((name, value))
    return tuple(params)


@dataclass(frozen=True, slots=True)
class MimeType:
    """The meta of a 2x response. ``type``/``subtype``/parameter names are lower-case."""

    type: str
    subtype: str
    params: tuple[tuple[str, str], ...] = ()

    @property
    def essence(self) -> str:
        return f"{self.type}/{self.subtype}"

    def param(self, name: str) -> str | None:
        """The first value of a parameter: RFC 2045 forbids repeats, so later ones are noise."""
        name = name.lower()
        return next((value for key, value in self.params if key == name), None)

    @property
    def charset(self) -> str | None:
        """The declared charset, lower-cased; ``None`` when absent or empty."""
        value = (self.param("charset") or "").strip().lower()
        return value or None

    @property
    def effective_charset(self) -> str | None:
        """The charset to decode with: declared, else UTF-8 for text (§3.3 makes UTF-8 the
        default for ``text/*``), else ``None`` because binary bodies have no charset."""
        return self.charset or ("utf-8" if self.is_text else None)

    @property
    def langs(self) -> tuple[str, ...]:
        """The ``lang`` parameter (§5.2: comma-separated BCP 47 tags), trimmed, empties dropped."""
        value = self.param("lang") or ""
        return tuple(tag.strip() for tag in value.split(",") if tag.strip())

    @property
    def is_text(self) -> bool:
        return self.type == "text"

    @classmethod
    def parse(cls, meta: str) -> MimeType:
        """Parse a 2x meta.

        Empty meta means ``text/gemini; charset=utf-8`` (§3.3). Case, blanks around ``;``,
        ``=`` and ``/``, quoted values and garbled parameters are tolerated. A meta without a
        ``type/subtype`` essence (``"text"``, ``"gemini"``, ``"text/"``) raises
        :class:`MalformedHeader`: guessing between text/plain and text/gemini would render
        the page wrongly, and binary guesses are worse, so the crawler records an error.
        """
        meta = meta.strip(_BLANKS)
        if not meta:
            meta = DEFAULT_MIME
        essence, _, rest = meta.partition(";")
        type_, slash, subtype = (part.strip(_BLANKS) for part in essence.partition("/"))
        if not slash or not _TOKEN.fullmatch(type_) or not _TOKEN.fullmatch(subtype):
            raise MalformedHeader(f"not a MIME type of the form type/subtype: {_excerpt(meta)}")
        return cls(type_.lower(), subtype.lower(), _parse_params(rest))

    def __str__(self) -> str:
        return self.essence + "".join(f"; {k}={_quote_param(v)}" for k, v in self.params)


def build_request(url: str) -> bytes:
    """The request line for ``url`` (§2: absolute URL, UTF-8, at most 1024 bytes, CRLF).

    Only the framing is checked here; normalising the URL is the URL module's job. Control
    characters are refused because a CR or LF would end the request early and let the rest
    of the URL be read as something else.
    """
    if not url:
        raise InvalidURL("empty URL")
    if _URL_CONTROL.search(url):
        raise InvalidURL(f"URL contains a control character: {_excerpt(url)}")
    if url.startswith("\ufeff"):
        raise InvalidURL("URL starts with a byte order mark")
    try:
        encoded = url.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidURL(f"URL is not encodable as UTF-8: {_excerpt(url)}") from exc
    if len(encoded) > MAX_REQUEST_BYTES:
        raise InvalidURL(
            f"URL is {len(encoded)} bytes; Gemini requests allow at most {MAX_REQUEST_BYTES}"
        )
    return encoded + b"\r\n"


def parse_request(line: bytes) -> str:
    """Validate a request line received by one of our servers and return its URL.

    §2: the request is an absolute URL, UTF-8, at most 1024 bytes, followed by CRLF; the
    v0.24 text adds that it must carry no userinfo, no fragment and no leading BOM. Every
    refusal raises :class:`MalformedRequest` with a short message that is safe to send back
    as the meta of a 59 (it never echoes the client's bytes).

    We are strict here (a bare LF is refused) because we are the server: clients that get
    a clear 59 can be fixed, whereas accepting sloppy requests spreads the sloppiness.
    """
    if not line.endswith(b"\r\n"):
        if line.endswith(b"\n"):
            raise MalformedRequest("request must end with CRLF, not a bare LF")
        raise MalformedRequest("request is not terminated by CRLF")
    body = line[:-2]
    if len(body) > MAX_REQUEST_BYTES:
        raise MalformedRequest(f"request is longer than {MAX_REQUEST_BYTES} bytes")
    if not body:
        raise MalformedRequest("empty request")
    if body.startswith(_BOM):
        raise MalformedRequest("request must not start with a byte order mark")
    try:
        url = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedRequest("request is not valid UTF-8") from exc
    if _URL_CONTROL.search(url):
        raise MalformedRequest("request contains a control character")
    if not _SCHEME.match(url):
        raise MalformedRequest("request must be an absolute URL with a scheme")
    if "#" in url:
        raise MalformedRequest("request must not contain a fragment")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise MalformedRequest("request URL has an invalid host or port") from exc
    if "@" in parts.netloc:
        raise MalformedRequest("request must not contain userinfo")
    if not parts.hostname:
        raise MalformedRequest("request URL has no host")
    if any(blank in parts.netloc for blank in _BLANKS):
        raise MalformedRequest("request URL host contains whitespace")
    if port == 0:
        raise MalformedRequest("request URL has an invalid host or port")
    return url
