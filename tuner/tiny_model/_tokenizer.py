"""The tiny model's tokenizer: a byte-level BPE trained on the corpus shipped beside it.

Byte-level pre-tokenization with the full 256-byte alphabet means any text encodes, so bench
prompts and chat messages never hit an unknown token. Training is deterministic for a given
corpus and vocabulary size, so two builds give the same ``tokenizer.json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from slotune.collector.errors import ConfigError

BOS = "<s>"
EOS = "</s>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
SPECIAL_TOKENS = (BOS, EOS, "<unk>", *ROLE_TOKENS)

# Each message is "<|role|>\n{content}<|end|>\n"; the prompt for a reply ends with the
# assistant's role token, so the model continues as the assistant.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def _tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as e:
        raise ConfigError(
            "building the tiny model's tokenizer needs the 'tokenizers' package: "
            "pip install 'slotune[tiny-model]'"
        ) from e
    return tokenizers


def corpus_text() -> str:
    """The training text shipped with slotune."""
    return resources.files(__package__).joinpath("corpus.md").read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The trained vocabulary: its size and the ids the model is let to produce."""

    size: int
    word_ids: tuple[int, ...]


def train_tokenizer(out_dir: Path, vocab_size: int) -> Vocabulary:
    """Train the BPE and write ``tokenizer.json`` into ``out_dir``.

    The word ids are the tokens that decode on their own to text with a letter or digit: no
    special token, no lone byte of a multi-byte character, no bare space or punctuation.
    """
    tk = _tokenizers()
    tokenizer = tk.Tokenizer(tk.models.BPE())
    tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_text().splitlines(), trainer=trainer)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    size = int(tokenizer.get_vocab_size())
    word_ids = tuple(i for i in range(size) if _is_word(tokenizer.decode([i])))
    return Vocabulary(size, word_ids)


def _is_word(text: str) -> bool:
    # Special tokens decode to "" (skipped); a partial UTF-8 sequence decodes to U+FFFD.
    return "\ufffd" not in text and re.search(r"\w", text) is not None


def tokenizer_config(model_max_len: int) -> dict[str, object]:
    """``tokenizer_config.json`` for transformers' fast tokenizer, with the chat template."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": "<unk>",
        "pad_token": EOS,
        "add_bos_token": False,
        "model_max_length": model_max_len,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
