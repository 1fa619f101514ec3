//! grammask-core: grammar-constrained decoding without Python.
//!
//! Pipeline: text front ends ([`ebnf`], [`regex`], [`json_schema`]) produce a [`grammar::Grammar`]
//! (rules over an expression arena). [`compiler`] turns each rule body into a byte-level automaton
//! whose edges are byte ranges or rule references, and pairs it with a [`vocab::Vocabulary`] into a
//! shared, immutable [`compiler::CompiledGrammar`]. A [`matcher::Matcher`] runs an Earley parser over
//! those automata ([`earley`]), one chart row per input byte, and [`mask`] computes the set of tokens
//! that keep the input a valid prefix, memoizing per parser kernel state in the compiled grammar.
//!
//! ```text
//! let vocab = Arc::new(Vocabulary::new(tokens, VocabType::ByteLevel, opts)?);
//! let grammar = Grammar::from_ebnf(text, "root")?;
//! let compiled = Arc::new(CompiledGrammar::new(&grammar, vocab)?);
//! let mut m = Matcher::new(compiled.clone(), MatcherOptions::default());
//! loop { m.fill_next_token_bitmask(&mut row)?; /* sample t */ if !m.accept_token(t) { .. } }
//! ```
#![forbid(unsafe_code)]

pub mod bitset;
pub mod budget;
pub mod builtin;
pub mod cache;
pub mod combine;
pub mod compiler;
pub mod earley;
pub mod ebnf;
pub mod error;
pub mod fasthash;
pub mod follow;
pub mod grammar;
pub mod json_string;
pub mod json_schema;
pub mod limits;
pub mod mask;
pub mod matcher;
pub mod print;
pub mod regex;
pub mod serialize;
pub mod slice;
pub mod spelling;
pub mod trie;
pub mod vocab;

pub use error::{Error, ErrorKind};
