"""Credentials out of URLs before they are printed, logged, written as JSON or stored.

A URL may carry a secret in its userinfo (``http://user:PW@host``) or in its query
(``?password=…``, ``?token=…``, ``?api_key=…``). :func:`redact_url` masks both and keeps the
rest, so the URL still says where it points.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

MASK = "***"

# Query parameter names that carry a credential (libpq's password and sslpassword, OAuth
# tokens, API keys, signatures).
_SECRET_PARAM = re.compile(r"pass|pwd|token|key|secret|auth|signature|credential", re.IGNORECASE)


def is_secret_param(name: str) -> bool:
    """Whether a query parameter's value is a credential."""
    return bool(_SECRET_PARAM.search(name))


def redact_url(url: str) -> str:
    """The URL with its userinfo password and credential query values masked.

    Text that is not a URL comes back unchanged, except a ``user:secret@`` part, which is
    masked all the same.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return _redact_unparsed(url)
    if "@" in netloc:
        creds, _, host = netloc.rpartition("@")
        user, has_password, _ = creds.partition(":")
        netloc = f"{user}:{MASK}@{host}" if has_password else netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_param(k) for k, _ in pairs):
            masked = [(k, MASK if is_secret_param(k) else v) for k, v in pairs]
            query = urlencode(masked, safe="*", quote_via=quote)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_unparsed(text: str) -> str:
    head, sep, rest = text.partition("://")
    if not sep or "@" not in rest:
        return text
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{head}://{user}:{MASK}@{host}" if ":" in creds else text
