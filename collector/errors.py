"""Errors raised by slotune.

Every error carries a message that names the problem and the fix; only the CLI turns
an error into an exit code.

    SlotuneError
    ├── ConfigError          bad user input: flags, YAML files, SLO specs, trace files
    │   └── SLOSpecError     an SLO shorthand or SLO file that does not parse
    ├── StoreError           the database cannot be used
    │   ├── StoreUnavailable wrong or unreachable URL, locked SQLite file: retry later
    │   ├── StoreRejected    the database refused the data itself: retrying cannot help
    │   └── SchemaMismatch   schema older or newer than this slotune knows
    ├── EngineConfigError    an engine configuration the engine itself would refuse
    ├── SourceError          a metrics source returned something unusable
    └── MetricsUnavailable   the metrics query API (``--metrics URL``) cannot be read
"""

from __future__ import annotations


class SlotuneError(Exception):
    """Root of every error slotune raises on purpose."""


class ConfigError(SlotuneError):
    """Bad user input (flags, YAML, trace files)."""


class SLOSpecError(ConfigError):
    """An SLO shorthand or SLO file that does not parse."""


class StoreError(SlotuneError):
    """The database cannot be used."""


class StoreUnavailable(StoreError):
    """Wrong or unreachable database URL, or a locked SQLite file."""


class StoreRejected(StoreError):
    """The database refused the data itself (too long, out of range, a constraint)."""


class SchemaMismatch(StoreError):
    """The database schema is older or newer than this version of slotune knows."""


class EngineConfigError(SlotuneError):
    """An engine configuration the engine itself would refuse at start."""


class SourceError(SlotuneError):
    """A metrics source returned something that cannot be parsed."""


class MetricsUnavailable(SlotuneError):
    """The metrics query API (``--metrics URL``) cannot be read: unreachable, an error or
    malformed reply, a reply too large, or a query timeout. A rule that needs it is no_data."""
