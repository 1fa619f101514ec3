//! grammask-core: grammar-constrained decoding without Python.
//!
//! Pipeline: text front ends ([`ebnf`], [`regex`], [`json_schema`], [`lark`], [`builtin`]) produce a
//! [`grammar::Grammar`] (rules over an expression arena). [`compiler`] turns each rule body into a
//! byte-level automaton whose edges are byte ranges or rule references. A [`vocab::Vocabulary`]
//! gets one shared [`token_index::TokenIndex`] (token trie, [slices](mod@slice), run indexes, a
//! cross-grammar kernel cache), and the automata with the index make an immutable
//! [`compiled::CompiledGrammar`] ([`grammar_compiler::GrammarCompiler`] does it all from text, with
//! a cache). A [`matcher::Matcher`] runs an Earley parser over those automata ([`earley`]), one
//! chart row per input byte, and [`mask`] computes the set of tokens that keep the input a valid
//! prefix, memoizing per parser kernel state in the compiled grammar; [`batch`] fills many masks
//! on several threads. The engine's terms are defined in the glossary of `docs/architecture.md`.
//!
//! ```text
//! let vocab = Arc::new(Vocabulary::new(tokens, VocabType::ByteLevel, opts)?);
//! let grammar = Grammar::from_ebnf(text, "root")?;
//! let compiled = Arc::new(CompiledGrammar::new(&grammar, vocab)?);
//! let mut m = Matcher::new(compiled.clone(), MatcherOptions::default());
//! loop { m.fill_next_token_bitmask(&mut row)?; /* sample t */ if !m.accept_token(t) { .. } }
//! ```
#![forbid(unsafe_code)]

#[macro_use]
mod test_counter;

pub mod apply;
pub mod batch;
pub mod bitset;
pub mod budget;
pub mod build_counts;
pub mod builtin;
pub mod cache;
pub mod captures;
pub mod combine;
pub mod compiled;
pub mod compiler;
pub mod earley;
pub mod ebnf;
pub mod error;
pub mod fasthash;
pub mod follow;
pub mod grammar;
pub mod grammar_compiler;
pub mod json_schema;
// Lint fixes in this file wait for its concurrent rework (canonical JSON spellings).
#[allow(clippy::needless_for_each, clippy::type_complexity)]
pub mod json_string;
pub mod lark;
pub mod limits;
pub mod mask;
pub mod matcher;
pub mod print;
pub mod regex;
pub mod rule_options;
pub mod serialize;
pub mod slice;
pub mod spelling;
#[cfg(test)]
mod test_rng;
pub mod token_edges;
pub mod token_index;
pub mod token_set;
pub mod trie;
pub mod vocab;

pub use error::{Error, ErrorKind};
