//! `grammask._core.GrammarCompiler` and `CompiledGrammar`: compile (GIL released) and cache.
use crate::errors::{guard, py_err};
use crate::grammar::{PyGrammar, PySchemaOptions};
use crate::tokenizer_info::PyTokenizerInfo;
use grammask_core::compiled::CompiledGrammar;
use grammask_core::error::Result;
use grammask_core::grammar_compiler::GrammarCompiler;
use pyo3::prelude::*;
use std::sync::Arc;

#[pyclass(frozen, name = "CompiledGrammar", module = "grammask._core")]
pub struct PyCompiledGrammar {
    pub inner: Arc<CompiledGrammar>,
}

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
        self.inner.serialize_json()
    }

    #[staticmethod]
    fn deserialize_json(
        py: Python<'_>,
        text: &str,
        tokenizer_info: PyRef<'_, PyTokenizerInfo>,
    ) -> PyResult<PyCompiledGrammar> {
        let vocab = tokenizer_info.inner.clone();
        let text = text.to_owned();
        py.allow_threads(|| CompiledGrammar::deserialize_json(&text, &vocab))
            .map(|c| PyCompiledGrammar { inner: Arc::new(c) })
            .map_err(py_err)
    }
}

#[pyclass(frozen, name = "GrammarCompiler", module = "grammask._core")]
pub struct PyGrammarCompiler {
    inner: GrammarCompiler,
}

impl PyGrammarCompiler {
    /// Runs `compile` on the core compiler with the GIL released.
    fn compile(
        &self,
        py: Python<'_>,
        compile: impl FnOnce(&GrammarCompiler) -> Result<Arc<CompiledGrammar>> + Send,
    ) -> PyResult<PyCompiledGrammar> {
        let inner = &self.inner;
        py.allow_threads(|| guard(|| compile(inner)).map(|inner| PyCompiledGrammar { inner })).map_err(py_err)
    }
}

#[pymethods]
impl PyGrammarCompiler {
    #[new]
    #[pyo3(signature = (tokenizer_info, cache_enabled = true, cache_limit_bytes = -1, max_threads = usize::MAX))]
    fn new(
        py: Python<'_>,
        tokenizer_info: PyRef<'_, PyTokenizerInfo>,
        cache_enabled: bool,
        cache_limit_bytes: i64,
        max_threads: usize,
    ) -> PyResult<Self> {
        if cache_limit_bytes < -1 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "cache_limit_bytes must be -1 (unlimited) or >= 0, got {cache_limit_bytes}"
            )));
        }
        let vocab = tokenizer_info.inner.clone();
        let inner = py.allow_threads(|| {
            GrammarCompiler::new(&vocab, cache_enabled, cache_limit_bytes).with_max_threads(max_threads)
        });
        Ok(PyGrammarCompiler { inner })
    }

    fn compile_grammar(&self, py: Python<'_>, grammar: PyRef<'_, PyGrammar>) -> PyResult<PyCompiledGrammar> {
        let g = grammar.inner.clone();
        self.compile(py, move |c| c.compile_grammar(&g))
    }

    #[pyo3(signature = (text, root_rule_name = "root"))]
    fn compile_ebnf(&self, py: Python<'_>, text: &str, root_rule_name: &str) -> PyResult<PyCompiledGrammar> {
        self.compile(py, |c| c.compile_ebnf(text, root_rule_name))
    }

    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &str,
        options: PyRef<'_, PySchemaOptions>,
    ) -> PyResult<PyCompiledGrammar> {
        let opts = &options.inner;
        self.compile(py, |c| c.compile_json_schema(schema, opts))
    }

    fn compile_regex(&self, py: Python<'_>, pattern: &str) -> PyResult<PyCompiledGrammar> {
        self.compile(py, |c| c.compile_regex(pattern))
    }

    fn compile_lark(&self, py: Python<'_>, text: &str) -> PyResult<PyCompiledGrammar> {
        self.compile(py, |c| c.compile_lark(text))
    }

    #[pyo3(signature = (spelling = "canonical", max_whitespace_cnt = None))]
    fn compile_builtin_json_grammar(
        &self,
        py: Python<'_>,
        spelling: &str,
        max_whitespace_cnt: Option<u32>,
    ) -> PyResult<PyCompiledGrammar> {
        let sp = crate::grammar::parse_spelling(spelling)?;
        self.compile(py, |c| c.compile_builtin_json_grammar(sp, max_whitespace_cnt))
    }

    fn clear_cache(&self) {
        self.inner.clear_cache();
    }

    fn get_cache_size_bytes(&self) -> usize {
        self.inner.cache_size_bytes()
    }

    /// Bytes held per part by the vocabulary's token index (shared by the vocabulary's compilers
    /// and grammars; in no grammar's `memory_size_bytes`).
    fn get_vocabulary_memory_parts(&self) -> Vec<(&'static str, usize)> {
        self.inner.vocabulary_memory_parts()
    }

    #[getter]
    fn cache_limit_bytes(&self) -> i64 {
        self.inner.cache_limit_bytes()
    }

    #[getter]
    fn tokenizer_info(&self) -> PyTokenizerInfo {
        PyTokenizerInfo { inner: self.inner.vocab().clone() }
    }
}
