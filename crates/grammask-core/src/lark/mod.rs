//! Lark text -> [`Grammar`]: the front end for the Lark dialect that llguidance defines and
//! XGrammar 0.2.8 follows (`Grammar.from_lark`, `GrammarCompiler.compile_lark`).
//!
//! Pipeline: [`syntax`] lexes and parses the text into definitions (rules `name: ...`, terminals
//! `NAME: ...`) and directives; [`lower`] builds the grammar IR: terminals become regular rules
//! (regexes go through [`crate::regex`], `%json` through [`crate::json_schema`]), rules become
//! CFG rules, and `%ignore` is made exact without a lexer by allowing the ignored lexemes after
//! every lexeme that a rule uses (a scannerless parse). The root rule is `start`.
//!
//! Semantics, coverage and the differences from llguidance's greedy lexer are in docs/lark.md.
//! Special tokens (`<|name|>`, `<[ids]>`) become token elements (`tokens.rs`; names need the
//! vocabulary: [`lark_to_grammar_with_vocab`]). Rule options (`lazy`, `max_chars`, `max_tokens`,
//! `capture`, `temperature`, `stop`, `suffix`, `stop_capture`) map to [`crate::rule_options`]
//! (`rule_options.rs`). Features that need more engine support (named grammars) are `Unsupported`
//! errors naming the feature, never silently ignored. Every error has a line and column in the Lark text.

mod common;
mod lower;
mod rule_options;
mod syntax;
#[cfg(test)]
mod tests;
mod tokens;

use crate::error::Result;
use crate::grammar::Grammar;

pub(crate) use lower::{dot_without_newline, substring_expr};
pub use syntax::MAX_LARK_NESTING;

/// Deepest nesting of `%lark { ... }` blocks.
pub const MAX_LARK_DEPTH: usize = 16;

/// Converts a Lark grammar to the grammar IR; the root is the `start` rule.
pub fn lark_to_grammar(text: &str) -> Result<Grammar> {
    if text.len() > crate::limits::MAX_GRAMMAR_BYTES {
        return Err(crate::error::Error::limit("grammar text (bytes)", crate::limits::MAX_GRAMMAR_BYTES));
    }
    lower::lower(text, 0)
}

/// [`lark_to_grammar`], with special tokens named by text (`<|name|>`) resolved in `vocab`.
pub fn lark_to_grammar_with_vocab(text: &str, vocab: &crate::vocab::Vocabulary) -> Result<Grammar> {
    tokens::with_vocab(vocab, || lark_to_grammar(text))
}

impl Grammar {
    /// Same as [`lark_to_grammar`].
    pub fn from_lark(text: &str) -> Result<Grammar> {
        lark_to_grammar(text)
    }
}
