//! Binding of `grammask_core::vocab::Vocabulary` as `grammask._core.TokenizerInfo`.
//!
//! Extracts the token list (bytes or str), releases the GIL while the core decodes and sorts the
//! vocabulary, and hands results back as Python lists. `python/grammask/tokenizer_info.py` wraps
//! this class; other bindings take the shared vocabulary from `PyTokenizerInfo::inner`.
use std::sync::Arc;

use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions, DETECTION_STOP_TOKENS};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::errors::{guard, py_err};

/// An immutable vocabulary shared with compiled grammars.
#[pyclass(name = "TokenizerInfo", module = "grammask._core", frozen)]
pub struct PyTokenizerInfo {
    pub inner: Arc<Vocabulary>,
}

/// Each item of `encoded_vocab` as bytes: `bytes` as is, `str` as UTF-8.
fn extract_tokens(encoded_vocab: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(encoded_vocab.len().unwrap_or(0));
    for (i, item) in encoded_vocab.try_iter()?.enumerate() {
        let item = item?;
        if let Ok(b) = item.downcast::<PyBytes>() {
            out.push(b.as_bytes().to_vec());
        } else if let Ok(s) = item.downcast::<PyString>() {
            let s = s
                .to_cow()
                .map_err(|e| PyValueError::new_err(format!("encoded_vocab[{i}] is not valid UTF-8 text: {e}")))?;
            out.push(s.as_bytes().to_vec());
        } else {
            return Err(PyTypeError::new_err(format!(
                "encoded_vocab[{i}] must be bytes or str, not {}",
                item.get_type().name()?
            )));
        }
    }
    Ok(out)
}

fn vocab_type_from_code(code: i64) -> PyResult<VocabType> {
    u64::try_from(code).ok().and_then(VocabType::from_code).ok_or_else(|| {
        PyValueError::new_err(format!("vocab_type must be 0 (RAW), 1 (BYTE_FALLBACK) or 2 (BYTE_LEVEL), got {code}"))
    })
}

fn ids_from_py(ids: Option<Vec<i64>>, what: &str) -> PyResult<Option<Vec<u32>>> {
    ids.map(|ids| {
        ids.into_iter()
            .map(|id| u32::try_from(id).map_err(|_| PyValueError::new_err(format!("{what} id {id} is out of range"))))
            .collect()
    })
    .transpose()
}

fn wrap(v: Vocabulary) -> PyTokenizerInfo {
    PyTokenizerInfo { inner: Arc::new(v) }
}

#[pymethods]
impl PyTokenizerInfo {
    #[new]
    #[pyo3(signature = (encoded_vocab, vocab_type=0, vocab_size=None, stop_token_ids=None, special_token_ids=None, add_prefix_space=false))]
    fn new(
        py: Python<'_>,
        encoded_vocab: &Bound<'_, PyAny>,
        vocab_type: i64,
        vocab_size: Option<i64>,
        stop_token_ids: Option<Vec<i64>>,
        special_token_ids: Option<Vec<i64>>,
        add_prefix_space: bool,
    ) -> PyResult<Self> {
        let encoded = extract_tokens(encoded_vocab)?;
        let vocab_type = vocab_type_from_code(vocab_type)?;
        let vocab_size = vocab_size
            .map(|n| {
                usize::try_from(n)
                    .map_err(|_| PyValueError::new_err(format!("vocab_size must be non-negative, got {n}")))
            })
            .transpose()?;
        let options = VocabularyOptions {
            vocab_size,
            stop_token_ids: ids_from_py(stop_token_ids, "stop token")?,
            special_token_ids: ids_from_py(special_token_ids, "special token")?,
            add_prefix_space,
        };
        let v = py.allow_threads(|| guard(|| Vocabulary::new(encoded, vocab_type, options))).map_err(py_err)?;
        Ok(wrap(v))
    }

    /// Token texts treated as stop tokens when no stop list is given.
    #[classattr]
    #[allow(non_snake_case)]
    fn DETECTION_STOP_TOKENS(py: Python<'_>) -> PyResult<Py<PyTuple>> {
        Ok(PyTuple::new(py, DETECTION_STOP_TOKENS)?.unbind())
    }

    #[getter]
    fn vocab_type(&self) -> u8 {
        self.inner.vocab_type().code()
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    #[getter]
    fn add_prefix_space(&self) -> bool {
        self.inner.add_prefix_space()
    }

    /// Decoded bytes of the tokens the tokenizer spelled (`len(encoded_vocab)` items).
    #[getter]
    fn decoded_vocab<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let n = self.inner.num_encoded() as u32;
        PyList::new(py, (0..n).map(|id| PyBytes::new(py, self.inner.token_bytes(id))))
    }

    /// The tokens as the tokenizer spelled them.
    #[getter]
    fn encoded_vocab<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let n = self.inner.num_encoded() as u32;
        PyList::new(py, (0..n).map(|id| PyBytes::new(py, self.inner.encoded_token(id))))
    }

    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.inner.stop_token_ids().to_vec()
    }

    #[getter]
    fn special_token_ids(&self) -> Vec<u32> {
        self.inner.special_token_ids()
    }

    /// Ids grammar text can produce, sorted by decoded bytes.
    #[getter]
    fn sorted_text_token_ids(&self) -> Vec<u32> {
        self.inner.sorted_text_tokens().to_vec()
    }

    fn token_bytes<'py>(&self, py: Python<'py>, token_id: i64) -> PyResult<Bound<'py, PyBytes>> {
        let id = self.check_id(token_id)?;
        Ok(PyBytes::new(py, self.inner.token_bytes(id)))
    }

    fn is_special(&self, token_id: i64) -> PyResult<bool> {
        Ok(self.inner.is_special(self.check_id(token_id)?))
    }

    fn is_stop(&self, token_id: i64) -> PyResult<bool> {
        Ok(self.inner.is_stop(self.check_id(token_id)?))
    }

    fn dump_metadata(&self) -> String {
        self.inner.metadata_json()
    }

    #[staticmethod]
    fn from_vocab_and_metadata(py: Python<'_>, encoded_vocab: &Bound<'_, PyAny>, metadata: &str) -> PyResult<Self> {
        let encoded = extract_tokens(encoded_vocab)?;
        let metadata = metadata.to_owned();
        let v =
            py.allow_threads(|| guard(|| Vocabulary::from_vocab_and_metadata(encoded, &metadata))).map_err(py_err)?;
        Ok(wrap(v))
    }

    fn serialize_json(&self, py: Python<'_>) -> String {
        let inner = self.inner.clone();
        py.allow_threads(move || inner.to_json())
    }

    #[staticmethod]
    fn deserialize_json(py: Python<'_>, json_string: &str) -> PyResult<Self> {
        let s = json_string.to_owned();
        let v = py.allow_threads(move || guard(|| Vocabulary::from_json(&s))).map_err(py_err)?;
        Ok(wrap(v))
    }

    fn __repr__(&self) -> String {
        format!(
            "TokenizerInfo(vocab_type={}, vocab_size={}, add_prefix_space={}, stop_token_ids={:?})",
            self.inner.vocab_type().code(),
            self.inner.vocab_size(),
            self.inner.add_prefix_space(),
            self.inner.stop_token_ids()
        )
    }
}

impl PyTokenizerInfo {
    fn check_id(&self, token_id: i64) -> PyResult<u32> {
        match u32::try_from(token_id) {
            Ok(id) if (id as usize) < self.inner.vocab_size() => Ok(id),
            _ => Err(PyValueError::new_err(format!(
                "token id {token_id} is out of range for a vocabulary of {} tokens",
                self.inner.vocab_size()
            ))),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTokenizerInfo>()
}
