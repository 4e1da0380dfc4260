"""A small Geminispace written for relevance tests, and the queries whose best answer is known.

The capsules imitate what Geminispace holds: the protocol's home with its documentation, a
mirror of it, personal gemlogs, a pubnix with ``~user`` capsules, recipe capsules in French,
German and Spanish, a Japanese page, a directory and a search engine (hubs), an input
endpoint, an image, a feed — and a spammer: a keyword-stuffed page that a farm of pages in one
capsule links to with the words it wants to rank for.

Every expectation below is what a person would answer, not what the ranking happens to
produce: several queries are hard for plain BM25 on purpose (a stuffed page out-repeats the
real one; the real home page says "Gemini" less often than a blog post does).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.indexer.spaces import P

GEMINI = "gemini://gemini.example"
ALICE = "gemini://alice.example"
TILDE = "gemini://tilde.example"
FR = "gemini://recettes.example"
DE = "gemini://rezepte.example"
ES = "gemini://recetas.example"
JA = "gemini://nihongo.example"
CLIENTS = "gemini://clients.example"
SPAM = "gemini://spam.example"
MIRROR = "gemini://mirror.example"
STATION = "gemini://station.example"
SEARCH = "gemini://search.example"
WEATHER = "gemini://weather.example"
NEWS = "gemini://news.example"
DAVE = "gemini://dave.example"
ERIN = "gemini://erin.example"

SPEC_BODY = """# Gemini protocol specification

This document is the specification of the Gemini protocol, a lightweight application-level
protocol for serving hypertext documents over TLS.

## Requests

A request is a single CRLF-terminated line containing an absolute URL of at most 1024 bytes.

## Responses

A response header is a two-digit status code, a space and a meta string, terminated by CRLF.
Status codes are grouped into families: input, success, redirect, temporary failure,
permanent failure and client certificates.

## TLS

Use of TLS is mandatory. Clients should use trust on first use (TOFU) to validate server
certificates, since most capsules use self-signed certificates.

## Gemtext

The text/gemini media type is a line-oriented markup format with links, headings, lists,
quotes and preformatted blocks.
"""

PAGES: dict[str, P] = {
    # --- the protocol's home ----------------------------------------------------------------
    f"{GEMINI}/": P(
        """# Project Gemini

Gemini is a new internet protocol which is heavier than gopher, lighter than the web, and
values privacy and simplicity.

=> /docs/ Documentation
=> /docs/specification.gmi Protocol specification
=> /docs/faq.gmi Frequently asked questions
=> /software/ Known software
=> /docs/best-practices.gmi Best practices
=> /news.gmi Project news
""",
        lang="en",
    ),
    f"{GEMINI}/docs/": P(
        """# Documentation

=> specification.gmi The specification
=> faq.gmi FAQ
=> best-practices.gmi Best practices for capsule authors
=> tofu.gmi TOFU and certificates
=> gemtext.gmi A quick introduction to gemtext markup
""",
        lang="en",
    ),
    f"{GEMINI}/docs/specification.gmi": P(SPEC_BODY, lang="en"),
    f"{GEMINI}/docs/faq.gmi": P(
        """# Project Gemini FAQ

## What is this?

These are frequently asked questions about the protocol and answers to them.

## Why not just use gopher?

Gopher has no way to say what kind of document a response holds, no encryption, and no
standard for internationalized text.

## Why not the web?

The web has grown complex; a browser is a huge program. This protocol keeps clients small.
""",
        lang="en",
    ),
    f"{GEMINI}/docs/best-practices.gmi": P(
        """# Best practices for capsule authors

## File names

End gemtext file names in .gmi so servers know the media type.

## Redirects

Keep redirects rare; never redirect in loops.

## Text encoding

Serve UTF-8 and declare the language of your pages with the lang parameter.
""",
        lang="en",
    ),
    f"{GEMINI}/docs/tofu.gmi": P(
        """# TOFU: trust on first use

Clients remember the certificate fingerprint a capsule presented the first time and warn
when it changes before it expires. Self-signed certificates are normal here.
""",
        lang="en",
    ),
    f"{GEMINI}/docs/gemtext.gmi": P(
        """# A quick introduction to gemtext

Gemtext is line oriented. Lines starting with => are links, # starts a heading, * a list
item and > a quote. Three backticks toggle preformatted text.
""",
        lang="en",
    ),
    f"{GEMINI}/software/": P(
        """# Known software

## Clients

=> gemini://clients.example/lagrange.gmi Lagrange, a graphical client
=> gemini://clients.example/amfora.gmi Amfora, a terminal client
=> gemini://clients.example/ Reviews of many clients

## Servers

* Agate, a simple server written in Rust
* Molly Brown, a full-featured server written in Go
""",
        lang="en",
    ),
    f"{GEMINI}/news.gmi": P(
        """# Project news

2024-03-01 The mailing list archive moved to a new home.
2024-02-10 The specification was clarified about TLS close_notify.
""",
        lang="en",
    ),
    # --- a verbatim mirror: must fold into the original ----------------------------------------
    f"{MIRROR}/gemini/specification.gmi": P(SPEC_BODY, lang="en"),
    f"{MIRROR}/": P(
        """# Mirror of useful documents

=> /gemini/specification.gmi Mirror of the protocol specification
""",
        lang="en",
    ),
    # --- client reviews -------------------------------------------------------------------
    f"{CLIENTS}/": P(
        """# Gemini client reviews

I tried every Gemini client I could find and wrote a review of each.

=> lagrange.gmi Lagrange review: the best graphical client
=> amfora.gmi Amfora review: a fast terminal client
=> bombadillo.gmi Bombadillo review
""",
        lang="en",
    ),
    f"{CLIENTS}/lagrange.gmi": P(
        """# Lagrange review

Lagrange is a desktop and mobile client with tabs, bookmarks, a sidebar outline and
beautiful typography. It handles client certificates and TOFU well.
""",
        lang="en",
    ),
    f"{CLIENTS}/amfora.gmi": P(
        """# Amfora review

Amfora runs in the terminal, has tabs and themes, and is written in Go.
""",
        lang="en",
    ),
    f"{CLIENTS}/bombadillo.gmi": P(
        """# Bombadillo review

Bombadillo is a terminal browser for gopher, finger and gemini with vim-like keys.
""",
        lang="en",
    ),
    # --- the spammer: stuffed page and a farm linking to it ----------------------------------
    f"{SPAM}/best.gmi": P(
        "# Best gemini client gemini specification\n\n"
        + "gemini client gemini client best gemini client download gemini client now. " * 12
        + "gemini specification gemini specification gemini protocol gemini gemini. " * 8
        + "\nLagrange Amfora tomatoes sourdough recipes casino.\n",
        lang="en",
    ),
    # --- personal gemlog ---------------------------------------------------------------------
    f"{ALICE}/": P(
        """# Alice's gemlog

Hello! I write about my garden, baking bread and cycling.

=> /gemlog/ My gemlog
=> gemini://gemini.example/ Project Gemini
=> gemini://tilde.example/~bob/ Bob's capsule
""",
        lang="en",
    ),
    f"{ALICE}/gemlog/": P(
        """# Alice's gemlog

=> 2024-05-02-tomatoes.gmi 2024-05-02 Growing tomatoes on a balcony
=> 2024-04-11-sourdough.gmi 2024-04-11 My sourdough starter
=> 2024-03-20-cycling.gmi 2024-03-20 A week of bicycle touring
""",
        lang="en",
        feed_kind="gemsub",
    ),
    f"{ALICE}/gemlog/2024-05-02-tomatoes.gmi": P(
        """# Growing tomatoes on a balcony

This spring I planted six tomato seedlings in pots on my balcony. Tomatoes love sun, so the
pots face south. I water them every morning and feed them with compost tea once a week.
Cherry tomatoes ripen first; the beefsteak tomatoes take until August.
""",
        lang="en",
    ),
    f"{ALICE}/gemlog/2024-04-11-sourdough.gmi": P(
        """# My sourdough starter

A sourdough starter is flour and water left to ferment. Mine is called Gerald. Feed the
starter daily, and bake bread when it doubles within six hours. My first loaves were flat;
a longer proof and a hotter oven fixed that.
""",
        lang="en",
    ),
    f"{ALICE}/gemlog/2024-03-20-cycling.gmi": P(
        """# A week of bicycle touring

I spent a week cycling along the river with panniers and a tent. Touring by bicycle is slow
in the best way: sixty kilometres a day, camp sites, and a lot of bread.
""",
        lang="en",
    ),
    # --- a pubnix with two users (two scopes on one host) ------------------------------------
    f"{TILDE}/": P(
        """# tilde.example, a public unix server

=> /~bob/ bob
=> /~carol/ carol
""",
        lang="en",
    ),
    f"{TILDE}/~bob/": P(
        """# Bob's corner

Notes on Linux, text editors and terminals.

=> vim.gmi My vim configuration
=> emacs.gmi Why I also use Emacs
=> certs.gmi Making a self-signed certificate for my capsule
""",
        lang="en",
    ),
    f"{TILDE}/~bob/vim.gmi": P(
        """# My vim configuration

My vimrc sets relative line numbers, uses spaces instead of tabs and maps jk to escape.
The configuration file lives in my dotfiles repository.
""",
        lang="en",
    ),
    f"{TILDE}/~bob/emacs.gmi": P(
        """# Why I also use Emacs

Org mode is the one thing vim cannot replace. Emacs with evil mode feels like home.
""",
        lang="en",
    ),
    f"{TILDE}/~bob/certs.gmi": P(
        """# Making a self-signed certificate for my capsule

openssl req -x509 -newkey ec with a long expiry did the trick. Visitors' clients pin the
certificate on first use, so do not change it often.
""",
        lang="en",
    ),
    f"{TILDE}/~carol/": P(
        """# Carol's poems and games

=> poem-winter.gmi Winter, a poem
=> chess.gmi Notes on chess openings
""",
        lang="en",
    ),
    f"{TILDE}/~carol/poem-winter.gmi": P(
        """# Winter

Snow on the roof,
the kettle sings,
a poem waits in the cold ink.
""",
        lang="en",
    ),
    f"{TILDE}/~carol/chess.gmi": P(
        """# Notes on chess openings

The Sicilian Defence answers e4 with c5. The Queen's Gambit offers a pawn for the centre.
I keep a notebook of openings and the games where they went wrong.
""",
        lang="en",
    ),
    # --- French recipes --------------------------------------------------------------------
    f"{FR}/": P(
        """# Recettes de cuisine

=> ratatouille.gmi La ratatouille de ma grand-mère
=> crepes.gmi Les crêpes de la Chandeleur
=> tarte-tatin.gmi La tarte Tatin
""",
        lang="fr",
    ),
    f"{FR}/ratatouille.gmi": P(
        """# La ratatouille de ma grand-mère

Coupez les aubergines, les courgettes, les poivrons et les tomates en dés. Faites revenir
chaque légume séparément dans l'huile d'olive, puis laissez mijoter ensemble une heure.
""",
        lang="fr",
    ),
    f"{FR}/crepes.gmi": P(
        """# Les crêpes de la Chandeleur

Mélangez la farine, les œufs et le lait pour obtenir une pâte lisse. Laissez reposer la
pâte une heure, puis faites cuire les crêpes dans une poêle bien chaude.
""",
        lang="fr",
    ),
    f"{FR}/tarte-tatin.gmi": P(
        """# La tarte Tatin

Une tarte aux pommes renversée : les pommes caramélisent dans le beurre et le sucre avant
d'être recouvertes de pâte et cuites au four.
""",
        lang="fr",
    ),
    # --- German recipes (one page declares no language: detection must find German) ---------
    f"{DE}/": P(
        """# Rezepte aus der Küche

=> apfelstrudel.gmi Wiener Apfelstrudel
=> brezel.gmi Brezeln selber backen
=> sauerkraut.gmi Sauerkraut einlegen
""",
        lang="de",
    ),
    f"{DE}/apfelstrudel.gmi": P(
        """# Wiener Apfelstrudel

Der Teig wird hauchdünn ausgezogen, mit Äpfeln, Zimt, Rosinen und gerösteten Bröseln
belegt und aufgerollt. Dann backt man den Strudel goldbraun.
""",
        lang="de",
    ),
    f"{DE}/brezel.gmi": P(
        """# Brezeln selber backen

Für echte Laugenbrezeln braucht man Natronlauge. Die geformten Brezeln werden kurz in die
Lauge getaucht, mit grobem Salz bestreut und im heißen Ofen gebacken.
""",
        lang=None,
    ),
    f"{DE}/sauerkraut.gmi": P(
        """# Sauerkraut einlegen

Weißkohl fein hobeln, mit Salz kneten und fest in ein Gärgefäß drücken. Nach drei Wochen
ist das Sauerkraut fertig.
""",
        lang="de",
    ),
    # --- Spanish recipes -------------------------------------------------------------------
    f"{ES}/": P(
        """# Recetas de mi abuela

=> tortilla.gmi Tortilla de patatas
=> paella.gmi Paella valenciana
=> gazpacho.gmi Gazpacho andaluz
""",
        lang="es",
    ),
    f"{ES}/tortilla.gmi": P(
        """# Tortilla de patatas

Pela las patatas, córtalas finas y fríelas despacio con cebolla. Bate los huevos, mezcla
todo y cuaja la tortilla por ambos lados en la sartén.
""",
        lang="es",
    ),
    f"{ES}/paella.gmi": P(
        """# Paella valenciana

La paella lleva arroz, pollo, conejo, judías verdes y azafrán, cocinados en una paellera
ancha sobre el fuego.
""",
        lang="es",
    ),
    f"{ES}/gazpacho.gmi": P(
        """# Gazpacho andaluz

Tritura tomates maduros, pepino, pimiento, ajo, aceite de oliva y vinagre. Se sirve muy
frío en verano.
""",
        lang="es",
    ),
    # --- Japanese ------------------------------------------------------------------------
    f"{JA}/tokyo.gmi": P(
        "# 東京の天気\n\n今日の東京は晴れです。明日は雨が降るでしょう。\n",
        lang="ja",
    ),
    f"{JA}/kyoto.gmi": P(
        "# 京都のお寺\n\n京都には古いお寺がたくさんあります。秋の紅葉がきれいです。\n",
        lang="ja",
    ),
    # --- weather: an input endpoint, an image, a latin-1 text page --------------------------
    f"{WEATHER}/": P(
        """# Weather station

Forecasts for any city.

=> /forecast Get a weather forecast for your city
=> /radar.png Rain radar image
=> /report.txt Monthly climate report
""",
        lang="en",
    ),
    f"{WEATHER}/forecast": P(
        None, state="input", meta="Enter a city name for the weather forecast"
    ),
    f"{WEATHER}/radar.png": P(None, mime="image/png", charset=None, size=48_000),
    f"{WEATHER}/report.txt": P(
        "Monthly climate report\n\nRainfall was above average; temperatures were mild.\n",
        mime="text/plain",
        charset="iso-8859-1",
        lang="en",
    ),
    # --- a news feed ------------------------------------------------------------------------
    f"{NEWS}/": P(
        """# Geminispace news digest

=> gemini://gemini.example/news.gmi 2024-03-01 Mailing list archive moved
=> gemini://alice.example/gemlog/2024-05-02-tomatoes.gmi 2024-05-02 Alice grows tomatoes
""",
        lang="en",
        feed_kind="gemsub",
    ),
    # --- two more personal capsules that link to what they like -----------------------------
    f"{DAVE}/": P(
        """# Dave's links

Things worth reading in Geminispace.

=> gemini://gemini.example/ Gemini, the protocol
=> gemini://gemini.example/docs/specification.gmi The Gemini specification
=> gemini://clients.example/ Gemini client reviews
=> gemini://recettes.example/crepes.gmi The best crêpes recipe
=> gemini://alice.example/ Alice's gemlog
""",
        lang="en",
    ),
    f"{ERIN}/": P(
        """# Erin's capsule

I read Alice's gemlog every week, especially her baking posts.

=> gemini://alice.example/gemlog/2024-04-11-sourdough.gmi Alice on sourdough bread
=> gemini://gemini.example/ Project Gemini home
=> gemini://gemini.example/docs/faq.gmi The Gemini FAQ
=> gemini://clients.example/lagrange.gmi Lagrange, my favourite client
=> gemini://gemini.example/docs/specification.gmi Read the Gemini spec
""",
        lang="en",
    ),
    f"{ERIN}/gemini-thoughts.gmi": P(
        """# Thoughts on Gemini

Gemini made me write again. Gemini capsules feel like the early web; Gemini clients are
small; every Gemini page loads instantly. I love Gemini, Gemini, Gemini.
""",
        lang="en",
    ),
}

# Small personal capsules whose link pages point at what their authors read, as most do.
_FANS = {
    "frank": [
        ("gemini://gemini.example/", "Project Gemini"),
        ("gemini://gemini.example/docs/specification.gmi", "Gemini specification"),
        ("gemini://clients.example/", "Gemini client reviews"),
    ],
    "grace": [
        ("gemini://gemini.example/", "Gemini home"),
        ("gemini://gemini.example/docs/best-practices.gmi", "Best practices"),
        ("gemini://alice.example/", "Alice"),
    ],
    "heidi": [
        ("gemini://gemini.example/", "The Gemini protocol"),
        ("gemini://gemini.example/docs/faq.gmi", "Gemini FAQ"),
        ("gemini://rezepte.example/", "Rezepte"),
        ("gemini://recetas.example/", "Recetas"),
    ],
    "ivan": [
        ("gemini://gemini.example/", "gemini"),
        ("gemini://tilde.example/~bob/", "Bob on vim and Emacs"),
        ("gemini://tilde.example/~carol/", "Carol's poems"),
    ],
}
for _name, _links in _FANS.items():
    PAGES[f"gemini://{_name}.example/links.gmi"] = P(
        f"# {_name.title()}'s links\n\nCapsules I read.\n\n"
        + "".join(f"=> {url} {label}\n" for url, label in _links),
        lang="en",
    )

# A farm of pages in one capsule, all linking to the stuffed page with the words it wants.
for _number in range(30):
    PAGES[f"{SPAM}/farm/{_number}.gmi"] = P(
        f"# Page {_number}\n\n=> /best.gmi best gemini client\n=> /best.gmi gemini specification\n",
        lang="en",
    )

# A directory that links to many capsules (a hub: its links count little). Capsules it lists
# that were never crawled exist as known URLs, as they would in the store.
_LISTED = [
    "gemini://spam.example/best.gmi",
    *(f"gemini://listed{i}.example/" for i in range(22)),
]
PAGES[f"{STATION}/"] = P(
    "# Station: a directory of capsules\n\n"
    + "".join(f"=> {url} best gemini client capsule\n" for url in _LISTED),
    lang="en",
)
for _i in range(22):
    PAGES[f"gemini://listed{_i}.example/"] = P(None, state="new", mime=None, charset=None)

# A search engine's result page: also a hub.
PAGES[f"{SEARCH}/search?gemini"] = P(
    "# Results for gemini\n\n"
    + "".join(f"=> {url} gemini gemini\n" for url in _LISTED)
    + "=> gemini://spam.example/best.gmi Best gemini client\n",
    lang="en",
)


PAGES[f"{ERIN}/changelog.md"] = P(
    "# Changelog\n\n## 2024-06-01\n\n- Added a guide to **wheel truing** with a "
    "[spoke tension table](gemini://erin.example/spokes.gmi).\n"
    "- Fixed `typos` in _the_ hub notes.\n\n```sh\nmake truing-table\n```\n",
    mime="text/markdown",
    lang="en",
)


@dataclass(frozen=True)
class Known:
    """A query and the page a person expects among the first ``within`` results."""

    query: str
    expected: str
    within: int = 1


KNOWN_ANSWERS: tuple[Known, ...] = (
    Known("gemini", f"{GEMINI}/"),
    Known("gemini specification", f"{GEMINI}/docs/specification.gmi"),
    Known("protocol specification", f"{GEMINI}/docs/specification.gmi"),
    Known("gemini client", f"{CLIENTS}/"),
    Known("gemini faq", f"{GEMINI}/docs/faq.gmi"),
    Known("frequently asked questions", f"{GEMINI}/docs/faq.gmi"),
    Known("best practices", f"{GEMINI}/docs/best-practices.gmi"),
    Known("lagrange", f"{CLIENTS}/lagrange.gmi"),
    Known("amfora terminal", f"{CLIENTS}/amfora.gmi"),
    Known("trust on first use", f"{GEMINI}/docs/tofu.gmi"),
    Known("self-signed certificate", f"{TILDE}/~bob/certs.gmi"),
    Known("tomatoes", f"{ALICE}/gemlog/2024-05-02-tomatoes.gmi"),
    Known("growing tomato", f"{ALICE}/gemlog/2024-05-02-tomatoes.gmi"),
    Known("sourdough bread", f"{ALICE}/gemlog/2024-04-11-sourdough.gmi"),
    Known('"sourdough starter"', f"{ALICE}/gemlog/2024-04-11-sourdough.gmi"),
    Known("bicycle touring", f"{ALICE}/gemlog/2024-03-20-cycling.gmi"),
    Known("alice", f"{ALICE}/"),
    Known("vim configuration", f"{TILDE}/~bob/vim.gmi"),
    Known("emacs org mode", f"{TILDE}/~bob/emacs.gmi"),
    Known("site:tilde.example/~carol winter poem", f"{TILDE}/~carol/poem-winter.gmi"),
    Known("chess openings", f"{TILDE}/~carol/chess.gmi"),
    Known("ratatouille", f"{FR}/ratatouille.gmi"),
    Known("crepes", f"{FR}/crepes.gmi"),
    Known("pâte crêpes", f"{FR}/crepes.gmi"),
    Known("lang:fr pommes", f"{FR}/tarte-tatin.gmi"),
    Known("apfelstrudel", f"{DE}/apfelstrudel.gmi"),
    Known("brezel backen", f"{DE}/brezel.gmi"),
    Known("tortilla de patatas", f"{ES}/tortilla.gmi"),
    Known("intitle:paella", f"{ES}/paella.gmi"),
    Known("gazpacho", f"{ES}/gazpacho.gmi"),
    Known("東京", f"{JA}/tokyo.gmi"),
    Known("京都", f"{JA}/kyoto.gmi"),
    Known("weather forecast city", f"{WEATHER}/forecast", within=2),
    Known("type:input weather", f"{WEATHER}/forecast"),
    Known("type:image radar", f"{WEATHER}/radar.png"),
    Known("climate report", f"{WEATHER}/report.txt"),
    Known("mailing list archive", f"{GEMINI}/news.gmi", within=3),
    Known("gemtext links headings", f"{GEMINI}/docs/gemtext.gmi"),
    # Navigational: a capsule's name, host, start page URL or start page title.
    Known("rezepte", f"{DE}/"),
    Known("recettes.example", f"{FR}/"),
    Known("gemini://clients.example/", f"{CLIENTS}/"),
    Known("recettes de cuisine", f"{FR}/"),
    # Markdown: read as text, its syntax taken away.
    Known("wheel truing", f"{ERIN}/changelog.md"),
    Known("spoke tension table", f"{ERIN}/changelog.md"),
    # Prefixes.
    Known("sourd*", f"{ALICE}/gemlog/2024-04-11-sourdough.gmi"),
    Known("apfel*", f"{DE}/apfelstrudel.gmi"),
    # Dates: the gemlog's labels and URLs date its posts.
    Known(
        "site:alice.example after:2024-05-01 before:2024-05-31",
        f"{ALICE}/gemlog/2024-05-02-tomatoes.gmi",
    ),
    Known(
        "inurl:2024 (bicycle OR sourdough) sort:newest", f"{ALICE}/gemlog/2024-04-11-sourdough.gmi"
    ),
)
