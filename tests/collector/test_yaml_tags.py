"""A YAML tag whose value it cannot convert is one line at its line, in every YAML file
slotune reads (they share the reader in collector/yamlfile.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slotune.collector.agent.targets import load_targets_file
from slotune.collector.alerts.rules import load_rules_file
from slotune.collector.alerts.slo_files import load_slo_documents
from slotune.collector.errors import ConfigError
from slotune.tuner.tune.space import load_space_file

READERS: dict[str, tuple[Callable[[Path], Any], str]] = {
    "slo apply": (
        load_slo_documents,
        "slos:\n  - name: a\n    spec: ttft:p99<=1s\n    objective: {}\n",
    ),
    "agent --targets": (
        lambda p: load_targets_file(p, node="n"),
        "targets:\n  - kind: vllm\n    url: {}\n",
    ),
    "alerts apply": (load_rules_file, "rules:\n  - name: {}\n"),
    "tune --space": (load_space_file, "max_num_seqs: {}\n"),
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!!int 0xzz", "!!int '0xzz' is not a valid int"),
        ("!!float abc", "!!float 'abc' is not a valid float"),
        ("!!timestamp notatime", "!!timestamp 'notatime' is not a valid timestamp"),
        ("!!int " + "9" * 5000, "!!int '" + "9" * 40 + "'... is not a valid int"),
    ],
)
@pytest.mark.parametrize("reader", READERS)
def test_a_tag_with_a_bad_value_is_one_line(
    tmp_path: Path, reader: str, value: str, expected: str
) -> None:
    load, template = READERS[reader]
    path = tmp_path / "f.yaml"
    path.write_text(template.format(value))
    with pytest.raises(ConfigError) as e:
        load(path)
    line = template.count("\n", 0, template.index("{}")) + 1
    assert f"{path}:{line}: not valid YAML ({expected})" in str(e.value), str(e.value)


@pytest.mark.parametrize("reader", READERS)
def test_a_recursive_alias_is_refused_or_read_never_a_crash(tmp_path: Path, reader: str) -> None:
    load, template = READERS[reader]
    path = tmp_path / "f.yaml"
    path.write_text(template.format("&a [*a]"))
    with contextlib.suppress(ConfigError):
        load(path)


@pytest.mark.parametrize("reader", READERS)
def test_deep_flow_nesting_is_refused_before_yaml_reads_it(tmp_path: Path, reader: str) -> None:
    load, template = READERS[reader]
    path = tmp_path / "f.yaml"
    path.write_text(template.format("[" * 1500))
    with pytest.raises(ConfigError, match=r"nests deeper than YAML can be read \(\[ and \{ more"):
        load(path)
