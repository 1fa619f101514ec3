"""grammask: grammar-constrained decoding with a Rust core.

Pipeline: :class:`TokenizerInfo` (from a Hugging Face tokenizer) -> :class:`GrammarCompiler`
(cached) -> :class:`CompiledGrammar` -> one :class:`GrammarMatcher` per sequence, which fills a
token bitmask before each step and accepts the sampled token; :func:`apply_token_bitmask_inplace`
masks the logits. The API is a drop-in for XGrammar 0.2.8's: ``import grammask as xgr``.
"""

from . import config, exception, testing
from ._core import __version__
from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace, get_bitmask_shape, reset_token_bitmask
from .compiler import CompiledGrammar, GrammarCompiler
from .config import (
    get_max_recursion_depth,
    get_serialization_version,
    max_recursion_depth,
    set_max_recursion_depth,
)
from .exception import (
    DeserializeFormatError,
    DeserializeVersionError,
    GrammarSyntaxError,
    GrammaskError,
    InvalidArgumentError,
    InvalidGrammarError,
    InvalidJSONError,
    InvalidSchemaError,
    InvalidStructuralTagError,
    LimitExceededError,
    UnsupportedFeatureError,
)
from .grammar import Grammar
from .matcher import BatchGrammarMatcher, GrammarMatcher
from .tokenizer_info import TokenizerInfo, VocabType

__all__ = [
    "BatchGrammarMatcher",
    "CompiledGrammar",
    "DeserializeFormatError",
    "DeserializeVersionError",
    "Grammar",
    "GrammarCompiler",
    "GrammarMatcher",
    "GrammarSyntaxError",
    "GrammaskError",
    "InvalidArgumentError",
    "InvalidGrammarError",
    "InvalidJSONError",
    "InvalidSchemaError",
    "InvalidStructuralTagError",
    "LimitExceededError",
    "TokenizerInfo",
    "UnsupportedFeatureError",
    "VocabType",
    "__version__",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_dtype",
    "config",
    "exception",
    "get_bitmask_shape",
    "get_max_recursion_depth",
    "get_serialization_version",
    "max_recursion_depth",
    "reset_token_bitmask",
    "set_max_recursion_depth",
    "testing",
]

# `hf` (grammask.contrib.hf, which imports transformers) is reached lazily and kept out of
# __all__ so that `from grammask import *` stays fast; XGrammar lists it in its __all__.

# XGrammar 0.1 names (deprecated, warn on use; not in __all__): see grammask._legacy.
_LEGACY = ("BNFGrammar", "BuiltinGrammar", "CachedGrammarCompiler")


_STRUCTURAL_TAG_NAMES = (
    "structural_tag",
    "builtin_structural_tag",
    "openai_tool_call_schema",
    "StructuralTag",
    "StructuralTagItem",
    "get_model_structural_tag",
    "get_builtin_structural_tag",
    "normalize_tool_choice",
    "register_model_structural_tag",
)


def __getattr__(name: str):
    # torch is optional and imported lazily: bitmask_dtype is torch.int32 when torch is installed
    # (as in XGrammar), numpy.int32 otherwise.
    if name == "bitmask_dtype":
        from .bitmask import _torch

        torch = _torch()
        if torch is not None:
            return torch.int32
        import numpy

        return numpy.int32
    if name in _STRUCTURAL_TAG_NAMES:
        # Imported on first use: structural tags need pydantic.
        import importlib

        if name in ("structural_tag", "builtin_structural_tag", "openai_tool_call_schema"):
            return importlib.import_module("." + name, __name__)
        module = "structural_tag" if name in ("StructuralTag", "StructuralTagItem") else "builtin_structural_tag"
        return getattr(importlib.import_module("." + module, __name__), name)
    if name in ("hf", "contrib"):
        # Imported on first use: the transformers integration imports transformers.
        import importlib

        contrib = importlib.import_module(".contrib", __name__)
        if name == "contrib":
            return contrib
        return importlib.import_module(".contrib.hf", __name__)
    if name in _LEGACY:
        from . import _legacy

        return getattr(_legacy, name)
    from ._compat import GAPS, missing

    if name in GAPS:
        raise missing(name)
    raise AttributeError(f"module 'grammask' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"bitmask_dtype", "contrib", "hf"})
