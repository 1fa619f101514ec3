//! Regular expressions (the common subset of ECMA-262 and Python `re`) to grammar.
//!
//! Pipeline: [`Regex::parse`] turns a pattern into a small AST (codepoint sets, concatenation,
//! alternation, bounded repetition, anchors). From there two paths lead to EBNF:
//! - [`regex_to_ebnf`] mirrors the pattern's structure directly (compact, `x{m,n}` kept as is);
//! - [`CharDfa::from_regex`] builds a deterministic automaton over Unicode scalar values, which the
//!   JSON Schema converter combines (intersection, complement, length bounds) and prints with
//!   [`CharDfa::to_ebnf`], either as raw text or as the body of a JSON string literal.
//!
//! Status: skeleton; the bodies are being filled in.
use crate::error::{Error, ErrorKind, Result};

/// Most states of one [`CharDfa`]; building or combining automata past it is a `LimitExceeded` error.
pub const MAX_DFA_STATES: usize = 10_000;

fn not_yet(what: &str) -> Error {
    Error::new(ErrorKind::Unsupported, format!("{what} is not implemented yet"))
}

/// Pattern flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegexFlags {
    pub ignore_case: bool,
    pub dot_all: bool,
}

/// A parsed pattern.
#[derive(Clone, Debug)]
pub struct Regex {
    _private: (),
}

impl Regex {
    /// Parses the common subset of ECMA-262 and Python `re`.
    pub fn parse(pattern: &str, flags: RegexFlags) -> Result<Regex> {
        let _ = (pattern, flags);
        Err(not_yet("regex parsing"))
    }
}

/// Whether a pattern must match the whole string or, as in JSON Schema `pattern`, anywhere in it
/// (ECMA-262 search semantics: unanchored unless the pattern anchors itself with ^ / $).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchoring {
    FullMatch,
    Search,
}

/// How a language of strings is spelled in the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextMode {
    /// The string's UTF-8 bytes as they are.
    Raw,
    /// The body (between the quotes) of a JSON string literal whose decoded value is in the language.
    JsonStringBody,
}

/// A deterministic finite automaton over Unicode scalar values.
#[derive(Clone, Debug)]
pub struct CharDfa {
    _private: (),
}

impl CharDfa {
    pub fn from_regex(re: &Regex, anchoring: Anchoring) -> Result<CharDfa> {
        let _ = (re, anchoring);
        Err(not_yet("regex automata"))
    }
    pub fn any_string() -> CharDfa {
        CharDfa { _private: () }
    }
    pub fn literal(s: &str) -> CharDfa {
        let _ = s;
        CharDfa { _private: () }
    }
    pub fn length_between(min: u64, max: Option<u64>) -> Result<CharDfa> {
        let _ = (min, max);
        Err(not_yet("length automata"))
    }
    pub fn intersect(&self, other: &CharDfa) -> Result<CharDfa> {
        let _ = other;
        Err(not_yet("automaton intersection"))
    }
    pub fn union(&self, other: &CharDfa) -> Result<CharDfa> {
        let _ = other;
        Err(not_yet("automaton union"))
    }
    #[must_use]
    pub fn complement(&self) -> CharDfa {
        self.clone()
    }
    pub fn difference(&self, other: &CharDfa) -> Result<CharDfa> {
        let _ = other;
        Err(not_yet("automaton difference"))
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn accepts(&self, s: &str) -> bool {
        let _ = s;
        false
    }
    pub fn finite_strings(&self, limit: usize) -> Option<Vec<String>> {
        let _ = limit;
        None
    }
    pub fn is_subset_of(&self, other: &CharDfa) -> Result<bool> {
        let _ = other;
        Err(not_yet("automaton inclusion"))
    }
    pub fn to_ebnf(&self, rule_prefix: &str, mode: TextMode) -> String {
        let _ = mode;
        format!("{rule_prefix} ::= \"\"\n")
    }
    pub fn num_states(&self) -> usize {
        0
    }
}

/// `Grammar.from_regex`: full match, raw UTF-8; the entry rule is `rule_name`.
pub fn regex_to_ebnf(pattern: &str, rule_name: &str) -> Result<String> {
    let _ = (pattern, rule_name);
    Err(not_yet("regular expressions"))
}
