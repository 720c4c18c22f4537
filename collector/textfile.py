"""Read and write the files users name on the command line, bounded, never blocking.

Every file option reads and writes through here, so none of them hangs on a FIFO (opening
one blocks until the other end comes), fills memory from ``/dev/zero`` or writes into a
device: only regular files are read or replaced, opened without blocking, and a text file
past :data:`MAX_TEXT_BYTES` is refused rather than read. Streaming readers (traces of
gigabytes) take :func:`open_regular` and bound what they hold themselves.

A file is written whole or not at all (:func:`open_output`: a scratch file beside it, renamed
over it once complete), so a failure leaves no half-written output. :func:`check_output`
refuses an output that can never be written before a long computation starts, and
:func:`output_dir` does the same for an output directory.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


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
            raise error(f"{path}: is {_kind(mode)}, not a file; give the {what} as a regular file")
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


def check_output(path: str | Path, what: str, error: type[ConfigError] = ConfigError) -> Path:
    """Where :func:`open_output` will write ``path``, refused now if it never could.

    Call it before the work whose result is written, so a bad ``--out`` fails at once.

    Returns:
        The file written: ``path`` with symbolic links resolved.

    Raises:
        ``error``: ``path`` is a directory, FIFO, device or socket, or its directory does
            not exist or cannot be written.
    """
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        pass
    except OSError as e:
        raise error(f"{path}: cannot write the {what} ({e.strerror}); check the path") from e
    else:
        if not stat.S_ISREG(mode):
            raise error(f"{path}: is {_kind(mode)}, not a file; give the {what} as a regular file")
    parent = target.parent
    if not parent.is_dir():
        raise error(f"{path}: cannot write the {what} ({parent} is not a directory)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise error(f"{path}: cannot write the {what} ({parent} is not writable)")
    return target


@contextmanager
def open_output(
    path: str | Path, what: str, error: type[ConfigError] = ConfigError
) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` into, which replaces ``path`` only when the block
    ends without an exception (nothing is left behind otherwise).

    Raises:
        ``error``: as :func:`check_output`, or the write fails (a full disk), naming
            ``path`` and ``what``.
    """
    target = check_output(path, what, error)
    try:
        fd, scratch = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as e:
        raise error(f"{path}: cannot write the {what} ({e.strerror}); check the path") from e
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.chmod(scratch, _mode_for(target))
        os.replace(scratch, target)
    except OSError as e:
        os.unlink(scratch)
        raise error(f"{path}: cannot write the {what} ({e.strerror}); nothing written") from e
    except BaseException:
        os.unlink(scratch)
        raise


def _mode_for(target: Path) -> int:
    """The file's own permissions when it exists, else readable by all (as ``open`` with the
    usual umask makes it), where the scratch file is private."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o644


def write_text(
    path: str | Path, text: str, what: str, error: type[ConfigError] = ConfigError
) -> None:
    """Write ``text`` as UTF-8 to ``path``, whole or not at all (see :func:`open_output`)."""
    with open_output(path, what, error) as f:
        f.write(text.encode("utf-8"))


def output_dir(path: str | Path, what: str, error: type[ConfigError] = ConfigError) -> Path:
    """A directory to write files into, made if missing, refused if files cannot be
    written there.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ``error``: ``path`` is not a directory, cannot be made, or is not writable.
    """
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # A probe, not os.access: /proc and read-only mounts pass the permission bits
        # and still refuse a new file.
        with tempfile.TemporaryFile(dir=directory):
            pass
    except FileExistsError as e:
        raise error(f"{path}: is not a directory; give the {what} as a directory") from e
    except OSError as e:
        raise error(f"{path}: cannot write the {what} there ({e.strerror})") from e
    return directory
