"""Reading an emulated engine's lag back from its Prometheus endpoint, wherever its face
serves it."""

from __future__ import annotations

import httpx

from slotune.tuner.emulate.faces import FACES
from slotune.tuner.emulate.lag import LagReport, read_lag


def fetch_lag(base_url: str, kind: str = "vllm", timeout_s: float = 30.0) -> LagReport | None:
    """Read an emulated engine's lag from its Prometheus endpoint.

    Args:
        base_url: the engine's address.
        kind: the engine (an ``Engine`` value), which says where its Prometheus text is.
        timeout_s: how long to wait for the answer.

    Returns:
        The report; None for an engine that does not serve it (a real one, or one the
        emulator does not emulate), or that cannot be read.
    """
    face = FACES.get(kind)
    if face is None:
        return None
    path = face.prometheus_path
    try:
        response = httpx.get(base_url.rstrip("/") + path, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        return read_lag(response.text)
    except ValueError:  # not Prometheus text
        return None
