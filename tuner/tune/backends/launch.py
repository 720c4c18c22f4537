"""The ``launch`` backend: one engine process per trial, started from a command template.

Template placeholders: ``{model}`` (catalog id), ``{hf_model}`` (its Hugging Face name),
``{gpu}`` (catalog id), ``{port}`` (a free port on 127.0.0.1), ``{engine_args}`` (the trial's
flags as the engine's adapter renders them, shell-quoted). Real engines on a GPU node::

    vllm serve {hf_model} --port {port} {engine_args}
    python -m sglang.launch_server --model-path {hf_model} --port {port} {engine_args}

(:func:`default_command` builds such a line from the engine adapter's launch command), and the
emulated engine here (``--engine sglang`` for SGLang's routes, flags and metrics)::

    slotune emulate --model {model} --gpu {gpu} --port {port} --speedup 20 {engine_args}

Per trial: start the process in its own process group with its output in a log file, wait for
``/health`` and ``/v1/models`` while following the log's start-up phases (:mod:`.startup`;
failing fast when the process exits), warm up, serve the workload with the load generator
while sampling ``/metrics`` (:mod:`.watch`), then stop the whole group (SIGTERM, then SIGKILL).
A process that exits or never becomes healthy fails the trial with the engine's own error line
from the log (``ValueError: ...``, ``CUDA out of memory``, ``Address already in use``,
SGLang's ``Not enough memory. Please try to increase --mem-fraction-static.``, argparse's
``unrecognized arguments``), the phase it was in and its last log lines, in one line.

``speedup`` K: the emulated GPU runs K times faster than real time (``slotune emulate --speedup
K`` in the template), so arrivals are sent K times faster and measured times multiplied by K: the
summary is in real-GPU seconds and comparable to the SLOs and to the simulator.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import httpx
import yaml

from slotune.collector.bench import ArrivalKind, ArrivalSpec, BenchConfig, run_benchmark
from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.collector.records import RequestRecord
from slotune.collector.slo import SLO
from slotune.collector.summary import Summary, summarize
from slotune.collector.workload import Trace
from slotune.tuner.emulate.lag_client import fetch_lag
from slotune.tuner.engines.param import Value
from slotune.tuner.engines.registry import adapter_for, adapters
from slotune.tuner.sim.catalog import get_model
from slotune.tuner.tune.backends.base import Backend, EngineSession, TrialFailed
from slotune.tuner.tune.backends.startup import (
    DEFAULT_STARTUP_TIMEOUT_S,
    POLL_S,
    LogFollower,
    StartupProgress,
    last_lines,
)
from slotune.tuner.tune.backends.watch import MetricsWatch, RunEngineFigures, merge
from slotune.tuner.tune.gpu_slots import GpuSlot
from slotune.tuner.tune.steady import with_queue_growth

# A request of the workload may wait behind a long queue at a rate past capacity.
REQUEST_TIMEOUT_S = 600.0
STOP_GRACE_S = 10.0
# How long a run whose connections broke waits for the engine's exit status before it counts
# as served (the load generator's error kinds for a server that went away).
DEATH_GRACE_S = 5.0
_LOST_CONNECTION = ("connect", "disconnect")
WARMUP_REQUESTS = 2
# The file an engine reads its options from, when its adapter has some (TensorRT-LLM's YAML).
OPTIONS_FILE = "engine_options.yaml"
# Lines an engine prints when it refuses to start, most specific first.
_REASON_PATTERNS = (
    re.compile(r"(torch\.OutOfMemoryError|CUDA out of memory|OutOfMemoryError).*"),
    re.compile(r"Fatal Python error: .*"),
    re.compile(r".*(Address already in use|address already in use).*"),
    # vLLM validates its configs with pydantic: the message is inside the error's detail line.
    re.compile(r"Value error, [^\[]*"),
    # python -m says "No module named x", or wraps it: "Error while finding module
    # specification for 'x.y' (ModuleNotFoundError: No module named 'x')".
    re.compile(r"\bNo module named ('[^']+'|\S+)"),
    re.compile(r"\b(ModuleNotFoundError|ImportError|FileNotFoundError):.*"),
    re.compile(
        r"\b(ValueError|RuntimeError|AssertionError|TypeError|KeyError|error):.*", re.IGNORECASE
    ),
    re.compile(r".*(unrecognized arguments|No such option|invalid choice).*"),
    re.compile(r"\b\w+Error: .*"),
)
# Lines that only point at another one: SGLang's launcher, once a scheduler process died,
# says "Rank 0 scheduler is dead" and raises "Initialization failed. Please see the error
# messages above."; the scheduler's own traceback above holds the reason.
_POINTER_LINES = re.compile(
    r"Please see the error messages above|scheduler is dead|Please check if there are relevant logs"
)
# What to do about a reason, when the engine's own line does not say (pattern -> fix).
_FIXES = (
    (
        re.compile(r"No module named"),
        "install the engine in the Python that --command runs, or point --command at that Python",
    ),
    (
        re.compile(r"address already in use", re.IGNORECASE),
        "another process holds a port the engine binds; stop it, or give the engine other "
        "ports in --command",
    ),
    (
        re.compile(r"unrecognized arguments|invalid choice|No such option"),
        "the installed engine does not take this flag or value; drop it from the space "
        "(--param) or install a release that has it",
    ),
)


def port_is_free(port: int) -> bool:
    """Whether nothing listens on ``port`` of 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def failure_reason(log_text: str) -> str:
    """The engine's own explanation from its log: the last line matching a known error form,
    with what to do about it when the line does not say."""
    lines = [
        ln.strip() for ln in log_text.splitlines() if ln.strip() and not _POINTER_LINES.search(ln)
    ]
    for pattern in _REASON_PATTERNS:
        for line in reversed(lines):
            m = pattern.search(line)
            if m:
                return _with_fix(m.group(0).strip())
    return _with_fix(lines[-1]) if lines else "no output"


def _with_fix(reason: str) -> str:
    for pattern, fix in _FIXES:
        if pattern.search(reason):
            return f"{reason}; {fix}"
    return reason


def render_command(
    template: str, *, model: str, gpu: str, port: int, engine_args: str
) -> list[str]:
    """The argv of a ``--command`` template with its placeholders filled in.

    Raises:
        ConfigError: an unknown placeholder, an unbalanced brace or quote, or no command.
    """
    try:
        text = template.format(
            model=model,
            hf_model=get_model(model).hf_name,
            gpu=gpu,
            port=port,
            engine_args=engine_args,
        )
    except (KeyError, IndexError) as e:
        raise ConfigError(
            f"--command has an unknown placeholder {e}; use {{model}}, "
            "{hf_model}, {gpu}, {port}, {engine_args}"
        ) from e
    except ValueError as e:  # a lone "{" or "}"
        raise ConfigError(f"--command: {e}; write a literal brace as {{{{ or }}}}") from e
    try:
        argv = shlex.split(text)
    except ValueError as e:  # an unclosed quote
        raise ConfigError(f"--command: {e}; close every quote") from e
    if not argv:
        raise ConfigError(
            "--command is empty; e.g. 'vllm serve {hf_model} --port {port} {engine_args}'"
        )
    if "{port}" not in template:
        raise ConfigError(
            "--command must pass {port} to the engine (e.g. '--port {port}'): each trial's "
            "engine gets a free port of its own"
        )
    for adapter in adapters():
        adapter.check_command(argv)
    return argv


def default_command(engine: str, model: str, gpu: str) -> str:
    """The ``--command`` template of the real engine: the launch command of the engine's
    adapter (``python -m sglang.launch_server --model-path …``, ``vllm serve …``) with
    slotune's host, port and engine arguments (every engine slotune tunes takes ``--host``
    and ``--port``).

    Raises:
        ConfigError: an engine slotune does not tune, or an unknown model id.
    """
    adapter = adapter_for(engine)
    command = adapter.launch_command(
        adapter.config_from_params(model, gpu, {}), options_path=OPTIONS_FILE
    )
    return f"{shlex.join(command)} --host 127.0.0.1 --port {{port}} {{engine_args}}"


def write_trace(trace: Trace, path: Path) -> None:
    """Write a trace in slotune's canonical JSONL format."""
    with path.open("w") as f:
        for r in trace.requests:
            row: dict[str, Any] = {
                "timestamp": r.timestamp_s,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
            }
            if r.hash_ids:
                row.update(hash_ids=list(r.hash_ids), block_size=r.block_size)
            if r.session_id is not None:
                row["session_id"] = r.session_id
            f.write(json.dumps(row) + "\n")


def scale_record(r: RequestRecord, k: float) -> RequestRecord:
    """A record's times multiplied by ``k`` (emulated-engine time -> real-GPU time)."""

    def s(x: float | None) -> float | None:
        return None if x is None else x * k

    return replace(
        r,
        send_s=r.send_s * k,
        first_token_s=s(r.first_token_s),
        end_s=s(r.end_s),
        scheduled_s=s(r.scheduled_s),
        chunk_times_s=tuple(t * k for t in r.chunk_times_s),
    )


class EngineProcess:
    """A started engine: its process group, port and log file."""

    def __init__(self, argv: list[str], log_path: Path, env: Mapping[str, str], port: int) -> None:
        self.log_path = log_path
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        if not port_is_free(port):
            raise TrialFailed(
                f"port {port} on 127.0.0.1 is already in use; stop what listens there "
                "or let slotune pick the port ({port} in --command)"
            )
        self._log: IO[bytes] = log_path.open("wb")
        self._started_at = time.monotonic()
        self.startup: StartupProgress | None = None
        try:
            self.proc = subprocess.Popen(
                argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_detach,
                env={**os.environ, **env},
            )
        except OSError as e:
            self._log.close()
            raise TrialFailed(f"cannot start {argv[0]!r}: {e.strerror}; check --command") from e

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def reason(self) -> str:
        """The engine's error line, then its last log lines and where the log is."""
        text = self.log_text()
        why, tail = failure_reason(text), last_lines(text)
        context = "" if tail.endswith(why) else f"; last log lines: {tail}"
        return f"{why}{context} (log: {self.log_path})"

    def is_alive(self) -> bool:
        return self.proc.poll() is None

    def has_died(self, within_s: float = 0.0) -> bool:
        """Whether the process ended, waiting up to ``within_s`` for it to be reaped (a
        client sees a dying engine's connections close before its exit status is there)."""
        try:
            self.proc.wait(within_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def exit_status(self) -> str:
        """How the process ended: ``exited with code 1``, ``was killed by SIGKILL``."""
        code = self.proc.returncode
        if code is not None and code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                pass
        return f"exited with code {code}"

    def wait_healthy(self, timeout_s: float) -> StartupProgress:
        """Wait until ``/health`` and ``/v1/models`` answer 200, following the log's start-up
        phases (SGLang answers ``/health`` with 503 until its warm-up request is done).

        Raises:
            TrialFailed: the process exited, or was not healthy within ``timeout_s``.
        """
        follower = LogFollower(self.log_text, self._started_at)
        deadline = self._started_at + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                progress = follower.poll()
                if not self.is_alive():
                    raise TrialFailed(
                        f"engine {self.exit_status()} while {progress.phase} "
                        f"({progress.elapsed_s:.0f} s after start): "
                        f"{self.reason()}"
                    )
                try:
                    healthy = all(
                        client.get(self.url + path).status_code == 200
                        for path in ("/health", "/v1/models")
                    )
                except httpx.HTTPError:
                    healthy = False
                if healthy:
                    self.startup = follower.poll()
                    return self.startup
                time.sleep(POLL_S)
        raise TrialFailed(
            f"engine not healthy after {timeout_s:.0f} s, still {follower.phase} "
            f"(raise --startup-timeout if it is making progress): {self.reason()}"
        )

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after a grace period."""
        try:
            if self.is_alive():
                _signal_group(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    _signal_group(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(STOP_GRACE_S)
            # Children may outlive a leader that exited on its own.
            _signal_group(self.proc.pid, signal.SIGKILL)
        finally:
            self._log.close()


_PR_SET_PDEATHSIG = 1
# Looked up once here: between fork and exec (with the heartbeat thread running) the child
# must not load libraries or take locks.
_prctl: Callable[..., int] | None
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _detach() -> None:
    """In the child before exec: its own process group (so the whole group can be stopped),
    and SIGTERM when the worker that started it dies, even by SIGKILL (Linux), so a killed
    study leaves no engine holding a GPU and a port."""
    os.setsid()
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class EndpointSession(EngineSession):
    """Serves workloads against an HTTP endpoint (a launched engine, or an attached one).

    Each measured run is watched (:class:`~.watch.MetricsWatch`): its KV usage and queue
    peaks and its counter deltas go into the run summary's ``scraped`` figures;
    ``engine_metrics`` is the same over all the trial's runs, plus ``extra_engine`` (the
    attach backend's reading of the server's configuration, the launch backend's start-up
    phases).
    """

    def __init__(
        self,
        url: str,
        kind: str,
        speedup: float,
        workdir: Path,
        process: EngineProcess | None = None,
        extra_engine: Mapping[str, Any] | None = None,
    ) -> None:
        self._url, self._kind, self._k, self._dir = url, kind, speedup, workdir
        self._process = process
        self._runs = 0
        self._watch = MetricsWatch(kind, url)
        self._figures: list[RunEngineFigures] = []
        self._extra_engine = dict(extra_engine or {})

    def run(self, trace: Trace, slos: Sequence[SLO], seed: int) -> Summary:
        if self._runs == 0:
            # First requests pay for lazy initialisation (CUDA graphs, allocator); keep
            # them out of the measurement.
            warm = [replace(r, timestamp_s=0.0) for r in trace.requests[:WARMUP_REQUESTS]]
            self._serve(replace(trace, requests=tuple(warm)), seed)
        with self._watch.during() as watched:
            records = self._serve(trace, seed)
        self._figures.extend(watched)
        summary = with_queue_growth(summarize(records, slos), records)
        return replace(summary, scraped=watched[0].to_figures())

    def _serve(self, trace: Trace, seed: int) -> list[RequestRecord]:
        self._runs += 1
        path = self._dir / f"trace-{self._runs}.jsonl"
        write_trace(trace, path)
        config = BenchConfig(
            url=self._url,
            arrival=ArrivalSpec(ArrivalKind.TRACE, time_scale=1.0 / self._k),
            trace_file=str(path),
            num_requests=len(trace),
            cooldown=False,
            seed=seed,
            timeout_s=REQUEST_TIMEOUT_S,
        )
        result = run_benchmark(config)
        lost = any(r.error in _LOST_CONNECTION for r in result.records)
        if self._process is not None and self._process.has_died(DEATH_GRACE_S if lost else 0):
            raise TrialFailed(
                f"engine died during the run ({self._process.exit_status()}): "
                f"{self._process.reason()}"
            )
        return [scale_record(r, self._k) for r in result.records]

    def engine_metrics(self) -> dict[str, Any]:
        trial = merge(self._figures)
        out: dict[str, Any] = {
            "prefix_hit_rate": trial.prefix_hit_rate,
            "prefix_queries": trial.deltas.get("prefix_queries"),
            "prefix_hits": trial.deltas.get("prefix_hits"),
            "preemptions": trial.deltas.get("preemptions"),
            "requests_finished": trial.deltas.get("requests_finished"),
            "kv_usage_max": trial.kv_usage_max,
            "kv_usage_mean": trial.kv_usage_mean,
            "requests_waiting_max": trial.waiting_max,
            "requests_running_max": trial.running_max,
            "num_samples": trial.num_samples,
            **self._extra_engine,
        }
        if trial.errors:
            out["scrape_error"] = trial.errors[0]
        lag = fetch_lag(self._url, self._kind)  # None unless the engine is the emulated one
        if lag is not None:
            out["emulator_lag"] = lag.to_dict()
        if self._process is not None:
            out["log"] = str(self._process.log_path)
            if self._process.startup is not None:
                out["startup_s"] = self._process.startup.elapsed_s
                out["startup_phases_s"] = self._process.startup.phase_at_s
        return out


class LaunchBackend(Backend):
    """Starts an engine per trial from ``command`` (see the module docstring)."""

    name = "launch"

    def __init__(
        self,
        command: str,
        *,
        engine: str,
        model: str,
        gpu: str,
        speedup: float = 1.0,
        slot: GpuSlot = GpuSlot(()),
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        log_root: Path | None = None,
    ) -> None:
        self.command, self.engine, self.model, self.gpu = command, engine, model, gpu
        self.speedup, self.slot, self.startup_timeout_s = speedup, slot, startup_timeout_s
        self.log_root = log_root or Path(tempfile.gettempdir()) / "slotune-launch"

    def argv(self, config: Mapping[str, Value], port: int, workdir: Path) -> list[str]:
        """The command line of one trial's engine: its flags and any options file from the
        engine's adapter, in the ``--command`` template."""
        adapter = adapter_for(self.engine)
        engine_config = adapter.config_from_params(self.model, self.gpu, config)
        options_path = workdir / OPTIONS_FILE
        options = adapter.launch_files(engine_config)
        if options:
            options_path.write_text(yaml.safe_dump(options))
        engine_args = shlex.join(adapter.to_argv(engine_config, options_path=str(options_path)))
        try:
            return render_command(
                self.command, model=self.model, gpu=self.gpu, port=port, engine_args=engine_args
            )
        except (ConfigError, EngineConfigError) as e:
            raise TrialFailed(str(e)) from e

    @contextmanager
    def open(self, config: Mapping[str, Value]) -> Iterator[EngineSession]:
        self.log_root.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="trial-", dir=self.log_root))
        port = free_port()
        process = EngineProcess(
            self.argv(config, port, workdir), workdir / "engine.log", self.slot.env(), port
        )
        try:
            process.wait_healthy(self.startup_timeout_s)
            yield EndpointSession(process.url, self.engine, self.speedup, workdir, process)
        finally:
            process.stop()
