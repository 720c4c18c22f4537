"""Credentials out of URLs before they are printed, logged, written as JSON or stored.

A URL may carry a secret in its userinfo (``http://user:PW@host``, or a token as the whole
userinfo of a web URL: ``https://TOKEN@host``), in its query (``?password=…``, ``?token=…``,
``?api_key=…``, a storage signature ``?sig=…``), in path parameters (``;password=…``) or in its
fragment (``#access_token=…``, as OAuth's implicit flow returns it). :func:`redact_url` masks
all of them and keeps the rest as it was written, so the URL still says where it points.

A database URL's user name without a password (``postgresql://u@h/db``) is a role, not a
credential, and stays.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit, urlunsplit

MASK = "***"

# Parameter names that carry a credential (libpq's password and sslpassword, OAuth tokens,
# API keys, signatures such as Azure SAS's sig).
_SECRET_PARAM = re.compile(
    r"pass|pwd|token|key|secret|auth|signature|credential|(?:^|[_.-])sig(?:$|[_.-])",
    re.IGNORECASE,
)
# Schemes where a lone userinfo is a token (git and API hosts take https://TOKEN@host).
_WEB_SCHEMES = frozenset({"http", "https", "ws", "wss"})
_PAIR = re.compile(r"(?P<name>[^=;&#?/]+)=(?P<value>[^;&#]*)")


def is_secret_param(name: str) -> bool:
    """Whether a query parameter's value is a credential."""
    return bool(_SECRET_PARAM.search(unquote_plus(name)))


def redact_url(url: str) -> str:
    """The URL with its userinfo secrets and credential parameters masked.

    Text that is not a URL comes back with the same masks applied where they can be found.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return _redact_unparsed(url)
    netloc = _redact_userinfo(parts.scheme, netloc)
    path = _mask_pairs(parts.path) if ";" in parts.path else parts.path
    query, fragment = _mask_pairs(parts.query), _mask_pairs(parts.fragment)
    redacted = (parts.scheme, netloc, path, query, fragment)
    if redacted[1:] == (parts.netloc, parts.path, parts.query, parts.fragment):
        return url
    return urlunsplit(redacted)


def _redact_userinfo(scheme: str, netloc: str) -> str:
    if "@" not in netloc:
        return netloc
    creds, _, host = netloc.rpartition("@")
    user, has_password, _ = creds.partition(":")
    if has_password:
        return f"{user}:{MASK}@{host}"
    if scheme.lower().split("+")[0] in _WEB_SCHEMES:
        return f"{MASK}@{host}"
    return netloc


def _mask_pairs(text: str) -> str:
    """``name=value`` pairs of a query, fragment or path parameters, credentials masked."""
    if "=" not in text:
        return text
    return _PAIR.sub(lambda m: f"{m['name']}={MASK}" if is_secret_param(m["name"]) else m[0], text)


def _redact_unparsed(text: str) -> str:
    head, sep, rest = text.partition("://")
    if sep and "@" in rest:
        netloc, slash, tail = rest.partition("/")
        if "@" in netloc:
            rest = _redact_userinfo(head, netloc) + slash + tail
    return _mask_pairs(head + sep + rest)
