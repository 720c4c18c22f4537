"""What every page shares: the store, read-only mode, error display, caching, formatting.

``slotune ui`` hands its settings over in the environment: ``SLOTUNE_DB`` (the store URL;
unset: the default SQLite file), ``SLOTUNE_METRICS`` (a query API the metrics are read from;
unset: the store) and ``SLOTUNE_UI_READ_ONLY`` (``1`` hides every control that
writes).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

import plotly.graph_objects as go
import streamlit as st

from slotune.collector.errors import SchemaMismatch, SlotuneError, StoreError
from slotune.collector.metrics import PromClient, open_metrics
from slotune.collector.store import Store, open_store

READ_ONLY_ENV = "SLOTUNE_UI_READ_ONLY"
TTL_S = 10  # cached reads; live parts refresh on their own timer
LIVE_S = 5  # refresh period of live fragments

RANGES: dict[str, float] = {
    "5m": 300.0,
    "1h": 3600.0,
    "6h": 6 * 3600.0,
    "1d": 86400.0,
    "7d": 7 * 86400.0,
    "30d": 30 * 86400.0,
}


def db_url() -> str | None:
    """The store URL (None: the default SQLite file)."""
    return os.environ.get("SLOTUNE_DB") or None


def metrics() -> PromClient | None:
    """The query API metrics are read from (None: the store's samples)."""
    return _metrics(os.environ.get("SLOTUNE_METRICS") or None)


@st.cache_resource(show_spinner=False)
def _metrics(url: str | None) -> PromClient | None:
    return open_metrics(url)


def is_read_only() -> bool:
    return os.environ.get(READ_ONLY_ENV, "") == "1"


def login_required() -> bool:
    """Whether Streamlit's OIDC login is configured (``[auth]`` in secrets.toml)."""
    try:
        return "auth" in st.secrets
    except (FileNotFoundError, KeyError, st.errors.StreamlitSecretNotFoundError):
        return False


def _dispose(s: Store) -> None:
    s.dispose()


@st.cache_resource(show_spinner=False, on_release=_dispose)
def _store(url: str | None) -> Store:
    return open_store(url)


# What markdown turns into links, images or formatting: brackets (links and images, inline or
# by reference; ``:color[...]`` directives), emphasis, code, strike-through, math, tables,
# ``<scheme:...>`` autolinks and HTML, and GFM's bare ``http://``, ``www.`` and e-mail links.
_MARKDOWN_CHARS = re.compile(r"([\\`*_\[\]~$|@])|<(?=[A-Za-z/!?])")
_BARE_LINK = re.compile(r"(?i)\b(https?|ftp|mailto|www)([:.])")


def md(text: object) -> str:
    """User text (a name, a path, an error message) as literal text inside markdown, so a
    name such as ``[x](http://evil)`` or ``![](http://evil/p.png)`` shows as written and can
    never add a link or an image to the page."""
    escaped = _MARKDOWN_CHARS.sub(lambda m: "\\" + m[0], str(text))
    return _BARE_LINK.sub(lambda m: f"{m[1]}\\{m[2]}", escaped)


def code(text: object) -> str:
    """User text as an inline code span: fenced by more backticks than it holds in a row,
    since backslash escapes do not work inside code."""
    text = str(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fail(message: str) -> NoReturn:
    """Show one error line (plain text: escaped here) and stop the page."""
    st.error(md(message), icon=":material/error:")
    st.stop()


def show_error(message: str) -> None:
    """Show one error line of plain text (escaped here)."""
    st.error(md(message))


def explain(e: BaseException) -> str:
    """One line saying what is wrong and what to do."""
    if isinstance(e, SchemaMismatch):
        return f"The store's schema does not match this slotune: {e}"
    if isinstance(e, StoreError):
        return f"The store cannot be read: {e}"
    if isinstance(e, SlotuneError):
        return str(e)
    first = (str(e).strip().splitlines() or [""])[0]
    return f"Unexpected {type(e).__name__}: {first}. Reload the page; if it persists, check the dashboard's log."


def store() -> Store:
    """The open store, or one error message on the page."""
    try:
        return _store(db_url())
    except Exception as e:
        fail(explain(e))


@contextmanager
def guarded() -> Iterator[None]:
    """Turn any error of a page body into one message (never a Streamlit exception box)."""
    try:
        yield
    except SlotuneError as e:
        if isinstance(e, StoreError):
            _store.clear()  # reconnect on the next run (the database may be back)
        fail(explain(e))
    except Exception as e:  # st.stop / st.rerun are BaseExceptions and pass through
        fail(explain(e))


def query_choice(key: str, options: list[str], default: str) -> str:
    """A filter kept in the URL (``?key=value``) so a view can be shared as a link."""
    value = st.query_params.get(key, default)
    return value if value in options else default


def set_query(key: str, value: str | None) -> None:
    if value is None:
        st.query_params.pop(key, None)
    else:
        st.query_params[key] = value


def when(ts: float | None) -> str:
    """An epoch time as UTC text."""
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def strip_source(message: str, source: str) -> str:
    """An error of a parser fed by a form, without the parser's ``source:line:`` prefix."""
    return re.sub(rf"^{re.escape(source)}(:\d+)?: ", "", message)


def utc_times(ts: Sequence[float]) -> list[dt.datetime]:
    """Epoch times as UTC datetimes, for a chart's time axis (see :func:`time_axis`)."""
    return [dt.datetime.fromtimestamp(t, dt.UTC) for t in ts]


def time_axis(fig: go.Figure) -> go.Figure:
    """One clock on every chart: 24 h, in UTC, named on the axis."""
    fig.update_xaxes(
        title_text="time (UTC)", tickformat="%H:%M<br>%b %d", hoverformat="%Y-%m-%d %H:%M:%S UTC"
    )
    return fig
