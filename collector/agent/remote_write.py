"""Prometheus remote-write 1.0: the agent's scrapes sent to a receiver instead of the store.

For what no Prometheus scrapes (NVML on a GPU node, DCGM without an exporter): ``slotune agent
--remote-write URL`` posts each batch as a snappy-compressed protobuf ``WriteRequest`` (the
1.0 wire format, which Prometheus' ``--web.enable-remote-write-receiver``, Mimir, Thanos
Receive and VictoriaMetrics accept). The message is declared at run time with ``protobuf``'s
descriptor API and compressed with ``cramjam``'s snappy block format: both maintained
libraries, no generated code, no OpenTelemetry pipeline between the scrape and the wire (whose
exporter would re-aggregate and re-stamp the samples).

Series: every raw engine and exporter series as the endpoint named it, with ``job="slotune"``
and ``instance=<target>``, so the metrics contract reads them back as target
``slotune/<target>``; canonical series only for sources that have no raw ones (NVML).

Delivery: a failed post (unreachable, 5xx, 429) is retried with exponential backoff, then the
batch goes to the agent's bounded on-disk spool, one batch a segment, and is replayed in order
before the next batch, so an outage loses nothing and replays nothing twice. A batch the
receiver refuses (other 4xx) is quarantined with the reason. Header values are never logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

import cramjam
import httpx
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import TargetSpec
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.errors import ConfigError, SlotuneError
from slotune.collector.redact import redact_url
from slotune.collector.store import SampleIn
from slotune.collector.vocabulary import SourceKind

log = logging.getLogger(__name__)

JOB = "slotune"
RETRY_DELAYS_S = (0.5, 1.0, 2.0)
TIMEOUT_S = 30.0
_CANONICAL_ONLY = frozenset({SourceKind.NVML.value})
_CANONICAL_SERIES = frozenset(
    f"{name}{suffix}" for name in CANONICAL for suffix in ("", "_bucket", "_sum", "_count")
)


class ReceiverDown(SlotuneError):
    """The receiver could not take the batch now (retry later)."""


class ReceiverRefused(SlotuneError):
    """The receiver refused the batch itself (retrying cannot help)."""


@cache
def _write_request_class() -> Any:
    """``prometheus.WriteRequest`` of remote-write 1.0 (prompb/remote.proto, types.proto)."""
    f = descriptor_pb2.FileDescriptorProto(
        name="slotune_remote_write.proto", package="prometheus", syntax="proto3"
    )
    scalar = descriptor_pb2.FieldDescriptorProto
    shapes: dict[str, list[tuple[str, int, int, str]]] = {
        "Label": [("name", 1, scalar.TYPE_STRING, ""), ("value", 2, scalar.TYPE_STRING, "")],
        "Sample": [("value", 1, scalar.TYPE_DOUBLE, ""), ("timestamp", 2, scalar.TYPE_INT64, "")],
        "TimeSeries": [
            ("labels", 1, scalar.TYPE_MESSAGE, ".prometheus.Label"),
            ("samples", 2, scalar.TYPE_MESSAGE, ".prometheus.Sample"),
        ],
        "WriteRequest": [("timeseries", 1, scalar.TYPE_MESSAGE, ".prometheus.TimeSeries")],
    }
    for name, fields in shapes.items():
        message = f.message_type.add(name=name)
        for field_name, number, kind, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind)
            field.label = scalar.LABEL_REPEATED if type_name else scalar.LABEL_OPTIONAL
            if type_name:
                field.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("prometheus.WriteRequest"))


def encode(samples: Sequence[SampleIn]) -> bytes:
    """One snappy-compressed ``WriteRequest`` of the samples (each series' samples in time
    order, as receivers require)."""
    series: dict[tuple[tuple[str, str], ...], list[SampleIn]] = {}
    for s in samples:
        named = {**s.labels, "__name__": s.name, "job": JOB, "instance": s.target}
        series.setdefault(tuple(sorted(named.items())), []).append(s)
    request = _write_request_class()()
    for labels, points in series.items():
        ts = request.timeseries.add()
        for k, v in labels:
            ts.labels.add(name=k, value=v)
        for p in sorted(points, key=lambda p: p.ts):
            ts.samples.add(value=p.value, timestamp=round(p.ts * 1000))
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def parse_headers(pairs: Sequence[str]) -> dict[str, str]:
    """``K=V`` strings as headers.

    Raises:
        ConfigError: a pair without ``=`` or with an empty name (the value is not shown).
    """
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(
                f"--remote-write-header {name.strip()[:40]!r}...: give NAME=VALUE, e.g. "
                "Authorization=Bearer TOKEN or X-Scope-OrgID=tenant"
            )
        out[name.strip()] = value
    return out


class RemoteWriter(StoreWriter):
    """Sends sample batches to a remote-write receiver, spooling while it is away (the
    queueing of :class:`StoreWriter`, another destination)."""

    def __init__(
        self,
        url: str,
        spool: Spool,
        headers: Mapping[str, str] | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(None, spool)
        self.url = url
        self.shown_url = redact_url(url)
        self.sleep = sleep
        self._http = httpx.Client(
            headers={
                **dict(headers or {}),
                "Content-Encoding": "snappy",
                "Content-Type": "application/x-protobuf",
                "X-Prometheus-Remote-Write-Version": "0.1.0",
                "User-Agent": "slotune-agent",
            },
            timeout=TIMEOUT_S,
            transport=transport,
        )
        self._kinds: dict[str, str] = {}

    def register(self, target: TargetSpec) -> None:
        self._kinds[target.name] = target.kind.value

    def write_now(self, batch: Sequence[SampleIn]) -> None:
        """Send one batch (blocking): the spool first, the batch after; spool it on failure."""
        batch = [s for s in batch if self._is_sent(s)]
        try:
            if not self.spool.is_empty():
                replayed = self.spool.replay(self._post)
                self._replayed += replayed
                log.info(
                    "receiver %s is back: replayed %d spooled batches", self.shown_url, replayed
                )
            self._post(batch)
            self._is_up = True
        except ReceiverDown as e:
            self.hold(batch, str(e))
        except Exception as e:  # a bug or a disk error must not end the writer task
            log.exception("unexpected error sending %d samples", len(batch))
            self.spool.quarantine(batch, f"unexpected error: {type(e).__name__}: {e}")

    def _is_sent(self, s: SampleIn) -> bool:
        if self._kinds.get(s.target) in _CANONICAL_ONLY:
            return True
        return s.name not in _CANONICAL_SERIES

    def _post(self, batch: Sequence[SampleIn]) -> None:
        """Post one batch, retrying with backoff; a refused batch is quarantined.

        Raises:
            ReceiverDown: still failing after the retries.
        """
        if not batch:
            return
        body = encode(batch)
        why = ""
        for delay in (*RETRY_DELAYS_S, None):
            try:
                reply = self._http.post(self.url, content=body)
            except httpx.HTTPError as e:
                why = f"unreachable ({type(e).__name__})"
            else:
                if reply.status_code < 300:
                    self._written += len(batch)
                    return
                if 400 <= reply.status_code < 500 and reply.status_code != 429:
                    reason = f"HTTP {reply.status_code}: {reply.text[:300]}"
                    self.spool.quarantine(batch, f"remote-write {self.shown_url} refused: {reason}")
                    return
                why = f"HTTP {reply.status_code}"
            if delay is not None:
                self.sleep(delay)
        raise ReceiverDown(f"remote-write receiver {self.shown_url} is {why}")

    def close(self) -> None:
        self._http.close()
