//! The grammar compiler of one vocabulary: every front end to a cached [`CompiledGrammar`].
//!
//! Pipeline place: the entry point of `GrammarCompiler` in the Python API. It takes grammar text
//! (EBNF, JSON Schema, regex), a [`Grammar`] or the builtin JSON grammar, turns it into a
//! [`Grammar`] through the matching front end, compiles it against its vocabulary
//! ([`CompiledGrammar::new`]) and keeps the result in a [`GrammarCache`] keyed by the source
//! (kind, options and text), so a repeated request is a lookup.
use crate::builtin::builtin_json_grammar_with;
use crate::cache::GrammarCache;
use crate::compiled::CompiledGrammar;
use crate::ebnf::parse_ebnf;
use crate::error::{Error, ErrorKind, Result};
use crate::grammar::Grammar;
use crate::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use crate::regex::regex_to_grammar;
use crate::spelling::Spelling;
use crate::token_index::TokenIndex;
use crate::vocab::Vocabulary;
use std::sync::Arc;

/// Compiles grammars against one vocabulary, with a cache of the results.
#[derive(Debug)]
pub struct GrammarCompiler {
    vocab: Arc<Vocabulary>,
    /// Keeps the vocabulary's token trie and shared kernel cache alive as long as the compiler,
    /// even when no compiled grammar is (the index registry only holds weak references).
    index: Arc<TokenIndex>,
    cache: GrammarCache,
    cache_enabled: bool,
    /// Threads one compile may run on, the calling one included (XGrammar's `max_threads`).
    max_threads: usize,
}

impl GrammarCompiler {
    /// A compiler for `vocab` (builds the vocabulary's token index now); `cache_limit_bytes < 0`
    /// means an unlimited cache.
    pub fn new(vocab: &Arc<Vocabulary>, cache_enabled: bool, cache_limit_bytes: i64) -> GrammarCompiler {
        GrammarCompiler {
            index: TokenIndex::for_vocab(vocab),
            vocab: vocab.clone(),
            cache: GrammarCache::new(cache_limit_bytes),
            cache_enabled,
            max_threads: usize::MAX,
        }
    }

    /// Compiles on at most `max_threads` threads, the calling one included (at least 1).
    #[must_use]
    pub fn with_max_threads(mut self, max_threads: usize) -> GrammarCompiler {
        self.max_threads = max_threads.max(1);
        self
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Looks `key` up, else compiles with `make` and caches the result. The key is made only
    /// when the cache is enabled (PERF: a schema's key is a copy of its text and options, ~25 k
    /// instructions a compile of the band, spent for nothing without a cache).
    fn cached(
        &self,
        key: impl FnOnce() -> String,
        make: impl FnOnce() -> Result<Grammar>,
    ) -> Result<Arc<CompiledGrammar>> {
        self.cached_with(key, make, |e| e)
    }

    /// [`Self::cached`] with `remap` applied to a compile error.
    fn cached_with(
        &self,
        key: impl FnOnce() -> String,
        make: impl FnOnce() -> Result<Grammar>,
        remap: fn(Error) -> Error,
    ) -> Result<Arc<CompiledGrammar>> {
        let key = self.cache_enabled.then(key);
        if let Some(c) = key.as_ref().and_then(|k| self.cache.get(k)) {
            return Ok(c);
        }
        let g = make()?;
        let compiled = Arc::new(CompiledGrammar::new_owned(g, &self.vocab, self.max_threads).map_err(remap)?);
        Ok(match key {
            Some(key) => self.cache.insert(key, compiled),
            None => compiled,
        })
    }

    pub fn compile_grammar(&self, grammar: &Grammar) -> Result<Arc<CompiledGrammar>> {
        self.cached(|| format!("grammar\0{grammar}"), || Ok(grammar.clone()))
    }

    pub fn compile_ebnf(&self, text: &str, root_rule_name: &str) -> Result<Arc<CompiledGrammar>> {
        self.cached(|| format!("ebnf\0{root_rule_name}\0{text}"), || parse_ebnf(text, root_rule_name))
    }

    pub fn compile_json_schema(&self, schema: &str, options: &JsonSchemaOptions) -> Result<Arc<CompiledGrammar>> {
        let key = || format!("schema\0{options:?}\0{schema}");
        // A schema whose rules all turn out unproductive (e.g. a `oneOf` that every allowed value
        // fails) accepts no value: the schema's error, as when the converter sees it directly.
        let remap = |e: Error| match e.kind() {
            ErrorKind::InvalidGrammar => Error::new(ErrorKind::InvalidSchema, "the schema accepts no value"),
            _ => e,
        };
        self.cached_with(key, || json_schema_to_grammar(schema, options), remap)
    }

    pub fn compile_regex(&self, pattern: &str) -> Result<Arc<CompiledGrammar>> {
        self.cached(|| format!("regex\0{pattern}"), || regex_to_grammar(pattern))
    }

    pub fn compile_lark(&self, text: &str) -> Result<Arc<CompiledGrammar>> {
        self.cached(|| format!("lark\0{text}"), || crate::lark::lark_to_grammar_with_vocab(text, &self.vocab))
    }

    /// The builtin JSON grammar under `spelling`, with whitespace runs of at most
    /// `max_whitespace_cnt` characters (`None`: the spelling's default).
    pub fn compile_builtin_json_grammar(
        &self,
        spelling: Spelling,
        max_whitespace_cnt: Option<u32>,
    ) -> Result<Arc<CompiledGrammar>> {
        let key = || format!("builtin_json\0{spelling:?}\0{max_whitespace_cnt:?}");
        self.cached(key, || builtin_json_grammar_with(spelling, max_whitespace_cnt))
    }

    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    pub fn cache_size_bytes(&self) -> usize {
        self.cache.size_bytes()
    }

    pub fn cache_limit_bytes(&self) -> i64 {
        self.cache.limit_bytes()
    }

    /// Bytes held per part by the vocabulary's token index, shared by every compiler and grammar
    /// of the vocabulary and counted in no grammar's size ([`TokenIndex::memory_parts`]).
    pub fn vocabulary_memory_parts(&self) -> Vec<(&'static str, usize)> {
        self.index.memory_parts()
    }
}
