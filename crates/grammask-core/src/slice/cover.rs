//! Cover search: whether a kernel state reads a slice, by a product search of its rule automata
//! (a bounded pushdown simulation) with the slice automaton.
//!
//! Pipeline place: called when a kernel is classified ([`super::BodySlice::covers`],
//! [`super::ClassSlice::covers`]); a state that covers a slice takes the slice plus walks of its
//! frontier instead of a full trie walk. The verdicts are kept per compiled grammar
//! ([`CoverMemo`]), so the searches of successive positions of one string share their work.
use super::Body;
use crate::compiler::{Automata, StateId};
use crate::fasthash::{FastMap, FastState};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A mutex that fills take before the class-body thread ([`cover_search_after_fills`]): that
/// thread begins no search while a fill waits, so a fill that needs the memo waits for at most
/// the thread's search in progress (and other fills' searches, as before).
/// PERF: with a plain `Mutex`, the thread took the lock again right after each search, before
/// the fill it woke ran: in a test of 20 back-to-back 1 ms holds, a waiter waited for 17 and
/// 18 of them in two of eight tries.
#[derive(Debug, Default)]
struct FillFirst<T> {
    inner: Mutex<T>,
    /// Fills waiting for (or just given) `inner`.
    waiting: AtomicUsize,
}

/// How long the class-body thread sleeps between its checks while fills wait for the memo.
const AFTER_FILLS_POLL: std::time::Duration = std::time::Duration::from_micros(100);

impl<T> FillFirst<T> {
    /// The lock, for a fill (ahead of [`Self::lock_after_fills`]).
    fn lock(&self) -> MutexGuard<'_, T> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        guard
    }

    /// The lock, once no fill waits for it.
    fn lock_after_fills(&self) -> MutexGuard<'_, T> {
        while self.waiting.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(AFTER_FILLS_POLL);
        }
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod fill_first_tests {
    use super::FillFirst;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A fill that asks for the lock while another thread takes it for back-to-back searches
    /// waits for the search in progress (and one begun in the instant it asked), not the rest.
    #[test]
    fn a_fill_waits_for_at_most_the_search_in_progress() {
        for _ in 0..8 {
            let (memo, done) = (Arc::new(FillFirst::<()>::default()), Arc::new(AtomicUsize::new(0)));
            let (m, d) = (Arc::clone(&memo), Arc::clone(&done));
            let searches = std::thread::spawn(move || {
                for _ in 0..20 {
                    let _held = m.lock_after_fills();
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(1) {
                        std::hint::spin_loop();
                    }
                    d.fetch_add(1, Ordering::SeqCst);
                }
            });
            std::thread::sleep(Duration::from_millis(2));
            let before = done.load(Ordering::SeqCst);
            let during = {
                let _held = memo.lock();
                done.load(Ordering::SeqCst) - before
            };
            searches.join().unwrap();
            assert!(during <= 2, "the fill waited for {during} searches");
        }
    }
}

/// Most (configuration set, slice state) pairs one [`cover_search`] explores beyond those its
/// memo has decided.
const MAX_COVER_PAIRS: usize = 16384;

/// Most pairs all the cover searches for one kernel state explore together (the body slice's,
/// its callees', the walked bodies', the class slice's), beyond those the memo has decided; past
/// it every search of the state gives up and the state takes the walk without that shortcut
/// (exact). See [`with_cover_budget`].
pub const MAX_STATE_COVER_PAIRS: usize = 16384;

thread_local! {
    /// Pairs the cover searches on this thread may still explore: set by [`with_cover_budget`]
    /// for one kernel state, unbounded outside one (each search still stops at
    /// [`MAX_COVER_PAIRS`]).
    static PAIRS_LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Pairs taken on this thread so far ([`cover_pairs_taken`]).
    static PAIRS_TAKEN: Cell<usize> = const { Cell::new(0) };
}

/// How many cover-search pairs the searches on this thread explored so far, for tests.
#[doc(hidden)]
pub fn cover_pairs_taken() -> usize {
    PAIRS_TAKEN.get()
}

/// Runs `f` (the classification of one kernel state) with at most `pairs` new cover-search
/// pairs for all of its searches, and no more than an enclosing call leaves (so a caller can
/// force a smaller budget on every state `f` classifies: the tests' tiny budgets). A search that
/// reaches the budget gives up like one past [`MAX_COVER_PAIRS`]: undecided, nothing memoized.
pub fn with_cover_budget<R>(pairs: usize, f: impl FnOnce() -> R) -> R {
    /// Restores the enclosing budget, also when `f` unwinds.
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            PAIRS_LEFT.set(self.0);
        }
    }
    let outer = PAIRS_LEFT.get();
    let _restore = Restore(outer);
    PAIRS_LEFT.set(outer.min(pairs));
    f()
}

test_counter! {
    /// How many times the cover searches on this thread met every multi-byte character of a pair at
    /// once ([`Explored::characters_to`]), for tests.
    pub fn characters_met_at_once => CHARACTERS_AT_ONCE
}

/// Takes one pair from the thread's budget ([`with_cover_budget`]); false when none is left.
pub fn take_cover_pair() -> bool {
    let left = PAIRS_LEFT.get();
    PAIRS_LEFT.set(left.saturating_sub(1));
    PAIRS_TAKEN.set(PAIRS_TAKEN.get() + usize::from(left > 0));
    left > 0
}

/// Most configuration sets a [`CoverMemo`] keeps per slice; past it the slice's memo starts over.
const MAX_MEMO_SETS: usize = 1 << 16;

/// Whether every rule reference of `q` is a tail call: its target state is final and has no
/// edges, so the referenced rule's end is the end of `q`'s rule (a regex's `x* (y z)?` compiled as
/// `x* (y rest)?`, or a rule that calls itself last).
#[cfg(test)]
pub(super) fn tail_calls_only(a: &Automata, q: StateId) -> bool {
    a.rule_edges(q)
        .iter()
        .all(|&(_, t)| a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty())
}

/// Deepest stack of pending calls [`cover_search`] follows.
const MAX_CALL_DEPTH: u32 = 4;

/// Most configurations in one set of [`cover_search`] (a string body's row holds a handful; a
/// state that predicts much more is no string body, and gives up early).
const MAX_SET_CONFIGS: usize = 256;

/// A configuration of [`cover_search`]: an automaton state, and the stack of states its callers
/// resume in (an id into [`Stacks`]; 0: empty, the state's rule ending ends the kernel's rule).
type Config = (StateId, u32);

/// Stands, in a configuration or on a stack, for any *inert* return state: not final, no rule
/// edges, and every byte it reads is `Walk` in the slice's state 0 (a key's closing `"` after a
/// called key pattern, in a string body). Such a configuration reads nothing, ends nothing and
/// never returns further while the slice is in state 0, so the stack below it is dropped and all
/// such states share one configuration: the sets of a called rule (a key pattern of 600 rules)
/// are then the same whichever of 94 properties called it, instead of 800 new sets for each.
/// In any other slice state a set holding it is undecided by the abstract search, and the
/// search is redone with the real return states ([`cover_search`]).
const INERT: StateId = StateId(u32::MAX);

/// Interned stacks of return states, as linked cells: `cells[id] = (below, top, depth)`.
#[derive(Debug)]
struct Stacks {
    cells: Vec<(u32, StateId, u32)>,
    ids: FastMap<(u32, StateId), u32>,
}

impl Stacks {
    fn push(&mut self, below: u32, top: StateId) -> Option<u32> {
        // Nothing below an inert state is ever returned to.
        let below = if top == INERT { 0 } else { below };
        let depth = self.cells[below as usize].2 + 1;
        if depth > MAX_CALL_DEPTH {
            return None;
        }
        let next = self.cells.len() as u32;
        let id = *self.ids.entry((below, top)).or_insert(next);
        if id == next {
            self.cells.push((below, top, depth));
        }
        Some(id)
    }
}

/// The slice automaton a search reads against: its verdicts are kept apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SliceKey {
    /// The string-body automaton ([`super::BodySlice`]).
    Body,
    /// The free-text automaton of an ASCII class ([`super::ClassSlice`]).
    Class(u128),
    /// The string-body automaton with these ASCII bytes walked at a character boundary
    /// ([`super::WalkedBody`]).
    BodyWalking(u128),
    /// The string-body automaton with these short ASCII strings walked ([`super::Walked::Strings`]).
    BodyStrings([u32; super::walked::MAX_WALKED_STRINGS]),
    /// The string-body automaton with these strings walked, searched from a token start whose
    /// leading run of `run` characters walks a `stop` character after it
    /// ([`super::Walked::StartRun`]); `inside`: searched from inside the run.
    BodyStart { strings: [u32; super::walked::MAX_WALKED_STRINGS], run: u128, stop: u128, inside: bool },
}

/// A misread: the slice state, the byte, and the path's history ([`History`]) to the misreading
/// pair, with [`WIDE_MISREAD`] set when the byte is refused with others (see [`History`]).
pub type Misread = (u8, u8, History);

/// The last (up to) seven ASCII characters read at a character boundary on one path, one a byte,
/// the last in the low byte (0: none known); a character's bit 7 is set when the path read it as
/// one of a class (a run of several bytes that every configuration and the slice step treat
/// alike: `[a-z]` after `net_` in `net_[a-z]+[0-9]+`).
pub type History = u64;

/// [`History`] bits that hold characters.
pub(super) const HISTORY_CHARS: History = (1 << 56) - 1;

/// In a [`Misread`]'s history: the misread byte is refused with the rest of its run (a class).
pub(super) const WIDE_MISREAD: History = 1 << 63;

/// Whether slice state `b` is at a character boundary of the string-body slices (the body's state
/// 0, or a walked-string prefix state: [`super::walked`]).
fn boundary(b: u8) -> bool {
    b == 0 || b >= super::walked::FIRST_PREFIX_STATE
}

/// Cover-search verdicts of one compiled grammar, per slice: the configuration sets met so far
/// (with their stacks, interned for the grammar's lifetime) and, per set and slice state, whether
/// the pair is decided.
///
/// Invariant: a pair marked *good* reads, with every pair reachable from it on slice bytes, every
/// `To` byte and no `Dead` byte, and each of their successors closes within the bounds; for a good
/// pair, `ends` holds whether some pair it reaches (itself included) holds a final configuration
/// with an empty stack; a pair marked *bad* misreads a byte or reaches a pair that does. Pairs a
/// search left undecided (past its bounds) are neither, so a later search explores them again.
#[derive(Debug, Default)]
pub struct CoverMemo {
    /// Per slice and whether inert return states are abstracted ([`INERT`]).
    slices: FillFirst<Slices>,
    /// Per kernel state, what [`super::walked_cover`] found (a state whose walked searches failed
    /// is not searched again).
    pub(super) walked: Mutex<FastMap<StateId, Option<(super::Walked, super::Cover)>>>,
    /// The walked strings found so far, merged while they fit (see [`super::walked`]): tried
    /// first by the next state's string search.
    pub(super) strings_seed: Mutex<Option<[u32; super::walked::MAX_WALKED_STRINGS]>>,
    /// Callee starts searched as other states' ([`CoverMemo::with_substitutes`]).
    substitutes: Arc<FastMap<StateId, StateId>>,
}

/// The verdicts of a [`CoverMemo`] by slice, and the automaton's facts their searches share.
#[derive(Debug, Default)]
struct Slices {
    /// Per slice and whether inert return states are abstracted ([`INERT`]).
    by_key: FastMap<(SliceKey, bool), Explored>,
    /// Per automaton state that reads a byte >= 0x80, the state every well-formed multi-byte
    /// character leads it to, if it reads exactly those characters alike ([`char_exit`]).
    /// PERF: kept per slice, each round of a walked search (a slice of its own) found them
    /// again (MaskBench o23177 t110: 1.5 M instructions).
    char_exits: FastMap<StateId, Option<StateId>>,
}

/// Most slice automaton states a cover search tracks (one bit each per explored set).
pub(crate) const SLICE_STATES: usize = 32;

/// One bit per slice automaton state.
type StateBits = u32;

#[derive(Debug)]
struct Explored {
    /// [`CoverMemo::substitutes`].
    substitutes: Arc<FastMap<StateId, StateId>>,
    stacks: Stacks,
    /// The sets, each stored once (the interner's key and the list share it).
    ids: FastMap<Arc<[Config]>, u32>,
    sets: Vec<Arc<[Config]>>,
    /// Per set, one bit per slice state (at most [`SLICE_STATES`]).
    good: Vec<StateBits>,
    ends: Vec<StateBits>,
    /// Per set, one bit per slice state: whether a good pair reaches a pair in a slice state
    /// other than 0 holding a final configuration with an empty stack (the rule ends inside a
    /// character or an escape).
    ends_inside: Vec<StateBits>,
    bad: Vec<StateBits>,
    /// Per slice state, the bytes at which the slice step changes ([`run_bounds`]), found on
    /// first use unless kept ([`StepFacts`]).
    slice_bounds: [Option<[u64; 4]>; SLICE_STATES],
    /// With inert return states abstracted: the bytes `Walk` in slice state 0 (`None`: not
    /// abstracted), and the slice states in which one of them is not `Walk`.
    inert_bytes: Option<[u64; 4]>,
    inert_refused: StateBits,
    /// Root sets whose abstract search was refused (the search with real states decides them).
    refused_roots: Vec<u32>,
    /// Per bad pair, the (slice state, byte) of the misread it reaches (a byte the slice reads and
    /// no configuration does, or a dead byte some configuration reads), kept only for string-body
    /// slices and only an ASCII byte at a character boundary (what [`super::walked_cover`] uses).
    misreads: FastMap<(u32, u8), Misread>,
    keeps_misreads: bool,
    /// Per bad pair whose misread a search met, where it met it from that pair
    /// ([`Refutation::at`], `steps` counted from the pair): a path of the automaton, so a later
    /// search that meets the pair decided, or from it as its root, reports it too (a fill then
    /// spares the bounded search as the first one did; [`super::bounded_short`]).
    misread_at: FastMap<(u32, u8), MisreadAt>,
    /// The slice states from which every path returns to state 0 (inside a character): a set
    /// there is explored in place of the pair whose character it is, never a pair of its own
    /// (searches start at state 0, and a character's sets belong to the state it began in).
    transient: StateBits,
    /// Per slice state, where every well-formed multi-byte character leads ([`char_exit`]),
    /// found on first use: [`NOT_FOUND`] before, [`NO_EXIT`] where some character does not lead
    /// to one non-transient state alike.
    slice_char_exit: [u8; SLICE_STATES],
}

/// [`Explored::slice_char_exit`] not found yet, and found to be none (slice states are < 32).
const NOT_FOUND: u8 = u8::MAX;
const NO_EXIT: u8 = u8::MAX - 1;

/// The well-formed UTF-8 characters of two to four bytes, as byte ranges (RFC 3629).
const UTF8_SHAPES: [&[(u8, u8)]; 8] = [
    &[(0xC2, 0xDF), (0x80, 0xBF)],
    &[(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    &[(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    &[(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
];

/// The state every well-formed multi-byte character leads `s` to, when `s` reads them all alike:
/// no byte that leads a malformed sequence (0x80-0xC1, 0xF5-0xFF) is read from `s`; along each
/// shape every byte of a range steps to one state (`target(s, lo, hi)`), which passes `inner` and
/// reads no byte outside the shape's next range (`reads(s, lo, hi)`: some byte of `lo..=hi` is
/// read); and all characters end in one state.
fn char_exit<S: Copy + Eq>(
    s: S,
    target: impl Fn(S, u8, u8) -> Option<S>,
    reads: impl Fn(S, u8, u8) -> bool,
    inner: impl Fn(S) -> bool,
) -> Option<S> {
    if reads(s, 0x80, 0xC1) || reads(s, 0xF5, 0xFF) {
        return None;
    }
    let mut exit = None;
    for shape in UTF8_SHAPES {
        let mut at = s;
        for (k, &(lo, hi)) in shape.iter().enumerate() {
            // Continuation ranges lie inside 0x80-0xBF: bytes below and above them exist.
            if k > 0 && (!inner(at) || reads(at, 0, lo - 1) || reads(at, hi + 1, 0xFF)) {
                return None;
            }
            at = target(at, lo, hi)?;
        }
        if exit.is_some_and(|e| e != at) {
            return None;
        }
        exit = Some(at);
    }
    exit
}

/// [`char_exit`] of automaton state `q`: the states inside a character are plain (not final, no
/// rule edge).
pub(super) fn state_char_exit(a: &Automata, q: StateId) -> Option<StateId> {
    let inner = |s: StateId| !a.state(s).is_final && a.rule_edges(s).is_empty();
    // Edges are sorted and disjoint: one edge holds the whole range, or it is split.
    let target = |s: StateId, lo: u8, hi: u8| {
        a.byte_edges(s).iter().find(|e| e.lo <= lo && lo <= e.hi).filter(|e| hi <= e.hi).map(|e| e.target)
    };
    let reads = |s: StateId, lo: u8, hi: u8| a.byte_edges(s).iter().any(|e| e.lo <= hi && lo <= e.hi);
    char_exit(q, target, reads, inner)
}

/// What [`Explored::new`] derives from the slice step alone: the inert bytes and the slice
/// states that refuse them (with inert return states abstracted), the transient slice states,
/// and the run bounds of the slice states ([`run_bounds`]; all of them for a kept key, else
/// found on first use).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct StepFacts {
    inert_bytes: Option<[u64; 4]>,
    inert_refused: StateBits,
    transient: StateBits,
    bounds: [Option<[u64; 4]>; SLICE_STATES],
}

/// Most keys [`STEP_FACTS`] holds (cleared when full).
const MAX_STEP_FACTS: usize = 1024;

/// [`StepFacts`] of the keys whose step is fixed code, whatever the grammar: [`SliceKey::Body`]
/// ([`super::body::body_step`]) and [`SliceKey::Class`] ([`super::class::class_step`] of its
/// class), kept for the process. PERF: each compile made its own `Explored` per key and stepped
/// every byte of all 32 slice states for these (~8 k steps a key, ~26 k a compile of the band).
static STEP_FACTS: std::sync::OnceLock<Mutex<FastMap<(SliceKey, bool), StepFacts>>> = std::sync::OnceLock::new();

impl StepFacts {
    fn of(abstract_returns: bool, step: &impl Fn(u8, u8) -> Body, all_bounds: bool) -> StepFacts {
        let mut inert_bytes = None;
        let mut inert_refused: StateBits = 0;
        if abstract_returns {
            let mut bits = [0u64; 4];
            for x in (0..=255u8).filter(|&x| step(0, x) == Body::Walk) {
                bits[usize::from(x >> 6)] |= 1 << (x & 63);
                for b in 1..SLICE_STATES as u8 {
                    if step(b, x) != Body::Walk {
                        inert_refused |= 1 << b;
                    }
                }
            }
            inert_bytes = Some(bits);
        }
        // Grown to a fixed point: a state all of whose successors other than 0 are transient.
        // PERF: successors read once (the fixed point's rounds over every byte were +7% on the
        // compile of small schemas).
        let mut succ: [StateBits; SLICE_STATES] = [0; SLICE_STATES];
        for b in 1..SLICE_STATES as u8 {
            for x in 0..=255u8 {
                if let Body::To(nb) = step(b, x) {
                    succ[usize::from(b)] |= 1 << nb;
                }
            }
        }
        let mut transient: StateBits = 0;
        loop {
            let grown = (1..SLICE_STATES as u8).fold(transient, |t, b| {
                let out = succ[usize::from(b)] & !1 & !transient == 0;
                t | StateBits::from(out) << b
            });
            if grown == transient {
                break;
            }
            transient = grown;
        }
        let mut bounds = [None; SLICE_STATES];
        if all_bounds {
            for (b, bits) in bounds.iter_mut().enumerate() {
                *bits = Some(run_bounds(b as u8, step));
            }
        }
        StepFacts { inert_bytes, inert_refused, transient, bounds }
    }

    /// [`Self::of`], from [`STEP_FACTS`] for a key whose step is fixed code.
    fn for_key(key: SliceKey, abstract_returns: bool, step: &impl Fn(u8, u8) -> Body) -> StepFacts {
        if !matches!(key, SliceKey::Body | SliceKey::Class(_)) {
            return StepFacts::of(abstract_returns, step, false);
        }
        let cache = STEP_FACTS.get_or_init(|| Mutex::new(HashMap::with_hasher(FastState)));
        let k = (key, abstract_returns);
        if let Some(&f) = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&k) {
            return f;
        }
        let f = StepFacts::of(abstract_returns, step, true);
        let mut map = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_STEP_FACTS {
            map.clear();
        }
        map.insert(k, f);
        f
    }
}

/// The bytes at which the slice step changes in slice state `b` (bit `x`: `step(b, x)` differs
/// from `step(b, x - 1)`; bit 0 always).
fn run_bounds(b: u8, step: &impl Fn(u8, u8) -> Body) -> [u64; 4] {
    let mut bits = [1u64, 0, 0, 0];
    for x in 1..=255u8 {
        if step(b, x) != step(b, x - 1) {
            bits[usize::from(x >> 6)] |= 1 << (x & 63);
        }
    }
    bits
}

impl Explored {
    fn new(
        key: SliceKey,
        abstract_returns: bool,
        step: &impl Fn(u8, u8) -> Body,
        substitutes: Arc<FastMap<StateId, StateId>>,
    ) -> Explored {
        let StepFacts { inert_bytes, inert_refused, transient, bounds } =
            StepFacts::for_key(key, abstract_returns, step);
        Explored {
            substitutes,
            transient,
            inert_bytes,
            inert_refused,
            refused_roots: Vec::new(),
            misreads: HashMap::with_hasher(FastState),
            keeps_misreads: matches!(key, SliceKey::Body | SliceKey::BodyWalking(_) | SliceKey::BodyStrings(_)),
            misread_at: HashMap::with_hasher(FastState),
            stacks: Stacks { cells: vec![(0, StateId(0), 0)], ids: HashMap::with_hasher(FastState) },
            ids: HashMap::with_hasher(FastState),
            sets: Vec::new(),
            good: Vec::new(),
            ends: Vec::new(),
            ends_inside: Vec::new(),
            bad: Vec::new(),
            slice_bounds: bounds,
            slice_char_exit: [NOT_FOUND; SLICE_STATES],
        }
    }

    /// The verdict kept for pair `(id, b)`: where the rule may end if good, `Err` if bad, `None`
    /// if undecided.
    fn decided(&self, id: u32, b: u8) -> Option<Result<Ends, ()>> {
        let (i, bit) = (id as usize, 1 << b);
        if self.good[i] & bit != 0 {
            Some(Ok(Ends { may_end: self.ends[i] & bit != 0, inside: self.ends_inside[i] & bit != 0 }))
        } else if self.bad[i] & bit != 0 {
            Some(Err(()))
        } else {
            None
        }
    }

    /// Marks pair `(id, b)` refuting, by `misread`; returns the misread if kept (see
    /// [`Self::misreads`]): a fresh search and a memoized one report the same.
    fn refute(&mut self, id: u32, b: u8, misread: Option<Misread>) -> Option<Misread> {
        self.bad[id as usize] |= 1 << b;
        let kept = misread.filter(|&(mb, x, _)| self.keeps_misreads && boundary(mb) && x < 0x80);
        if let Some(m) = kept {
            self.misreads.insert((id, b), m);
        }
        kept
    }

    fn intern(&mut self, set: &[Config]) -> u32 {
        if let Some(&i) = self.ids.get(set) {
            return i;
        }
        let i = self.sets.len() as u32;
        let set: Arc<[Config]> = set.into();
        self.ids.insert(set.clone(), i);
        self.sets.push(set);
        self.good.push(0);
        self.ends.push(0);
        self.ends_inside.push(0);
        self.bad.push(0);
        i
    }

    /// Whether return state `t` is inert (see [`INERT`]) for this search.
    fn is_inert(&self, a: &Automata, t: StateId) -> bool {
        let Some(bits) = self.inert_bytes else { return false };
        let walk = |x: u8| bits[usize::from(x >> 6)] >> (x & 63) & 1 == 1;
        !a.state(t).is_final && a.rule_edges(t).is_empty() && a.byte_edges(t).iter().all(|e| (e.lo..=e.hi).all(walk))
    }

    /// Closes `set` under calls and returns, sorted and deduplicated; `None` past the depth or
    /// the set size.
    fn close(&mut self, a: &Automata, set: &mut Vec<Config>) -> Option<()> {
        let mut i = 0;
        while i < set.len() {
            let (q, st) = set[i];
            i += 1;
            if q == INERT {
                continue;
            }
            let add = |c: Config, set: &mut Vec<Config>| {
                if !set.contains(&c) {
                    set.push(c);
                }
            };
            if a.state(q).is_final && st != 0 {
                let (below, top, _) = self.stacks.cells[st as usize];
                add((top, below), set);
            }
            for &(r, t) in a.rule_edges(q) {
                let tail = a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty();
                let t = if !tail && self.is_inert(a, t) { INERT } else { t };
                let callee_stack = if tail { st } else { self.stacks.push(st, t)? };
                let s0 = a.callee_start(q, r);
                add((self.substitutes.get(&s0).copied().unwrap_or(s0), callee_stack), set);
            }
            if set.len() > MAX_SET_CONFIGS {
                return None;
            }
        }
        // A configuration that reads no byte and is not final has done all it can (its calls
        // are in the set): without it, a rule's start tail-called from several states is one set.
        set.retain(|&(q, _)| q == INERT || a.state(q).is_final || !a.byte_edges(q).is_empty());
        set.sort_unstable();
        set.dedup();
        Some(())
    }

    fn bounds(&mut self, b: u8, step: &impl Fn(u8, u8) -> Body) -> [u64; 4] {
        *self.slice_bounds[usize::from(b)].get_or_insert_with(|| run_bounds(b, step))
    }
}

impl Explored {
    /// The set that every well-formed multi-byte character leads configurations `real` to from
    /// slice state `b`, and its slice state, when a fresh exploration of those characters would
    /// meet only that one pair: the slice reads every such character through transient states
    /// to one non-transient state and reads no byte that leads a malformed one; each
    /// configuration reads no byte >= 0x80, or reads exactly those characters alike, through
    /// states that neither end nor call, to one state; and some configuration reads them.
    /// `Err` when closing that set gives up (as a fresh exploration would).
    fn characters_to(
        &mut self,
        a: &Automata,
        step: &impl Fn(u8, u8) -> Body,
        real: &[Config],
        b: u8,
        next: &mut Vec<Config>,
        char_exits: &mut FastMap<StateId, Option<StateId>>,
    ) -> Option<Result<u8, ()>> {
        if self.slice_char_exit[usize::from(b)] == NOT_FOUND {
            let to = |sb: u8, x: u8| match step(sb, x) {
                Body::To(nb) => Some(nb),
                Body::Dead | Body::Walk => None,
            };
            let target = |sb: u8, lo: u8, hi: u8| to(sb, lo).filter(|&t| (lo..=hi).all(|x| to(sb, x) == Some(t)));
            let reads = |sb: u8, lo: u8, hi: u8| (lo..=hi).any(|x| to(sb, x).is_some());
            let transient = self.transient;
            let exit =
                char_exit(b, target, reads, |sb| transient >> sb & 1 == 1).filter(|&nb| transient >> nb & 1 == 0);
            self.slice_char_exit[usize::from(b)] = exit.unwrap_or(NO_EXIT);
        }
        let nb = self.slice_char_exit[usize::from(b)];
        if nb == NO_EXIT {
            return None;
        }
        next.clear();
        for &(q, st) in real {
            if a.byte_edges(q).last().is_none_or(|e| e.hi < 0x80) {
                continue;
            }
            let t = *char_exits.entry(q).or_insert_with(|| state_char_exit(a, q));
            next.push((t?, st));
        }
        if next.is_empty() {
            return None;
        }
        next.sort_unstable();
        next.dedup();
        Some(self.close(a, next).map(|()| nb).ok_or(()))
    }
}

impl CoverMemo {
    /// A memo whose searches read a call of each key of `substitutes` as a call of its value.
    /// The caller vouches that after every byte string, the two rules read the same next bytes
    /// and either both may end or some longer string ends both: an open object's other-keys
    /// rule (every string body but a few words W, none with a `"` or a backslash) for the
    /// string-body rule, where a verdict reads bytes and asks only whether an end is reachable.
    /// PERF: each open object's key start searched its own excluded-key automaton (~0.5 M
    /// instructions on Llama 3, ~40% of the first key's fill); now every key start of the
    /// grammar meets the string body's sets, decided once.
    pub fn with_substitutes(substitutes: FastMap<StateId, StateId>) -> CoverMemo {
        CoverMemo { substitutes: Arc::new(substitutes), ..CoverMemo::default() }
    }

    /// Heap bytes of the kept verdicts (each set once, shared by the list and the interner),
    /// their misreads, the states' character exits and the walked-cover answers.
    pub fn memory_size(&self) -> usize {
        // One lock at a time (`walked_cover` never holds both either).
        let walked = self.walked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len() * 48;
        let slices = self.slices.lock();
        let size = |e: &Explored| {
            let configs: usize = e.sets.iter().map(|s| s.len()).sum();
            configs * std::mem::size_of::<Config>()
                + e.sets.len() * 74
                + e.stacks.cells.len() * 24
                + e.misreads.len() * 16
                + e.misread_at.len() * 16
        };
        slices.by_key.values().map(size).sum::<usize>() + slices.char_exits.len() * 16 + walked
    }

    /// Per slice state, how many pairs are decided; and how many configurations of the kept sets
    /// neither read a byte nor end (for tests).
    #[cfg(test)]
    pub(super) fn pairs_by_slice_state(&self, a: &Automata) -> ([usize; SLICE_STATES], usize) {
        let slices = self.slices.lock();
        let (mut by, mut idle) = ([0; SLICE_STATES], 0);
        for e in slices.by_key.values() {
            for (i, set) in e.sets.iter().enumerate() {
                for (b, n) in by.iter_mut().enumerate() {
                    *n += usize::from((e.good[i] | e.bad[i]) >> b & 1 == 1);
                }
                let idle_config = |&&(q, _): &&Config| q != INERT && !a.state(q).is_final && a.byte_edges(q).is_empty();
                idle += set.iter().filter(idle_config).count();
            }
        }
        (by, idle)
    }

    /// How many (set, slice state) pairs are decided, good or bad (for tests).
    #[cfg(test)]
    pub(super) fn decided_pairs(&self) -> usize {
        let slices = self.slices.lock();
        let ones = |v: &[StateBits]| v.iter().map(|w| w.count_ones() as usize).sum::<usize>();
        slices.by_key.values().map(|e| ones(&e.good) + ones(&e.bad)).sum()
    }
}

/// The abstract search met an inert configuration in a slice state where its bytes matter.
struct Refused;

/// Where a cover search met the misread that refuted it, when it found it itself (not through a
/// pair decided before): `steps` pair steps from its root (one character each in the body
/// slice, whose pairs are all at a character boundary), at a pair some of whose configurations,
/// inert ones aside, read on (have a byte edge), so that the rule reads the path's text and is
/// still inside after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MisreadAt {
    pub steps: u32,
    pub reads_on: bool,
}

/// A failed cover search: the misread kept ([`Explored::refute`]; `None` also when the search
/// gave up), and where the search met it, if it did itself.
#[derive(Clone, Copy, Debug)]
pub struct Refutation {
    pub misread: Option<Misread>,
    pub at: Option<MisreadAt>,
}

/// Where a covering kernel state's rule may end inside slice text.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ends {
    /// Somewhere (a final configuration with an empty stack is reachable).
    pub may_end: bool,
    /// Somewhere other than slice state 0 (inside a character or an escape).
    pub inside: bool,
}

/// Product search of the grammar automaton from `s` with the slice automaton `step` from its
/// state 0, over the sets of configurations a chart row can hold: a pushdown simulation of the
/// rule automata with item origins dropped, exact while the stacks of pending calls stay within
/// [`MAX_CALL_DEPTH`]. A tail call (target state final and without edges: the callee's end is the
/// caller's end) pushes nothing. Every `To` byte must be read by some configuration and every
/// `Dead` byte by none (`Walk` bytes are free). If so, where the kernel's rule can end (a final
/// state with an empty stack is reachable, somewhere or inside a character); else
/// `Err(Some((b, x)))` when a pair the search reaches misreads byte `x` in slice state `b` (the
/// slice reads it and no configuration does, or it is dead and some configuration reads it), or
/// `Err(None)` when the search gave up (past [`MAX_COVER_PAIRS`] new pairs or the depth). Pairs
/// `memo` decided are not explored again, and the pairs this search decides join it.
///
/// PERF: bytes are taken in runs on which the slice step and every configuration's edges are
/// constant (a string body's set has ~20 such runs), not one by one; and the verdicts are kept:
/// a regex-bodied string with `minLength` (`Github_hard---o79409`'s `trace_id`) explored 1-10k
/// pairs at every new position, ~5 us each (6-60 ms), and its positions all meet the same sets.
/// Inert return states are abstracted first ([`INERT`]): each of the 94 key positions of an open
/// object with a key pattern (`Github_hard---o30633`) explored the same 800 pattern sets again
/// under its own return state, 8 M instructions each, 112-184 ms for one mask. Sets keep no
/// configuration that neither reads nor ends, and a character's sets are explored in place of
/// the pair that began it ([`Explored::transient`]): `trace_id`'s callee-start search met each
/// regex state's rule start once per tail-calling state and 8 sets inside characters per rule
/// (8.4k pairs, 48 M instructions; now 744 pairs, 15.5 M).
pub(super) fn cover_search(
    a: &Automata,
    s: StateId,
    key: SliceKey,
    step: impl Fn(u8, u8) -> Body,
    memo: &CoverMemo,
) -> Result<Ends, Option<Misread>> {
    cover_search_from(a, s, key, 0, step, memo)
}

/// [`cover_search`] from slice state `start` (a boundary state; one key searches from one start).
pub(super) fn cover_search_from(
    a: &Automata,
    s: StateId,
    key: SliceKey,
    start: u8,
    step: impl Fn(u8, u8) -> Body,
    memo: &CoverMemo,
) -> Result<Ends, Option<Misread>> {
    search_locked(a, s, key, start, step, memo, &mut memo.lock_slices()).map_err(|r| r.misread)
}

/// [`cover_search`] with where it met its misread ([`Refutation`]).
pub(super) fn cover_search_refuted(
    a: &Automata,
    s: StateId,
    key: SliceKey,
    step: impl Fn(u8, u8) -> Body,
    memo: &CoverMemo,
) -> Result<Ends, Refutation> {
    search_locked(a, s, key, 0, step, memo, &mut memo.lock_slices())
}

thread_local! {
    /// Whether this thread's searches run off the fill path ([`after_fills`]).
    static AFTER_FILLS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every cover search on this thread beginning only while no fill waits for the
/// memo, as [`cover_search_after_fills`] does (the class-body thread's searches of whole kernel
/// states, [`super::search_string_starts`]).
pub fn after_fills<R>(f: impl FnOnce() -> R) -> R {
    /// Restores the enclosing flag, also when `f` unwinds.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            AFTER_FILLS.set(self.0);
        }
    }
    let _restore = Restore(AFTER_FILLS.replace(true));
    f()
}

impl CoverMemo {
    /// The verdicts, locked as a fill or, inside [`after_fills`], after the fills.
    fn lock_slices(&self) -> MutexGuard<'_, Slices> {
        if AFTER_FILLS.get() {
            self.slices.lock_after_fills()
        } else {
            self.slices.lock()
        }
    }
}

/// [`cover_search`] off the fill path (the class-body thread, [`super::BodySlice::search_callees`]):
/// it begins only while no fill waits for the memo ([`FillFirst`]).
pub(super) fn cover_search_after_fills(
    a: &Automata,
    s: StateId,
    key: SliceKey,
    step: impl Fn(u8, u8) -> Body,
    memo: &CoverMemo,
) -> Result<Ends, Option<Misread>> {
    search_locked(a, s, key, 0, step, memo, &mut memo.slices.lock_after_fills()).map_err(|r| r.misread)
}

/// [`cover_search_from`] with the memo's verdicts held.
fn search_locked(
    a: &Automata,
    s: StateId,
    key: SliceKey,
    start: u8,
    step: impl Fn(u8, u8) -> Body,
    memo: &CoverMemo,
    slices: &mut Slices,
) -> Result<Ends, Refutation> {
    let gave_up = Refutation { misread: None, at: None };
    let s = memo.substitutes.get(&s).copied().unwrap_or(s);
    for abstract_returns in [true, false] {
        let k = (key, abstract_returns);
        let Slices { by_key, char_exits } = &mut *slices;
        if by_key.get(&k).is_some_and(|e| e.sets.len() >= MAX_MEMO_SETS) {
            by_key.remove(&k);
        }
        let ex =
            by_key.entry(k).or_insert_with(|| Explored::new(key, abstract_returns, &step, memo.substitutes.clone()));
        let mut first = vec![(s, 0)];
        ex.close(a, &mut first).ok_or(gave_up)?;
        let root = ex.intern(&first);
        if ex.refused_roots.contains(&root) {
            continue;
        }
        match search(a, ex, root, start, &step, char_exits) {
            Ok(v) => return v,
            Err(Refused) => ex.refused_roots.push(root),
        }
    }
    unreachable!("the search with real return states is never refused")
}

/// [`cover_search`] from pair `(root, start)`.
fn search(
    a: &Automata,
    ex: &mut Explored,
    root: u32,
    start: u8,
    step: &impl Fn(u8, u8) -> Body,
    char_exits: &mut FastMap<StateId, Option<StateId>>,
) -> Result<Result<Ends, Refutation>, Refused> {
    if let Some(v) = ex.decided(root, start) {
        let at = ex.misread_at.get(&(root, start)).copied();
        return Ok(v.map_err(|()| Refutation { misread: ex.misreads.get(&(root, start)).copied(), at }));
    }
    let mut g = Graph { char_exits: std::mem::take(char_exits), ..Graph::default() };
    g.pair(root, start, 0, 0);
    let explored: Result<Result<(), Refutation>, Refused> = loop {
        let Some(p) = g.stack.pop() else { break Ok(Ok(())) };
        let (id, b) = g.pairs[p as usize];
        let set = ex.sets[id as usize].clone();
        g.seen.clear();
        g.seen_configs.clear();
        match expand(a, ex, step, &mut g, p, &set, b) {
            Ok(Ok(())) => {}
            Ok(Err(misread)) => break Ok(Err(Refutation { misread, at: g.misread_at })),
            Err(Refused) => break Err(Refused),
        }
    };
    *char_exits = std::mem::take(&mut g.char_exits);
    if let Err(refuted) = explored? {
        if let Some(at) = refuted.at {
            ex.misread_at.insert((root, start), at);
        }
        return Ok(Err(refuted));
    }
    // Every pair explored is good; a pair ends the rule if a pair it reaches does (back along
    // the edges, grouped by target in linear time).
    let Graph { pairs, mut ends, mut inside, edges, .. } = g;
    let preds = by_target(pairs.len(), &edges);
    for flags in [&mut ends, &mut inside] {
        let mut work: Vec<u32> = (0..pairs.len() as u32).filter(|&p| flags[p as usize]).collect();
        while let Some(q) = work.pop() {
            for &p in &preds.1[preds.0[q as usize] as usize..preds.0[q as usize + 1] as usize] {
                if !flags[p as usize] {
                    flags[p as usize] = true;
                    work.push(p);
                }
            }
        }
    }
    for (i, &(id, b)) in pairs.iter().enumerate() {
        ex.good[id as usize] |= 1 << b;
        ex.ends[id as usize] |= StateBits::from(ends[i]) << b;
        ex.ends_inside[id as usize] |= StateBits::from(inside[i]) << b;
    }
    Ok(Ok(Ends { may_end: ends[0], inside: inside[0] }))
}

/// One search's undecided pairs: their local index, whether one of their own configurations (or
/// a decided successor's, or one inside a character they begin) ends the kernel's rule, somewhere
/// or inside a character, and the edges between them.
#[derive(Default)]
struct Graph {
    local: FastMap<(u32, u8), u32>,
    pairs: Vec<(u32, u8)>,
    ends: Vec<bool>,
    inside: Vec<bool>,
    /// Per pair, the characters read at a boundary on the path that found it ([`History`]).
    hist: Vec<History>,
    /// Per pair, the pair steps from the root on the path that found it.
    steps: Vec<u32>,
    /// Where this search met a misread itself ([`MisreadAt`]; the search ends there).
    misread_at: Option<MisreadAt>,
    edges: Vec<(u32, u32)>,
    /// The pairs still to explore.
    stack: Vec<u32>,
    /// Pairs and in-character steps explored, against [`MAX_COVER_PAIRS`] (the root is free).
    explored: usize,
    /// The in-character steps of the pair being explored, each (slice state, stepped
    /// configurations) explored once: `(b, i, j)` for `b` and `seen_configs[i..j]`.
    seen: Vec<(u8, u32, u32)>,
    seen_configs: Vec<Config>,
    /// Buffers of [`expand`]'s calls, kept for the next ones.
    spare: Vec<Vec<Config>>,
    /// [`Slices::char_exits`], held by the search.
    char_exits: FastMap<StateId, Option<StateId>>,
    spare_edges: Vec<Vec<u32>>,
}

impl Graph {
    /// Counts one more pair or in-character step; false past the bounds (this search's and the
    /// thread's, see [`with_cover_budget`]).
    fn take(&mut self) -> bool {
        if self.explored >= MAX_COVER_PAIRS || !(self.pairs.is_empty() || take_cover_pair()) {
            return false;
        }
        self.explored += 1;
        true
    }

    /// The local index of pair `(id, b)`, a new pair to explore if it is not one yet; `None` past
    /// the bounds.
    fn pair(&mut self, id: u32, b: u8, hist: History, steps: u32) -> Option<u32> {
        if let Some(&q) = self.local.get(&(id, b)) {
            return Some(q);
        }
        if !self.take() {
            return None;
        }
        let q = self.pairs.len() as u32;
        self.local.insert((id, b), q);
        self.pairs.push((id, b));
        self.ends.push(false);
        self.inside.push(false);
        self.hist.push(hist);
        self.steps.push(steps);
        self.stack.push(q);
        Some(q)
    }
}

/// Explores configurations `set` in slice state `b` for pair `p` of `g` (its own set, or one
/// inside a character it begins): every `To` byte must be read by some configuration and every
/// `Dead` byte by none. A successor at a slice state of [`Explored::transient`] (inside a
/// character) is explored in place, the rest are `p`'s edges. `Err` with the misread (`p` is then
/// marked bad), or `Err(None)` past the bounds.
fn expand(
    a: &Automata,
    ex: &mut Explored,
    step: &impl Fn(u8, u8) -> Body,
    g: &mut Graph,
    p: u32,
    set: &[Config],
    b: u8,
) -> Result<Result<(), Option<Misread>>, Refused> {
    let (pid, pb) = g.pairs[p as usize];
    // The path's characters before a byte read here (none inside a character).
    let hist = if boundary(b) { g.hist[p as usize] } else { 0 };
    // Sets are sorted: an inert configuration, if any, is last.
    let inert = set.last().is_some_and(|&(q, _)| q == INERT);
    if inert && ex.inert_refused >> b & 1 == 1 {
        return Err(Refused);
    }
    let real = &set[..set.len() - usize::from(inert)];
    // The pairs found from here on are `p`'s (see [`History`]).
    let first_new = g.pairs.len();
    let ends_here = real.iter().any(|&(q, st)| st == 0 && a.state(q).is_final);
    g.ends[p as usize] |= ends_here;
    g.inside[p as usize] |= ends_here && b != 0;
    // The bytes at which a run starts: the slice step's and every configuration's edges'.
    let mut bounds = ex.bounds(b, step);
    for &(q, _) in real {
        for e in a.byte_edges(q) {
            bounds[usize::from(e.lo >> 6)] |= 1 << (e.lo & 63);
            if let Some(x) = e.hi.checked_add(1) {
                bounds[usize::from(x >> 6)] |= 1 << (x & 63);
            }
        }
    }
    // Where every multi-byte character leads, when all lead to one pair (then the runs stop at
    // 0x80, a run bound, and that pair is met once, as a fresh exploration of them would meet
    // only it, after the ASCII runs).
    let mut chars = g.spare.pop().unwrap_or_default();
    let chars_to = ex.characters_to(a, step, real, b, &mut chars, &mut g.char_exits);
    if chars_to.is_some() {
        bounds[2] |= 1;
    }
    let mut next = g.spare.pop().unwrap_or_default();
    // Per configuration of `real`, its first byte edge not below the run (the runs go up).
    // PERF: `Automata::step` scanned every edge below each run: a pattern's DFA state reads
    // ~25 edges in ~50 runs (MaskBench o23177 t110: ~14% of its cover searches).
    let mut edge_at = g.spare_edges.pop().unwrap_or_default();
    edge_at.clear();
    edge_at.resize(real.len(), 0);
    let mut last_raw = g.spare.pop().unwrap_or_default();
    last_raw.clear();
    let mut last: Option<u32> = None;
    let explored = 'runs: {
        let mut runs = run_starts(bounds).peekable();
        while let Some(x) = runs.next() {
            if let Some(to) = chars_to.filter(|_| x >= 0x80) {
                let Ok(nb) = to else { break 'runs Err(None) };
                CHARACTERS_AT_ONCE.set(CHARACTERS_AT_ONCE.get() + 1);
                if !g.take() {
                    break 'runs Err(None);
                }
                let nid = ex.intern(&chars);
                if let Err(misread) = meet(ex, g, p, nid, nb, 0) {
                    break 'runs Err(misread);
                }
                break;
            }
            // Whether the run holds more bytes than `x` (a class of characters).
            let wide = runs.peek().map_or(x < 255, |&y| y > x + 1);
            let class = |c: u8| u64::from(c) | if wide { 0x80 } else { 0 };
            next.clear();
            for (&(q, st), i) in real.iter().zip(edge_at.iter_mut()) {
                let edges = a.byte_edges(q);
                while edges.get(*i as usize).is_some_and(|e| e.hi < x) {
                    *i += 1;
                }
                if let Some(e) = edges.get(*i as usize).filter(|e| e.lo <= x) {
                    next.push((e.target, st));
                }
            }
            match step(b, x) {
                Body::To(nb) => {
                    debug_assert!(usize::from(nb) < SLICE_STATES, "slice automaton state {nb}");
                    if next.is_empty() {
                        // Inside a character (`b` transient, not `p`'s own state) `p` read its lead.
                        let reads_on = b != pb || real.iter().any(|&(q, _)| !a.byte_edges(q).is_empty());
                        g.misread_at = Some(MisreadAt { steps: g.steps[p as usize], reads_on });
                        ex.misread_at.insert((pid, pb), MisreadAt { steps: 0, reads_on });
                        break 'runs Err(ex.refute(pid, pb, Some((b, x, hist | u64::from(wide) << 63))));
                    }
                    next.sort_unstable();
                    next.dedup();
                    // The closed set depends only on the stepped configurations, which are the
                    // same for runs of bytes (a class of characters): close it once per run.
                    if ex.transient >> nb & 1 == 1 {
                        let seen =
                            |&(sb, i, j): &(u8, u32, u32)| sb == nb && g.seen_configs[i as usize..j as usize] == next;
                        if g.seen.iter().any(seen) {
                            continue;
                        }
                        let i = g.seen_configs.len() as u32;
                        g.seen_configs.extend_from_slice(&next);
                        g.seen.push((nb, i, g.seen_configs.len() as u32));
                        if !g.take() || ex.close(a, &mut next).is_none() {
                            break 'runs Err(None);
                        }
                        if let Err(misread) = expand(a, ex, step, g, p, &next, nb)? {
                            break 'runs Err(misread);
                        }
                        continue;
                    }
                    let nid = match last {
                        Some(nid) if last_raw == next => nid,
                        _ => {
                            last_raw.clone_from(&next);
                            if ex.close(a, &mut next).is_none() {
                                break 'runs Err(None);
                            }
                            let nid = ex.intern(&next);
                            last = Some(nid);
                            nid
                        }
                    };
                    let seen = if boundary(nb) && x < 0x80 { (hist << 8 | class(x)) & HISTORY_CHARS } else { 0 };
                    match meet(ex, g, p, nid, nb, seen) {
                        Err(misread) => break 'runs Err(misread),
                        // A pair this one found on another run: its last character is one of a
                        // class.
                        Ok(Some(Met { q, found: true }))
                            if q as usize >= first_new && g.hist[q as usize] & 0x7F != 0 =>
                        {
                            g.hist[q as usize] |= 0x80;
                        }
                        Ok(_) => {}
                    }
                }
                Body::Dead if !next.is_empty() => {
                    g.misread_at = Some(MisreadAt { steps: g.steps[p as usize], reads_on: true });
                    ex.misread_at.insert((pid, pb), MisreadAt { steps: 0, reads_on: true });
                    break 'runs Err(ex.refute(pid, pb, Some((b, x, hist | u64::from(wide) << 63))));
                }
                Body::Dead | Body::Walk => {}
            }
        }
        Ok(())
    };
    g.spare.extend([next, last_raw, chars]);
    g.spare_edges.push(edge_at);
    Ok(explored)
}

/// An undecided successor pair met by [`meet`]: its index, and whether it was there before.
struct Met {
    q: u32,
    found: bool,
}

/// Meets `(nid, nb)`, a successor of pair `p`: a decided one adds its ends to `p`'s, a refuting
/// one refutes `p` too (the `Err`, the break value of [`expand`]'s runs), an undecided one is
/// found or added (with `seen` as its history) and gets an edge from `p`.
fn meet(ex: &mut Explored, g: &mut Graph, p: u32, nid: u32, nb: u8, seen: u64) -> Result<Option<Met>, Option<Misread>> {
    match ex.decided(nid, nb) {
        Some(Ok(e)) => {
            g.ends[p as usize] |= e.may_end;
            g.inside[p as usize] |= e.inside;
            Ok(None)
        }
        Some(Err(())) => {
            let (pid, pb) = g.pairs[p as usize];
            let misread = ex.misreads.get(&(nid, nb)).copied();
            // Where the decided pair met its misread, one character past `p`.
            if let Some(&at) = ex.misread_at.get(&(nid, nb)) {
                let at = MisreadAt { steps: at.steps + 1, ..at };
                ex.misread_at.insert((pid, pb), at);
                g.misread_at = Some(MisreadAt { steps: g.steps[p as usize] + at.steps, ..at });
            }
            Err(ex.refute(pid, pb, misread))
        }
        None => {
            let known = g.pairs.len();
            let q = g.pair(nid, nb, seen, g.steps[p as usize] + 1).ok_or(None)?;
            // Runs of one pair often lead to the same pair: one edge is enough.
            if g.edges.last() != Some(&(p, q)) {
                g.edges.push((p, q));
            }
            Ok(Some(Met { q, found: g.pairs.len() == known }))
        }
    }
}

/// The sources of `edges` (among `n` pairs) grouped by target: those of target `q` are
/// `.1[.0[q]..0[q + 1]]` (a counting sort).
/// PERF: sorting the edges cost ~40% of a 9k-pair search (`o79409`'s `trace_id`).
fn by_target(n: usize, edges: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; n + 1];
    for &(_, q) in edges {
        start[q as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut from = vec![0u32; edges.len()];
    for &(p, q) in edges {
        from[fill[q as usize] as usize] = p;
        fill[q as usize] += 1;
    }
    (start, from)
}

/// The bytes whose bit is set in `bits`, in increasing order.
fn run_starts(bits: [u64; 4]) -> impl Iterator<Item = u8> {
    bits.into_iter().enumerate().flat_map(|(w, mut word)| {
        std::iter::from_fn(move || {
            let bit = word.trailing_zeros();
            (bit < 64).then(|| {
                word &= word - 1;
                (w as u32 * 64 + bit) as u8
            })
        })
    })
}

#[cfg(test)]
mod step_facts_tests {
    use super::super::{body::body_step, class::class_step};
    use super::*;

    /// Kept facts are those of the key's own step: the body's and each class's (the classes'
    /// inert bytes differ), asked in turns so that a wrongly keyed cache returns another's.
    #[test]
    fn kept_step_facts_equal_fresh_ones() {
        let classes = [0u128, 1 << b'a', (1 << 0x7F) - (1 << 0x20), !0u128 >> 1, 0x3FF << b'0'];
        for round in 0..2 {
            for abstract_returns in [true, false] {
                let body = StepFacts::for_key(SliceKey::Body, abstract_returns, &body_step);
                assert_eq!(body, StepFacts::of(abstract_returns, &body_step, true), "round {round}");
                for c in classes {
                    let step = |b, x| class_step(c, b, x);
                    let kept = StepFacts::for_key(SliceKey::Class(c), abstract_returns, &step);
                    assert_eq!(kept, StepFacts::of(abstract_returns, &step, true), "class {c:#x}, round {round}");
                }
            }
        }
        let inert = |c: u128| StepFacts::for_key(SliceKey::Class(c), true, &|b, x| class_step(c, b, x)).inert_bytes;
        assert_ne!(inert(classes[1]), inert(classes[2]));
    }
}
