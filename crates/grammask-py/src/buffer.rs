//! Writable int32 buffers from Python objects (numpy arrays, CPU torch tensors viewed as numpy),
//! through the buffer protocol, for an abi3 (cp39-abi3) build.
//!
//! pyo3 only exposes the buffer protocol under the limited API from Python 3.11, where it
//! joined the stable ABI. `PyObject_GetBuffer`, `PyBuffer_Release` and the `Py_buffer` layout
//! below have not changed since Python 3.3, and every CPython 3.9+ exports them, so we declare
//! them here. (A Windows abi3 build would link `python3.dll`, which lacks them before 3.11;
//! grammask ships Linux and macOS wheels.)
#![allow(unsafe_code)]

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use std::ffi::{c_char, c_int, c_void, CStr};

use crate::errors::invalid_argument;

/// CPython's `Py_buffer` (Include/pybuffer.h), unchanged since Python 3.3.
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut pyo3::ffi::PyObject,
    len: isize,
    itemsize: isize,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut isize,
    strides: *mut isize,
    suboffsets: *mut isize,
    internal: *mut c_void,
}

extern "C" {
    fn PyObject_GetBuffer(obj: *mut pyo3::ffi::PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// `PyBUF_RECORDS_RO`: shape, strides and format, read-only allowed (checked below, so a
/// read-only array gets our message rather than a generic BufferError).
const PYBUF_RECORDS_RO: c_int = 0x0010 | 0x0008 | 0x0004;

/// A C-contiguous, writable buffer of `rows * words` int32 elements.
///
/// Invariant: `raw.buf` points to `rows * words` initialized, 4-byte aligned int32 values that
/// stay valid until `Drop` releases the view (the exporter is kept alive by `raw.obj`).
pub struct Int32Buffer {
    raw: Box<RawBuffer>,
    pub rows: usize,
    pub words: usize,
}

// SAFETY: the view only holds a pointer to memory owned by a Python object that `raw.obj` keeps
// alive; moving the handle between threads moves no Python state. Release happens under the GIL.
unsafe impl Send for Int32Buffer {}

fn is_int32_format(format: *const c_char, itemsize: isize) -> bool {
    if itemsize != 4 {
        return false;
    }
    if format.is_null() {
        return false; // unsigned bytes by default
    }
    // SAFETY: a non-null format is a NUL-terminated string owned by the view (buffer protocol).
    let f = unsafe { CStr::from_ptr(format) }.to_bytes();
    let f = match f {
        [b'@' | b'=' | b'<', rest @ ..] => rest,
        [b'>' | b'!', ..] => return cfg!(target_endian = "big") && matches!(&f[1..], b"i" | b"l"),
        _ => f,
    };
    matches!(f, b"i" | b"l")
}

impl Int32Buffer {
    /// Acquires and checks the buffer of `obj`: int32, writable, C-contiguous, 1-D or 2-D.
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<Int32Buffer> {
        let wrong_type = || {
            PyTypeError::new_err(
                "the bitmask must be an int32 array (numpy or a CPU torch tensor); allocate it with allocate_token_bitmask()",
            )
        };
        // SAFETY: an all-zero `Py_buffer` is a valid out-parameter; CPython fills it on success.
        let mut raw: Box<RawBuffer> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `obj` is a live object and we hold the GIL (`Bound`); `raw` is writable.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), std::ptr::from_mut(&mut *raw), PYBUF_RECORDS_RO) } != 0 {
            // Clear the BufferError that CPython set; ours names what is expected.
            drop(PyErr::take(obj.py()));
            return Err(wrong_type());
        }
        // From here on `Drop` releases the view on every return path.
        let view = Int32Buffer { raw, rows: 0, words: 0 };
        view.check(wrong_type)
    }

    fn check(mut self, wrong_type: impl Fn() -> PyErr) -> PyResult<Int32Buffer> {
        let r = &*self.raw;
        if !is_int32_format(r.format, r.itemsize) {
            return Err(wrong_type());
        }
        if r.readonly != 0 {
            return Err(invalid_argument("the bitmask is read-only"));
        }
        let ndim = usize::try_from(r.ndim).unwrap_or(0);
        // SAFETY: with PyBUF_RECORDS_RO, `shape` and `strides` point to `ndim` elements each.
        let (shape, strides) =
            unsafe { (std::slice::from_raw_parts(r.shape, ndim), std::slice::from_raw_parts(r.strides, ndim)) };
        let (rows, words) = match *shape {
            [w] => (1, w),
            [rr, w] => (rr, w),
            ref s => return Err(invalid_argument(format!("the bitmask must be 1-D or 2-D, got shape {s:?}"))),
        };
        let (rows, words) = (usize::try_from(rows).unwrap_or(0), usize::try_from(words).unwrap_or(0));
        // C-contiguous: the last stride is 4 bytes, the row stride `words * 4` (any stride is
        // fine on a dimension of length 1).
        let contiguous = match *strides {
            [s] => words <= 1 || s == 4,
            [s0, s1] => (words <= 1 || s1 == 4) && (rows <= 1 || isize::try_from(words).is_ok_and(|w| s0 == 4 * w)),
            _ => false,
        };
        if !contiguous {
            return Err(invalid_argument("the bitmask must be C-contiguous"));
        }
        if !(r.buf as usize).is_multiple_of(4) {
            return Err(invalid_argument("the bitmask is not 4-byte aligned"));
        }
        self.rows = rows;
        self.words = words;
        Ok(self)
    }

    pub fn check_row(&self, index: usize) -> PyResult<()> {
        if index >= self.rows {
            return Err(invalid_argument(format!(
                "bitmask row index {index} is out of range for a bitmask with {} rows",
                self.rows
            )));
        }
        Ok(())
    }

    /// Row `index` (`words` elements), writable.
    pub fn row_mut(&mut self, index: usize) -> PyResult<&mut [u32]> {
        self.check_row(index)?;
        let ptr = self.raw.buf.cast::<u32>();
        // SAFETY: `check` established the struct invariant (`rows * words` aligned int32
        // elements, writable, C-contiguous) and `check_row` that `index < rows`, so the row
        // `[index * words, (index + 1) * words)` lies inside the buffer; u32 and i32 share size
        // and alignment. The slice borrows `self` mutably, the only handle to this view in Rust.
        // Python code cannot write the buffer meanwhile unless the caller releases the GIL: a
        // caller that does (a mask fill) holds the only reference it hands out, and the exporter
        // stays alive and unresized while the view is held (the buffer protocol's contract).
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr.add(index * self.words), self.words) })
    }

    /// Copies `src` into row `index` and clears the rest of the row.
    pub fn write_row(&mut self, index: usize, src: &[u32]) -> PyResult<()> {
        // PERF: a slice copy replaces a per-element `Cell::set` loop plus a temporary row (~3 us
        // of a 6 us memoized fill on Llama 3's 4,008-word rows).
        let row = self.row_mut(index)?;
        let n = src.len().min(row.len());
        row[..n].copy_from_slice(&src[..n]);
        row[n..].fill(0);
        Ok(())
    }
}

impl Int32Buffer {
    /// Rows `indices[0]`, `indices[1]`, ... as mutable slices, or None when an index repeats
    /// (two handles to one row). Every index must have passed `check_row`.
    pub fn rows_mut(&mut self, indices: &[usize]) -> Option<Vec<&mut [u32]>> {
        let mut seen = vec![false; self.rows];
        for &i in indices {
            assert!(i < self.rows, "row index checked by check_row");
            if std::mem::replace(&mut seen[i], true) {
                return None;
            }
        }
        let ptr = self.raw.buf.cast::<u32>();
        let words = self.words;
        // SAFETY: as in `write_row`, each row `[i * words, (i + 1) * words)` lies inside the
        // buffer, and the indices are distinct, so the slices do not overlap; they borrow `self`
        // mutably, so no other handle to the view exists while they live.
        Some(indices.iter().map(|&i| unsafe { std::slice::from_raw_parts_mut(ptr.add(i * words), words) }).collect())
    }
}

impl Drop for Int32Buffer {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and is released once;
        // releasing needs the GIL.
        Python::with_gil(|_| unsafe { PyBuffer_Release(std::ptr::from_mut(&mut *self.raw)) });
    }
}

/// A 1-D or 2-D strided buffer of `itemsize`-byte elements whose rows are contiguous, viewed as
/// `rows` rows of `cols` elements `row_stride` bytes apart (a 1-D buffer is one row).
///
/// Invariant: for `r < rows`, the `cols * itemsize` bytes at `raw.buf + r * row_stride` lie in
/// the exporter's memory, are aligned to `itemsize`, and stay valid until `Drop` releases the
/// view; when `writable`, the exporter allows writes.
pub struct RowsView {
    raw: Box<RawBuffer>,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: isize,
    pub itemsize: usize,
    /// The struct-module format code without its byte-order prefix (`f`, `e`, `d`, `h`, `i`, ...).
    pub format: u8,
}

// SAFETY: as for `Int32Buffer`.
unsafe impl Send for RowsView {}
// SAFETY: shared access only reads the fields; rows are handed out through `&mut self` or
// `&self` for reads only.
unsafe impl Sync for RowsView {}

impl RowsView {
    /// Acquires `obj`'s buffer; `what` names it in errors ("the logits", "the bitmask").
    pub fn get(obj: &Bound<'_, PyAny>, what: &str, writable: bool) -> PyResult<RowsView> {
        // SAFETY: as in `Int32Buffer::get`.
        let mut raw: Box<RawBuffer> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: as in `Int32Buffer::get`.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), std::ptr::from_mut(&mut *raw), PYBUF_RECORDS_RO) } != 0 {
            drop(PyErr::take(obj.py()));
            return Err(PyTypeError::new_err(format!("{what} must support the buffer protocol (a numpy array)")));
        }
        let mut v = RowsView { raw, rows: 0, cols: 0, row_stride: 0, itemsize: 0, format: 0 };
        let r = &*v.raw;
        if writable && r.readonly != 0 {
            return Err(invalid_argument(format!("{what} is read-only")));
        }
        let ndim = usize::try_from(r.ndim).unwrap_or(0);
        // SAFETY: with PyBUF_RECORDS_RO, `shape` and `strides` point to `ndim` elements each.
        let (shape, strides) =
            unsafe { (std::slice::from_raw_parts(r.shape, ndim), std::slice::from_raw_parts(r.strides, ndim)) };
        let itemsize = usize::try_from(r.itemsize).unwrap_or(0);
        let (rows, cols, row_stride, col_stride) = match (shape, strides) {
            ([c], [cs]) => (1, *c, 0, *cs),
            ([rr, c], [rs, cs]) => (*rr, *c, *rs, *cs),
            _ => return Err(invalid_argument(format!("{what} must be 1-D or 2-D, got shape {shape:?}"))),
        };
        let (rows, cols) = (usize::try_from(rows).unwrap_or(0), usize::try_from(cols).unwrap_or(0));
        if cols > 1 && col_stride != r.itemsize {
            return Err(invalid_argument(format!("the rows of {what} must be contiguous")));
        }
        let aligned = itemsize.is_power_of_two()
            && (r.buf as usize).is_multiple_of(itemsize)
            && (rows <= 1 || row_stride.unsigned_abs() % itemsize == 0);
        if !aligned {
            return Err(invalid_argument(format!("{what} is not aligned to its element size")));
        }
        let format = if r.format.is_null() {
            b'B'
        } else {
            // SAFETY: a non-null format is a NUL-terminated string owned by the view.
            let f = unsafe { CStr::from_ptr(r.format) }.to_bytes();
            match f {
                [b'@' | b'=' | b'<', c] | [c] => *c,
                _ => 0,
            }
        };
        (v.rows, v.cols, v.row_stride, v.itemsize, v.format) = (rows, cols, row_stride, itemsize, format);
        Ok(v)
    }

    fn row_ptr(&self, r: usize) -> *mut u8 {
        debug_assert!(r < self.rows);
        self.raw
            .buf
            .cast::<u8>()
            .wrapping_offset(isize::try_from(r).unwrap_or(isize::MAX).wrapping_mul(self.row_stride))
    }

    /// Row `r` as elements of `T` (`size_of::<T>() == itemsize`), read-only.
    pub fn row<T>(&self, r: usize) -> &[T] {
        assert!(r < self.rows && std::mem::size_of::<T>() == self.itemsize);
        // SAFETY: the struct invariant (row `r` is `cols` aligned, initialized elements of
        // `itemsize` bytes inside the exporter's memory) with `T` of that size; T is a plain
        // integer type here, valid for every bit pattern.
        unsafe { std::slice::from_raw_parts(self.row_ptr(r).cast::<T>(), self.cols) }
    }

    /// Row `r` as elements of `T`, writable. The caller must hold the only Rust reference to
    /// this view's memory (`&mut self`); distinct rows never overlap when `row_stride` is at
    /// least a row's size, which `get` does not promise, so rows are handed out one at a time.
    pub fn row_mut<T>(&mut self, r: usize) -> &mut [T] {
        assert!(r < self.rows && std::mem::size_of::<T>() == self.itemsize && self.raw.readonly == 0);
        // SAFETY: as in `row`, plus: the exporter allows writes (checked by `get` when asked
        // for a writable view, and asserted here), and `&mut self` makes this the only slice.
        unsafe { std::slice::from_raw_parts_mut(self.row_ptr(r).cast::<T>(), self.cols) }
    }
}

impl Drop for RowsView {
    fn drop(&mut self) {
        // SAFETY: as for `Int32Buffer`.
        Python::with_gil(|_| unsafe { PyBuffer_Release(std::ptr::from_mut(&mut *self.raw)) });
    }
}
