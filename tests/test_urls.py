"""sextant.urls: every normalization rule, every refusal, RFC 3986 resolution, properties."""

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sextant import urls
from sextant.errors import InvalidURL
from sextant.urls import GeminiURL

# --- normalization --------------------------------------------------------------------

NORMALIZE_CASES = [
    # scheme and host case
    ("GEMINI://EXAMPLE.ORG/", "gemini://example.org/"),
    ("Gemini://Example.Org/Path/Keeps/Case", "gemini://example.org/Path/Keeps/Case"),
    # default port dropped, others kept, empty port means default, leading zeros
    ("gemini://example.org:1965/", "gemini://example.org/"),
    ("gemini://example.org:01965/", "gemini://example.org/"),
    ("gemini://example.org:/", "gemini://example.org/"),
    ("gemini://example.org:1966/a", "gemini://example.org:1966/a"),
    ("gemini://example.org:1/", "gemini://example.org:1/"),
    ("gemini://example.org:65535/", "gemini://example.org:65535/"),
    # empty path
    ("gemini://example.org", "gemini://example.org/"),
    ("gemini://example.org?q", "gemini://example.org/?q"),
    ("gemini://example.org:1966", "gemini://example.org:1966/"),
    # query: absent vs empty is preserved
    ("gemini://example.org/?", "gemini://example.org/?"),
    ("gemini://example.org/a?x?y/z", "gemini://example.org/a?x?y/z"),
    # dot segments (RFC 3986 5.2.4)
    ("gemini://example.org/a/./b/../c", "gemini://example.org/a/c"),
    ("gemini://example.org/../../x", "gemini://example.org/x"),
    ("gemini://example.org/a/..", "gemini://example.org/"),
    ("gemini://example.org/a/.", "gemini://example.org/a/"),
    ("gemini://example.org/a/b/../", "gemini://example.org/a/"),
    ("gemini://example.org/.hidden/..dots/x..", "gemini://example.org/.hidden/..dots/x.."),
    ("gemini://example.org/%2e%2E/x", "gemini://example.org/x"),
    ("gemini://example.org/a/%2E/b", "gemini://example.org/a/b"),
    ("gemini://example.org/a?b/../c", "gemini://example.org/a?b/../c"),
    ("gemini://example.org//double//slash", "gemini://example.org//double//slash"),
    # percent-encoding: unreserved decoded, hex upper-cased, reserved kept encoded
    ("gemini://example.org/%7euser/%41%62%2D%5F%2e%7E", "gemini://example.org/~user/Ab-_.~"),
    ("gemini://example.org/%2f%3f%23%c3%a9", "gemini://example.org/%2F%3F%23%C3%A9"),
    ("gemini://example.org/a%2Fb/../c", "gemini://example.org/c"),
    ("gemini://example.org/?%3d%26%2b", "gemini://example.org/?%3D%26%2B"),
    # raw characters that are not allowed get encoded
    ("gemini://example.org/a b", "gemini://example.org/a%20b"),
    ("gemini://example.org/café", "gemini://example.org/caf%C3%A9"),
    ("gemini://example.org/日本", "gemini://example.org/%E6%97%A5%E6%9C%AC"),
    ("gemini://example.org/😀", "gemini://example.org/%F0%9F%98%80"),
    (
        'gemini://example.org/[x]{y}|^`\\"<>',
        "gemini://example.org/%5Bx%5D%7By%7D%7C%5E%60%5C%22%3C%3E",
    ),
    ("gemini://example.org/a?b c", "gemini://example.org/a?b%20c"),
    ("gemini://example.org/?ü", "gemini://example.org/?%C3%BC"),
    # a stray "%" stands for itself
    ("gemini://example.org/100%", "gemini://example.org/100%25"),
    ("gemini://example.org/%zz%4", "gemini://example.org/%25zz%254"),
    # "+" is literal in Gemini; spaces are %20
    ("gemini://example.org/?q=a+b", "gemini://example.org/?q=a+b"),
    ("gemini://example.org/a+b", "gemini://example.org/a+b"),
    # sub-delims, ":" and "@" are fine raw in paths
    ("gemini://example.org/a;p=1/b:c@d!$&'()*,", "gemini://example.org/a;p=1/b:c@d!$&'()*,"),
    # fragments are dropped
    ("gemini://example.org/a#frag", "gemini://example.org/a"),
    ("gemini://example.org#frag", "gemini://example.org/"),
    ("gemini://example.org/a?b#c?d", "gemini://example.org/a?b"),
    ("gemini://example.org/a#", "gemini://example.org/a"),
    # surrounding whitespace (gemtext lines, header metas) is noise
    ("  gemini://example.org/ \t\r\n", "gemini://example.org/"),
    # IDN hosts become punycode
    ("gemini://Bücher.Example/", "gemini://xn--bcher-kva.example/"),
    ("gemini://xn--BCHER-KVA.example/", "gemini://xn--bcher-kva.example/"),
    ("gemini://例え。テスト/", "gemini://xn--r8jz45g.xn--zckzah/"),
    # other host spellings
    ("gemini://example.org./", "gemini://example.org/"),
    ("gemini://ex%61mple.org/", "gemini://example.org/"),
    ("gemini://b%C3%BCcher.example/", "gemini://xn--bcher-kva.example/"),
    ("gemini://my_host.example/", "gemini://my_host.example/"),
    ("gemini://_dmarc._my-host_.example/", "gemini://_dmarc._my-host_.example/"),
    ("gemini://a-b--c.x-y.example/", "gemini://a-b--c.x-y.example/"),
    ("gemini://1.example/", "gemini://1.example/"),
    ("gemini://" + "a" + "-" * 61 + "z.org/", "gemini://a" + "-" * 61 + "z.org/"),
    ("gemini://127.0.0.1:1966/", "gemini://127.0.0.1:1966/"),
    ("gemini://[2001:DB8:0::1]/", "gemini://[2001:db8::1]/"),
    ("gemini://[::1]:1965/", "gemini://[::1]/"),
    ("gemini://[::1]:300/x", "gemini://[::1]:300/x"),
]


@pytest.mark.parametrize(("raw", "expected"), NORMALIZE_CASES)
def test_normalize(raw, expected):
    assert urls.normalize(raw) == expected
    assert str(urls.parse(raw)) == expected
    assert urls.normalize(expected) == expected


PARSE_FIELD_CASES = [
    ("gemini://Example.org", ("gemini", "example.org", 1965, "/", None)),
    ("gemini://example.org:1966/a?b", ("gemini", "example.org", 1966, "/a", "b")),
    ("gemini://example.org/?", ("gemini", "example.org", 1965, "/", "")),
    ("gemini://[::1]:7000/x", ("gemini", "::1", 7000, "/x", None)),
    ("gemini://Bücher.example/", ("gemini", "xn--bcher-kva.example", 1965, "/", None)),
]


@pytest.mark.parametrize(("raw", "fields"), PARSE_FIELD_CASES)
def test_parse_fields(raw, fields):
    url = urls.parse(raw)
    assert (url.scheme, url.host, url.port, url.path, url.query) == fields


def test_equal_spellings_give_equal_hashable_urls():
    a = urls.parse("GEMINI://Example.ORG:1965/%7ea/./b#x")
    b = urls.parse("gemini://example.org/~a/b")
    assert a == b
    assert len({a, b}) == 1
    assert urls.parse("gemini://example.org/~a/b?") != b


# --- refusals -------------------------------------------------------------------------

BASE_LEN = len("gemini://example.org/")

INVALID_CASES = [
    ("", "empty URL"),
    ("   ", "empty URL"),
    ("/relative/path", "relative URL"),
    ("example.org/path", "relative URL"),
    ("//example.org/", "relative URL"),
    ("?query", "relative URL"),
    ("https://example.org/", "https:"),
    ("HTTP://example.org/", "http:"),
    ("gopher://example.org/", "gopher:"),
    ("mailto:someone@example.org", "mailto:"),
    ("spartan://example.org/", "spartan:"),
    ("gemini:/path", "has no host"),
    ("gemini:example.org", "has no host"),
    ("gemini://user@example.org/", "userinfo"),
    ("gemini://user:pw@example.org/", "userinfo"),
    ("gemini://@example.org/", "userinfo"),
    ("gemini:///path", "empty host"),
    ("gemini://", "empty host"),
    ("gemini://:1965/", "empty host"),
    ("gemini://?q", "empty host"),
    ("gemini://.", "empty host"),
    ("gemini://./x", "empty host"),
    ("gemini://example.org:abc/", "not a number"),
    ("gemini://example.org:-1/", "not a number"),
    ("gemini://example.org:+1965/", "not a number"),
    ("gemini://example.org: 1965/", "not a number"),
    ("gemini://example.org:１９６５/", "not a number"),
    ("gemini://example.org:0/", "out of range"),
    ("gemini://example.org:65536/", "out of range"),
    ("gemini://example.org:" + "9" * 50 + "/", "out of range"),
    ("gemini://exa mple.org/", "not allowed in a host name"),
    ("gemini://exa<mple.org/", "not allowed in a host name"),
    ("gemini://a..b/", "empty label"),
    ("gemini://.example.org/", "empty label"),
    ("gemini://" + "a" * 64 + ".org/", "label longer"),
    ("gemini://-bad-.org/", "starts or ends with a hyphen"),
    ("gemini://-bad.org/", "starts or ends with a hyphen"),
    ("gemini://bad-.org/", "starts or ends with a hyphen"),
    ("gemini://good.-bad/", "starts or ends with a hyphen"),
    ("gemini://good.bad-./", "starts or ends with a hyphen"),
    ("gemini://-/", "starts or ends with a hyphen"),
    ("gemini://-bücher.example/", "starts or ends with a hyphen"),
    ("gemini://" + ("a" * 60 + ".") * 5 + "org/", "longer than DNS allows (253)"),
    ("gemini://ex%ffample.org/", "not UTF-8"),
    ("gemini://b\u00fccher" + "x" * 70 + ".example/", "not a valid internationalized"),
    ("gemini://\udcff.org/", "not a valid internationalized"),
    ("gemini://example.org/a\tb", "U+0009"),
    ("gemini://example.org/a\nb", "U+000A"),
    ("gemini://example.org/a\rb", "U+000D"),
    ("gemini://example.org/a\r\nGET /", "U+000D"),
    ("gemini://example.org/\x00", "U+0000"),
    ("gemini://example.org/\x7f", "U+007F"),
    ("gemini://example.org/?\x1b[31m", "U+001B"),
    ("gemini://exam\x00ple.org/", "U+0000"),
    ("gemini://example.org/#a\nb", "U+000A"),
    ("gemini://example.org/\udcff", "surrogate"),
    ("gemini://::1/", "brackets"),
    ("gemini://[::1/", "unterminated"),
    ("gemini://[::1]x/", "unexpected"),
    ("gemini://[not-v6]/", "not a valid IPv6"),
    ("gemini://[127.0.0.1]/", "not a valid IPv6"),
    ("gemini://[fe80::1%25eth0]/", "zone"),
    ("gemini://example.org/" + "a" * (1025 - BASE_LEN), "1025 bytes"),
    # short raw text, long once non-ASCII is encoded: the limit is on the normalized form
    ("gemini://example.org/" + "é" * 200, "bytes once normalized"),
    ("gemini://example.org/" + "a" * 100_000, "far over"),
]


@pytest.mark.parametrize(("raw", "message"), INVALID_CASES)
def test_parse_rejects(raw, message):
    with pytest.raises(InvalidURL, match=re.escape(message)):
        urls.parse(raw)
    with pytest.raises(InvalidURL):
        urls.normalize(raw)


def test_length_limit_boundary_is_1024_bytes():
    exact = "gemini://example.org/" + "a" * (1024 - BASE_LEN)
    assert urls.normalize(exact) == exact
    with pytest.raises(InvalidURL):
        urls.normalize(exact + "a")


def test_length_is_measured_after_dot_segments_collapse():
    raw = "gemini://example.org/" + "a/../" * 400 + "x"
    assert len(raw) > urls.MAX_URL_BYTES
    assert urls.normalize(raw) == "gemini://example.org/x"


def test_hostile_megabyte_is_refused_quickly():
    raw = "gemini://example.org/" + "%" * 1_000_000
    start = time.perf_counter()
    with pytest.raises(InvalidURL):
        urls.parse(raw)
    # Refused on its length, in microseconds: 0.5 s leaves a loaded machine plenty of room.
    assert time.perf_counter() - start < 0.5


def test_invalid_url_is_a_value_error():
    with pytest.raises(ValueError, match="userinfo"):
        urls.parse("gemini://u@h/")


# --- other schemes when asked for -------------------------------------------------------

OTHER_SCHEME_CASES = [
    ("HTTPS://Example.COM:443/a", "https://example.com/a", 443),
    ("https://example.com:8443/", "https://example.com:8443/", 8443),
    ("spartan://host/", "spartan://host/", 300),
    ("gopher://host/1/x", "gopher://host/1/x", 70),
    ("titan://host/upload;size=1", "titan://host/upload;size=1", 1965),
    ("foo://host:1/", "foo://host:1/", 1),
]


@pytest.mark.parametrize(("raw", "expected", "port"), OTHER_SCHEME_CASES)
def test_parse_other_schemes_when_allowed(raw, expected, port):
    url = urls.parse(raw, gemini_only=False)
    assert str(url) == expected
    assert url.port == port


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("foo://host/", "no default port"),
        ("mailto:a@b.example", "has no host"),
        ("https://user@example.com/", "userinfo"),
    ],
)
def test_parse_other_schemes_still_validated(raw, message):
    with pytest.raises(InvalidURL, match=message):
        urls.parse(raw, gemini_only=False)


# --- GeminiURL helpers ---------------------------------------------------------------

AUTHORITY_CASES = [
    ("gemini://example.org/", "example.org"),
    ("gemini://example.org:1966/", "example.org:1966"),
    ("gemini://[::1]/", "[::1]"),
    ("gemini://[2001:db8::1]:7000/", "[2001:db8::1]:7000"),
]


@pytest.mark.parametrize(("raw", "authority"), AUTHORITY_CASES)
def test_authority(raw, authority):
    assert urls.parse(raw).authority == authority


DISPLAY_HOST_CASES = [
    ("gemini://xn--bcher-kva.example/", "bücher.example"),
    ("gemini://例え。テスト/", "例え.テスト"),
    ("gemini://example.org/", "example.org"),
    ("gemini://[::1]/", "::1"),
    # malformed punycode cannot be decoded: shown as is rather than failing
    ("gemini://xn--a.example/", "xn--a.example"),
]


@pytest.mark.parametrize(("raw", "display"), DISPLAY_HOST_CASES)
def test_display_host(raw, display):
    assert urls.parse(raw).display_host == display


WITH_PATH_CASES = [
    ("/a/../b c", None, "gemini://h:7/b%20c"),
    ("rel", None, "gemini://h:7/rel"),
    ("", None, "gemini://h:7/"),
    ("/x", "a b+c", "gemini://h:7/x?a%20b+c"),
    ("/x", "", "gemini://h:7/x?"),
    ("/what?#", None, "gemini://h:7/what%3F%23"),
    ("/%7e%2f", None, "gemini://h:7/~%2F"),
]


@pytest.mark.parametrize(("path", "query", "expected"), WITH_PATH_CASES)
def test_with_path(path, query, expected):
    base = urls.parse("gemini://h:7/old?q")
    assert str(base.with_path(path, query)) == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [("/a\nb", "U+000A"), ("/" + "a" * 1024, "bytes once normalized"), ("/\udcff", "surrogate")],
)
def test_with_path_rejects(path, message):
    with pytest.raises(InvalidURL, match=re.escape(message)):
        urls.parse("gemini://h/").with_path(path)


SCOPE_CASES = [
    ("gemini://example.org/", "example.org"),
    ("gemini://example.org/a/b", "example.org"),
    ("gemini://example.org:1966/a", "example.org:1966"),
    ("gemini://tilde.team/~alice/", "tilde.team/~alice"),
    ("gemini://tilde.team/~alice", "tilde.team/~alice"),
    ("gemini://tilde.team/~alice/log/1.gmi", "tilde.team/~alice"),
    ("gemini://tilde.team:1966/~bob/x", "tilde.team:1966/~bob"),
    ("gemini://tilde.team/%7Ecarol/x", "tilde.team/~carol"),
    ("gemini://[::1]/~dan/", "[::1]/~dan"),
    ("gemini://tilde.team/~/", "tilde.team"),
    ("gemini://tilde.team/~", "tilde.team"),
    ("gemini://tilde.team/users/~alice/", "tilde.team"),
]


@pytest.mark.parametrize(("raw", "scope"), SCOPE_CASES)
def test_scope_of(raw, scope):
    assert urls.scope_of(urls.parse(raw)) == scope


@pytest.mark.parametrize(
    ("raw", "robots"),
    [
        ("gemini://example.org/a/b?q", "gemini://example.org/robots.txt"),
        ("gemini://example.org:1966/", "gemini://example.org:1966/robots.txt"),
        ("gemini://[::1]/x", "gemini://[::1]/robots.txt"),
    ],
)
def test_robots_url(raw, robots):
    result = urls.robots_url(urls.parse(raw))
    assert isinstance(result, GeminiURL)
    assert str(result) == robots


SCHEME_OF_CASES = [
    ("gemini://x/", "gemini"),
    ("GEMINI://x/", "gemini"),
    ("  HTTPS://x/", "https"),
    ("mailto:a@b", "mailto"),
    ("svn+ssh://x", "svn+ssh"),
    ("/path", ""),
    ("relative/path", ""),
    ("//host/", ""),
    ("1abc:x", ""),
    ("", ""),
    ("?q", ""),
]


@pytest.mark.parametrize(("raw", "scheme"), SCHEME_OF_CASES)
def test_scheme_of(raw, scheme):
    assert urls.scheme_of(raw) == scheme


# --- resolution: RFC 3986 section 5.4, base http://a/b/c/d;p?q adapted to gemini -------

RFC_BASE = "gemini://a/b/c/d;p?q"

RFC_NORMAL = [
    ("g:h", "g:h"),
    ("g", "gemini://a/b/c/g"),
    ("./g", "gemini://a/b/c/g"),
    ("g/", "gemini://a/b/c/g/"),
    ("/g", "gemini://a/g"),
    ("//g", "gemini://g/"),  # normalized: empty path becomes "/"
    ("?y", "gemini://a/b/c/d;p?y"),
    ("g?y", "gemini://a/b/c/g?y"),
    ("#s", "gemini://a/b/c/d;p?q"),  # fragments are dropped
    ("g#s", "gemini://a/b/c/g"),
    ("g?y#s", "gemini://a/b/c/g?y"),
    (";x", "gemini://a/b/c/;x"),
    ("g;x", "gemini://a/b/c/g;x"),
    ("g;x?y#s", "gemini://a/b/c/g;x?y"),
    ("", "gemini://a/b/c/d;p?q"),
    (".", "gemini://a/b/c/"),
    ("./", "gemini://a/b/c/"),
    ("..", "gemini://a/b/"),
    ("../", "gemini://a/b/"),
    ("../g", "gemini://a/b/g"),
    ("../..", "gemini://a/"),
    ("../../", "gemini://a/"),
    ("../../g", "gemini://a/g"),
]

RFC_ABNORMAL = [
    ("../../../g", "gemini://a/g"),
    ("../../../../g", "gemini://a/g"),
    ("/./g", "gemini://a/g"),
    ("/../g", "gemini://a/g"),
    ("g.", "gemini://a/b/c/g."),
    (".g", "gemini://a/b/c/.g"),
    ("g..", "gemini://a/b/c/g.."),
    ("..g", "gemini://a/b/c/..g"),
    ("./../g", "gemini://a/b/g"),
    ("./g/.", "gemini://a/b/c/g/"),
    ("g/./h", "gemini://a/b/c/g/h"),
    ("g/../h", "gemini://a/b/c/h"),
    ("g;x=1/./y", "gemini://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "gemini://a/b/c/y"),
    ("g?y/./x", "gemini://a/b/c/g?y/./x"),
    ("g?y/../x", "gemini://a/b/c/g?y/../x"),
    ("g#s/./x", "gemini://a/b/c/g"),
    ("g#s/../x", "gemini://a/b/c/g"),
    # RFC "http:g": other schemes are returned as written; the same scheme without an
    # authority is read as relative (the non-strict parser RFC 5.2.2 allows).
    ("http:g", "http:g"),
    ("gemini:g", "gemini://a/b/c/g"),
]


@pytest.mark.parametrize(("ref", "expected"), RFC_NORMAL + RFC_ABNORMAL)
def test_resolve_rfc3986_examples(ref, expected):
    assert urls.resolve(RFC_BASE, ref) == expected
    assert urls.resolve(urls.parse(RFC_BASE), ref) == expected


OTHER_SCHEME_REFS = [
    ("HTTPS://Example.com/A?B#C", "https://Example.com/A?B#C"),
    ("  mailto:Someone@Example.COM  ", "mailto:Someone@Example.COM"),
    ("Gopher://x/1/../y", "gopher://x/1/../y"),
    ("spartan://h/a b", "spartan://h/a b"),
    ("javascript:alert(1)", "javascript:alert(1)"),
    ("\thttp://user@host:99999/", "http://user@host:99999/"),
]


@pytest.mark.parametrize(("ref", "expected"), OTHER_SCHEME_REFS)
def test_resolve_keeps_other_schemes_as_written(ref, expected):
    assert urls.resolve("gemini://example.org/dir/page.gmi", ref) == expected


RESOLVE_CASES = [
    ("gemini://h/a/b", "//Other.Example/p", "gemini://other.example/p"),
    ("gemini://h/a/b", "//other.example", "gemini://other.example/"),
    ("gemini://h/a/b", "GEMINI://OTHER/x/../y#f", "gemini://other/y"),
    ("gemini://h/a/b", " c d ", "gemini://h/a/c%20d"),
    ("gemini://h/a/b", "café?é", "gemini://h/a/caf%C3%A9?%C3%A9"),
    ("gemini://h/a/b", "%7eme/", "gemini://h/a/~me/"),
    ("gemini://h/a/b", "%2E%2E/x", "gemini://h/x"),
    ("gemini://h/a/b", "?", "gemini://h/a/b?"),
    ("gemini://h/a/b", "x?a+b", "gemini://h/a/x?a+b"),
    ("gemini://h:1966/a/b", "c", "gemini://h:1966/a/c"),
    ("gemini://h:1966/a/b", "/c", "gemini://h:1966/c"),
    ("gemini://h:1966/a/b", "//k/c", "gemini://k/c"),
    ("gemini://[::1]/a/", "b", "gemini://[::1]/a/b"),
    ("gemini://h/", "..", "gemini://h/"),
    ("gemini://h", "x", "gemini://h/x"),
    ("gemini://h/~user/log/", "../", "gemini://h/~user/"),
    ("gemini://h/a/b?q", "#top", "gemini://h/a/b?q"),
    ("titan://h/a/b", "c", "titan://h/a/c"),
    ("titan://h/a/b", "gemini://h/x", "gemini://h/x"),
]


@pytest.mark.parametrize(("base", "ref", "expected"), RESOLVE_CASES)
def test_resolve(base, ref, expected):
    assert urls.resolve(base, ref) == expected


RESOLVE_INVALID_CASES = [
    ("gemini://h/a", "gemini://user@x/", "userinfo"),
    ("gemini://h/a", "gemini://x:0/", "out of range"),
    ("gemini://h/a", "a\nb", "U+000A"),
    ("gemini://h/a", "//u@x/", "userinfo"),
    ("gemini://h/a", "x" * 1100, "bytes once normalized"),
    ("gemini://h/a", "\udcff", "surrogate"),
    ("titan://h/a", "gemini:g", "has no host"),
    ("not a url", "g", "relative URL"),
    ("gemini://u@h/", "g", "userinfo"),
]


@pytest.mark.parametrize(("base", "ref", "message"), RESOLVE_INVALID_CASES)
def test_resolve_rejects(base, ref, message):
    with pytest.raises(InvalidURL, match=re.escape(message)):
        urls.resolve(base, ref)


# --- properties -----------------------------------------------------------------------

_PATH_ALPHABET = st.sampled_from(
    [
        *list("abcXYZ019-._~!$&'()*+,;=:@/?#%[]{}|\\^` \"<>é日😀\t\n\x00\x7f"),
        "%2e",
        "%2E",
        "%41",
        "%7e",
        "%2F",
        "%zz",
        "%c3%a9",
        "./",
        "../",
        "/./",
        "/../",
    ]
)
_HOST_ALPHABET = st.sampled_from([*list("abcXYZ019-_.üß例"), "xn--", "%41", "。"])


@st.composite
def url_like(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["gemini", "GEMINI", "Gemini", "https", "gopher"]))
    host = "".join(draw(st.lists(_HOST_ALPHABET, min_size=0, max_size=12)))
    if draw(st.booleans()):
        host = "[" + draw(st.sampled_from(["::1", "2001:DB8::1", "fe80::1%25x", "zz"])) + "]"
    port = draw(st.sampled_from(["", ":", ":1965", ":01965", ":1966", ":0", ":70000", ":x"]))
    path = "".join(draw(st.lists(_PATH_ALPHABET, max_size=30)))
    return f"{scheme}://{host}{port}{path}"


@settings(max_examples=300, deadline=None)
@given(url_like())
def test_normalize_is_idempotent(raw):
    try:
        once = urls.normalize(raw)
    except InvalidURL:
        return
    assert urls.normalize(once) == once
    assert urls.parse(once) == urls.parse(raw)
    assert once.isascii()
    assert len(once.encode()) <= urls.MAX_URL_BYTES
    assert "#" not in once


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parse_never_fails_other_than_invalid_url(raw):
    try:
        url = urls.parse(raw, gemini_only=False)
    except InvalidURL:
        return
    assert urls.parse(str(url), gemini_only=False) == url


_REF_ALPHABET = st.sampled_from(
    [*list("ab./?#%:;@~ é\t+="), "../", "./", "//", "gemini:", "GEMINI://x/", "http:", "%2e"]
)


@settings(max_examples=300, deadline=None)
@given(
    base=st.sampled_from([RFC_BASE, "gemini://h/", "gemini://h:1966/~u/x/y?z", "gemini://[::1]/a"]),
    ref=st.lists(_REF_ALPHABET, max_size=20).map("".join),
)
def test_resolve_returns_normalized_gemini(base, ref):
    try:
        result = urls.resolve(base, ref)
    except InvalidURL:
        return
    if urls.scheme_of(result) == "gemini":
        assert urls.normalize(result) == result
        # resolving an absolute result again against any base is a fixed point
        assert urls.resolve("gemini://elsewhere/", result) == result
