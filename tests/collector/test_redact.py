"""Every place a URL carries a credential is masked; the rest of the URL is kept as written."""

from __future__ import annotations

import pytest

from slotune.collector.redact import redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://SECRET@github.com/org/repo", "https://***@github.com/org/repo"),
        ("wss://tok@h:1/ws", "wss://***@h:1/ws"),
        ("http://h:8000/v1;password=SECRET;x=1", "http://h:8000/v1;password=***;x=1"),
        ("Server=h;Password=SECRET", "Server=h;Password=***"),
        (
            "https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=SECRET%2Fx&se=2",
            "https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=***&se=2",
        ),
        ("http://h/cb#token=SECRET", "http://h/cb#token=***"),
        ("http://h/cb#access_token=SECRET&state=s", "http://h/cb#access_token=***&state=s"),
        ("http://h/m?pass%77ord=SECRET", "http://h/m?pass%77ord=***"),
        ("http://tok@[::1/x", "http://***@[::1/x"),  # not parseable: masked all the same
        # kept: a database role, and names that only contain the letters of a secret's
        ("postgresql+psycopg://slotune@h:5432/db", "postgresql+psycopg://slotune@h:5432/db"),
        ("http://h/design?signal=1&x=%20", "http://h/design?signal=1&x=%20"),
    ],
)
def test_a_credential_anywhere_in_a_url_is_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "SECRET" not in redact_url(url)
