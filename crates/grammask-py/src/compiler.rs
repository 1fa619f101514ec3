//! `grammask._core.GrammarCompiler` and `CompiledGrammar`: compile (GIL released) and cache.
use crate::errors::py_err;
use crate::grammar::{grammar_from_regex, grammar_from_schema, PyGrammar, PySchemaOptions};
use crate::tokenizer_info::PyTokenizerInfo;
use grammask_core::builtin::builtin_json_grammar_with;
use grammask_core::cache::GrammarCache;
use grammask_core::ebnf::parse_ebnf;
use grammask_core::error::{Error, ErrorKind, Result};
use grammask_core::grammar::Grammar;
use grammask_core::matcher::{CompiledGrammar, TokenIndex};
use grammask_core::vocab::Vocabulary;
use pyo3::prelude::*;
use std::sync::Arc;

#[pyclass(frozen, name = "CompiledGrammar", module = "grammask._core")]
pub struct PyCompiledGrammar {
    pub inner: Arc<CompiledGrammar>,
}

/// Serialization format version of compiled grammars.
const COMPILED_VERSION: &str = "grammask-compiled-1";

#[pymethods]
impl PyCompiledGrammar {
    #[getter]
    fn grammar(&self) -> PyGrammar {
        PyGrammar { inner: Arc::new(self.inner.grammar().clone()) }
    }

    #[getter]
    fn tokenizer_info(&self) -> PyTokenizerInfo {
        PyTokenizerInfo { inner: self.inner.vocab().clone() }
    }

    #[getter]
    fn memory_size_bytes(&self) -> usize {
        self.inner.memory_size()
    }

    /// JSON with the grammar and the tokenizer metadata (not the vocabulary).
    fn serialize_json(&self) -> String {
        let g: serde_json::Value = serde_json::from_str(&self.inner.grammar().to_json()).unwrap_or_default();
        let meta: serde_json::Value = serde_json::from_str(&self.inner.vocab().metadata_json()).unwrap_or_default();
        serde_json::json!({"grammar": g, "tokenizer_metadata": meta, "__VERSION__": COMPILED_VERSION}).to_string()
    }

    #[staticmethod]
    fn deserialize_json(py: Python<'_>, text: &str, tokenizer_info: PyRef<'_, PyTokenizerInfo>) -> PyResult<PyCompiledGrammar> {
        let vocab = tokenizer_info.inner.clone();
        let text = text.to_owned();
        py.allow_threads(|| deserialize_compiled(&text, &vocab)).map(|c| PyCompiledGrammar { inner: Arc::new(c) }).map_err(py_err)
    }
}

fn deserialize_compiled(text: &str, vocab: &Arc<Vocabulary>) -> Result<CompiledGrammar> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| Error::new(ErrorKind::InvalidJson, format!("invalid JSON: {e}")))?;
    let version = v.get("__VERSION__").and_then(|x| x.as_str()).unwrap_or("");
    if version != COMPILED_VERSION {
        return Err(Error::new(
            ErrorKind::Deserialize,
            format!("wrong version of serialized compiled grammar: got '{version}', expected '{COMPILED_VERSION}'"),
        ));
    }
    let meta = v.get("tokenizer_metadata").map(ToString::to_string).unwrap_or_default();
    let want: serde_json::Value = serde_json::from_str(&vocab.metadata_json()).unwrap_or_default();
    let got: serde_json::Value = serde_json::from_str(&meta).unwrap_or_default();
    if want != got {
        return Err(Error::new(
            ErrorKind::Deserialize,
            format!("tokenizer metadata mismatch: the grammar was compiled for {got}, this tokenizer is {want}"),
        ));
    }
    let g = v.get("grammar").map(ToString::to_string).unwrap_or_default();
    CompiledGrammar::new(&Grammar::from_json(&g)?, vocab)
}

#[pyclass(frozen, name = "GrammarCompiler", module = "grammask._core")]
pub struct PyGrammarCompiler {
    vocab: Arc<Vocabulary>,
    /// Keeps the vocabulary's token trie and shared kernel cache alive as long as the compiler,
    /// even when no compiled grammar is (the index registry only holds weak references).
    _index: Arc<TokenIndex>,
    cache: GrammarCache,
    cache_enabled: bool,
}

impl PyGrammarCompiler {
    /// Looks `key` up, else compiles with `make` (GIL released) and caches the result.
    fn cached(&self, py: Python<'_>, key: String, make: impl FnOnce() -> Result<Grammar> + Send) -> PyResult<PyCompiledGrammar> {
        self.cached_with(py, key, make, |e| e)
    }

    /// [`Self::cached`] with `remap` applied to a compile error.
    fn cached_with(
        &self,
        py: Python<'_>,
        key: String,
        make: impl FnOnce() -> Result<Grammar> + Send,
        remap: fn(Error) -> Error,
    ) -> PyResult<PyCompiledGrammar> {
        if self.cache_enabled {
            if let Some(c) = self.cache.get(&key) {
                return Ok(PyCompiledGrammar { inner: c });
            }
        }
        let vocab = self.vocab.clone();
        let compiled = py
            .allow_threads(move || -> Result<CompiledGrammar> {
                let g = make()?;
                CompiledGrammar::new(&g, &vocab).map_err(remap)
            })
            .map_err(py_err)?;
        let compiled = Arc::new(compiled);
        let inner = if self.cache_enabled { self.cache.insert(key, compiled) } else { compiled };
        Ok(PyCompiledGrammar { inner })
    }
}

#[pymethods]
impl PyGrammarCompiler {
    #[new]
    #[pyo3(signature = (tokenizer_info, cache_enabled = true, cache_limit_bytes = -1))]
    fn new(
        py: Python<'_>,
        tokenizer_info: PyRef<'_, PyTokenizerInfo>,
        cache_enabled: bool,
        cache_limit_bytes: i64,
    ) -> PyResult<Self> {
        if cache_limit_bytes < -1 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "cache_limit_bytes must be -1 (unlimited) or >= 0, got {cache_limit_bytes}"
            )));
        }
        let vocab = tokenizer_info.inner.clone();
        let index = py.allow_threads(|| TokenIndex::for_vocab(&vocab));
        Ok(PyGrammarCompiler {
            _index: index,
            vocab: tokenizer_info.inner.clone(),
            cache: GrammarCache::new(cache_limit_bytes),
            cache_enabled,
        })
    }

    fn compile_grammar(&self, py: Python<'_>, grammar: PyRef<'_, PyGrammar>) -> PyResult<PyCompiledGrammar> {
        let g = grammar.inner.clone();
        self.cached(py, format!("grammar\0{g}"), move || Ok((*g).clone()))
    }

    #[pyo3(signature = (text, root_rule_name = "root"))]
    fn compile_ebnf(&self, py: Python<'_>, text: &str, root_rule_name: &str) -> PyResult<PyCompiledGrammar> {
        let (t, r) = (text.to_owned(), root_rule_name.to_owned());
        self.cached(py, format!("ebnf\0{root_rule_name}\0{text}"), move || parse_ebnf(&t, &r))
    }

    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &str,
        options: PyRef<'_, PySchemaOptions>,
    ) -> PyResult<PyCompiledGrammar> {
        let opts = options.inner.clone();
        let key = format!("schema\0{opts:?}\0{schema}");
        let s = schema.to_owned();
        // A schema whose rules all turn out unproductive (e.g. a `oneOf` that every allowed value
        // fails) accepts no value: the schema's error, as when the converter sees it directly.
        let remap = |e: Error| match e.kind() {
            ErrorKind::InvalidGrammar => Error::new(ErrorKind::InvalidSchema, "the schema accepts no value"),
            _ => e,
        };
        self.cached_with(py, key, move || grammar_from_schema(&s, &opts), remap)
    }

    fn compile_regex(&self, py: Python<'_>, pattern: &str) -> PyResult<PyCompiledGrammar> {
        let p = pattern.to_owned();
        self.cached(py, format!("regex\0{pattern}"), move || grammar_from_regex(&p))
    }

    #[pyo3(signature = (spelling = "canonical", max_whitespace_cnt = None))]
    fn compile_builtin_json_grammar(
        &self,
        py: Python<'_>,
        spelling: &str,
        max_whitespace_cnt: Option<u32>,
    ) -> PyResult<PyCompiledGrammar> {
        let sp = crate::grammar::parse_spelling(spelling)?;
        let key = format!("builtin_json\0{sp:?}\0{max_whitespace_cnt:?}");
        self.cached(py, key, move || builtin_json_grammar_with(sp, max_whitespace_cnt))
    }

    fn clear_cache(&self) {
        self.cache.clear();
    }

    fn get_cache_size_bytes(&self) -> usize {
        self.cache.size_bytes()
    }

    #[getter]
    fn cache_limit_bytes(&self) -> i64 {
        self.cache.limit_bytes()
    }

    #[getter]
    fn tokenizer_info(&self) -> PyTokenizerInfo {
        PyTokenizerInfo { inner: self.vocab.clone() }
    }
}
