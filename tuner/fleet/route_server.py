"""Start, run and stop ``slotune route``: bind 127.0.0.1 by default, stop cleanly on a signal."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from slotune.collector.errors import ConfigError
from slotune.tuner.fleet.proxy import RouteProxy
from slotune.tuner.fleet.route_config import RouteConfig, load_route_config

log = logging.getLogger("slotune.route")
_SHUTDOWN_GRACE_S = 1.0
_BACKLOG = 2048
_MAX_REASON_CHARS = 200


class _MalformedRequestsInOneLine(logging.Filter):
    """aiohttp's server logs a request it cannot parse at ERROR with a traceback; that is
    the client's mistake, not the proxy's: one WARNING line with the reason instead. Other
    errors (bugs) keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, RequestPayloadError) and record.msg == "Unhandled exception":
            return False  # the body the handler refused (one line there), read again at the end
        if isinstance(exc, HttpProcessingError) and 400 <= exc.code < 500:
            reason = exc.message
        elif isinstance(exc, RequestPayloadError):
            reason = str(exc)
        else:
            return True
        reason = " ".join(reason.split())[:_MAX_REASON_CHARS]  # aiohttp's spans lines
        record.msg, record.args = f"{record.getMessage()}: {exc.__class__.__name__}: {reason}", ()
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


async def run_proxy(
    proxy: RouteProxy,
    host: str,
    port: int,
    stop: asyncio.Event,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve ``proxy`` on ``host:port`` until ``stop`` is set; ``on_ready`` gets the bound port.

    Raises:
        ConfigError: the address cannot be bound.
    """
    runner = web.AppRunner(
        proxy.make_app(),
        handler_cancellation=True,  # a client that leaves cancels its upstream request
        access_log=None,
        # aiohttp closes a connection that has not sent a whole request head this long after
        # connecting or after its last answer: the header-read timeout (slow senders dropped)
        keepalive_timeout=proxy.config.timeouts.client_s,
        shutdown_timeout=_SHUTDOWN_GRACE_S,
    )
    one_line = _MalformedRequestsInOneLine()
    server_log = logging.getLogger("aiohttp.server")
    server_log.addFilter(one_line)
    await runner.setup()
    try:
        # as deep as an engine's (uvicorn's 2048): a client burst queues, it is not dropped
        site = web.TCPSite(runner, host, port, backlog=_BACKLOG)
        try:
            await site.start()
        except OverflowError:
            raise ConfigError(f"--port {port} is not a port; pass one from 0 to 65535") from None
        except OSError as e:
            raise ConfigError(
                f"cannot bind {host}:{port} ({e.strerror}); pass a free --port"
            ) from e
        bound = runner.addresses[0][1]
        log.info(
            "Starting slotune route on http://%s:%d: %d backends, policy %s",
            host,
            bound,
            len(proxy.backends),
            proxy.policy.name,
        )
        if on_ready is not None:
            on_ready(bound)
        await stop.wait()
        log.info("Shutting down slotune route")
    finally:
        await runner.cleanup()
        server_log.removeFilter(one_line)


def serve(config_path: str | Path, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Run ``slotune route --config FILE`` until SIGINT or SIGTERM.

    Raises:
        ConfigError: a bad fleet file (file:line: field), or a port that cannot be bound.
    """
    config: RouteConfig = load_route_config(config_path)
    # log lines like slotune emulate's: INFO 12-01 12:00:00 [slotune.route] ...
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stdout,
        format="%(levelname)s %(asctime)s [%(name)s] %(message)s",
        datefmt="%m-%d %H:%M:%S",
    )
    proxy = RouteProxy(config)
    # the ~10^5 objects of the imports live as long as the process: out of every collection.
    # Under load a full collection over them paused the loop for long enough to time out
    # every connect in progress at once.
    gc.freeze()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_proxy(proxy, host, port, stop)

    asyncio.run(main())
