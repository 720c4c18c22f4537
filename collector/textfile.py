"""Open and read the files users name on the command line, bounded, never blocking.

Every file option reads through here, so none of them hangs on a FIFO (opening one blocks
until a writer comes, reading it until the writer leaves) or fills memory from ``/dev/zero``:
only regular files are read, opened without blocking, and a text file past
:data:`MAX_TEXT_BYTES` is refused rather than read. Streaming readers (traces of gigabytes)
take :func:`open_regular` and bound what they hold themselves.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from slotune.collector.errors import ConfigError

MAX_TEXT_BYTES = 64 << 20
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_regular(path: str | Path, what: str, error: type[ConfigError] = ConfigError) -> BinaryIO:
    """A regular file opened for binary reading; the caller closes it.

    Raises:
        ``error``: the file cannot be opened, or it is not a regular file (naming what it
            is, and ``what`` it should be).
    """
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"{path}: cannot read the {what} ({e.strerror}); check the path") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise error(f"{path}: is {kind}, not a file; give the {what} as a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_text(
    path: str | Path,
    what: str,
    error: type[ConfigError] = ConfigError,
    *,
    max_bytes: int = MAX_TEXT_BYTES,
) -> str:
    """A regular UTF-8 text file's content, at most ``max_bytes`` long.

    Raises:
        ``error``: the file cannot be read, is not a regular file, is longer than
            ``max_bytes`` or is not UTF-8, naming it and ``what`` it should be.
    """
    with open_regular(path, what, error) as f:
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise error(f"{path}: cannot read the {what} ({e.strerror})") from e
    if len(data) > max_bytes:
        raise error(
            f"{path}: the {what} is larger than {max_bytes >> 20} MiB; no {what} is this "
            "large, so this is the wrong file"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: the {what} is not UTF-8 text ({e.reason} at byte {e.start})") from e
