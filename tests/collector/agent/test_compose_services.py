"""The agent and engine services of docker-compose.yml."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from typer.testing import CliRunner

from slotune.collector.agent.targets import parse_target_arg
from slotune.ui.cli import app

ROOT = Path(__file__).resolve().parents[3]


def services() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    assert list(jsonschema.Draft7Validator(schema).iter_errors(data)) == []
    return data["services"]


def gpu_devices(service: dict[str, Any]) -> list[dict[str, Any]]:
    return service["deploy"]["resources"]["reservations"]["devices"]


def default_of(value: str) -> str:
    """``${VAR:-default}`` -> ``default`` (what compose substitutes without .env)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_agent_runs_on_the_host_network_with_the_gpus_and_targets_the_engine() -> None:
    agent = services()["agent"]
    assert agent["network_mode"] == "host"
    assert gpu_devices(agent) == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    assert agent["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    command = [default_of(c) for c in agent["command"]]
    assert command[0] == "agent"
    target = parse_target_arg(command[command.index("--scrape") + 1], node="n")
    assert target.metrics_urls == ("http://127.0.0.1:8000/metrics",)
    # every option of the command exists on `slotune agent`
    help_text = CliRunner().invoke(app, ["agent", "--help"], terminal_width=200).stdout
    for option in (c for c in command if c.startswith("--")):
        assert option in help_text, option
    assert "@127.0.0.1:5432/" in agent["environment"]["SLOTUNE_DB"]


def test_engine_is_the_emulator_and_vllm_needs_the_gpu_profile() -> None:
    s = services()
    engine = s["engine"]
    assert engine["command"][:2] == ["emulate", "--model"]
    assert "--port" in engine["command"] and engine["network_mode"] == "host"
    vllm = s["vllm"]
    assert vllm["image"].startswith("vllm/vllm-openai")
    assert vllm["profiles"] == ["gpu"]
    assert gpu_devices(vllm)[0]["capabilities"] == ["gpu"]
    assert vllm["environment"]["HUGGING_FACE_HUB_TOKEN"] == "${HF_TOKEN:-}"  # never literal
