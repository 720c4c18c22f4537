"""Per-request records: what a load generator or the simulator observed for one request."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

# Upper bounds (seconds) of the histogram of gaps between chunks past a request's timed ones;
# the last count is for gaps above the last bound.
UNTIMED_GAP_BOUNDS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def untimed_gap_bucket(gap_s: float) -> int:
    """The index in :data:`UNTIMED_GAP_BOUNDS_S` counts a gap goes to."""
    return bisect.bisect_left(UNTIMED_GAP_BOUNDS_S, gap_s)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as seen by the client (or by the simulator, which sees it exactly).

    Times are seconds on one clock (any origin). ``chunk_times_s`` / ``chunk_tokens`` list
    every streamed chunk that arrived, including chunks carrying zero tokens, up to the load
    generator's per-request bound (a server that streams without end must not exhaust the
    client); chunks past it are only counted (``num_untimed_chunks``, their tokens in
    ``num_untimed_tokens``, the gaps before them in ``untimed_gap_counts``). A
    non-streaming response is a single chunk at ``end_s``.

    Attributes:
        request_id: unique id within a run.
        send_s: when the request was sent (or arrived, in the simulator).
        first_token_s: arrival of the first chunk carrying at least one token.
        end_s: arrival of the last byte; None if the request never finished.
        chunk_times_s: arrival time of every chunk.
        chunk_tokens: tokens carried by each chunk (same length as ``chunk_times_s``).
        input_tokens: prompt tokens (server ``usage`` when known, else the client count).
        output_tokens: completion tokens from the server's ``usage`` (None if not reported).
        error: error kind (``http_4xx``, ``http_5xx``, ``timeout``, ``disconnect``,
            ``connect``, ``protocol``) or None on success.
        error_detail: human-readable detail for the error.
        http_status: HTTP status code, if a response arrived.
        scheduled_s: when the arrival schedule wanted the request sent.
        num_untimed_chunks: chunks that arrived past the bound on timed chunks.
        num_untimed_tokens: the tokens they carried (client count).
        untimed_gap_counts: their gaps to the chunk before, counted per bucket of
            :data:`UNTIMED_GAP_BOUNDS_S` (empty when every chunk is timed).
    """

    request_id: str
    send_s: float
    first_token_s: float | None
    end_s: float | None
    chunk_times_s: tuple[float, ...] = ()
    chunk_tokens: tuple[int, ...] = ()
    input_tokens: int = 0
    output_tokens: int | None = None
    error: str | None = None
    error_detail: str | None = None
    http_status: int | None = None
    scheduled_s: float | None = None
    num_untimed_chunks: int = 0
    num_untimed_tokens: int = 0
    untimed_gap_counts: tuple[int, ...] = ()

    @property
    def is_ok(self) -> bool:
        return self.error is None and self.end_s is not None

    @property
    def num_output_tokens(self) -> int:
        """Server-reported output tokens, else the client's count of streamed tokens."""
        if self.output_tokens is not None:
            return self.output_tokens
        return sum(self.chunk_tokens) + self.num_untimed_tokens

    @property
    def ttft_s(self) -> float | None:
        if self.first_token_s is None:
            return None
        return self.first_token_s - self.send_s

    @property
    def e2e_s(self) -> float | None:
        if self.end_s is None:
            return None
        return self.end_s - self.send_s

    @property
    def tpot_s(self) -> float | None:
        """(e2e - ttft) / (output_tokens - 1); None for single-token outputs."""
        n = self.num_output_tokens
        if not self.is_ok or self.first_token_s is None or self.end_s is None or n < 2:
            return None
        return (self.end_s - self.first_token_s) / (n - 1)

    def itl_gaps_s(self) -> list[tuple[float, int]]:
        """(gap / tokens, tokens) for each token-carrying chunk after the first.

        The gap between consecutive token-carrying chunks is divided by the tokens of the
        later chunk and weighted by them, so pooled percentiles are per token, as vLLM's
        server-side inter-token latency is.
        """
        out: list[tuple[float, int]] = []
        prev: float | None = None
        for t, n in zip(self.chunk_times_s, self.chunk_tokens, strict=False):
            if n <= 0:
                continue
            if prev is not None:
                out.append(((t - prev) / n, n))
            prev = t
        return out
