"""The sample capsules and what makes each one special.

Static pages come from ``content/<host>/`` (package data); this module adds the
behaviour that files alone cannot express: declared languages and charsets,
redirects, the input endpoint and generated binary files.
"""

from __future__ import annotations

import gzip
import io
import struct
import tarfile
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from urllib.parse import unquote

from gemserve.server import Request, Response

Handler = Callable[[Request], Awaitable[Response]]

#: MIME types by file extension; anything else is served as application/octet-stream.
MIME_TYPES = {
    ".gmi": "text/gemini",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".xml": "application/atom+xml",
}


@dataclass(frozen=True)
class SampleCapsule:
    host: str
    lang: str | None = None
    #: path -> (target, permanent)
    redirects: Mapping[str, tuple[str, bool]] = field(default_factory=dict)
    #: path -> full meta, for pages whose header is special (e.g. no charset)
    metas: Mapping[str, str] = field(default_factory=dict)
    #: path -> generated response
    dynamic: Mapping[str, Handler] = field(default_factory=dict)

    @property
    def root(self) -> Traversable:
        return files("gemserve.sample_space") / "content" / self.host

    async def handle(self, request: Request) -> Response:
        """Answer like a typical static Gemini server, plus this capsule's specials."""
        path = unquote(request.url.path)
        if path in self.dynamic:
            return await self.dynamic[path](request)
        if path in self.redirects:
            target, permanent = self.redirects[path]
            return Response.redirect(target, permanent=permanent)
        node = self.root
        for part in path.strip("/").split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                return Response.bad_request("no parent directories")
            node = node / part
        if node.is_dir():
            if not path.endswith("/"):
                # Like most static servers: a directory without its slash is redirected, so
                # relative links inside its index resolve correctly.
                return Response.redirect(path + "/", permanent=True)
            node = node / "index.gmi"
        if not node.is_file():
            return Response.not_found("no such page")
        return Response.success(node.read_bytes(), self._meta_for(path, node.name))

    def _meta_for(self, path: str, name: str) -> str:
        if path in self.metas:
            return self.metas[path]
        if name == "robots.txt":
            return "text/plain; charset=utf-8"
        suffix = name[name.rfind(".") :] if "." in name else ""
        mime = MIME_TYPES.get(suffix, "application/octet-stream")
        if mime == "text/gemini":
            mime += "; charset=utf-8" + (f"; lang={self.lang}" if self.lang else "")
        elif mime.startswith("text/"):
            mime += "; charset=utf-8"
        return mime


async def lookup(request: Request) -> Response:
    """A CGI-like endpoint: ``10`` asks for a word, then lists the capsules that mention it."""
    if not request.url.query:
        return Response.input("Which word should Lookup look for?")
    word = unquote(request.url.query).strip().lower()
    found = sorted(
        capsule.host for capsule in CAPSULES if any(word in text for text in _texts(capsule.root))
    )
    lines = [f"# Lookup: {word}", ""]
    lines += [f"=> gemini://{host}/ {host}" for host in found] or ["Nothing mentions it."]
    return Response.gemtext("\n".join(lines) + "\n")


def _texts(node: Traversable) -> list[str]:
    if node.is_file():
        return [node.read_bytes().decode("utf-8", "replace").lower()]
    return [text for child in node.iterdir() for text in _texts(child)]


async def feedback(request: Request) -> Response:
    """An input endpoint a crawler may see: it records the prompt, searchable as type:input."""
    if not request.url.query:
        return Response.input("Which part of the protocol should Protocol Notes explain next?")
    return Response.gemtext("# Thank you\n\nYour suggestion was noted.\n", lang="en")


def png_image(width: int = 16, height: int = 16) -> bytes:
    """A real, tiny PNG (a blue-grey gradient), generated so no binary sits in the repo."""
    rows = b"".join(
        b"\x00" + bytes(value for x in range(width) for value in (40, 60 + 8 * y, 120 + 4 * x))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def tar_gz_archive() -> bytes:
    """A real gzip-compressed tar archive with one text file in it."""
    payload = b"Notes for a talk about small protocols.\n"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        info = tarfile.TarInfo("notes/talk.txt")
        info.size = len(payload)
        info.mtime = 1_790_000_000
        archive.addfile(info, io.BytesIO(payload))
    return gzip.compress(raw.getvalue(), mtime=0)


def _static(body: bytes, mime: str) -> Handler:
    async def handler(_request: Request) -> Response:
        return Response.success(body, mime)

    return handler


CAPSULES: tuple[SampleCapsule, ...] = (
    SampleCapsule("station.example", lang="en"),
    SampleCapsule("gemlog.example", lang="en"),
    SampleCapsule(
        "docs.example",
        lang="en",
        redirects={"/old-spec": ("/spec/", True), "/guides": ("guides/", False)},
        dynamic={"/feedback": feedback},
    ),
    SampleCapsule("rezepte.example", lang="de"),
    # The old poem is Latin-1 bytes served with no charset: the crawler must detect it.
    SampleCapsule("poemes.example", lang="fr", metas={"/ancien.gmi": "text/gemini"}),
    SampleCapsule("biblioteca.example", lang="es"),
    SampleCapsule("search.example", lang="en", dynamic={"/lookup": lookup}),
    SampleCapsule(
        "pubnix.example",
        lang="en",
        # carol moved her writing to the gemlog: a redirect to another capsule.
        redirects={"/~carol/": ("gemini://gemlog.example/", True)},
        # Real servers often serve robots.txt as gemtext; crawlers must accept it.
        metas={"/~bob/robots.txt": "text/gemini"},
    ),
    SampleCapsule(
        "files.example",
        dynamic={
            "/lighthouse.png": _static(png_image(), "image/png"),
            "/notes.tar.gz": _static(tar_gz_archive(), "application/gzip"),
        },
    ),
)

#: The capsule every crawl of the sample space starts from.
SEED_URL = "gemini://station.example/"


def capsule(host: str) -> SampleCapsule:
    return next(c for c in CAPSULES if c.host == host)
