"""Per-request records: what a load generator or the simulator observed for one request."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as seen by the client (or by the simulator, which sees it exactly).

    Times are seconds on one clock (any origin). ``chunk_times_s`` / ``chunk_tokens`` list
    every streamed chunk that arrived, including chunks carrying zero tokens; a
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

    @property
    def is_ok(self) -> bool:
        return self.error is None and self.end_s is not None

    @property
    def num_output_tokens(self) -> int:
        """Server-reported output tokens, else the client's count of streamed tokens."""
        if self.output_tokens is not None:
            return self.output_tokens
        return sum(self.chunk_tokens)

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
