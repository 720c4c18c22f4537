"""Engine start-up logs read into phases and failure lines (SGLang 0.5's and vLLM's own wording)."""

from __future__ import annotations

import time

import pytest

from slotune.tuner.tune.backends.launch import failure_reason
from slotune.tuner.tune.backends.startup import LogFollower

START_UP = [
    "[2026-12-01 23:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B', ...)",
    "[2026-12-01 23:00:02 TP0] Init torch distributed begin.",
    "[2026-12-01 23:00:03 TP0] Load weight begin. avail mem=78.50 GB",
    "[2026-12-01 23:00:20 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
    "avail mem=63.48 GB, mem usage=15.02 GB.",
    "[2026-12-01 23:00:20 TP0] KV Cache is allocated. #tokens: 444500, K size: 27.13 GB, "
    "V size: 27.13 GB",
    "[2026-12-01 23:00:20 TP0] Capture cuda graph begin. This can take up to several minutes. "
    "avail mem=8.10 GB",
    "[2026-12-01 23:00:27 TP0] Capture cuda graph end. Time elapsed: 6.57 s. mem usage=0.40 GB.",
    "[2026-12-01 23:00:27] INFO:     Started server process [4242]",
    "[2026-12-01 23:00:27] INFO:     Application startup complete.",
    "[2026-12-01 23:00:29] The server is fired up and ready to roll!",
]


VLLM_START_UP = [
    "WARNING [vllm.py:1703] Enforce eager set, disabling torch.compile, CUDAGraphs",
    "INFO [cpu_model_runner.py:68] Starting to load model /models/tiny...",
    "INFO [backends.py:1] Compiling a graph for compile range (1, 2048) takes 41.2 s",
    "INFO [entry.py:140] Starting vLLM server on http://127.0.0.1:8000",
    "INFO:     Application startup complete.",
]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            START_UP,
            [
                "starting",
                "starting",
                "loading the model",
                "loading the model",
                "allocating the KV cache",
                "capturing graphs",
                "capturing graphs",
                "starting the server",
                "serving",
                "serving",
            ],
        ),
        (
            VLLM_START_UP,
            [
                "starting",  # eager mode's "disabling torch.compile" is no compile
                "loading the model",
                "compiling",
                "starting the server",
                "serving",
            ],
        ),
    ],
    ids=["sglang", "vllm"],
)
def test_start_up_phases_follow_the_engines_log(lines: list[str], expected: list[str]) -> None:
    shown: list[str] = []
    follower = LogFollower(lambda: "\n".join(shown), time.monotonic())
    phases = []
    for line in lines:
        shown.append(line)
        phases.append(follower.poll().phase)
    assert phases == expected


def test_the_scheduler_traceback_is_the_reason_not_the_launchers_pointer() -> None:
    log = "\n".join(
        [
            *START_UP[:4],
            "[2026-12-01 23:00:20 TP0] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            '  File "sglang/srt/managers/scheduler.py", line 3020, in run_scheduler_process',
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            "[2026-12-01 23:00:21] Rank 0 scheduler is dead. Please check if there are relevant "
            "logs.",
            "[2026-12-01 23:00:21] Exit code: 1",
            "RuntimeError: Initialization failed. Please see the error messages above.",
        ]
    )
    assert failure_reason(log) == (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    )


def test_argparse_refusals_name_the_flag_and_the_fix() -> None:
    unknown = (
        "usage: launch_server.py [-h] --model-path MODEL_PATH ...\n"
        "launch_server.py: error: unrecognized arguments: --max-num-seqs 8\n"
    )
    assert failure_reason(unknown) == (
        "error: unrecognized arguments: --max-num-seqs 8; the installed engine does not take "
        "this flag or value; drop it from the space (--param) or install a release that has it"
    )
    choice = (
        "launch_server.py: error: argument --schedule-policy: invalid choice: 'sjf' (choose "
        "from 'lpm', 'random', 'fcfs', 'dfs-weight', 'lof', 'priority', 'routing-key')\n"
    )
    assert failure_reason(choice).startswith(
        "error: argument --schedule-policy: invalid choice: 'sjf' (choose from 'lpm'"
    )


def test_a_missing_sglang_is_one_line_with_the_fix() -> None:
    log = (
        "/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' "
        "(ModuleNotFoundError: No module named 'sglang')\n"
    )
    assert failure_reason(log) == (
        "No module named 'sglang'; install the engine in the Python that --command runs, or "
        "point --command at that Python"
    )


def test_a_port_sglang_binds_that_is_taken_names_the_port_problem() -> None:
    log = (
        "[2026-12-01 23:00:27] ERROR:    [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 30000): address already in use\n"
    )
    assert failure_reason(log).endswith(
        "address already in use; another process holds a port the engine binds; stop it, or "
        "give the engine other ports in --command"
    )
