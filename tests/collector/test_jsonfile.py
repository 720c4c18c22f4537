"""The one JSON decoder of user input: what it refuses, and that it names the field."""

from __future__ import annotations

import pytest

from slotune.collector.errors import ConfigError
from slotune.collector.jsonfile import read_json


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000, "f:3: nests deeper than 64 levels"),
        ('{"a": [1, ' + "9" * 401 + "]}", "f:3: field 'a.1': an integer of more than 20 digits"),
        ('{"a": ' + "9" * 5000 + "}", "f:3: an integer of more than 20 digits"),
        ('{"a": {"b": NaN}}', "f:3: field 'a.b': NaN is not a number JSON allows"),
        ('{"a": -Infinity}', "f:3: field 'a': -Infinity is not a number JSON allows"),
        ('{"a": 1e999}', "f:3: field 'a': a number too large to be finite"),
        ('{"p": "\\ud800"}', "f:3: field 'p': holds a lone surrogate"),
        ('{"a": 1', "f:3: not valid JSON (Expecting ',' delimiter at column 8)"),
        (b"\xff", "f:3: not UTF-8 text"),
    ],
)
def test_hostile_json_is_one_error_naming_the_field(text: str | bytes, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        read_json(text, source="f:3")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"s": "' + "[" * 200 + '"}', {"s": "[" * 200}),  # brackets in a string do not nest
        ('{"p": "\\ud83d\\ude00"}', {"p": "\U0001f600"}),  # a surrogate pair
        ('{"id": 18446744073709551615}', {"id": 2**64 - 1}),
        ("[1.5e308, -0.0]", [1.5e308, -0.0]),
    ],
)
def test_valid_json_is_read_as_the_standard_decoder_reads_it(text: str, value: object) -> None:
    assert read_json(text, source="f") == value


def test_the_error_class_is_the_callers() -> None:
    class BodyError(ConfigError):
        pass

    with pytest.raises(BodyError, match="request body: field 'x'"):
        read_json('{"x": NaN}', source="request body", error=BodyError)
