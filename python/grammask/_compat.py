"""Names of XGrammar 0.2.8's top-level module that grammask does not provide (yet), with the message
``grammask.<name>`` raises (an ``AttributeError``, so ``hasattr`` keeps working). The allow-list
that ``tests/test_api_compat.py`` and ``tools/xgrammar_compat.py`` read; every other public XGrammar
name must exist in grammask."""

from __future__ import annotations

from typing import Dict

# name -> (kind, message). kind "in progress elsewhere": another change adds it; "not provided":
# an XGrammar implementation detail with no counterpart.
GAPS: Dict[str, tuple] = {
    "base": (
        "not provided",
        "xgrammar.base is XGrammar's binding loader; grammask's binding is grammask._core",
    ),
    "load_binding": (
        "not provided",
        "xgrammar.load_binding loads XGrammar's C++ library; grammask's binding is grammask._core",
    ),
    "tvm_ffi_binding": (
        "not provided",
        "xgrammar.tvm_ffi_binding is XGrammar's FFI layer; grammask's binding is grammask._core",
    ),
}


def missing(name: str) -> AttributeError:
    """The error ``grammask.<name>`` raises for a gap."""
    kind, message = GAPS[name]
    return AttributeError(f"grammask has no {name!r} ({kind}): {message}")
