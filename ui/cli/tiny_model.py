"""``slotune tiny-model``: a small random-weight model for running real engines without a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from slotune.ui.cli._common import JsonOption, print_json, say

tiny_model_app = typer.Typer(
    help="A tiny random-weight Llama with a locally trained tokenizer (no download), for "
    "trying slotune on a real engine such as vLLM's CPU build.",
    no_args_is_help=True,
)


@tiny_model_app.command("build")
def build_cmd(
    out_dir: Annotated[Path, typer.Argument(help="Directory to write the model into.")],
    seed: Annotated[int, typer.Option(help="Seed of the random weights.")] = 0,
    max_model_len: Annotated[
        int, typer.Option(min=16, help="Context length written into the model's config.")
    ] = 2048,
    json: JsonOption = False,
) -> None:
    """Write config, safetensors weights, tokenizer and chat template into OUT_DIR.

    Example: slotune tiny-model build ./tiny-llama, then
    python -m vllm.entrypoints.openai.api_server --model ./tiny-llama --enforce-eager.
    """
    from slotune.tuner.tiny_model import build_tiny_model

    model = build_tiny_model(out_dir, seed=seed, max_model_len=max_model_len)
    if json:
        print_json(model.to_dict())
    else:
        say(
            f"{model.path}: Llama, {model.num_params / 1e6:.1f} M parameters, vocabulary "
            f"{model.vocab_size}, context {model.max_model_len} tokens (random weights)"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(tiny_model_app, name="tiny-model")
