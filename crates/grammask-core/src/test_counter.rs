//! Thread-local event counters that tests read to prove a mask path ran.

/// Declares a thread-local event counter `CELL` (a `Cell<usize>`, counted with
/// `CELL.set(CELL.get() + 1)`) and its reader `fn reader() -> usize`, hidden from the docs.
///
/// ```ignore
/// test_counter! {
///     /// How many kernels this thread's walks took from the plain-text slice, for tests.
///     pub fn region_text_cuts => TEXT_CUTS
/// }
/// ```
/// Invariant: a counter only moves on the path it names, so a test asserting it moved fails
/// when the path is bypassed.
macro_rules! test_counter {
    ($(#[$doc:meta])* $vis:vis fn $reader:ident => $cell:ident) => {
        thread_local! {
            static $cell: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        }
        $(#[$doc])*
        #[doc(hidden)]
        $vis fn $reader() -> usize {
            $cell.get()
        }
    };
}
