"""A stand-in for ``python -m sglang.launch_server`` in the launch tests; no model runs.

It parses the flags slotune sets with SGLang's argument names and choices (argparse's own
error lines for an unknown flag or value), prints SGLang 0.5's start-up log lines in their
order, then serves SGLang's routes on 127.0.0.1: ``/health`` (503 until the warm-up is done,
as SGLang answers while starting), ``/server_info`` and ``/get_server_info``, ``/model_info``,
``/v1/models`` and ``/metrics`` (a real SGLang 0.5.23 exposition).

``FAKE_SGLANG_MODE`` picks a failure: ``oom`` (the scheduler dies sizing the KV pool, as with a
``--mem-fraction-static`` that leaves nothing), ``hang`` (capturing CUDA graphs forever),
``die-on-request`` (serves, then exits on the first completion request). ``--nccl-port N``
binds N as SGLang's NCCL port does, failing with torch's wording when it is taken.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DUMP = Path(__file__).resolve().parents[4] / "data" / "sglang" / "metrics-0.5.23.txt"
POLICIES = ("lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key")


def log(text: str, rank: str = " TP0") -> None:
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}{rank}] {text}", flush=True)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--model-path", "--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--nccl-port", type=int, default=None)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--chunked-prefill-size", type=int, default=None)
    p.add_argument("--max-prefill-tokens", type=int, default=16384)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--schedule-policy", choices=POLICIES, default="fcfs")
    p.add_argument("--schedule-conservativeness", type=float, default=1.0)
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--enable-mixed-chunk", action="store_true")
    p.add_argument("--cuda-graph-max-bs", type=int, default=None)
    p.add_argument("--page-size", type=int, default=None)
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("--dp-size", "--data-parallel-size", type=int, default=1)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--enable-metrics", action="store_true")
    return p.parse_args()


def server_info(args: argparse.Namespace) -> dict[str, object]:
    resolved = {
        "model_path": args.model_path,
        "tokenizer_path": args.model_path,
        "host": args.host,
        "port": args.port,
        "mem_fraction_static": args.mem_fraction_static or 0.907,
        "max_running_requests": args.max_running_requests,
        "max_total_tokens": None,
        "chunked_prefill_size": args.chunked_prefill_size or 8192,
        "max_prefill_tokens": args.max_prefill_tokens,
        "schedule_policy": args.schedule_policy,
        "schedule_conservativeness": args.schedule_conservativeness,
        "page_size": args.page_size or 1,
        "tp_size": args.tp_size,
        "dp_size": args.dp_size,
        "kv_cache_dtype": args.kv_cache_dtype,
        "context_length": args.context_length,
        "disable_radix_cache": args.disable_radix_cache,
        "enable_mixed_chunk": args.enable_mixed_chunk,
        "cuda_graph_max_bs": args.cuda_graph_max_bs or 256,
        "enable_metrics": args.enable_metrics,
        "api_key": "fake-secret-key",
        "ssl_keyfile_password": None,
    }
    state = {
        **resolved,
        "last_gen_throughput": 0.0,
        "memory_usage": {"weight": 14.96, "kvcache": 54.26, "token_capacity": 444500, "graph": 0.4},
        "effective_max_running_requests_per_dp": args.max_running_requests or 2048,
    }
    return {
        **resolved,
        "status": "ready",
        "max_total_num_tokens": 444500,
        "max_req_input_len": 131066,
        "internal_states": [state],
        "version": "0.5.23",
    }


def main() -> None:
    args = parse()
    mode = os.environ.get("FAKE_SGLANG_MODE", "serve")
    log(f"server_args=ServerArgs(model_path={args.model_path!r}, port={args.port})", rank="")
    log("Init torch distributed begin.")
    if args.nccl_port is not None:
        nccl = socket.socket()
        try:
            nccl.bind(("127.0.0.1", args.nccl_port))
        except OSError:
            log("Scheduler hit an exception: Traceback (most recent call last):")
            print(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on "
                f"any local network address. port: {args.nccl_port}, useIpv6: false, code: -98, "
                "name: EADDRINUSE, message: address already in use",
                flush=True,
            )
            sys.exit(1)
    log("Init torch distributed ends. mem usage=0.00 GB")
    log("Load weight begin. avail mem=78.50 GB")
    log(
        "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.48 GB, "
        "mem usage=15.02 GB."
    )
    if mode == "oom":
        log("Scheduler hit an exception: Traceback (most recent call last):")
        print('  File "sglang/srt/managers/scheduler.py", line 3020, in run_scheduler_process')
        print("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
        log("Rank 0 scheduler is dead. Please check if there are relevant logs.", rank="")
        log("Exit code: 1", rank="")
        print("EOFError", flush=True)
        sys.exit(1)
    log("KV Cache is allocated. #tokens: 444500, K size: 27.13 GB, V size: 27.13 GB")
    log("Memory pool end. avail mem=8.34 GB")
    log("Capture cuda graph begin. This can take up to several minutes. avail mem=8.10 GB")
    if mode == "hang":
        time.sleep(3600)
    log("Capture cuda graph end. Time elapsed: 6.57 s. mem usage=0.40 GB. avail mem=7.70 GB.")
    log(
        f"max_total_num_tokens=444500, chunked_prefill_size={args.chunked_prefill_size or 8192}, "
        f"max_prefill_tokens={args.max_prefill_tokens}, "
        f"max_running_requests={args.max_running_requests or 2048}, context_len=131072, "
        "available_gpu_mem=7.70 GB"
    )
    serve(args, mode)


def serve(args: argparse.Namespace, mode: str) -> None:
    info = server_info(args)
    warm = {"done": False}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *a: object) -> None:
            pass

        def reply(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path in ("/health", "/health_generate"):
                self.reply(200 if warm["done"] else 503)
            elif path in ("/server_info", "/get_server_info"):
                self.reply(200, json.dumps(info).encode())
            elif path in ("/model_info", "/get_model_info"):
                model = {"model_path": args.model_path, "is_generation": True}
                self.reply(200, json.dumps(model).encode())
            elif path == "/v1/models":
                card = {
                    "id": args.model_path,
                    "object": "model",
                    "owned_by": "sglang",
                    "root": args.model_path,
                    "max_model_len": 131072,
                }
                self.reply(200, json.dumps({"object": "list", "data": [card]}).encode())
            elif path == "/metrics":
                self.reply(200, DUMP.read_bytes(), "text/plain; version=0.0.4")
            else:
                self.reply(404, b'{"detail":"Not Found"}')

        def do_POST(self) -> None:
            if mode == "die-on-request":
                print("Fatal Python error: Segmentation fault", flush=True)
                os.kill(os.getpid(), signal.SIGSEGV)
            self.reply(404, b'{"detail":"Not Found"}')

    httpd = ThreadingHTTPServer((args.host, args.port), Handler)
    log(f"INFO:     Started server process [{os.getpid()}]", rank="")
    log("INFO:     Waiting for application startup.", rank="")
    log("INFO:     Application startup complete.", rank="")
    log(
        f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)",
        rank="",
    )
    log("The server is fired up and ready to roll!", rank="")
    warm["done"] = True
    httpd.serve_forever()


if __name__ == "__main__":
    main()
