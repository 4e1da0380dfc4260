"""Every page of the capsule built from a hostile capsule's text carries none of its commands.

Gemini clients run in terminals too, so a control character or a bidi override in a title,
a link label, a snippet or a robots.txt must not reach them; the words around it must.
"""

from __future__ import annotations

import pytest

from indexer.build import run_index
from sextant.config import Settings
from sextant.store.migrate import open_store
from tests import hostile_space
from tests.hostile_space import EVIL, EVIL_HOST, FRIEND, WORD, unsafe_characters
from tests.search_capsule.conftest import settings_in, start_capsule

# HOSTILE once through the capsule: controls shown as U+FFFD, bidi controls gone.
SHOWN = (
    "clear\ufffd[2J osc\ufffd]8;;http://x.example/\ufffd\\click\ufffd]8;;\ufffd\\ bell\ufffd "
    "csi\ufffd31m flipevilisolated tail"
)


@pytest.fixture(scope="module")
def hostile_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = settings_in(tmp_path_factory.mktemp("hostile"))
    engine = open_store(settings.db_url)
    hostile_space.populate(engine)
    engine.dispose()
    run_index(settings.index_dir, settings.db_url, procs=1)
    return settings


@pytest.fixture
async def hostile_capsule(nursery, hostile_settings, tls_context):
    running = await start_capsule(nursery, hostile_settings, tls_context)
    yield running
    running.app.close()


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        (f"/search?{WORD}", f"=> {EVIL} Sourdough {SHOWN}"),
        (f"/v/search?{WORD}", f"=> {EVIL} Sourdough {SHOWN}"),
        (f"/backlinks?{FRIEND}", f"=> {EVIL} Sourdough {SHOWN} — “{SHOWN}”"),
        (f"/backlinks?{EVIL}", f"=> {EVIL} Sourdough {SHOWN}"),
        (f"/capsule?{EVIL_HOST}", f"# {SHOWN}"),  # the robots.txt comment, preformatted
        ("/known-hosts", "=> gemini://evil.example/ evil.example"),
        ("/newest-pages", f"=> {EVIL} 2026-07-01 Sourdough {SHOWN} (evil.example)"),
        ("/known-feeds", f"=> {EVIL} Sourdough {SHOWN}"),
        ("/statistics", "* utf-8clear\ufffd[2J o"),
    ],
)
async def test_pages_show_hostile_text_without_its_controls(hostile_capsule, path, shown):
    reply = await hostile_capsule.client.get(path)
    assert reply.status == 20, (reply.status, reply.meta)
    assert unsafe_characters(reply.text) == [], reply.text
    assert shown in reply.text, reply.text
    for link in reply.gemtext.links:
        assert unsafe_characters(link.label) == []
