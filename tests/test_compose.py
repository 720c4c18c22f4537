"""The deployment files: docker-compose.yml validates against the Compose specification."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).resolve().parent / "data" / "compose-spec.json"


def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_compose_file_matches_the_specification() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(compose()), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors] == []


def test_migration_runs_once_after_postgres_is_healthy() -> None:
    services = compose()["services"]
    assert "healthcheck" in services["postgres"]
    migrate = services["migrate"]
    assert migrate["command"] == ["db", "upgrade"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert migrate["restart"] == "no"
    assert migrate["environment"]["SLOTUNE_DB"].startswith("postgresql+psycopg://")


def test_no_secret_is_written_in_the_file() -> None:
    services = compose()["services"]
    url = services["migrate"]["environment"]["SLOTUNE_DB"]
    # user and password are substituted from the environment (.env), never literal
    assert re.match(r"postgresql\+psycopg://\$\{[^}]+\}:\$\{POSTGRES_PASSWORD:\?[^}]+\}@", url)
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD"
    )


def test_dockerfile_installs_the_package_with_the_cli_entrypoint() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "FROM python:3.11-slim" in text
    assert "RUN pip install . " in text and "pip install -e" not in text
    assert 'ENTRYPOINT ["slotune"]' in text
