"""The wire grammar, fed the headers and requests real (and hostile) peers send."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sextant.errors import InvalidURL, MalformedHeader, MalformedRequest
from sextant.protocol import (
    MAX_HEADER_BYTES,
    MAX_META_BYTES,
    MAX_REQUEST_BYTES,
    Family,
    MimeType,
    ResponseHeader,
    Status,
    build_request,
    family,
    parse_request,
    slow_down_seconds,
)

# ---------------------------------------------------------------- response headers


@pytest.mark.parametrize(
    ("line", "status", "meta"),
    [
        (b"20 text/gemini\r\n", 20, "text/gemini"),
        (b"20 text/gemini\n", 20, "text/gemini"),  # LF-only servers
        (b"20 text/gemini", 20, "text/gemini"),  # terminator already removed by the reader
        (b"30 gemini://example.org/\r", 30, "gemini://example.org/"),  # stray CR only
        (b"20 text/gemini   \t\r\n", 20, "text/gemini"),  # trailing blanks
        (b"20  text/gemini\r\n", 20, "text/gemini"),  # two spaces
        (b"20\ttext/gemini\r\n", 20, "text/gemini"),  # tab as separator
        (b"51\r\n", 51, ""),  # no meta at all
        (b"20\r\n", 20, ""),  # success without MIME: the default applies
        (b"20 \r\n", 20, ""),
        (b"40 \r\n", 40, ""),
        (b"\xef\xbb\xbf20 text/gemini\r\n", 20, "text/gemini"),  # BOM
        (b"2 text/gemini\r\n", 20, "text/gemini"),  # one digit: the family's first code
        (b"5\r\n", 50, ""),
        (b"1 Your name?\r\n", 10, "Your name?"),
        (b"25 odd\r\n", 25, "odd"),  # unknown code inside a family: kept as is
        (b"44 30\r\n", 44, "30"),
        (b"10 Entrez un caf\xc3\xa9 :\r\n", 10, "Entrez un café :"),
        (b"10 a\tb\r\n", 10, "a\tb"),  # an inner tab is text, not a control
        (b"20 text/gemini; charset=utf-8; lang=en\r\n", 20, "text/gemini; charset=utf-8; lang=en"),
        (b"69 x\r\n", 69, "x"),
        (b"10 x\r\n", 10, "x"),
    ],
)
def test_header_parses(line, status, meta):
    header = ResponseHeader.parse(line)
    assert (header.status, header.meta) == (status, meta)
    assert type(header.status) is int


def test_header_meta_of_exactly_the_limit_is_accepted():
    meta = "é" * (MAX_META_BYTES // 2)
    header = ResponseHeader.parse(b"20 " + meta.encode() + b"\r\n")
    assert header.meta == meta
    assert len(header.encode()) == MAX_HEADER_BYTES


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"", "empty"),
        (b"\r\n", "empty"),
        (b"   \t\r\n", "empty"),
        (b"\xef\xbb\xbf\r\n", "empty"),
        (b"200 text/gemini\r\n", "HTTP"),
        (b"HTTP/1.1 200 OK\r\n", "not a number"),
        (b"OK text/gemini\r\n", "not a number"),
        (b" 20 text/gemini\r\n", "not a number"),
        (b"\xd9\xa2\xd9\xa0 text/gemini\r\n", "not a number"),  # Arabic-Indic digits
        (b"2x text/gemini\r\n", "followed by a space"),
        (b"20text/gemini\r\n", "followed by a space"),
        (b"00 x\r\n", "outside 10-69"),
        (b"09 x\r\n", "outside 10-69"),
        (b"70 x\r\n", "outside 10-69"),
        (b"99 x\r\n", "outside 10-69"),
        (b"0 x\r\n", "outside 10-69"),
        (b"7 x\r\n", "outside 10-69"),
        (b"20 " + b"a" * (MAX_META_BYTES + 1) + b"\r\n", "1025 bytes"),
        (b"20 text/gemini; charset=\xff\r\n", "UTF-8"),
        (b"20 text/\x00gemini\r\n", "control"),
        (b"10 \x1b[31mred\r\n", "control"),
        (b"20 a\rb\r\n", "control"),
        (b"30 gemini://a/\r\n20 text/gemini\r\n", "control"),  # a forged second line
        (b"20 a\x7f\r\n", "control"),
        (b"20 a\xc2\x85\r\n", "control"),  # C1 NEL
    ],
)
def test_header_rejected(line, message):
    with pytest.raises(MalformedHeader, match=message):
        ResponseHeader.parse(line)


def test_header_errors_are_value_errors_for_callers_that_catch_broadly():
    with pytest.raises(ValueError, match="outside"):
        ResponseHeader.parse(b"99 x")


@pytest.mark.parametrize(
    ("header", "wire"),
    [
        (ResponseHeader(20, "text/gemini"), b"20 text/gemini\r\n"),
        (ResponseHeader(Status.NOT_FOUND, ""), b"51 \r\n"),
        (ResponseHeader(10, "Nom ?"), b"10 Nom ?\r\n"),
        (ResponseHeader(10, "Ça va ?"), "10 Ça va ?\r\n".encode()),
        (ResponseHeader(44, "  60  "), b"44 60\r\n"),
    ],
)
def test_header_encodes_strictly(header, wire):
    assert header.encode() == wire
    assert ResponseHeader.parse(wire) == header


def test_header_constructor_normalises_status_and_meta():
    header = ResponseHeader(Status.SUCCESS, " text/gemini\t")
    assert header == ResponseHeader(20, "text/gemini")
    assert type(header.status) is int
    assert header.family is Family.SUCCESS


@pytest.mark.parametrize(
    ("status", "meta"),
    [
        (9, ""),
        (70, ""),
        (100, ""),
        (True, ""),
        ("20", ""),
        (20, "a\r\nb"),
        (20, "a\x00"),
        (20, "x" * (MAX_META_BYTES + 1)),
        (20, "\ud800"),
        (20, None),
    ],
)
def test_header_constructor_refuses_what_cannot_be_sent(status, meta):
    with pytest.raises(MalformedHeader):
        ResponseHeader(status, meta)


@given(
    st.integers(min_value=10, max_value=69),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=300),
)
def test_header_round_trips(status, meta):
    try:
        header = ResponseHeader(status, meta)
    except MalformedHeader:
        assume(False)
    assert ResponseHeader.parse(header.encode()) == header
    assert len(header.encode()) <= MAX_HEADER_BYTES


@given(st.binary(max_size=1100))
def test_header_parse_fails_only_with_malformed_header(line):
    try:
        header = ResponseHeader.parse(line)
    except MalformedHeader:
        return
    assert 10 <= header.status <= 69
    assert ResponseHeader.parse(header.encode()) == header


# ---------------------------------------------------------------- status families


_FAMILY_BY_FIRST_DIGIT = {
    "1": Family.INPUT,
    "2": Family.SUCCESS,
    "3": Family.REDIRECT,
    "4": Family.TEMPORARY_FAILURE,
    "5": Family.PERMANENT_FAILURE,
    "6": Family.CLIENT_CERTIFICATE,
}


@pytest.mark.parametrize("code", range(10, 70))
def test_family_of_every_code_follows_its_first_digit(code):
    assert family(code) is _FAMILY_BY_FIRST_DIGIT[str(code)[0]]


@pytest.mark.parametrize(
    ("status", "value", "expected"),
    [
        (Status.INPUT, 10, Family.INPUT),
        (Status.SENSITIVE_INPUT, 11, Family.INPUT),
        (Status.SUCCESS, 20, Family.SUCCESS),
        (Status.REDIRECT_TEMPORARY, 30, Family.REDIRECT),
        (Status.REDIRECT_PERMANENT, 31, Family.REDIRECT),
        (Status.TEMPORARY_FAILURE, 40, Family.TEMPORARY_FAILURE),
        (Status.SERVER_UNAVAILABLE, 41, Family.TEMPORARY_FAILURE),
        (Status.CGI_ERROR, 42, Family.TEMPORARY_FAILURE),
        (Status.PROXY_ERROR, 43, Family.TEMPORARY_FAILURE),
        (Status.SLOW_DOWN, 44, Family.TEMPORARY_FAILURE),
        (Status.PERMANENT_FAILURE, 50, Family.PERMANENT_FAILURE),
        (Status.NOT_FOUND, 51, Family.PERMANENT_FAILURE),
        (Status.GONE, 52, Family.PERMANENT_FAILURE),
        (Status.PROXY_REQUEST_REFUSED, 53, Family.PERMANENT_FAILURE),
        (Status.BAD_REQUEST, 59, Family.PERMANENT_FAILURE),
        (Status.CLIENT_CERTIFICATE_REQUIRED, 60, Family.CLIENT_CERTIFICATE),
        (Status.CERTIFICATE_NOT_AUTHORISED, 61, Family.CLIENT_CERTIFICATE),
        (Status.CERTIFICATE_NOT_VALID, 62, Family.CLIENT_CERTIFICATE),
    ],
)
def test_named_statuses_have_the_spec_values(status, value, expected):
    assert status == value
    assert family(status) is expected
    assert ResponseHeader.parse(f"{value} x".encode()).family is expected


def test_every_named_status_is_in_the_table():
    assert len(Status) == 18


@pytest.mark.parametrize("code", [-1, 0, 1, 9, 70, 99, 100, 200])
def test_family_refuses_codes_outside_the_spec(code):
    with pytest.raises(MalformedHeader):
        family(code)


# ---------------------------------------------------------------- 44 SLOW DOWN


@pytest.mark.parametrize(
    ("meta", "seconds"),
    [
        ("30", 30.0),
        (" 30 ", 30.0),
        ("2.5", 2.5),
        (".5", 0.5),
        ("30 seconds", 30.0),
        ("1e2", 100.0),
        ("", 60.0),
        ("soon", 60.0),
        ("inf", 60.0),
        ("nan", 60.0),
        ("-5", 0.0),
        ("0", 0.0),
        ("86400", 3600.0),
        ("1e999", 3600.0),
        ("9" * 400, 3600.0),
    ],
)
def test_slow_down_seconds(meta, seconds):
    assert slow_down_seconds(meta) == seconds


def test_slow_down_seconds_respects_caller_default_and_cap():
    assert slow_down_seconds("garbage", default=5.0, cap=10.0) == 5.0
    assert slow_down_seconds("500", default=5.0, cap=10.0) == 10.0
    assert slow_down_seconds("garbage", default=99.0, cap=10.0) == 10.0


@given(st.text(max_size=50))
def test_slow_down_seconds_is_always_a_usable_wait(meta):
    assert 0.0 <= slow_down_seconds(meta) <= 3600.0


# ---------------------------------------------------------------- MIME types


@pytest.mark.parametrize(
    ("meta", "essence", "charset", "effective", "langs"),
    [
        ("", "text/gemini", "utf-8", "utf-8", ()),
        ("   ", "text/gemini", "utf-8", "utf-8", ()),
        ("text/gemini", "text/gemini", None, "utf-8", ()),
        ("TEXT/Gemini; Charset=UTF-8", "text/gemini", "utf-8", "utf-8", ()),
        ("text/plain ; charset = ISO-8859-1 ", "text/plain", "iso-8859-1", "iso-8859-1", ()),
        ("text / plain", "text/plain", None, "utf-8", ()),
        (
            'text/gemini; charset="utf-8"; lang="en, fr"',
            "text/gemini",
            "utf-8",
            "utf-8",
            ("en", "fr"),
        ),
        ("text/gemini; lang=en,fr , de", "text/gemini", None, "utf-8", ("en", "fr", "de")),
        ("text/gemini; LANG=en-GB", "text/gemini", None, "utf-8", ("en-GB",)),
        ("text/gemini; lang=", "text/gemini", None, "utf-8", ()),
        ("text/gemini; lang=,,", "text/gemini", None, "utf-8", ()),
        ("text/gemini;", "text/gemini", None, "utf-8", ()),
        ("text/gemini;;; ;", "text/gemini", None, "utf-8", ()),
        ("text/gemini; charset", "text/gemini", None, "utf-8", ()),
        ("text/gemini; charset=", "text/gemini", None, "utf-8", ()),
        ("text/gemini; charset=utf-8; charset=latin1", "text/gemini", "utf-8", "utf-8", ()),
        ("text/gemini; =x; lang=en", "text/gemini", None, "utf-8", ("en",)),
        ("image/png", "image/png", None, None, ()),
        (
            "application/octet-stream; charset=utf-8",
            "application/octet-stream",
            "utf-8",
            "utf-8",
            (),
        ),
        ("text/x-diff", "text/x-diff", None, "utf-8", ()),
    ],
)
def test_mime_parses(meta, essence, charset, effective, langs):
    mime = MimeType.parse(meta)
    assert mime.essence == essence
    assert mime.charset == charset
    assert mime.effective_charset == effective
    assert mime.langs == langs
    assert mime.is_text == essence.startswith("text/")


def test_mime_empty_meta_is_the_spec_default():
    assert MimeType.parse("") == MimeType("text", "gemini", (("charset", "utf-8"),))
    assert str(MimeType.parse("")) == "text/gemini; charset=utf-8"


@pytest.mark.parametrize(
    ("meta", "name", "value"),
    [
        ('text/gemini; title="a;b"; lang=en', "title", "a;b"),
        ('text/gemini; title="a;b"; lang=en', "lang", "en"),
        ('text/gemini; title="say \\"hi\\""', "title", 'say "hi"'),
        ('text/gemini; title="unterminated', "title", "unterminated"),
        ('text/gemini; title="x"junk; lang=fr', "lang", "fr"),
        ("text/gemini; Size=1133", "size", "1133"),
        ("text/gemini; size=1133", "missing", None),
    ],
)
def test_mime_parameters(meta, name, value):
    assert MimeType.parse(meta).param(name) == value


@pytest.mark.parametrize(
    "meta",
    [
        "text",
        "gemini",
        "text/",
        "/gemini",
        "/",
        "text/ge mini",
        "text/html charset=utf-8",
        "tëxt/x",
    ],
)
def test_mime_without_a_type_and_subtype_is_refused(meta):
    with pytest.raises(MalformedHeader, match="type/subtype"):
        MimeType.parse(meta)


@pytest.mark.parametrize(
    ("mime", "text"),
    [
        (MimeType("text", "gemini"), "text/gemini"),
        (MimeType("text", "gemini", (("lang", "en,fr"),)), "text/gemini; lang=en,fr"),
        (MimeType("text", "plain", (("title", 'a "b"; c'),)), 'text/plain; title="a \\"b\\"; c"'),
        (MimeType("text", "plain", (("x", ""),)), 'text/plain; x=""'),
    ],
)
def test_mime_str_quotes_when_needed(mime, text):
    assert str(mime) == text
    assert MimeType.parse(text) == mime


_token = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-+.!#$&^_`|~"), min_size=1, max_size=10
)


@given(
    _token,
    _token,
    st.lists(
        st.tuples(_token, st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=20)),
        max_size=4,
    ),
)
def test_mime_str_round_trips(type_, subtype, params):
    mime = MimeType(type_, subtype, tuple(params))
    assert MimeType.parse(str(mime)) == mime


@given(st.text(max_size=200))
def test_mime_parse_fails_only_with_malformed_header(meta):
    try:
        mime = MimeType.parse(meta)
    except MalformedHeader:
        return
    assert mime.type
    assert mime.subtype
    assert MimeType.parse(str(mime)).essence == mime.essence


# ---------------------------------------------------------------- requests (client side)


@pytest.mark.parametrize(
    ("url", "wire"),
    [
        ("gemini://example.org/", b"gemini://example.org/\r\n"),
        ("gemini://example.org:1966/a?q%20r", b"gemini://example.org:1966/a?q%20r\r\n"),
        ("gemini://example.org/café", "gemini://example.org/café\r\n".encode()),
    ],
)
def test_build_request(url, wire):
    assert build_request(url) == wire


def test_build_request_counts_bytes_not_characters():
    base = "gemini://example.org/"
    fits = base + "a" * (MAX_REQUEST_BYTES - len(base))
    assert len(build_request(fits)) == MAX_REQUEST_BYTES + 2
    with pytest.raises(InvalidURL, match="1025 bytes"):
        build_request(fits[:-1] + "é")  # one character, two bytes


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty"),
        ("gemini://example.org/\r\nmore", "control"),
        ("gemini://example.org/\n", "control"),
        ("gemini://example.org/\r", "control"),
        ("gemini://example.org/\x00", "control"),
        ("gemini://example.org/a\tb", "control"),
        ("\ufeffgemini://example.org/", "byte order mark"),
        ("gemini://example.org/\ud800", "UTF-8"),
        ("gemini://example.org/" + "a" * 1100, "at most 1024"),
    ],
)
def test_build_request_refuses(url, message):
    with pytest.raises(InvalidURL, match=message):
        build_request(url)


# ---------------------------------------------------------------- requests (server side)


@pytest.mark.parametrize(
    "url",
    [
        "gemini://example.org/",
        "gemini://example.org",
        "gemini://example.org:1965/search?hello%20world",
        "gemini://EXAMPLE.org/a/b/../c",
        "gemini://example.org/café?q=ü",
        "gemini://xn--caf-dma.example/",
        "gemini://127.0.0.1:1965/",
        "gemini://[::1]:1965/",
        "https://example.org/",  # a proxy request: the server decides with 53, not us
        "gemini://example.org/a b",  # sloppy but unambiguous; the URL layer normalises it
    ],
)
def test_parse_request_accepts(url):
    assert parse_request(url.encode() + b"\r\n") == url


def test_parse_request_accepts_exactly_1024_bytes():
    url = "gemini://example.org/" + "a" * (MAX_REQUEST_BYTES - len("gemini://example.org/"))
    assert parse_request(url.encode() + b"\r\n") == url


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"gemini://example.org/", "not terminated by CRLF"),
        (b"gemini://example.org/\r", "not terminated by CRLF"),
        (b"gemini://example.org/\n", "bare LF"),
        (b"gemini://example.org/" + b"a" * 1004 + b"\r\n", "longer than 1024"),
        (b"\r\n", "empty"),
        (b"\xef\xbb\xbfgemini://example.org/\r\n", "byte order mark"),
        (b"gemini://example.org/\xff\r\n", "UTF-8"),
        (b"gemini://example.org/\x00\r\n", "control"),
        (b"gemini://example.org/\x1b[2J\r\n", "control"),
        (b"gemini://example.org/\r\nsecond\r\n", "control"),
        (b"gemini://example.org/\t\r\n", "control"),
        (b"/index.gmi\r\n", "absolute URL"),
        (b"example.org/\r\n", "absolute URL"),
        (b"//example.org/\r\n", "absolute URL"),
        (b" gemini://example.org/\r\n", "absolute URL"),
        (b"gemini://example.org/#top\r\n", "fragment"),
        (b"gemini://example.org/#\r\n", "fragment"),
        (b"gemini://user@example.org/\r\n", "userinfo"),
        (b"gemini://user:secret@example.org/\r\n", "userinfo"),
        (b"gemini:///path\r\n", "no host"),
        (b"gemini:example.org\r\n", "no host"),
        (b"gemini://:1965/\r\n", "no host"),
        (b"gemini://example.org:99999/\r\n", "invalid host or port"),
        (b"gemini://example.org:0/\r\n", "invalid host or port"),
        (b"gemini://example.org:abc/\r\n", "invalid host or port"),
        (b"gemini://[::1/\r\n", "invalid host or port"),
        (b"gemini://exa mple.org/\r\n", "whitespace"),
    ],
)
def test_parse_request_refuses(line, message):
    with pytest.raises(MalformedRequest, match=message) as caught:
        parse_request(line)
    # The message goes back to the client verbatim as a 59 meta: it must be a valid one,
    # and must not echo the client's bytes (no reflected junk, no leaked secrets).
    reply = ResponseHeader(Status.BAD_REQUEST, str(caught.value))
    assert reply.meta == str(caught.value)
    assert b"secret" not in reply.encode()
    assert "example" not in str(caught.value)


def test_malformed_request_is_a_value_error():
    with pytest.raises(ValueError, match="fragment"):
        parse_request(b"gemini://a/#b\r\n")


_host = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z]{2,6}){0,2}", fullmatch=True)
_path = st.text(st.sampled_from("abcxyz019-._~!$&'()*+,;=:@/%éü漢"), max_size=60)


@given(_host, st.one_of(st.none(), st.integers(1, 65535)), _path)
def test_build_then_parse_request_round_trips(host, port, path):
    url = f"gemini://{host}{'' if port is None else f':{port}'}/{path}"
    assert parse_request(build_request(url)) == url


@given(st.binary(max_size=1200))
def test_parse_request_fails_only_with_malformed_request(line):
    try:
        url = parse_request(line)
    except MalformedRequest as exc:
        ResponseHeader(Status.BAD_REQUEST, str(exc))  # always a sendable 59
        return
    assert build_request(url) == line
