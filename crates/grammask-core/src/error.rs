//! One error type for every user-facing failure of the core, with a kind callers can match on,
//! an optional location (line/column in grammar text, or a JSON pointer in a schema) and a message
//! that says what was expected and what was found.

use std::fmt;

/// What went wrong. User errors (bad input, unsupported feature, limit hit) are separate from
/// internal errors, which are bugs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// EBNF text could not be parsed.
    EbnfSyntax,
    /// The grammar is well-formed text but semantically invalid (undefined rule, duplicate rule, ...).
    InvalidGrammar,
    /// A regular expression could not be parsed.
    RegexSyntax,
    /// A JSON document (schema, serialized object) is not valid JSON.
    InvalidJson,
    /// A JSON Schema is invalid or unsatisfiable.
    InvalidSchema,
    /// A feature (keyword, regex construct, ...) is recognised but cannot be enforced exactly.
    Unsupported,
    /// A documented size limit was exceeded.
    LimitExceeded,
    /// A caller passed a bad argument (token id, buffer shape, ...).
    InvalidArgument,
    /// A serialized object has the wrong format or version.
    Deserialize,
    /// A bug in grammask.
    Internal,
}

/// Where in the input the error is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// 1-based line and column in grammar or regex text (column counts characters).
    Text { line: u32, column: u32 },
    /// A JSON pointer into a schema, e.g. `/properties/a/pattern`.
    Pointer(String),
}

/// The core's error. Cheap to construct, `Display` gives the full human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    location: Option<Location>,
    message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, location: None, message: message.into() }
    }

    #[must_use]
    pub fn at_text(mut self, line: u32, column: u32) -> Self {
        self.location = Some(Location::Text { line, column });
        self
    }

    #[must_use]
    pub fn at_pointer(mut self, pointer: impl Into<String>) -> Self {
        self.location = Some(Location::Pointer(pointer.into()));
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn location(&self) -> Option<&Location> {
        self.location.as_ref()
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn limit(what: &str, limit: usize) -> Self {
        Error::new(ErrorKind::LimitExceeded, format!("{what} exceeds the limit of {limit}"))
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(Location::Text { line, column }) => {
                write!(f, "line {line}, column {column}: {}", self.message)
            }
            Some(Location::Pointer(p)) => {
                let p = if p.is_empty() { "#" } else { p.as_str() };
                write!(f, "at {p}: {}", self.message)
            }
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;
