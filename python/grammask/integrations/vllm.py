"""vLLM plugin: runs vLLM's ``xgrammar`` structured-output backend on grammask.

Installed as the entry point ``grammask = grammask.integrations.vllm:register`` in the group
``vllm.general_plugins``; vLLM calls :func:`register` in each of its processes (front end, engine
core, workers) before it builds a structured-output backend. Nothing on disk is patched:

* ``vllm.v1.structured_output.backend_xgrammar`` reads the XGrammar API through one module
  global, ``xgr`` (``TokenizerInfo``, ``GrammarCompiler``, ``GrammarMatcher``,
  ``allocate_token_bitmask``, ``Grammar.from_*`` in its request validator, ...). ``register``
  points that global at :data:`XGRAMMAR_NAMES`, a namespace of grammask's drop-in names, so
  ``XgrammarBackend``, ``XgrammarGrammar`` and ``validate_xgrammar_grammar`` -- and with them
  the ``auto`` routing of ``SamplingParams`` -- run on grammask.
* the same module's ``has_xgrammar_unsupported_json_features`` (vLLM's hand-kept list of schema
  features it will not send to XGrammar) is replaced by :func:`has_unsupported_json_features`:
  grammask's own answer, i.e. whether grammask refuses the schema. A schema grammask compiles
  stays on the xgrammar backend; one it refuses falls back (to guidance or outlines) as before.
* the bitmask is applied by vLLM's own kernels (``structured_output/utils.py`` keeps calling
  XGrammar's ``apply_token_bitmask_inplace``; gpu runner v2 has its own Triton kernel): grammask
  fills the same ``int32[rows, ceil(vocab/32)]`` LSB-first layout.

Other backends (``guidance``, ``outlines``, ``lm-format-enforcer``) never read these names, so
the plugin changes nothing when vLLM is configured for one of them. Set ``GRAMMASK_VLLM=0`` to
load the plugin without installing it. ``vllm`` is imported only inside :func:`register`.
"""

from __future__ import annotations

import json
import logging
import os
import types
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

import grammask as _gm

from ..exception import GrammaskError, LimitExceededError, UnsupportedFeatureError

__all__ = [
    "XGRAMMAR_NAMES",
    "has_unsupported_json_features",
    "is_registered",
    "register",
    "unregister",
]

logger = logging.getLogger(__name__)

_BACKEND_MODULE = "vllm.v1.structured_output.backend_xgrammar"


@dataclass
class _StructuralTagItem:
    """XGrammar's legacy structural-tag item (``begin``, ``schema``, ``end``), used when grammask
    does not provide its own ``StructuralTagItem``."""

    begin: str
    schema: Union[str, Dict[str, Any]]
    end: str


class _GrammarMatcher(_gm.GrammarMatcher):
    """grammask's matcher; vLLM passes ``max_rollback_tokens`` (its speculative depth), which
    grammask does not need: rollback is unlimited."""

    def __init__(self, compiled_grammar: Any, **kwargs: Any) -> None:
        kwargs.pop("max_rollback_tokens", None)
        super().__init__(compiled_grammar, **kwargs)


def _names() -> types.SimpleNamespace:
    names = {name: getattr(_gm, name) for name in _gm.__all__ if name not in ("bitmask_dtype",)}
    names["GrammarMatcher"] = _GrammarMatcher
    names["StructuralTagItem"] = getattr(_gm, "StructuralTagItem", _StructuralTagItem)
    for optional in ("StructuralTag", "get_model_structural_tag"):
        if hasattr(_gm, optional):
            names[optional] = getattr(_gm, optional)
    names["__name__"] = "grammask (as xgrammar, for vLLM)"
    return types.SimpleNamespace(**names)


XGRAMMAR_NAMES = _names()
"""The XGrammar names vLLM's xgrammar backend uses, resolved to grammask."""


def has_unsupported_json_features(schema: Any) -> bool:
    """Whether grammask refuses this JSON schema: vLLM's "unsupported features" question,
    answered by grammask itself instead of XGrammar's hand-kept list.

    Only refusals for unsupported features or limits count; a malformed schema is left to the
    validator's own compile, which reports grammask's message.
    """
    try:
        _gm.Grammar.from_json_schema(schema if isinstance(schema, str) else json.dumps(schema))
    except (UnsupportedFeatureError, LimitExceededError):
        return True
    except (GrammaskError, ValueError, TypeError, RuntimeError):
        return False
    return False


_saved: Optional[Dict[str, Any]] = None


def register() -> None:
    """vLLM general-plugin entry point: route the ``xgrammar`` backend to grammask.

    Idempotent. Logs and does nothing when vLLM's xgrammar backend module is missing or does not
    have the expected names (a vLLM release this plugin does not know).
    """
    global _saved
    if os.environ.get("GRAMMASK_VLLM", "1") in ("0", "false", "False", "no"):
        logger.info("grammask: GRAMMASK_VLLM=0, leaving vLLM's xgrammar backend alone")
        return
    if _saved is not None:
        return
    import importlib

    try:
        module = importlib.import_module(_BACKEND_MODULE)
    except ImportError as e:
        logger.warning("grammask: vLLM has no %s (%s); plugin not installed", _BACKEND_MODULE, e)
        return
    missing = [
        n for n in ("xgr", "has_xgrammar_unsupported_json_features") if not hasattr(module, n)
    ]
    if missing:
        logger.warning(
            "grammask: %s lacks %s; this vLLM release is not supported, plugin not installed",
            _BACKEND_MODULE,
            ", ".join(missing),
        )
        return
    _saved = {
        "xgr": module.__dict__["xgr"],
        "has_xgrammar_unsupported_json_features": module.has_xgrammar_unsupported_json_features,
    }
    module.xgr = XGRAMMAR_NAMES
    module.has_xgrammar_unsupported_json_features = has_unsupported_json_features
    logger.info(
        "grammask %s: vLLM's xgrammar structured-output backend now runs on grammask",
        _gm.__version__,
    )


def unregister() -> None:
    """Undo :func:`register` (for tests and comparisons with XGrammar in one process)."""
    global _saved
    if _saved is None:
        return
    import sys

    module = sys.modules.get(_BACKEND_MODULE)
    if module is not None:
        for name, value in _saved.items():
            setattr(module, name, value)
    _saved = None


def is_registered() -> bool:
    return _saved is not None
