//! EBNF text -> [`Grammar`]: the first stage of the pipeline for grammars written by hand.
//!
//! Two dialects:
//! - [`parse_ebnf`]: XGrammar's GBNF-like dialect (`name ::= expr`, string literals with escapes,
//!   character classes, `( )`, `|`, `* + ? {m} {m,} {m,n}`, `#` comments, a lookahead assertion
//!   `(= expr)` at the end of a rule, and the `Regex("...")` macro, expanded through
//!   [`crate::regex`] into rules imported after the written ones), and grammask's
//!   `JsonStringIn("a", ...)` and `JsonStringExcept("a", ...)` (JSON string contents that are,
//!   or are not, the listed strings, see [`crate::grammar::Expr::JsonStringIn`]), the token
//!   macros `Token(...)`, `ExcludeToken(...)`, `TokenTagDispatch(...)` (`parser/token_macros.rs`)
//!   and `TagDispatch(...)` (`parser/tag_dispatch.rs`), and rule options
//!   (`name[max_chars=N, lazy, capture, temperature=x, ...]`, `rule_options.rs`, see
//!   [`crate::rule_options`]).
//! - [`parse_iso_ebnf`]: the ISO-style dialect of ollama's grammar package (`name = expr .`,
//!   `"a" … "z"` ranges, `[optional]`, `{repeated}`, `( )`, `|`; `#`, `//` and `/* */` comments;
//!   Go raw strings in backquotes). The range operator is the ellipsis `…` (U+2026), as in Go's
//!   `x/exp/ebnf`; string escapes are those of the XGrammar dialect (no Go octal escapes).
//!
//! Escapes denote Unicode scalar values: string literals become UTF-8 [`crate::grammar::Expr::Bytes`],
//! classes become code point ranges. Rules are numbered in definition order. The printer in
//! [`crate::print`] writes the XGrammar dialect back.

mod cursor;
mod parser;
mod rule_options;
#[cfg(test)]
mod tests;

use crate::error::Result;
use crate::grammar::Grammar;
use parser::{Dialect, Parser};

/// Parses XGrammar-dialect EBNF; `root_rule_name` names the start rule.
pub fn parse_ebnf(text: &str, root_rule_name: &str) -> Result<Grammar> {
    check_size(text)?;
    Parser::new(text, Dialect::XGrammar).parse(root_rule_name)
}

/// [`parse_ebnf`], with `extra` defining more rules (which the text may reference) in the
/// builder after the text's rules; it returns their builder ids. Those rules are numbered after
/// the text's: the grammar comes with their ids in it, in `extra`'s order (not the builder's
/// ids). `extra_bytes`: about the text those rules would take (a hint to reserve room for them).
pub(crate) fn parse_ebnf_with(
    text: &str,
    root_rule_name: &str,
    extra_bytes: usize,
    extra: impl FnOnce(&mut crate::grammar::GrammarBuilder) -> Result<Vec<crate::grammar::RuleId>>,
) -> Result<(Grammar, Vec<crate::grammar::RuleId>)> {
    check_size(text)?;
    Parser::new(text, Dialect::XGrammar).parse_with(root_rule_name, extra_bytes, extra)
}

fn check_size(text: &str) -> Result<()> {
    if text.len() > crate::limits::MAX_GRAMMAR_BYTES {
        return Err(crate::error::Error::limit("grammar text (bytes)", crate::limits::MAX_GRAMMAR_BYTES));
    }
    Ok(())
}

/// Parses ISO-style EBNF (`rule = expr .`); `root_rule_name` names the start rule.
pub fn parse_iso_ebnf(text: &str, root_rule_name: &str) -> Result<Grammar> {
    check_size(text)?;
    Parser::new(text, Dialect::Iso).parse(root_rule_name)
}

impl Grammar {
    /// Same as [`parse_ebnf`].
    pub fn from_ebnf(text: &str, root_rule_name: &str) -> Result<Grammar> {
        parse_ebnf(text, root_rule_name)
    }
}
