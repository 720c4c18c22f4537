"""``slotune emulate``: the engine simulator in real time behind an OpenAI-compatible server."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command(
        "emulate",
        context_settings={
            "allow_extra_args": True,
            "ignore_unknown_options": True,
            "help_option_names": [],
        },
        add_help_option=False,
    )
    def emulate(ctx: typer.Context) -> None:
        """Serve an emulated vLLM / TensorRT-LLM engine, started with the engine's own flags.

        Example: slotune emulate --model llama-3.1-8b --gpu h100-sxm --port 8000
        --max-num-seqs 64 --enable-prefix-caching. Run `slotune emulate --help` for every flag.
        """
        from slotune.tuner.emulate import serve

        serve(ctx.args)
