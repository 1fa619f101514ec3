//! `grammask._core.Grammar`: front ends (EBNF, regex, JSON Schema, builtin JSON) and printing.
use crate::errors::{guard, py_err};
use grammask_core::grammar::Grammar;
use grammask_core::json_schema::{json_schema_to_ebnf, json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::spelling::Spelling;
use grammask_core::{builtin, combine, ebnf, lark, regex};
use pyo3::prelude::*;
use std::sync::Arc;

#[pyclass(frozen, name = "Grammar", module = "grammask._core")]
pub struct PyGrammar {
    pub inner: Arc<Grammar>,
}

impl PyGrammar {
    pub fn wrap(g: Grammar) -> PyGrammar {
        PyGrammar { inner: Arc::new(g) }
    }
}

/// `grammask._core.JsonSchemaOptions`: the output-shape options of a JSON Schema conversion,
/// built once in Python and passed to every schema entry point.
#[pyclass(frozen, name = "JsonSchemaOptions", module = "grammask._core")]
pub struct PySchemaOptions {
    pub inner: JsonSchemaOptions,
}

#[pymethods]
impl PySchemaOptions {
    #[new]
    #[pyo3(signature = (any_whitespace = true, indent = None, separators = None, strict_mode = true, max_whitespace_cnt = None, any_order = false, spelling = "canonical", format_assertion = true, schema_registry = None))]
    #[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)] // the Python keyword arguments
    fn new(
        any_whitespace: bool,
        indent: Option<u32>,
        separators: Option<(String, String)>,
        strict_mode: bool,
        max_whitespace_cnt: Option<u32>,
        any_order: bool,
        spelling: &str,
        format_assertion: bool,
        schema_registry: Option<Vec<(String, String)>>,
    ) -> PyResult<Self> {
        let spelling = parse_spelling(spelling)?;
        let mut schema_registry = schema_registry.unwrap_or_default();
        schema_registry.sort();
        Ok(PySchemaOptions {
            inner: JsonSchemaOptions {
                any_whitespace,
                indent,
                separators,
                strict_mode,
                max_whitespace_cnt,
                any_order,
                spelling,
                format_assertion,
                schema_registry,
            },
        })
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// The `spelling=` option: `"canonical"` or `"any"`, else `ValueError`.
pub fn parse_spelling(s: &str) -> PyResult<Spelling> {
    Spelling::parse(s).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!("spelling must be \"canonical\" or \"any\", got {s:?}"))
    })
}

#[pymethods]
impl PyGrammar {
    #[staticmethod]
    #[pyo3(signature = (text, root_rule_name = "root"))]
    fn from_ebnf(py: Python<'_>, text: &str, root_rule_name: &str) -> PyResult<PyGrammar> {
        let (text, root) = (text.to_owned(), root_rule_name.to_owned());
        py.allow_threads(|| guard(|| ebnf::parse_ebnf(&text, &root))).map(PyGrammar::wrap).map_err(py_err)
    }

    #[staticmethod]
    #[pyo3(signature = (text, root_rule_name = "root"))]
    fn from_iso_ebnf(py: Python<'_>, text: &str, root_rule_name: &str) -> PyResult<PyGrammar> {
        let (text, root) = (text.to_owned(), root_rule_name.to_owned());
        py.allow_threads(|| guard(|| ebnf::parse_iso_ebnf(&text, &root))).map(PyGrammar::wrap).map_err(py_err)
    }

    /// `tokenizer_info` resolves special tokens named by text (`<|name|>`).
    #[staticmethod]
    #[pyo3(signature = (text, tokenizer_info = None))]
    fn from_lark(
        py: Python<'_>,
        text: &str,
        tokenizer_info: Option<PyRef<'_, crate::tokenizer_info::PyTokenizerInfo>>,
    ) -> PyResult<PyGrammar> {
        let text = text.to_owned();
        let vocab = tokenizer_info.map(|t| t.inner.clone());
        py.allow_threads(|| {
            guard(|| match &vocab {
                Some(v) => lark::lark_to_grammar_with_vocab(&text, v),
                None => lark::lark_to_grammar(&text),
            })
        })
        .map(PyGrammar::wrap)
        .map_err(py_err)
    }

    #[staticmethod]
    fn from_regex(py: Python<'_>, pattern: &str) -> PyResult<PyGrammar> {
        let pattern = pattern.to_owned();
        py.allow_threads(|| guard(|| regex::regex_to_grammar(&pattern))).map(PyGrammar::wrap).map_err(py_err)
    }

    #[staticmethod]
    #[pyo3(signature = (pattern, rule_name = "root"))]
    fn regex_to_ebnf(py: Python<'_>, pattern: &str, rule_name: &str) -> PyResult<String> {
        let (pattern, rule) = (pattern.to_owned(), rule_name.to_owned());
        py.allow_threads(|| guard(|| regex::regex_to_ebnf(&pattern, &rule))).map_err(py_err)
    }

    #[staticmethod]
    fn from_json_schema(py: Python<'_>, schema: &str, options: PyRef<'_, PySchemaOptions>) -> PyResult<PyGrammar> {
        let (schema, opts) = (schema.to_owned(), options.inner.clone());
        py.allow_threads(|| guard(|| json_schema_to_grammar(&schema, &opts))).map(PyGrammar::wrap).map_err(py_err)
    }

    #[staticmethod]
    fn json_schema_to_ebnf(py: Python<'_>, schema: &str, options: PyRef<'_, PySchemaOptions>) -> PyResult<String> {
        let (schema, opts) = (schema.to_owned(), options.inner.clone());
        py.allow_threads(|| guard(|| json_schema_to_ebnf(&schema, &opts))).map_err(py_err)
    }

    #[staticmethod]
    #[pyo3(signature = (spelling = "canonical", max_whitespace_cnt = None))]
    fn builtin_json_grammar(spelling: &str, max_whitespace_cnt: Option<u32>) -> PyResult<PyGrammar> {
        let sp = parse_spelling(spelling)?;
        builtin::builtin_json_grammar_with(sp, max_whitespace_cnt).map(PyGrammar::wrap).map_err(py_err)
    }

    #[staticmethod]
    fn concat(grammars: Vec<PyRef<'_, PyGrammar>>) -> PyResult<PyGrammar> {
        let gs: Vec<Grammar> = grammars.iter().map(|g| (*g.inner).clone()).collect();
        combine::concat(&gs).map(PyGrammar::wrap).map_err(py_err)
    }

    #[staticmethod]
    fn union(grammars: Vec<PyRef<'_, PyGrammar>>) -> PyResult<PyGrammar> {
        let gs: Vec<Grammar> = grammars.iter().map(|g| (*g.inner).clone()).collect();
        combine::union(&gs).map(PyGrammar::wrap).map_err(py_err)
    }

    fn to_ebnf(&self) -> String {
        self.inner.to_string()
    }

    fn serialize_json(&self) -> String {
        self.inner.to_json()
    }

    #[staticmethod]
    fn deserialize_json(text: &str) -> PyResult<PyGrammar> {
        Grammar::from_json(text).map(PyGrammar::wrap).map_err(py_err)
    }

    fn root_rule_name(&self) -> String {
        self.inner.rule(self.inner.root()).name.clone()
    }

    fn num_rules(&self) -> usize {
        self.inner.rules().len()
    }
}
