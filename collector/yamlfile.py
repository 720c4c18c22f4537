"""Read the YAML files users write (SLOs, rules, targets, search spaces, fleet configs).

Every reader gets the line of each key path, so its errors can point at the file line, and
a malformed or hostile file is one clear :class:`~slotune.collector.errors.ConfigError`
(or the subclass the caller names), never PyYAML's own exception or a stack overflow.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from slotune.collector.errors import ConfigError
from slotune.collector.jsonfile import MAX_INT_DIGITS, is_unicode

# PyYAML parses flow collections recursively: near a thousand levels it takes seconds per
# file before it runs out of stack, so deeper nesting is refused before it starts.
MAX_YAML_FLOW_DEPTH = 100
_FLOW = re.compile(r"[\[\]{}]")
_INT_LIMIT = 10**MAX_INT_DIGITS

LineMap = dict[tuple[Any, ...], int]


def _line_map(node: yaml.Node) -> LineMap:
    """Map key paths to 1-based line numbers, so errors can point at the file line.

    Walked with a stack, and never into a node that contains itself (``&a [*a]``), so neither
    a recursive alias nor deep nesting can exhaust the stack here.
    """
    lines: LineMap = {}
    stack: list[tuple[yaml.Node, tuple[Any, ...], frozenset[int]]] = [(node, (), frozenset())]
    while stack:
        n, path, ancestors = stack.pop()
        lines.setdefault(path, n.start_mark.line + 1)
        if id(n) in ancestors:
            continue
        inside = ancestors | {id(n)}
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                lines[(*path, k.value)] = k.start_mark.line + 1
                stack.append((v, (*path, k.value), inside))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend((item, (*path, i), inside) for i, item in enumerate(n.value))
    return lines


def _deepest_flow(text: str) -> int:
    """How deep ``[`` and ``{`` nest (counted in strings and comments too: a bound, not a
    parse)."""
    depth = deepest = 0
    for m in _FLOW.finditer(text):
        depth = depth + 1 if m[0] in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, with a tagged value it cannot convert (``!!int 0xzz``,
    ``!!float abc``, ``!!timestamp notatime``, a 5,000-digit integer) reported as a YAML
    error at its line instead of escaping as the converter's own exception, and numbers held
    to the limits JSON input has (:mod:`slotune.collector.jsonfile`): finite, integers of at
    most :data:`~slotune.collector.jsonfile.MAX_INT_DIGITS` digits, text without lone surrogates."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            value = super().construct_object(node, deep)
        except (ValueError, TypeError, AttributeError, OverflowError) as e:
            tag = node.tag.removeprefix("tag:yaml.org,2002:")
            value = node.value if isinstance(node, yaml.ScalarNode) else type(node).__name__
            text = repr(value) if len(str(value)) <= 40 else f"{str(value)[:40]!r}..."
            raise yaml.constructor.ConstructorError(
                None, None, f"!!{tag} {text} is not a valid {tag}", node.start_mark
            ) from e
        if isinstance(value, float) and not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a finite number", node.start_mark
            )
        if isinstance(value, int) and not -_INT_LIMIT < value < _INT_LIMIT:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of more than {MAX_INT_DIGITS} digits", node.start_mark
            )
        if isinstance(value, str) and not is_unicode(value):
            raise yaml.constructor.ConstructorError(
                None, None, "a lone surrogate (\\ud800-\\udfff) is not text", node.start_mark
            )
        return value


def read_yaml(
    text: str, *, source: str, error: type[ConfigError] = ConfigError
) -> tuple[Any, LineMap]:
    """Parse YAML text; returns the data (None when empty) and the line of each key path.

    Raises:
        ``error``: not valid YAML, naming ``source`` and the line.
    """
    documents = read_yaml_documents(text, source=source, error=error)
    return documents[0] if documents else (None, {})


def read_yaml_documents(
    text: str, *, source: str, error: type[ConfigError] = ConfigError
) -> list[tuple[Any, LineMap]]:
    """Every document of a multi-document YAML text, each with the line of each key path.

    Raises:
        ``error``: not valid YAML, naming ``source`` and the line.
    """
    if _deepest_flow(text) > MAX_YAML_FLOW_DEPTH:
        raise error(
            f"{source}: nests deeper than YAML can be read ([ and {{ more than "
            f"{MAX_YAML_FLOW_DEPTH} levels deep; no configuration needs that)"
        )
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
        datas = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise error(f"{source}{line}: not valid YAML ({getattr(e, 'problem', e)})") from e
    except RecursionError:
        raise error(f"{source}: nests deeper than YAML can be read") from None
    return [
        (data, _line_map(node)) for node, data in zip(nodes, datas, strict=True) if node is not None
    ]
