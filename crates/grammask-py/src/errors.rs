//! The one place core errors become Python exceptions. Every exception derives from
//! `grammask.GrammaskError`, itself a `RuntimeError` (XGrammar raises `RuntimeError`), so code written
//! for XGrammar that catches `RuntimeError` keeps working.
use grammask_core::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyType};
use pyo3::{create_exception, PyErr};

create_exception!(grammask, GrammaskError, PyRuntimeError, "Base class of every grammask error.");
create_exception!(grammask, GrammarSyntaxError, GrammaskError, "Grammar or regex text could not be parsed.");
create_exception!(grammask, InvalidGrammarError, GrammaskError, "The grammar is semantically invalid.");
create_exception!(grammask, InvalidJSONError, GrammaskError, "Input that must be JSON is not valid JSON.");
create_exception!(grammask, InvalidSchemaError, GrammaskError, "A JSON Schema is invalid or unsatisfiable.");
create_exception!(grammask, UnsupportedFeatureError, GrammaskError, "A feature cannot be enforced exactly.");
create_exception!(grammask, LimitExceededError, GrammaskError, "A documented size limit was exceeded.");
create_exception!(grammask, DeserializeFormatError, GrammaskError, "A serialized object has the wrong format.");
create_exception!(grammask, InternalError, GrammaskError, "A bug in grammask; please report it.");

/// `InvalidArgumentError(GrammaskError, ValueError)`: bad arguments (token ids, rollback counts,
/// buffers) are caught both by `except ValueError` and, as in XGrammar, by `except RuntimeError`.
/// Two bases cannot be declared with `create_exception!`, so the class is made in Python once.
static INVALID_ARGUMENT: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn invalid_argument_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    INVALID_ARGUMENT
        .get_or_try_init(py, || {
            let ns = PyDict::new(py);
            ns.set_item("GrammaskError", py.get_type::<GrammaskError>())?;
            py.run(
                c"class InvalidArgumentError(GrammaskError, ValueError):\n    '''A bad argument: token id, count, buffer dtype or shape.'''\n\nInvalidArgumentError.__module__ = 'grammask'\n",
                Some(&ns),
                None,
            )?;
            Ok(ns.get_item("InvalidArgumentError")?.unwrap().downcast_into::<PyType>()?.unbind())
        })
        .map(|t| t.bind(py))
}

/// Converts a core error into the matching Python exception.
pub fn to_py(err: &Error) -> PyErr {
    let msg = err.to_string();
    match err.kind() {
        ErrorKind::EbnfSyntax | ErrorKind::RegexSyntax => GrammarSyntaxError::new_err(msg),
        ErrorKind::InvalidGrammar => InvalidGrammarError::new_err(msg),
        ErrorKind::InvalidJson => InvalidJSONError::new_err(msg),
        ErrorKind::InvalidSchema => InvalidSchemaError::new_err(msg),
        ErrorKind::Unsupported => UnsupportedFeatureError::new_err(msg),
        ErrorKind::LimitExceeded => LimitExceededError::new_err(msg),
        ErrorKind::InvalidArgument => Python::with_gil(|py| match invalid_argument_type(py) {
            Ok(t) => PyErr::from_type(t.clone(), msg),
            Err(e) => e,
        }),
        ErrorKind::Deserialize => DeserializeFormatError::new_err(msg),
        _ => InternalError::new_err(msg),
    }
}

/// An `InvalidArgumentError` with `msg` (GIL held).
pub fn invalid_argument(msg: impl Into<String>) -> PyErr {
    to_py(&Error::new(ErrorKind::InvalidArgument, msg.into()))
}

/// `?`-friendly conversion: `core_call().map_err(py_err)?`.
pub fn py_err(err: Error) -> PyErr {
    to_py(&err)
}

/// Runs a core call, turning a panic (a bug: a broken invariant) into an `Internal` error, so that
/// Python sees `grammask.InternalError` rather than pyo3's `PanicException` (a `BaseException`).
pub fn guard<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()));
        Err(Error::new(ErrorKind::Internal, format!("panic in grammask: {}", msg.unwrap_or_default())))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GrammaskError", py.get_type::<GrammaskError>())?;
    m.add("GrammarSyntaxError", py.get_type::<GrammarSyntaxError>())?;
    m.add("InvalidGrammarError", py.get_type::<InvalidGrammarError>())?;
    m.add("InvalidJSONError", py.get_type::<InvalidJSONError>())?;
    m.add("InvalidSchemaError", py.get_type::<InvalidSchemaError>())?;
    m.add("UnsupportedFeatureError", py.get_type::<UnsupportedFeatureError>())?;
    m.add("LimitExceededError", py.get_type::<LimitExceededError>())?;
    m.add("DeserializeFormatError", py.get_type::<DeserializeFormatError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add("InvalidArgumentError", invalid_argument_type(py)?)?;
    Ok(())
}
