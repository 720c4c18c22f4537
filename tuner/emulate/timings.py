"""``--timings-file``: one JSON line per finished request, the engine's own view of it.

Each line is ``{"request_id", "arrival_s", "first_token_s", "token_times_s", "end_s",
"prompt_tokens", "completion_tokens", "finish_reason"}`` with ``time.time()`` seconds;
``request_id`` is the client's ``X-Request-Id`` header when it sent one, else the response
id. Load generators compare their client-side TTFT/ITL against these lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from slotune.collector.errors import ConfigError
from slotune.tuner.emulate.events import FinishedRequest, StepReport


class TimingsFile:
    """Appends finished requests to a JSON-lines file (flushed per line)."""

    def __init__(self, path: Path) -> None:
        try:
            self._file: TextIO = path.open("a", encoding="utf-8")
        except OSError as e:
            raise ConfigError(
                f"--timings-file {path}: cannot open for appending ({e}); pass a writable path"
            ) from e

    def on_step(self, report: StepReport) -> None:
        """Steps are not written; only finished requests are."""

    def on_finished(self, request: FinishedRequest) -> None:
        self._file.write(json.dumps(request.to_timing_line(), separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
