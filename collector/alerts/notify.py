"""Notifiers: Alertmanager v2, Slack-compatible webhooks and the log.

A notifier sends :class:`Notification` batches and raises :class:`NotifyError` when the
receiver did not accept one; :class:`~collector.alerts.dispatch.Dispatcher` decides what is
sent when. Delivery retries with exponential backoff. URLs are shown with their secret parts
(path tokens, query, user info) replaced by ``***``: Slack and most webhook URLs carry their
token in the path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import SplitResult, urlsplit

from slotune.collector.alerts.promrules import ALERT_NAME
from slotune.collector.alerts.slo_rules import SLO_KIND
from slotune.collector.errors import ConfigError, SlotuneError
from slotune.collector.store import AlertState

log = logging.getLogger(__name__)


class NotifyError(SlotuneError):
    """A receiver did not accept a notification after every retry."""


def alert_name(rule: str, kind: str) -> str:
    """The ``alertname`` of a rule's alerts: an SLO's burn-rate alerts carry the name of the
    exported Prometheus rules (told apart by their ``slo`` and ``severity`` labels), so
    Alertmanager sees one alert whichever of the two sent it; a threshold rule's is its name."""
    return ALERT_NAME if kind == SLO_KIND else rule


@dataclass(frozen=True, slots=True)
class Notification:
    """One alert instance as sent to a receiver.

    Attributes:
        alertname: see :func:`alert_name`.
        rule: the slotune rule.
        state: firing or resolved.
        labels: the instance's labels (``slo`` or ``target``, ``severity``, rule labels).
        message: what it means, for people.
        value: the value that made it change, when known.
        starts_at_ts: when it started firing (resolved: when it resolved).
        ends_at_ts: firing: until when it holds without a re-send (Alertmanager resolves it
            then); resolved: when it resolved.
    """

    alertname: str
    rule: str
    state: AlertState
    labels: Mapping[str, str]
    message: str
    value: float | None
    starts_at_ts: float
    ends_at_ts: float

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")


def redact(url: str) -> str:
    """A URL safe to print: scheme, host and port only, the rest as ``***``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    rest = "/***" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{rest}"


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


class Notifier(ABC):
    """Delivers notifications somewhere; ``send`` raises :class:`NotifyError`.

    ``key`` names the receiver in the store's delivery outbox: stable for one URL, and
    never the URL itself (it may carry a token). ``resends_firing``: the receiver forgets
    a firing alert that is not re-sent (Alertmanager), so it gets every firing alert each
    resend interval, acknowledged or not; the others get a firing alert once, then again
    after the re-notify interval unless acknowledged.
    """

    name: str
    resends_firing: ClassVar[bool] = False

    @property
    @abstractmethod
    def key(self) -> str: ...

    @abstractmethod
    def send(self, notifications: Sequence[Notification]) -> None: ...


class LogNotifier(Notifier):
    name = "log"

    @property
    def key(self) -> str:
        return "log"

    def send(self, notifications: Sequence[Notification]) -> None:
        for n in notifications:
            log.warning("[%s] %s %s: %s", n.severity, n.state.value.upper(), n.rule, n.message)


@dataclass
class WebhookNotifier(Notifier):
    """POSTs JSON to a URL with retries (``attempts`` tries, backoff doubling from
    ``backoff_s``); an answer other than 2xx or no answer within ``timeout_s`` is a failure."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 5.0
    attempts: int = 3
    backoff_s: float = 0.5
    sleep: Callable[[float], None] = time.sleep
    name: str = "webhook"

    @property
    def key(self) -> str:
        return f"{self.name}:{hashlib.sha256(self.url.encode()).hexdigest()[:16]}"

    def payload(self, notifications: Sequence[Notification]) -> Any:
        raise NotImplementedError

    def send(self, notifications: Sequence[Notification]) -> None:
        body = json.dumps(self.payload(notifications)).encode()
        problem = ""
        for attempt in range(self.attempts):
            request = urllib.request.Request(
                self.url,
                data=body,
                method="POST",
                headers={"Content-Type": "application/json", **self.headers},
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    response.read()
                return
            except urllib.error.HTTPError as e:
                e.close()
                problem = f"answered HTTP {e.code}"
            except (urllib.error.URLError, TimeoutError, OSError) as e:
                reason = getattr(e, "reason", e)
                problem = "timed out" if isinstance(reason, TimeoutError) else "unreachable"
            if attempt + 1 < self.attempts:
                self.sleep(self.backoff_s * 2**attempt)
        raise NotifyError(
            f"{self.name} receiver {redact(self.url)} {problem} after {self.attempts} attempts; "
            "check the URL and that the receiver is up"
        )


@dataclass
class AlertmanagerNotifier(WebhookNotifier):
    """Alertmanager's ``POST /api/v2/alerts`` (give the Alertmanager base URL), the way
    Prometheus sends: every alert with ``endsAt``, a firing one's some way ahead."""

    name: str = "alertmanager"
    resends_firing: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not self.url.rstrip("/").endswith("/api/v2/alerts"):
            self.url = self.url.rstrip("/") + "/api/v2/alerts"

    def payload(self, notifications: Sequence[Notification]) -> list[dict[str, Any]]:
        return [
            {
                "labels": {"alertname": n.alertname, **n.labels},
                "annotations": {
                    "summary": n.message,
                    "rule": n.rule,
                    "value": f"{n.value:g}" if n.value is not None else "",
                },
                "startsAt": _rfc3339(n.starts_at_ts),
                "endsAt": _rfc3339(n.ends_at_ts),
                "generatorURL": "slotune://alerts/" + n.rule,
            }
            for n in notifications
        ]


@dataclass
class SlackNotifier(WebhookNotifier):
    """A Slack-compatible incoming webhook (``{"text": ...}``)."""

    name: str = "slack"

    def payload(self, notifications: Sequence[Notification]) -> dict[str, str]:
        lines = []
        for n in notifications:
            firing = n.state is AlertState.FIRING
            icon = ":rotating_light:" if firing else ":white_check_mark:"
            lines.append(f"{icon} *{n.state.value.upper()}* [{n.severity}] {n.rule}: {n.message}")
        return {"text": "\n".join(lines)}


def _http_url(kind: str, url: str) -> SplitResult:
    """The parts of an http(s) URL with a host and a valid port.

    Raises:
        ConfigError: naming what is wrong (never the URL, which may carry a token).
    """
    example = (
        "e.g. alertmanager=http://127.0.0.1:9093"
        if kind == "alertmanager"
        else f"e.g. {kind}=https://hooks.slack.com/services/…"
    )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ConfigError(f"--notify {kind}=…: the URL is not valid ({e}); give {example}") from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--notify {kind}=…: give an http(s) URL with a host, {example}")
    if port == 0:
        raise ConfigError(f"--notify {kind}=…: port 0 cannot be connected to; give {example}")
    return parts


def make_notifier(spec: str) -> Notifier:
    """``log``, ``alertmanager=URL`` or ``slack=URL`` (also ``webhook=URL``: Slack format).

    Raises:
        ConfigError: an unknown kind or a URL that is not a valid http(s) URL.
    """
    if spec == "log":
        return LogNotifier()
    kind, _, url = spec.partition("=")
    if kind not in ("alertmanager", "slack", "webhook"):
        raise ConfigError(f"--notify {kind!r} is unknown; use log, alertmanager=URL or slack=URL")
    _http_url(kind, url)
    if kind == "alertmanager":
        return AlertmanagerNotifier(url)
    return SlackNotifier(url)


def test_alerts(notifier: Notifier) -> list[str]:
    """Send a test alert, firing then resolved; returns the failure (empty: delivered). A
    receiver that refuses the firing alert is not tried again with its resolve."""
    now = time.time()
    firing = Notification(
        alertname="slotune-test",
        rule="slotune-test",
        state=AlertState.FIRING,
        labels={"severity": "info"},
        message="a test notification from slotune alerts test-notify",
        value=None,
        starts_at_ts=now,
        ends_at_ts=now + 300.0,
    )
    resolved = replace(firing, state=AlertState.RESOLVED, ends_at_ts=now)
    try:
        notifier.send([firing])
        notifier.send([resolved])
    except NotifyError as e:
        return [str(e)]
    return []
