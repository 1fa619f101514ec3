//! The one place core errors become Python exceptions. Every exception derives from
//! `grammask.GrammaskError`, itself a `RuntimeError` (XGrammar raises `RuntimeError`), so code written
//! for XGrammar that catches `RuntimeError` keeps working.
use grammask_core::{Error, ErrorKind};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
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
        ErrorKind::InvalidArgument => PyValueError::new_err(msg),
        ErrorKind::Deserialize => DeserializeFormatError::new_err(msg),
        _ => InternalError::new_err(msg),
    }
}

/// `?`-friendly conversion: `core_call().map_err(py_err)?`.
pub fn py_err(err: Error) -> PyErr {
    to_py(&err)
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
    Ok(())
}
