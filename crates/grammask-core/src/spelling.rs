//! Output spelling policy for every JSON front end (builtin JSON grammar, JSON Schema): which JSON
//! texts of a value the grammar admits. Takes nothing from the pipeline; the front ends read the
//! EBNF fragments here when they write their rules.
//!
//! [`Spelling::Canonical`] (the default) admits, for every value, the spellings that common
//! serializers (Python `json.dumps` with or without `ensure_ascii`, JavaScript `JSON.stringify`,
//! serde_json) write, and nothing that parses to a non-finite float:
//! - strings: printable ASCII other than `"` and `\` raw only (no `\u0061`, no `\/`); `"` and `\`
//!   as `\"` and `\\`; U+0008, U+0009, U+000A, U+000C, U+000D as `\b \t \n \f \r`; the other
//!   control characters U+0000..U+001F as `\u00XX`; U+007F and everything above it either raw
//!   (UTF-8) or as `\uXXXX` (astral characters as a surrogate pair), hex digits in either case.
//!   Every string value keeps at least one spelling.
//! - integers (`integer` schemas): `0` or `-?[1-9][0-9]*` with at most 308 digits: no fraction,
//!   no exponent, no `-0`; every value is finite as a float64 (below 10^308).
//! - other numbers: `-?int(.frac)?` with `frac` without trailing zeros (except `.0`) and an
//!   integer part of at most 308 digits, or scientific notation `-?d(.frac)?e[+-]?exp` with one
//!   non-zero digit before the point and `exp <= 307` (negative exponents up to 3 digits, leading
//!   zeros allowed as in Python's `1e-07`); no `-0`, no `-0.0`. Every value is finite.
//! - whitespace runs: at most [`DEFAULT_MAX_WHITESPACE`] characters unless the caller sets a bound.
//!
//! [`Spelling::Any`] is the exact JSON language: every escape, every number spelling, unbounded
//! whitespace; use it to validate given text.

/// How JSON values are spelled in generated grammars (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Spelling {
    /// What common serializers write; every number finite; bounded whitespace runs.
    #[default]
    Canonical,
    /// Every spelling JSON (ECMA-404) allows.
    Any,
}

impl Spelling {
    /// Parses the Python-facing option value (`"canonical"` or `"any"`).
    pub fn parse(s: &str) -> Option<Spelling> {
        match s {
            "canonical" => Some(Spelling::Canonical),
            "any" => Some(Spelling::Any),
            _ => None,
        }
    }

    /// The whitespace-run bound in effect: the caller's, else [`DEFAULT_MAX_WHITESPACE`] for
    /// canonical spelling and none for [`Spelling::Any`].
    pub fn whitespace_bound(self, requested: Option<u32>) -> Option<u32> {
        requested.or(match self {
            Spelling::Canonical => Some(DEFAULT_MAX_WHITESPACE),
            Spelling::Any => None,
        })
    }
}

/// Default bound on a whitespace run under canonical spelling: a newline and 4-space indentation
/// to depth 15 (`json.dumps(indent=4)`), or 2-space indentation to depth 31.
pub const DEFAULT_MAX_WHITESPACE: u32 = 64;

/// Largest number of integer digits a canonical number takes: every such value is below 10^308,
/// so finite as a float64 (whose largest value is about 1.8 * 10^308).
pub const MAX_INT_DIGITS: u32 = 308;

/// Body of the rule matching one JSON string character under canonical spelling (any scalar
/// value, one or two spellings each; see the module doc).
pub const CHAR_CANONICAL_BODY: &str = concat!(
    "[^\"\\\\\\u0000-\\u001f] | \"\\\\\" [\"\\\\bfnrt] | \"\\\\u00\" (\"0\" [0-7bBeEfF] | \"1\" [0-9a-fA-F])",
    " | \"\\\\u\" (\"007\" [fF] | \"00\" [89a-fA-F] [0-9a-fA-F] | \"0\" [1-9a-fA-F] [0-9a-fA-F]{2}",
    " | [1-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})",
    " | \"\\\\u\" [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}"
);

/// Canonical integers (an EBNF expression, parenthesized): `0` or `-?[1-9][0-9]{0,307}`.
pub const INT_CANONICAL: &str = "(\"0\" | \"-\"? [1-9] [0-9]{0,307})";

/// Canonical numbers (an EBNF expression, parenthesized; see the module doc).
pub const NUMBER_CANONICAL: &str = concat!(
    "(\"0\" \".0\"? | \"-\"? (\"0.\" [0-9]* [1-9] | [1-9] [0-9]{0,307} (\".\" ([0-9]* [1-9] | \"0\"))?",
    " | [1-9] (\".\" [0-9]* [1-9])? [eE] (\"-\" [0-9]{1,3} | \"+\"? ([0-9]{1,2} | [0-2] [0-9]{2} | \"30\" [0-7]))))"
);

/// Short escapes canonical spelling uses: (character, letter after the backslash).
pub const CANONICAL_SHORT_ESCAPES: [(char, char); 7] =
    [('"', '"'), ('\\', '\\'), ('\u{8}', 'b'), ('\u{c}', 'f'), ('\n', 'n'), ('\r', 'r'), ('\t', 't')];

/// Whether the character `c` is written raw and only raw under canonical spelling.
pub fn raw_only(c: char) -> bool {
    (' '..='~').contains(&c) && c != '"' && c != '\\'
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;

    #[test]
    fn fragments_parse() {
        for body in [CHAR_CANONICAL_BODY, INT_CANONICAL, NUMBER_CANONICAL] {
            parse_ebnf(&format!("root ::= {body}"), "root").unwrap();
        }
    }
}
