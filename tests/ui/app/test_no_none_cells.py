"""No table cell reads "None": every table of the dashboard shows a missing value as a
placeholder (Streamlit prints None in a text column otherwise)."""

from __future__ import annotations

import ast
from pathlib import Path

import slotune.ui.app

SCREENS = Path(slotune.ui.app.__file__).parent / "screens"


def test_every_table_of_every_page_has_a_placeholder() -> None:
    missing = []
    for path in sorted(SCREENS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "dataframe"
                and "placeholder" not in {k.arg for k in node.keywords}
            ):
                missing.append(f"{path.name}:{node.lineno}")
    assert missing == []
