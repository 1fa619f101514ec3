//! Thin PyO3 binding: extract arguments, release the GIL, call grammask-core, convert results.
//! No algorithm lives here.
// PyO3 extracts arguments by value (`PyRef`, `Vec`), borrowed or not.
#![allow(clippy::needless_pass_by_value)]
use pyo3::prelude::*;

mod alloc;

/// PERF: compiling a schema allocates thousands of small buffers (automata rows, rule sets,
/// grammar nodes); with the system allocator, allocation took a sixth of a typical compile.
#[global_allocator]
static GLOBAL: alloc::Allocator = alloc::Allocator;

mod apply;
mod buffer;
mod compiler;
mod errors;
mod grammar;
mod matcher;
mod pool;
mod tokenizer_info;

/// (kind, count, wall nanoseconds) of the shared tables this thread built and the shared caches it
/// started over so far (`grammask_core::build_counts`; benches diff it around a fill).
#[pyfunction]
fn thread_build_counts() -> Vec<(&'static str, u64, u64)> {
    grammask_core::build_counts::thread_counts()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    tokenizer_info::register(m)?;
    m.add_class::<grammar::PyGrammar>()?;
    m.add_class::<grammar::PySchemaOptions>()?;
    m.add_class::<compiler::PyGrammarCompiler>()?;
    m.add_class::<compiler::PyCompiledGrammar>()?;
    m.add_class::<matcher::PyGrammarMatcher>()?;
    m.add_function(wrap_pyfunction!(matcher::batch_fill_next_token_bitmask, m)?)?;
    m.add_function(wrap_pyfunction!(apply::apply_token_bitmask_inplace_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(thread_build_counts, m)?)?;
    Ok(())
}
