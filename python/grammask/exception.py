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
    """A serialized object was written by an incompatible version of grammask."""


class InvalidStructuralTagError(GrammaskError):
    """A structural tag is malformed or uses an unsupported format."""


def _reraise_version(err: DeserializeFormatError) -> Exception:
    """Deserialization errors about versions become :class:`DeserializeVersionError`."""
    if "version" in str(err):
        return DeserializeVersionError(str(err))
    return err
