//! Binding of `grammask_core::vocab::Vocabulary` as `grammask._core.TokenizerInfo`.
//! (Placeholder on main until the vocab branch lands its full binding.)
use grammask_core::vocab::Vocabulary;
use pyo3::prelude::*;
use std::sync::Arc;

#[pyclass(frozen, name = "TokenizerInfo", module = "grammask._core")]
pub struct PyTokenizerInfo {
    pub inner: Arc<Vocabulary>,
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTokenizerInfo>()
}
