"""The one writer of output files: whole or nothing, and never into a FIFO or a device."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slotune.collector.errors import ConfigError
from slotune.collector.textfile import open_output, output_dir, write_text


def test_a_file_is_replaced_whole_and_keeps_its_permissions(tmp_path: Path) -> None:
    path = tmp_path / "out.yaml"
    path.write_text("old")
    path.chmod(0o640)
    write_text(path, "new", "overlay")
    assert path.read_text() == "new" and (path.stat().st_mode & 0o777) == 0o640
    assert os.listdir(tmp_path) == ["out.yaml"]


def test_a_failure_while_writing_leaves_the_old_file_and_no_scratch(tmp_path: Path) -> None:
    path = tmp_path / "out.yaml"
    path.write_text("old")
    with pytest.raises(RuntimeError), open_output(path, "overlay") as f:
        f.write(b"half")
        raise RuntimeError("the computation failed")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["out.yaml"]


def test_a_symbolic_link_is_written_through(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to("real.txt")
    write_text(tmp_path / "link.txt", "new", "report")
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/dev/full", "is a character device, not a file"),
        ("/dev/full/x", "cannot write the report"),
        ("/proc/self/x", "cannot write the report"),
    ],
)
def test_what_cannot_hold_a_file_is_refused(path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        write_text(path, "x", "report")


def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ConfigError, match="is a FIFO"):
        write_text(tmp_path / "fifo", "x", "report")


def test_an_output_directory_is_made_or_refused(tmp_path: Path) -> None:
    assert output_dir(tmp_path / "[" / "x]", "model directory").is_dir()
    (tmp_path / "file").write_text("")
    for bad in (tmp_path / "file", Path("/proc/self"), Path("/dev/full/x")):
        with pytest.raises(ConfigError, match=str(bad)):
            output_dir(bad, "model directory")
