//! Interned rows: a kernel walk's chart rows kept in an arena by signature, with a byte
//! transition table per row.
//!
//! Pipeline place: used by the kernel walk (`walk.rs`) when its rows repeat (identifier and
//! number runs inside expressions).
use super::*;
use crate::compiler::LA_NONE;

/// The rows of a kernel walk interned by signature, with their byte transitions: the chart is
/// an arena of distinct rows (rows never pop; [`Chart::push_byte_from`] steps any of them), and a
/// trie node whose row was reached before from the same row by the same byte costs one table
/// lookup instead of an Earley step.
///
/// PERF: an SQL `SELECT ` state reaches ~60 distinct rows over ~52,000 trie nodes (every
/// identifier byte completes the same chain of rules); its walk went from ~15 ms of Earley steps
/// to table lookups.
///
/// Invariant: equal signatures mean the same future (see [`Chart`]; spent callee ends are left
/// out, [`Chart::last_future_signature`]), so a row found under a
/// signature stands for every row with that signature. Rows at or below `first` belong to the
/// walk's start and are never interned away.
pub(super) struct RowMemo {
    /// The walk's start row; rows from it on are memoized.
    pub(super) first: usize,
    by_sig: FastMap<u128, u32>,
    /// `(row - first) * 256 + byte`: the row reached, a plain virtual item ([`VIRTUAL`] `| id`),
    /// [`DEAD`], or [`UNKNOWN`].
    pub(super) next: Vec<u32>,
    /// Plain virtual items met (their frames are `Frame::Virtual(item, id + 1)`; `0` for one not
    /// interned), by id, and their transitions as `next`'s (`id * 256 + byte`): a virtual item
    /// steps on its automaton alone, so the same item steps alike.
    /// PERF: a counted `pattern` string's rows of one plain item (MaskBench o10013's string
    /// start) stepped ~14 K of ~48 K bytes through `RowMemo::step`, ~150 instructions each.
    virtuals: Vec<Item>,
    virtual_ids: FastMap<Item, u32>,
    virtual_next: Vec<u32>,
    /// Set when the arena reached [`MEMO_MAX_ROWS`] or [`MEMO_MAX_ITEMS`]: the walk must be
    /// redone without the memo.
    pub(super) full: bool,
    /// The row a virtual item's step built from its one new item, by that item: the row a
    /// single item closes to depends only on the item and on the walk's fixed rows below
    /// (its origin's), so the same item interns to the same row.
    ///
    /// PERF: every frontier node of a string value inlined in an object rule (`u"` for each
    /// body text `u` of the vocabulary) stepped its `"` from the body's virtual item and closed
    /// the row after the value anew before interning found it equal: ~88% of such a kernel
    /// (MaskBench o36011, ~6.8 M instructions, a new one at every value of the object).
    by_item: FastMap<Item, u32>,
    /// Per row from `first` on, whether the kernel's rule ended there ([`kernel_ended`]): 0 not
    /// known yet, 1 no, 2 yes.
    ended: Vec<u8>,
}

impl Drop for RowMemo {
    fn drop(&mut self) {
        let next = std::mem::take(&mut self.next);
        if next.capacity() <= MAX_POOLED_NEXT {
            NEXT_POOL.with(|p| *p.borrow_mut() = next);
        }
        let virtual_next = std::mem::take(&mut self.virtual_next);
        if virtual_next.capacity() <= MAX_POOLED_NEXT {
            VIRTUAL_POOL.with(|p| *p.borrow_mut() = virtual_next);
        }
    }
}

test_counter! {
    /// How many plain virtual items the walks on this thread interned with a transition table
    /// (`RowMemo::virtuals`), for tests.
    pub fn memo_virtual_items => VIRTUALS
}

test_counter! {
    /// How many Earley steps of the walks on this thread were kept for a run of bytes that step the
    /// row alike ([`same_step_run`]), for tests.
    pub fn row_run_steps => RUN_STEPS
}

test_counter! {
    /// How many rows the walks on this thread interned onto an earlier row that differed from them
    /// by spent callee ends only ([`Chart::last_future_signature`]), for tests.
    pub fn spent_row_merges => SPENT_MERGES
}

/// A frame of a walk with the row memo as its tables name it ([`RowMemo::code`]): an interned
/// row's chart index, or [`VIRTUAL`] `| id` for an interned plain virtual item.
pub(super) type Code = u32;

pub(super) const UNKNOWN: u32 = u32::MAX;
pub(super) const DEAD: u32 = u32::MAX - 1;
/// In a transition: the plain virtual item `id` (`VIRTUAL | id`, below [`DEAD`]).
const VIRTUAL: u32 = 1 << 31;
/// Most plain virtual items one memo interns (1 KB of transitions each); past it, their frames
/// are stepped without a table.
const MEMO_MAX_VIRTUALS: usize = 1024;
/// Bounds on a walk's interned rows (4 MB of transitions) and their items (8 MB).
const MEMO_MAX_ROWS: usize = 4096;
const MEMO_MAX_ITEMS: usize = 1 << 19;

thread_local! {
    /// The transition table of this thread's last kernel walk, reused by the next one.
    /// PERF: a fresh table of a few hundred rows came from fresh pages (page faults and growth
    /// copies were ~8% of an expression-start kernel).
    static NEXT_POOL: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The same for the table of plain virtual items (`RowMemo::virtual_next`).
    static VIRTUAL_POOL: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Largest transition table kept for reuse (1,024 rows).
const MAX_POOLED_NEXT: usize = 1024 * 256;

impl RowMemo {
    pub(super) fn new(a: &Automata, chart: &Chart) -> RowMemo {
        let first = chart.last_row_index();
        let mut by_sig = FastMap::default();
        by_sig.insert(chart.last_future_signature(a), first as u32);
        let mut next = NEXT_POOL.with(|p| std::mem::take(&mut *p.borrow_mut()));
        next.clear();
        next.resize(256, UNKNOWN);
        RowMemo {
            first,
            by_sig,
            next,
            full: false,
            by_item: FastMap::default(),
            ended: vec![0],
            virtuals: Vec::new(),
            virtual_ids: FastMap::default(),
            virtual_next: VIRTUAL_POOL.with(|p| {
                let mut v = std::mem::take(&mut *p.borrow_mut());
                v.clear();
                v
            }),
        }
    }

    /// Whether the kernel's rule ended at row `r` ([`kernel_ended`]), found once per interned
    /// row. PERF: a string start of 12 characters (MaskBench o10009) checked its rows ~36,000
    /// times, ~1.4 M instructions.
    #[inline]
    pub(super) fn ended(&mut self, a: &Automata, chart: &Chart, r: usize) -> bool {
        let Some(known) = r.checked_sub(self.first).and_then(|k| self.ended.get_mut(k)) else {
            return kernel_ended(a, chart.row(r));
        };
        if *known == 0 {
            *known = 1 + u8::from(kernel_ended(a, chart.row(r)));
        }
        *known == 2
    }

    /// Where `frame` leads by `byte` when the tables know it (`Some(None)`: dead), as
    /// [`Self::step`] answers; `None` where a step is needed.
    #[allow(clippy::option_option)] // `step`'s answer, if the tables know it
    #[inline]
    pub(super) fn known(&self, frame: Frame, byte: u8) -> Option<Option<Frame>> {
        let to = match frame {
            Frame::Rows(n) => *self.next.get((n - 1).checked_sub(self.first)? * 256 + usize::from(byte))?,
            Frame::Virtual(_, v) => *self.virtual_next.get(v.checked_sub(1)? * 256 + usize::from(byte))?,
        };
        match to {
            UNKNOWN => None,
            DEAD => Some(None),
            v if v & VIRTUAL != 0 => {
                let id = (v & !VIRTUAL) as usize;
                Some(Some(Frame::Virtual(self.virtuals[id], id + 1)))
            }
            row => Some(Some(Frame::Rows(row as usize + 1))),
        }
    }

    /// `frame` as its transition tables name it ([`Code`]): an interned row from `first` on,
    /// or an interned plain virtual item; `None` for any other frame.
    #[inline]
    pub(super) fn code(&self, frame: Frame) -> Option<Code> {
        match frame {
            Frame::Rows(n) => (n - 1).checked_sub(self.first).map(|_| (n - 1) as Code),
            Frame::Virtual(_, 0) => None,
            Frame::Virtual(_, v) => Some(VIRTUAL | (v - 1) as Code),
        }
    }

    /// The frame code `c` names (see [`Self::code`]).
    pub(super) fn frame(&self, c: Code) -> Frame {
        if c & VIRTUAL == 0 {
            return Frame::Rows(c as usize + 1);
        }
        let id = (c & !VIRTUAL) as usize;
        Frame::Virtual(self.virtuals[id], id + 1)
    }

    /// Where code `c` leads by `byte` as the tables know it: a code, [`DEAD`] or [`UNKNOWN`]
    /// (as [`Self::known`], with no frame built).
    #[inline]
    pub(super) fn next_code(&self, c: Code, byte: u8) -> Code {
        let slot = if c & VIRTUAL == 0 {
            self.next.get((c as usize - self.first) * 256 + usize::from(byte))
        } else {
            self.virtual_next.get((c & !VIRTUAL) as usize * 256 + usize::from(byte))
        };
        slot.copied().unwrap_or(UNKNOWN)
    }

    /// Whether the kernel's rule ended at code `c`'s frame ([`frame_ended`]): a row's answer
    /// once known is a load here, the first one is found out of line.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(super) fn code_ended(&mut self, a: &Automata, chart: &Chart, c: Code) -> bool {
        if c & VIRTUAL == 0 {
            return match self.ended.get(c as usize - self.first) {
                Some(&known) if known != 0 => known == 2,
                _ => self.ended(a, chart, c as usize),
            };
        }
        let it = self.virtuals[(c & !VIRTUAL) as usize];
        it.origin == 0 && a.state(it.state).is_final
    }

    /// A step's answer as a transition (`UNKNOWN` for a virtual item not interned, or once the
    /// memo is full: its dead ends are not the grammar's).
    fn encode(&self, to: Option<Frame>) -> u32 {
        match to {
            _ if self.full => UNKNOWN,
            None => DEAD,
            Some(Frame::Rows(n)) => (n - 1) as u32,
            Some(Frame::Virtual(_, 0)) => UNKNOWN,
            Some(Frame::Virtual(_, v)) => VIRTUAL | (v - 1) as u32,
        }
    }

    pub(super) fn step(&mut self, a: &Automata, chart: &mut Chart, frame: Frame, byte: u8) -> Result<Option<Frame>> {
        if let Some(to) = self.known(frame, byte) {
            return Ok(to);
        }
        let r = match frame {
            Frame::Virtual(it, v) => {
                let to = self.step_virtual(a, chart, it, byte)?;
                if v > 0 {
                    self.virtual_next[(v - 1) * 256 + usize::from(byte)] = self.encode(to);
                }
                return Ok(to);
            }
            Frame::Rows(n) => n - 1,
        };
        if let [it] = chart.row(r) {
            if a.rule_edges(it.state).is_empty() {
                let to = self.step_virtual(a, chart, *it, byte)?;
                if let Some(k) = r.checked_sub(self.first) {
                    self.next[k * 256 + usize::from(byte)] = self.encode(to);
                }
                return Ok(to);
            }
        }
        let slot = (r - self.first) * 256 + byte as usize;
        // Every byte of the run steps the row as `byte` does: one Earley step for all of them.
        let run = same_step_run(a, chart.row(r), byte);
        let slots = slot - usize::from(byte - run.start())..=slot + usize::from(run.end() - byte);
        RUN_STEPS.set(RUN_STEPS.get() + usize::from(run.start() != run.end()));
        if !chart.push_byte_from(a, r, byte)? {
            self.next[slots].fill(DEAD);
            return Ok(None);
        }
        let Some(row) = self.intern(a, chart) else {
            return Ok(None);
        };
        self.next[slots].fill(row as u32);
        Ok(Some(Frame::Rows(row + 1)))
    }

    /// A single item without rule edges steps on its automaton; a row is built (and interned)
    /// only when it reaches a state that needs one.
    fn step_virtual(&mut self, a: &Automata, chart: &mut Chart, it: Item, byte: u8) -> Result<Option<Frame>> {
        let Some(t) = a.step(it.state, byte) else {
            return Ok(None);
        };
        let next = Item { state: t, ..it };
        if is_plain(a, &next) {
            return Ok(Some(Frame::Virtual(next, self.virtual_id(next))));
        }
        if let Some(&row) = self.by_item.get(&next) {
            return Ok(Some(Frame::Rows(row as usize + 1)));
        }
        chart.push_items(a, &[next])?;
        let row = self.intern(a, chart);
        if let Some(row) = row {
            self.by_item.insert(next, row as u32);
        }
        Ok(row.map(|row| Frame::Rows(row + 1)))
    }

    /// Plain virtual item `it`'s id plus one (see `virtuals`), interned now if new; 0 past
    /// [`MEMO_MAX_VIRTUALS`].
    fn virtual_id(&mut self, it: Item) -> usize {
        if let Some(&id) = self.virtual_ids.get(&it) {
            return id as usize + 1;
        }
        if self.virtuals.len() >= MEMO_MAX_VIRTUALS {
            return 0;
        }
        self.virtual_ids.insert(it, self.virtuals.len() as u32);
        self.virtuals.push(it);
        VIRTUALS.set(VIRTUALS.get() + 1);
        self.virtual_next.resize(self.virtual_next.len() + 256, UNKNOWN);
        self.virtuals.len()
    }

    /// Interns the chart's newest row: an equal row found before replaces it. `None` (with
    /// `full` set) when the arena is at its bounds.
    fn intern(&mut self, a: &Automata, chart: &mut Chart) -> Option<usize> {
        // Rows are keyed by their future signature (spent items left out, see
        // `Chart::last_future_signature`): rows equal but for them have the same future. A row
        // found under its full signature is found under its future one: the key is the found
        // row's items less its spent ones, which are then this row's items, none of them spent,
        // so the future signature (a pass over the row) is computed for the rows missed only.
        let full = chart.last_signature();
        let mut sig = full;
        let mut found = self.by_sig.get(&full).copied();
        if found.is_none() {
            sig = chart.last_future_signature(a);
            if sig != full {
                found = self.by_sig.get(&sig).copied();
                SPENT_MERGES.set(SPENT_MERGES.get() + usize::from(found.is_some()));
            }
        }
        if let Some(row) = found {
            chart.pop_row();
            return Some(row as usize);
        }
        let row = chart.last_row_index();
        if row - self.first >= MEMO_MAX_ROWS || chart.num_items() > MEMO_MAX_ITEMS {
            self.full = true;
            return None;
        }
        self.by_sig.insert(sig, row as u32);
        self.next.resize(self.next.len() + 256, UNKNOWN);
        self.ended.push(0);
        Some(row)
    }
}

/// The bytes around `byte` that step every item of `row` as `byte` does (each item's state by the
/// same edge, or by none), where that alone makes the next row: no item under a lookahead, no
/// budgets (see [`Chart::push_byte_from`]); else `byte` alone.
/// PERF: a counted `pattern` string's rows (one per position of its first class character, by
/// their origins) were each stepped byte by byte: ~1,700 Earley steps at MaskBench o10009's
/// string start, where its classes make ~12 runs per row.
fn same_step_run(a: &Automata, row: &[Item], byte: u8) -> std::ops::RangeInclusive<u8> {
    if a.char_budgets().is_some() || a.rec_budgets().is_some() || row.iter().any(|it| it.la != LA_NONE) {
        return byte..=byte;
    }
    let (mut lo, mut hi) = (0u8, 255u8);
    for it in row {
        for e in a.byte_edges(it.state) {
            if e.hi < byte {
                lo = lo.max(e.hi + 1);
            } else if e.lo > byte {
                hi = hi.min(e.lo - 1);
                break;
            } else {
                (lo, hi) = (lo.max(e.lo), hi.min(e.hi));
                break;
            }
        }
    }
    lo..=hi
}
