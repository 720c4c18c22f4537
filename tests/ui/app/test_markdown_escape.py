"""User-chosen names reach the page as literal text: markdown in a name never becomes a link,
an image or formatting."""

from __future__ import annotations

import re

import pytest
from ui_pages import RunPage, assert_clean

from slotune.collector.store import open_store, save_diagnosis, upgrade
from slotune.ui.app._common import code, md

HOSTILE = "![x](http://evil.example/p.png) [click](http://evil.example) <http://e.x> www.e.x a@e.x"
# Markdown constructs that would add a link or an image, as they appear in markdown source.
_LINKISH = re.compile(r"(?<!\\)\[|(?<!\\)<[a-z]|(?<![\\])https?:|(?<!\\)www\.|(?<!\\)@")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


@pytest.mark.parametrize(
    "name",
    [HOSTILE, ":red[x] :material/warning: $x^2$ `c` *b* _i_ ~~s~~ |t|", "chat-itl (itl:p95<=50ms)"],
)
def test_escaped_text_shows_as_written_and_links_nothing(name: str) -> None:
    escaped = md(name)
    assert _unescape(escaped) == name
    assert not _LINKISH.search(escaped), escaped


def test_a_code_span_holds_any_backticks() -> None:
    assert code("slotune tune resume a`b") == "``slotune tune resume a`b``"
    assert code("`x") == "`` `x ``"


def test_a_hostile_diagnosis_subject_is_shown_literally(sqlite_url: str, run_page: RunPage) -> None:
    upgrade(sqlite_url)
    with open_store(sqlite_url) as store:
        save_diagnosis(store, "trace", {}, {"findings": []}, subject=HOSTILE)
    at = run_page("diagnosis", sqlite_url)
    assert_clean(at)
    (expander,) = at.expander
    assert HOSTILE in _unescape(expander.label)
    assert not _LINKISH.search(expander.label), expander.label
