//! `_core.apply_token_bitmask_inplace_cpu`: masks CPU logits (numpy arrays, or torch CPU
//! tensors viewed as numpy by the Python layer) with one Rust kernel, `grammask_core::apply`.
use crate::buffer::RowsView;
use crate::errors::invalid_argument;
use grammask_core::apply::{mask_row, Bf16, NegInf, F16};
use pyo3::prelude::*;

/// Pairs (logits row, bitmask row), as XGrammar defines them: without `indices`, row `i` of
/// each; with `indices`, logits row `i` takes bitmask row `i` (or the only bitmask row).
fn row_pairs(logit_rows: usize, mask_rows: usize, indices: Option<Vec<i64>>) -> PyResult<Vec<(usize, usize)>> {
    let Some(indices) = indices else {
        if logit_rows != mask_rows && !(logit_rows == 1 && mask_rows >= 1) {
            return Err(invalid_argument(format!(
                "the logits have {logit_rows} rows but the bitmask has {mask_rows}"
            )));
        }
        return Ok((0..logit_rows).map(|i| (i, i)).collect());
    };
    indices
        .into_iter()
        .map(|i| {
            let ok = usize::try_from(i).ok().filter(|&u| u < logit_rows && (mask_rows == 1 || u < mask_rows));
            ok.map(|u| (u, if mask_rows == 1 { 0 } else { u })).ok_or_else(|| {
                invalid_argument(format!(
                    "index {i} is out of range for {logit_rows} logit rows / {mask_rows} bitmask rows"
                ))
            })
        })
        .collect()
}

fn apply_rows<T: NegInf>(logits: &mut RowsView, mask: &RowsView, pairs: &[(usize, usize)], vocab: usize) {
    for &(lr, mr) in pairs {
        let words = &mask.row::<u32>(mr)[..vocab.div_ceil(32).min(mask.cols)];
        let row = logits.row_mut::<T>(lr);
        let n = vocab.min(row.len());
        mask_row(&mut row[..n], words);
    }
}

/// Sets the logits of disallowed tokens to `-inf`. `dtype` names the logits' float format
/// (`float32`, `float16`, `bfloat16` — passed as its int16 bit view — or `float64`); only the
/// first `vocab_size` logits of a row are touched.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, dtype, vocab_size, indices = None))]
pub fn apply_token_bitmask_inplace_cpu(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    dtype: &str,
    vocab_size: usize,
    indices: Option<Vec<i64>>,
) -> PyResult<()> {
    let mut l = RowsView::get(logits, "the logits", true)?;
    let m = RowsView::get(bitmask, "the bitmask", false)?;
    if m.itemsize != 4 || !matches!(m.format, b'i' | b'I' | b'l' | b'L') {
        return Err(invalid_argument("the bitmask must have dtype int32"));
    }
    let expected: &[(u8, usize)] = match dtype {
        "float32" => &[(b'f', 4)],
        "float16" => &[(b'e', 2)],
        "bfloat16" => &[(b'h', 2), (b'H', 2)],
        "float64" => &[(b'd', 8)],
        _ => return Err(invalid_argument(format!("logits must be float32, float16, bfloat16 or float64, got {dtype}"))),
    };
    if !expected.contains(&(l.format, l.itemsize)) {
        return Err(invalid_argument(format!(
            "the logits buffer (format {:?}, {} bytes) does not hold {dtype}",
            l.format as char, l.itemsize
        )));
    }
    if vocab_size > l.cols || vocab_size > m.cols * 32 {
        return Err(invalid_argument(format!(
            "vocab_size {vocab_size} exceeds the logits ({}) or the bitmask ({})",
            l.cols,
            m.cols * 32
        )));
    }
    let pairs = row_pairs(l.rows, m.rows, indices)?;
    py.allow_threads(|| match dtype {
        "float32" => apply_rows::<u32>(&mut l, &m, &pairs, vocab_size),
        "float16" => apply_rows::<F16>(&mut l, &m, &pairs, vocab_size),
        "bfloat16" => apply_rows::<Bf16>(&mut l, &m, &pairs, vocab_size),
        _ => apply_rows::<u64>(&mut l, &m, &pairs, vocab_size),
    });
    Ok(())
}
