//! Thin PyO3 binding: extract arguments, release the GIL, call grammask-core, convert results.
//! No algorithm lives here.
use pyo3::prelude::*;

mod errors;
mod tokenizer_info;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    tokenizer_info::register(m)?;
    Ok(())
}
