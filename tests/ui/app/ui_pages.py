"""What the page tests share: where the pages are, and assertions on a page run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGES = Path(__file__).resolve().parents[3] / "ui" / "app" / "screens"

# run_page("fleet", url, read_only=False, query={...}) -> the page run once
RunPage = Callable[..., AppTest]


def texts(at: AppTest) -> str:
    """Every piece of text a page shows, for content assertions."""
    parts = [
        e.value
        for kind in ("title", "subheader", "markdown", "caption", "info")
        for e in getattr(at, kind)
    ]
    parts += [f"{m.label}: {m.value}" for m in at.metric]
    return "\n".join(str(p) for p in parts)


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
