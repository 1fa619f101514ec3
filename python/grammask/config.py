"""Process-wide settings with XGrammar 0.2.8's names: the maximum recursion depth and the
serialization format version.

grammask's parsers and matchers use explicit stacks, never the call stack, so the recursion depth
bounds nothing here: the value is validated and stored (``1 <= depth <= 1_000_000``, as in
XGrammar) so that code setting it keeps working. Nesting of untrusted input is bounded by the
limits in ``docs/limits.md`` instead. The default is 10,000, or the integer in
``GRAMMASK_MAX_RECURSION_DEPTH`` (else ``XGRAMMAR_MAX_RECURSION_DEPTH``) when it is valid.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

from .exception import InvalidArgumentError

__all__ = [
    "get_max_recursion_depth",
    "set_max_recursion_depth",
    "max_recursion_depth",
    "get_serialization_version",
]

_DEFAULT_DEPTH = 10_000
_MAX_DEPTH = 1_000_000
_lock = threading.Lock()
_depth: Optional[int] = None  # None: not set, read the environment
_serialization_version: Optional[str] = None


def _depth_from_env() -> int:
    for name in ("GRAMMASK_MAX_RECURSION_DEPTH", "XGRAMMAR_MAX_RECURSION_DEPTH"):
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            depth = int(value)
        except ValueError:
            continue
        if 1 <= depth <= _MAX_DEPTH:
            return depth
    return _DEFAULT_DEPTH


def get_max_recursion_depth() -> int:
    """The maximum recursion depth: the value last set with :func:`set_max_recursion_depth`, else
    ``$GRAMMASK_MAX_RECURSION_DEPTH`` / ``$XGRAMMAR_MAX_RECURSION_DEPTH`` when valid, else 10000.
    Shared by the whole process."""
    with _lock:
        return _depth if _depth is not None else _depth_from_env()


def set_max_recursion_depth(max_recursion_depth: int) -> None:
    """Set the process-wide maximum recursion depth (thread-safe). Outside ``[1, 1_000_000]``
    raises :class:`~grammask.InvalidArgumentError` (a ``RuntimeError``, as in XGrammar)."""
    global _depth
    if isinstance(max_recursion_depth, bool) or not isinstance(max_recursion_depth, int):
        raise InvalidArgumentError(
            f"max_recursion_depth must be an int, got {max_recursion_depth!r}"
        )
    if not 1 <= max_recursion_depth <= _MAX_DEPTH:
        raise InvalidArgumentError(
            f"max_recursion_depth must be positive and at most {_MAX_DEPTH}, "
            f"got {max_recursion_depth}"
        )
    with _lock:
        _depth = max_recursion_depth


@contextmanager
def max_recursion_depth(temp_depth: int) -> Iterator[None]:
    """A context manager that sets the maximum recursion depth to ``temp_depth`` and restores the
    previous value on exit (also when the block raises)."""
    previous = get_max_recursion_depth()
    set_max_recursion_depth(temp_depth)
    try:
        yield
    finally:
        set_max_recursion_depth(previous)


def get_serialization_version() -> str:
    """The version tag written into serialized grammars (``"__VERSION__"`` of
    :meth:`Grammar.serialize_json`); deserializing another version raises
    :class:`~grammask.DeserializeVersionError`. grammask's format is its own (``"grammask-2"``),
    not XGrammar's (``"v16"``): the two libraries do not read each other's serializations."""
    global _serialization_version
    if _serialization_version is None:
        from .grammar import Grammar

        _serialization_version = str(
            json.loads(Grammar.from_ebnf('root ::= ""').serialize_json())["__VERSION__"]
        )
    return _serialization_version
