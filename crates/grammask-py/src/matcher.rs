//! `grammask._core.GrammarMatcher` and batch filling. Bitmasks arrive through the buffer protocol
//! (numpy arrays; torch CPU tensors are viewed as numpy by the Python layer) and are checked for
//! dtype, writability, contiguity and shape before anything is written; a single matcher's fill
//! also takes a torch tensor's address, rows and words, checked by the Python layer.
use crate::buffer::Int32Buffer;
use crate::compiler::PyCompiledGrammar;
use crate::errors::{guard, invalid_argument, py_err};
use grammask_core::batch;
use grammask_core::matcher::{Matcher, MatcherOptions};
use pyo3::prelude::*;

#[pyclass(name = "GrammarMatcher", module = "grammask._core")]
pub struct PyGrammarMatcher {
    inner: Matcher,
}

impl PyGrammarMatcher {
    /// A bitmask row of `words` int32 elements holds the vocabulary.
    fn check_words(&self, words: usize) -> PyResult<()> {
        let size = self.inner.compiled().vocab().vocab_size();
        let needed = size.div_ceil(32);
        if words < needed {
            return Err(invalid_argument(format!(
                "the bitmask has {words} int32 words per row but the vocabulary of size {size} needs {needed}"
            )));
        }
        Ok(())
    }

    /// Writes the next token mask into `row` (at least the vocabulary's words).
    fn fill_row(&mut self, py: Python<'_>, row: &mut [u32]) -> PyResult<bool> {
        let m = &mut self.inner;
        // A memoized mask is one copy: not worth releasing and retaking the GIL.
        // One memo look-up, passed down to the fill.
        let lookup = m.memo_lookup();
        if let Some(not_full) = guard(|| Ok(m.fill_memoized_with(row, &lookup))).map_err(py_err)? {
            return Ok(not_full);
        }
        py.allow_threads(|| guard(|| m.fill_next_token_bitmask_with(row, lookup))).map_err(py_err)
    }
}

#[pymethods]
impl PyGrammarMatcher {
    #[new]
    #[pyo3(signature = (compiled_grammar, override_stop_tokens = None, terminate_without_stop_token = false, max_tokens = None))]
    fn new(
        compiled_grammar: PyRef<'_, PyCompiledGrammar>,
        override_stop_tokens: Option<Vec<u32>>,
        terminate_without_stop_token: bool,
        max_tokens: Option<usize>,
    ) -> PyResult<Self> {
        let opts = MatcherOptions { override_stop_tokens, terminate_without_stop_token, max_tokens };
        Ok(PyGrammarMatcher { inner: Matcher::new(compiled_grammar.inner.clone(), opts).map_err(py_err)? })
    }

    fn accept_token(&mut self, token_id: i64) -> PyResult<bool> {
        let Ok(t) = u32::try_from(token_id) else { return Ok(false) };
        guard(|| self.inner.accept_token(t)).map_err(py_err)
    }

    fn accept_bytes(&mut self, data: &[u8]) -> PyResult<bool> {
        guard(|| self.inner.accept_bytes(data)).map_err(py_err)
    }

    #[pyo3(signature = (bitmask, index = 0))]
    fn fill_next_token_bitmask(&mut self, py: Python<'_>, bitmask: &Bound<'_, PyAny>, index: usize) -> PyResult<bool> {
        let mut b = Int32Buffer::get(bitmask)?;
        b.check_row(index)?;
        self.check_words(b.words)?;
        self.fill_row(py, b.row_mut(index)?)
    }

    /// Fills row `index` of the int32 bitmask of `rows` rows of `words` elements at `address`:
    /// the path for CPU torch tensors, whose Python layer (`grammask.bitmask.torch_int32_address`)
    /// checked dtype, device, contiguity and shape and holds the tensor's storage.
    ///
    /// PERF: viewing a new tensor as numpy (`.numpy()`, `.device`) cost 50-100 us right after a
    /// compile (cold caches), the slowest step of a tool-calling request; by address, no view.
    ///
    /// # Safety contract (not expressible in Python)
    /// `address` must point to `rows * words` writable, 4-byte aligned int32 elements that stay
    /// valid for the call. Private to the Python layer.
    #[pyo3(signature = (address, rows, words, index = 0))]
    fn fill_next_token_bitmask_at(
        &mut self,
        py: Python<'_>,
        address: usize,
        rows: usize,
        words: usize,
        index: usize,
    ) -> PyResult<bool> {
        if index >= rows {
            return Err(invalid_argument(format!(
                "bitmask row index {index} is out of range for a bitmask with {rows} rows"
            )));
        }
        self.check_words(words)?;
        if address == 0 || !address.is_multiple_of(4) {
            return Err(invalid_argument("the bitmask address is null or not 4-byte aligned"));
        }
        // SAFETY: by the contract above, `rows * words` int32 elements lie at `address`; `index <
        // rows`, so row `[index * words, (index + 1) * words)` is inside them; u32 and i32 share
        // size and alignment. The caller (holding the tensor) writes nothing while we run.
        #[allow(unsafe_code)]
        let row = unsafe { std::slice::from_raw_parts_mut((address as *mut u32).add(index * words), words) };
        self.fill_row(py, row)
    }

    /// Allowed token ids (for tests and debugging).
    fn allowed_tokens(&mut self) -> PyResult<Vec<usize>> {
        guard(|| self.inner.compute_mask().map(|m| m.iter_ones().collect())).map_err(py_err)
    }

    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }

    fn is_completed(&self) -> bool {
        self.inner.is_completed()
    }

    fn reset(&mut self) {
        self.inner.reset();
    }

    #[pyo3(signature = (num_tokens = 1))]
    fn rollback(&mut self, num_tokens: i64) -> PyResult<()> {
        let n = usize::try_from(num_tokens).map_err(|_| invalid_argument("num_tokens must be >= 0"))?;
        guard(|| self.inner.rollback(n)).map_err(py_err)
    }

    fn fork(&self) -> Self {
        PyGrammarMatcher { inner: self.inner.clone() }
    }

    fn find_jump_forward_bytes(&mut self) -> PyResult<Vec<u8>> {
        guard(|| self.inner.find_jump_forward_bytes()).map_err(py_err)
    }

    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.inner.stop_token_ids().to_vec()
    }

    #[getter]
    fn num_accepted(&self) -> usize {
        self.inner.num_accepted()
    }

    /// Captured rule occurrences as (name, bytes) pairs.
    #[pyo3(signature = (deduplicate = true))]
    fn get_captures(&self, py: Python<'_>, deduplicate: bool) -> Vec<(String, Py<pyo3::types::PyBytes>)> {
        self.inner
            .captures(deduplicate)
            .into_iter()
            .map(|(n, b)| (n, pyo3::types::PyBytes::new(py, &b).unbind()))
            .collect()
    }

    /// (temperature of the innermost active rule with one or None, whether paths disagreed).
    fn rule_temperature(&self) -> (Option<f32>, bool) {
        self.inner.rule_temperature()
    }
}

/// Fills row `indices[i]` (or `i`) of `bitmask` for `matchers[i]`, in `max_threads` threads
/// (the process's pool of parked threads) with the GIL released. Rows are written in place;
/// when an index repeats, rows are filled into scratch rows and copied in order (the last wins).
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices = None, max_threads = 1))]
pub fn batch_fill_next_token_bitmask(
    py: Python<'_>,
    matchers: Vec<Bound<'_, PyGrammarMatcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
    max_threads: usize,
) -> PyResult<()> {
    let mut b = Int32Buffer::get(bitmask)?;
    let indices: Vec<usize> = indices.unwrap_or_else(|| (0..matchers.len()).collect());
    if indices.len() != matchers.len() {
        return Err(invalid_argument(format!("got {} matchers but {} indices", matchers.len(), indices.len())));
    }
    for &i in &indices {
        b.check_row(i)?;
    }
    let mut refs: Vec<PyRefMut<'_, PyGrammarMatcher>> =
        matchers.iter().map(Bound::try_borrow_mut).collect::<Result<_, _>>()?;
    let pool = crate::pool::ParkedPool::get();
    if let Some(rows) = b.rows_mut(&indices) {
        let mut work: Vec<(&mut Matcher, &mut [u32])> = refs.iter_mut().map(|r| &mut r.inner).zip(rows).collect();
        return py.allow_threads(|| guard(|| batch::batch_fill_with(&mut work, max_threads, &*pool))).map_err(py_err);
    }
    let mut rows: Vec<Vec<u32>> = vec![vec![0u32; b.words]; refs.len()];
    let mut work: Vec<(&mut Matcher, &mut [u32])> =
        refs.iter_mut().map(|r| &mut r.inner).zip(rows.iter_mut().map(Vec::as_mut_slice)).collect();
    py.allow_threads(|| guard(|| batch::batch_fill_with(&mut work, max_threads, &*pool))).map_err(py_err)?;
    for (row, &i) in rows.iter().zip(&indices) {
        b.write_row(i, row)?;
    }
    Ok(())
}
