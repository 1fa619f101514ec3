//! Binding of `grammask_core::vocab::Vocabulary` as `grammask._core.TokenizerInfo`.
use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
