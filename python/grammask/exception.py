"""The exception tree. Every grammask error derives from :class:`GrammaskError`, a ``RuntimeError``
(as XGrammar's errors are), so code that catches ``RuntimeError`` keeps working. Bad arguments
(token ids, buffer shapes, dtypes) raise ``ValueError`` or ``TypeError``."""

from ._core import (
    DeserializeFormatError,
    GrammarSyntaxError,
    GrammaskError,
    InternalError,
    InvalidArgumentError,
    InvalidGrammarError,
    InvalidJSONError,
    InvalidSchemaError,
    LimitExceededError,
    UnsupportedFeatureError,
)

__all__ = [
    "GrammaskError",
    "GrammarSyntaxError",
    "InvalidGrammarError",
    "InvalidJSONError",
    "InvalidSchemaError",
    "UnsupportedFeatureError",
    "LimitExceededError",
    "DeserializeFormatError",
    "DeserializeVersionError",
    "InvalidStructuralTagError",
    "InternalError",
    "InvalidArgumentError",
]


class DeserializeVersionError(DeserializeFormatError):
    """A serialized object was written by an incompatible version of grammask (or by XGrammar), or
    carries no version tag."""


class _DeserializeJSONError(DeserializeFormatError, InvalidJSONError):
    """Serialized input that is not JSON: a :class:`DeserializeFormatError` and, as XGrammar
    raises for it, an :class:`InvalidJSONError`."""


class InvalidStructuralTagError(GrammaskError):
    """A structural tag is malformed or uses an unsupported format."""


def _reraise_version(err: Exception) -> Exception:
    """The exception a ``deserialize_json`` raises for ``err``: input that is not JSON becomes a
    :class:`DeserializeFormatError` that is also an :class:`InvalidJSONError`; a missing or
    wrong version tag a :class:`DeserializeVersionError`; other format errors stay."""
    if isinstance(err, DeserializeFormatError) and not isinstance(err, DeserializeVersionError):
        if "version" in str(err).lower():
            return DeserializeVersionError(str(err))
        return err
    if isinstance(err, InvalidJSONError) and not isinstance(err, DeserializeFormatError):
        return _DeserializeJSONError(str(err))
    return err
