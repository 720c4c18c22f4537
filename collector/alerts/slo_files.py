"""An SLO file in any format slotune reads: its own, OpenSLO v1, Sloth or Pyrra."""

from __future__ import annotations

from pathlib import Path

from slotune.collector.alerts.openslo import is_openslo, parse_openslo
from slotune.collector.alerts.sloth_pyrra import foreign_format, parse_pyrra, parse_sloth
from slotune.collector.errors import SLOSpecError
from slotune.collector.slo import SLO, parse_slo_yaml
from slotune.collector.textfile import read_text
from slotune.collector.yamlfile import read_yaml_documents


def load_slo_documents(path: str | Path) -> list[SLO]:
    """SLOs from a slotune SLO file, an OpenSLO v1 file (told apart by ``apiVersion``), or a
    Sloth or Pyrra file (:mod:`slotune.collector.alerts.sloth_pyrra`).

    Raises:
        SLOSpecError: naming the file, line and field.
    """
    text = read_text(path, "SLO file", SLOSpecError)
    if is_openslo(text):
        return parse_openslo(text, source=str(path))
    docs = read_yaml_documents(text, source=str(path), error=SLOSpecError)
    foreign = foreign_format(docs)
    if foreign == "sloth":
        return parse_sloth(docs, source=str(path))
    if foreign == "pyrra":
        return parse_pyrra(docs, source=str(path))
    return parse_slo_yaml(text, source=str(path))
