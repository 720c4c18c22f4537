"""Every file option of the command line (the registry in ``file_options.py``) given every
hostile file: empty, truncated, nested 100,000 deep, 401-digit numbers, NaN and infinity, lone
surrogates, wrong types, a FIFO, ``/dev/zero``, a directory, an unwritable path and Rich markup
in its name. Each is refused at once with one ``error:`` line that names the file, an exit
code other than 0, no traceback, and nothing written."""

from __future__ import annotations

import inspect
import os
import pathlib
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from file_options import REGISTRY, FileOption, Holds, Role
from typer.testing import CliRunner

from slotune.collector.store import upgrade
from slotune.ui.cli import app

NUMBER = "9" * 401
GOOD_LINE = '{"timestamp": 0, "input_tokens": 5, "output_tokens": 5, "ttft_ms": 10, "e2e_ms": 20}'


def _line(**fields: str) -> str:
    values = {"timestamp": "0", "input_tokens": "5", "output_tokens": "5", "ttft_ms": "10"}
    values |= {"e2e_ms": "20", **fields}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in values.items()) + "}\n"


# What each kind of file is given: (case, bytes).
CONTENTS: dict[Holds, dict[str, bytes]] = {
    Holds.JSONL: {
        "empty": b"",
        "truncated": b'{"timestamp": 0, "input_tok',
        "deeply nested": b"[" * 100_000,
        "huge number": _line(input_tokens=NUMBER).encode(),
        "NaN": _line(timestamp="NaN").encode(),
        "infinity": _line(ttft_ms="1e999").encode(),
        "lone surrogate": _line(model='"\\ud800"').encode(),
        "wrong types": _line(timestamp='"soon"', input_tokens="[5]").encode(),
    },
    Holds.JSON: {
        "empty": b"",
        "truncated": b'{"traceEvents": [{"ph": "X", "ts": 1',
        "deeply nested": b'{"traceEvents": ' + b"[" * 100_000,
        "huge number": b'{"traceEvents": [{"ph": "X", "ts": ' + NUMBER.encode() + b"}]}",
        "NaN": b'{"traceEvents": [{"ph": "X", "ts": NaN}], "summary": NaN}',
        "infinity": b'{"traceEvents": [{"ph": "X", "ts": 1e999}], "summary": 1e999}',
        "lone surrogate": b'{"traceEvents": [{"ph": "\\ud800"}], "summary": "\\ud800"}',
        "wrong types": b"[1, 2, 3]",
    },
    Holds.YAML: {
        "empty": b"",
        "truncated": b"targets:\n  - [kind, 'vllm",
        "deeply nested": b"a: " + b"[" * 100_000,
        "huge number": b"a: " + NUMBER.encode() + b"\n",
        "NaN": b"a: .nan\n",
        "infinity": b"a: .inf\n",
        "lone surrogate": b'a: "\\ud800"\n',
        "wrong types": b"- 1\n- 2\n",
    },
    Holds.TEXT: {
        "empty": b"",
        "truncated": b'vllm:num_requests_running{model_name="m',
        "deeply nested": b"{" * 100_000,
        "huge number": b"--max-num-seqs " + NUMBER.encode() + b"\n",
        "lone surrogate": b"\xed\xa0\x80\n",  # a surrogate, UTF-8 encoded: not UTF-8
        "wrong types": b"\x00\x01\x02",
    },
}
# NaN and infinity are values Prometheus text may carry, and flags are words: TEXT has no
# such case.


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'slotune.db'}"
    upgrade(url)
    return url


@pytest.fixture
def work(tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory the command runs in, with the valid inputs a command line names."""
    monkeypatch.setenv("SLOTUNE_DB", db)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "observed.jsonl").write_text(f"{GOOD_LINE}\n" * 40)
    kineto = Path(__file__).parents[1] / "data" / "gputraces" / "hta_alexnet_a100_trace.json.gz"
    (tmp_path / "inputs" / "kineto.json.gz").write_bytes(kineto.read_bytes())
    return tmp_path


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _run(option: FileOption, path: str, work: Path) -> tuple[int, str]:
    inputs = {"OBSERVED": "inputs/observed.jsonl", "KINETO": "inputs/kineto.json.gz"}
    argv = [inputs.get(a, a.replace("FILE", path)) for a in option.argv]
    before = _listing(work)
    result = CliRunner().invoke(app, argv)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{argv}: {result.exception!r}\n{result.output}"
    )
    assert _listing(work) == before, f"{argv} wrote {_listing(work) - before}"
    return result.exit_code, result.output


def _assert_refused(option: FileOption, path: str, work: Path) -> str:
    code, output = _run(option, path, work)
    lines = output.strip().splitlines()
    assert code != 0 and lines, f"{option.argv} accepted {path!r}: {output}"
    assert lines[-1].startswith("error: "), output
    assert sum(line.startswith("error:") for line in lines) == 1, output
    assert "Traceback" not in output
    assert path in lines[-1], f"the error does not name {path!r}: {lines[-1]}"
    return lines[-1]


def _cases(role: Role) -> list[Any]:
    return [pytest.param(o, id=name) for name, o in REGISTRY.items() if o.role is role]


def _content_cases(role: Role) -> list[Any]:
    return [
        pytest.param(option, data, id=f"{name}-{case}")
        for name, option in REGISTRY.items()
        if option.role is role and option.holds is not None
        for case, data in CONTENTS[option.holds].items()
    ]


@pytest.fixture
def fifo(work: Path) -> Iterator[Path]:
    path = work / "specials" / "fifo.json"
    path.parent.mkdir()
    os.mkfifo(path)
    yield path
    assert path.is_fifo()


# --- files read -----------------------------------------------------------------------------


@pytest.mark.parametrize(("option", "data"), _content_cases(Role.READ))
def test_a_hostile_file_is_refused_in_one_line(option: FileOption, data: bytes, work: Path) -> None:
    path = work / "inputs" / "hostile"
    path.write_bytes(data)
    _assert_refused(option, str(path), work)


@pytest.mark.parametrize("option", _cases(Role.READ))
@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "a directory", "a missing file"])
def test_what_is_not_a_regular_file_is_refused_at_once(
    option: FileOption, special: str, fifo: Path, work: Path
) -> None:
    path = {
        "fifo": str(fifo),
        "a directory": str(work / "inputs" / "empty"),
        "a missing file": str(work / "inputs" / "missing.txt"),
    }.get(special, special)
    if special == "a directory":
        Path(path).mkdir()
    _assert_refused(option, path, work)


@pytest.mark.parametrize("option", _cases(Role.READ))
def test_rich_markup_in_a_file_name_is_printed_as_it_is(option: FileOption, work: Path) -> None:
    path = work / "inputs" / "[" / "red]x[" / "bold]"
    path.parent.mkdir(parents=True)
    assert option.holds is not None
    path.write_bytes(CONTENTS[option.holds]["truncated"])
    _assert_refused(option, str(path), work)


@pytest.mark.parametrize(("option", "data"), _content_cases(Role.READ_DIR))
def test_a_hostile_file_in_a_directory_is_refused(
    option: FileOption, data: bytes, work: Path
) -> None:
    directory = work / "inputs" / "tokenizer"
    directory.mkdir()
    (directory / "tokenizer.json").write_bytes(data)
    _assert_refused(option, str(directory), work)


@pytest.mark.parametrize("option", _cases(Role.READ_DIR))
@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "a file", "a fifo inside"])
def test_what_is_not_a_directory_of_files_is_refused(
    option: FileOption, special: str, fifo: Path, work: Path
) -> None:
    path = {"fifo": str(fifo), "a file": "inputs/observed.jsonl"}.get(special, special)
    if special == "a fifo inside":
        os.mkfifo(work / "inputs" / "tokenizer.json")
        path = str(work / "inputs")
    _assert_refused(option, path, work)


# --- files and directories written ----------------------------------------------------------


def _unwritable(special: str, fifo: Path, work: Path) -> str:
    (work / "specials" / "file").write_text("keep")
    (work / "specials" / "dir").mkdir()
    (work / "specials" / "[" / "x]").mkdir(parents=True)
    return {
        "fifo": str(fifo),
        "a directory": str(work / "specials" / "dir"),
        "under a file": str(work / "specials" / "file" / "x"),
        "a missing directory": str(work / "specials" / "missing" / "x"),
        "markup": str(work / "specials" / "[" / "x]"),
    }.get(special, special)


@pytest.mark.parametrize("option", _cases(Role.WRITE))
@pytest.mark.parametrize(
    "special",
    [
        "fifo",
        "/dev/zero",
        "/dev/full",
        "a directory",
        "under a file",
        "a missing directory",
        "/proc/self/x",
        "/dev/full/x",
        "markup",
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
    option: FileOption, special: str, fifo: Path, work: Path
) -> None:
    _assert_refused(option, _unwritable(special, fifo, work), work)
    assert (work / "specials" / "file").read_text() == "keep"


@pytest.mark.parametrize("option", _cases(Role.WRITE_DIR))
@pytest.mark.parametrize(
    "special", ["fifo", "/dev/zero", "under a file", "/proc/self", "/dev/full/x", "a file"]
)
def test_an_output_directory_that_cannot_be_written_is_refused(
    option: FileOption, special: str, fifo: Path, work: Path
) -> None:
    path = _unwritable(special, fifo, work)
    if special == "a file":
        path = str(work / "specials" / "[" / "x]" / "[bold]")
        Path(path).write_text("keep")
    _assert_refused(option, path, work)


# --- the registry is complete ---------------------------------------------------------------


def _is_path(annotation: Any) -> bool:
    return annotation is pathlib.Path or any(_is_path(a) for a in typing.get_args(annotation))


def _path_params(t: typer.Typer, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    callbacks = [(prefix, t.registered_callback.callback)] if t.registered_callback else []
    callbacks += [
        ((*prefix, c.name or c.callback.__name__.replace("_", "-")), c.callback)
        for c in t.registered_commands
        if c.callback is not None
    ]
    for path, callback in callbacks:
        if callback is None:
            continue
        hints = typing.get_type_hints(callback, include_extras=True)
        for name in inspect.signature(callback).parameters:
            hint = hints.get(name)
            base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
            if _is_path(base):
                yield " ".join(path), name
    for group in t.registered_groups:
        assert group.typer_instance is not None and group.name is not None
        yield from _path_params(group.typer_instance, (*prefix, group.name))


def test_every_path_option_of_the_cli_is_in_the_registry() -> None:
    found = set(_path_params(app))
    registered = {o.param for o in REGISTRY.values() if o.param is not None}
    assert found - registered == set(), "add these options to tests/ui/file_options.py"
    assert registered - found == set(), "these registered options no longer exist"


def test_a_fifo_in_a_directory_of_ranks_is_refused(fifo: Path) -> None:
    result = CliRunner().invoke(app, ["diagnose", "trace", str(fifo.parent), "--no-store"])
    assert result.exit_code == 1 and "is a FIFO (named pipe), not a file" in result.output
