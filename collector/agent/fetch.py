"""HTTP access for the sources: one aiohttp session, a timeout per request, clear errors."""

from __future__ import annotations

import json
from types import TracebackType

import aiohttp

from slotune.collector.agent.base import Response
from slotune.collector.agent.budget import DEFAULT_BODY_SIZE_LIMIT, current_budget
from slotune.collector.errors import SourceError
from slotune.collector.redact import redact_url

_MAX_MODEL_CHARS = 200
_MIN_TIMEOUT_S = 0.001
_ACCEPT = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=1"


class HttpFetcher:
    """An async context manager that GETs URLs with a per-request timeout.

    Inside a scrape (:func:`~collector.agent.budget.scrape_budget`) a request gets what is
    left of the scrape's timeout and the target's body size limit instead.

    Args:
        timeout_s: limit for one request, connection included, outside a scrape.
    """

    def __init__(self, timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpFetcher:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            headers={"Accept": _ACCEPT},
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get(self, url: str) -> Response:
        """GET ``url``; raise SourceError unless it answers 200 in time."""
        if self._session is None:
            raise RuntimeError("HttpFetcher used outside 'async with'")
        budget = current_budget()
        timeout_s = budget.timeout_s if budget else self.timeout_s
        max_bytes = budget.max_body_bytes if budget else DEFAULT_BODY_SIZE_LIMIT
        # aiohttp reads a timeout of 0 as none at all: a spent budget still times out at once
        total_s = max(budget.remaining_s(), _MIN_TIMEOUT_S) if budget else self.timeout_s
        try:
            async with self._session.get(url, timeout=aiohttp.ClientTimeout(total=total_s)) as resp:
                if resp.status != 200:
                    raise SourceError(
                        f"{redact_url(url)} answered HTTP {resp.status}; check the path "
                        "(engines serve /metrics) and that metrics are enabled"
                    )
                body = await _read_capped(resp.content, url, max_bytes)
                text = body.decode(resp.charset or "utf-8", errors="replace")
                return Response(text, resp.headers.get("Content-Type", ""))
        except TimeoutError:
            raise SourceError(
                f"{redact_url(url)} did not answer within {timeout_s:g} s; check the "
                "server's load or raise its scrape_timeout"
            ) from None
        except aiohttp.ClientError as e:
            raise SourceError(
                f"{redact_url(url)} is unreachable ({type(e).__name__}: {e}); check that "
                "the server runs and the host and port are right"
            ) from None

    async def discover_model(self, base_url: str) -> str | None:
        """The first model id an OpenAI-compatible server lists at ``/v1/models``, if any."""
        try:
            resp = await self.get(base_url.rstrip("/") + "/v1/models")
        except SourceError:
            return None
        try:
            data = json.loads(resp.text).get("data") or []
            model = data[0].get("id") if data and isinstance(data[0], dict) else None
        except (ValueError, AttributeError, TypeError, LookupError, RecursionError):
            return None
        # the store's model column holds 200 characters
        return str(model)[:_MAX_MODEL_CHARS] if model else None


async def _read_capped(content: aiohttp.StreamReader, url: str, max_bytes: int) -> bytes:
    """The body, refused past ``max_bytes`` (an endless or runaway exposition)."""
    body = bytearray()
    while chunk := await content.read(max_bytes + 1 - len(body)):
        body += chunk
        if len(body) > max_bytes:
            raise SourceError(
                f"{redact_url(url)} answered more than its body_size_limit of "
                f"{format_bytes(max_bytes)}; an exposition is kilobytes to a few megabytes: "
                "check the path, or raise the target's body_size_limit"
            )
    return bytes(body)


def format_bytes(num_bytes: int) -> str:
    """``64 MiB``, ``4 KiB`` or ``100 B``: a size as a user would write it."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if num_bytes >= 1 << shift:
            return f"{num_bytes / (1 << shift):g} {unit}"
    return f"{num_bytes} B"
