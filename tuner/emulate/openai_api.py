"""OpenAI-compatible request parsing and response formatting, shaped like vLLM's server.

Errors use the OpenAI envelope ``{"error": {"message", "type", "param", "code"}}`` that vLLM
returns, with vLLM's wording for the model check and the context-length checks. Streaming
follows vLLM: completions chunks carry ``choices[0].text``; chat chunks carry
``choices[0].delta.content`` (the first chunk also ``"role": "assistant"``); with
``stream_options.include_usage`` a last chunk with empty ``choices`` carries ``usage``; the
stream ends with ``data: [DONE]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from slotune.tuner.emulate.prompts import render_chat, token_ids_of_text


class ApiKind(Enum):
    COMPLETION = "completion"
    CHAT = "chat"


class ApiError(Exception):
    """An HTTP error answer: status, OpenAI error type, message, offending parameter."""

    def __init__(self, status: int, err_type: str, message: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.err_type = err_type
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, "BadRequestError", message, param)


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A validated completion or chat request."""

    kind: ApiKind
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    min_tokens: int
    stream: bool
    include_usage: bool


def parse_request(
    body: Any, kind: ApiKind, served_model_name: str, max_model_len: int
) -> GenerationRequest:
    """Validate a request body the way vLLM does.

    Args:
        body: the decoded JSON body.
        kind: completions or chat completions.
        served_model_name: the only model name accepted.
        max_model_len: prompt plus output tokens may not exceed this.

    Raises:
        ApiError: 400 for an invalid request, 404 for an unknown model.
    """
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    model = body.get("model")
    if model is not None and model != served_model_name:
        raise ApiError(404, "NotFoundError", f"The model `{model}` does not exist.", "model")
    n = body.get("n", 1)
    if n != 1:
        raise bad_request(
            f"n={n} is not supported by the emulated engine, which returns one "
            "choice per request; send n=1 (or omit n).",
            "n",
        )
    prompt_ids = _prompt_ids(body) if kind is ApiKind.COMPLETION else _chat_ids(body)
    stream = _bool(body, "stream")
    stream_options = body.get("stream_options")
    if stream_options is not None and not stream:
        raise bad_request(
            "Stream options can only be defined when `stream=True`.", "stream_options"
        )
    include_usage = bool(stream_options.get("include_usage")) if stream_options else False
    max_tokens = _requested_max_tokens(body, kind)
    num_prompt = len(prompt_ids)
    if num_prompt >= max_model_len:
        raise bad_request(
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"request has {num_prompt} input tokens. Please reduce the length of the input "
            "messages.",
            "input_tokens",
        )
    if max_tokens is None:
        max_tokens = max_model_len - num_prompt
    elif num_prompt + max_tokens > max_model_len:
        raise bad_request(
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
            f"maximum context length is {max_model_len} tokens and your request has "
            f"{num_prompt} input tokens ({max_tokens} > {max_model_len} - {num_prompt}).",
            "max_tokens",
        )
    min_tokens = _int(body, "min_tokens", 0)
    if min_tokens < 0:
        raise bad_request(
            f"min_tokens must be greater than or equal to 0, got {min_tokens}.", "min_tokens"
        )
    if min_tokens > max_tokens:
        raise bad_request(
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
            "min_tokens",
        )
    _bool(body, "ignore_eos")
    return GenerationRequest(kind, tuple(prompt_ids), max_tokens, min_tokens, stream, include_usage)


def _prompt_ids(body: dict[str, Any]) -> list[int]:
    if "prompt_token_ids" in body:
        return _token_list(body["prompt_token_ids"], "prompt_token_ids")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        ids = token_ids_of_text(prompt)
    elif isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        ids = _token_list(prompt, "prompt")
    elif isinstance(prompt, list):
        raise bad_request(
            "Batched prompts are not supported by the emulated engine; send one "
            "prompt (a string or a list of token ids) per request.",
            "prompt",
        )
    else:
        raise bad_request("prompt is required: a string or a list of token ids.", "prompt")
    if not ids:
        raise bad_request("The prompt cannot be empty.", "prompt")
    return ids


def _chat_ids(body: dict[str, Any]) -> list[int]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request(
            "messages is required: a non-empty list of {role, content} objects.", "messages"
        )
    pairs = [(_role(m, i), _content_text(m, i)) for i, m in enumerate(messages)]
    return token_ids_of_text(render_chat(pairs))


def _role(message: Any, index: int) -> str:
    role = message.get("role") if isinstance(message, dict) else None
    if not isinstance(role, str):
        raise bad_request(f"messages[{index}].role must be a string.", "messages")
    return role


def _content_text(message: dict[str, Any], index: int) -> str:
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "\n".join(str(p) for p in parts)
    raise bad_request(
        f"messages[{index}].content must be a string or a list of content parts.", "messages"
    )


def _requested_max_tokens(body: dict[str, Any], kind: ApiKind) -> int | None:
    name = "max_tokens"
    value = body.get("max_tokens")
    if kind is ApiKind.CHAT and body.get("max_completion_tokens") is not None:
        name, value = "max_completion_tokens", body["max_completion_tokens"]
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise bad_request(f"{name} must be an integer, got {value!r}.", name)
    if value < 1:
        raise bad_request(f"max_tokens must be at least 1, got {value}.", name)
    return value


def _token_list(value: Any, name: str) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value
    ):
        raise bad_request(f"{name} must be a list of non-negative integer token ids.", name)
    return list(value)


def _int(body: dict[str, Any], name: str, default: int) -> int:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise bad_request(f"{name} must be an integer, got {value!r}.", name)
    return value


def _bool(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"{name} must be a boolean, got {value!r}.", name)
    return value


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    """What every chunk and response of one request shares."""

    kind: ApiKind
    response_id: str
    created: int
    model: str
    _mid_parts: tuple[bytes, bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Mid-stream chunks differ only in their text: encode everything else once.
        prefix, _, suffix = self._encode_chunk("\x00", None, False).partition(b'"\\u0000"')
        object.__setattr__(self, "_mid_parts", (prefix, suffix))

    @property
    def _object(self) -> str:
        return "text_completion" if self.kind is ApiKind.COMPLETION else "chat.completion"

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.response_id, "object": obj, "created": self.created, "model": self.model}

    def chunk(self, text: str, finish_reason: str | None, with_role: bool = False) -> bytes:
        """One SSE event carrying ``text``."""
        if finish_reason is None and not with_role:
            prefix, suffix = self._mid_parts
            return prefix + json.dumps(text).encode() + suffix
        return self._encode_chunk(text, finish_reason, with_role)

    def _encode_chunk(self, text: str, finish_reason: str | None, with_role: bool) -> bytes:
        if self.kind is ApiKind.COMPLETION:
            choice: dict[str, Any] = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
            return _sse(self._head("text_completion") | {"choices": [choice]})
        delta = {"role": "assistant", "content": text} if with_role else {"content": text}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        if finish_reason is not None:
            choice["stop_reason"] = None
        return _sse(self._head("chat.completion.chunk") | {"choices": [choice]})

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        """The last SSE event under ``stream_options.include_usage``: empty choices, usage."""
        obj = "text_completion" if self.kind is ApiKind.COMPLETION else "chat.completion.chunk"
        return _sse(
            self._head(obj) | {"choices": [], "usage": usage(prompt_tokens, completion_tokens)}
        )

    def full_response(
        self, text: str, finish_reason: str, prompt_tokens: int, completion_tokens: int
    ) -> dict[str, Any]:
        """The non-streaming response body."""
        if self.kind is ApiKind.COMPLETION:
            choice: dict[str, Any] = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
                "prompt_logprobs": None,
            }
        else:
            choice = {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": None,
                    "tool_calls": [],
                },
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
        return self._head(self._object) | {
            "choices": [choice],
            "usage": usage(prompt_tokens, completion_tokens),
        }


DONE = b"data: [DONE]\n\n"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
