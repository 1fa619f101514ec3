//! Earley recognition over the rule automata of [`crate::compiler::Automata`], one chart row per
//! input byte.
//!
//! An [`Item`] `(state, origin)` says: a rule was started at row `origin` and its automaton is now
//! in `state` after the input since then. Row `r` holds the items after `r` input bytes, closed
//! under prediction (entering referenced rules) and completion (a final state advances the items of
//! the origin row that wait on the rule). Rules that end empty are remembered per row, so parents
//! added to the row later still advance over them. Left recursion and ambiguity need no special
//! care.
//!
//! Rows form a stack: pushing a byte appends a row, popping removes the newest one. Token trie
//! walks, rollback and speculative checks all use push/pop, never copies.
//!
//! Invariants:
//! - an item appears at most once per row;
//! - `origin <= row index`, and for a predicted item `origin == row index`;
//! - the chart always has at least one row (row 0, the closure of the root rule's start state).

use crate::compiler::{Automata, CharBudgets, RecBudgets, StateId, LA_NONE};
use crate::error::{Error, Result};
use crate::fasthash::FastState;
use crate::grammar::RuleId;
use crate::limits;
use std::cell::Cell;
use std::collections::HashSet;

/// A row signature's length term: its number of items times this ([`Chart::signature`]).
const ROW_LEN_SEED: u128 = 0xD6E8_FEB8_6659_FD93;

/// A strong 128-bit mixer (two rounds of 64-bit multiply-xorshift on each half, crossed).
#[inline]
pub(crate) fn mix128(x: u128) -> u128 {
    let mut lo = x as u64;
    let mut hi = (x >> 64) as u64;
    lo ^= hi.rotate_left(29);
    lo = (lo ^ (lo >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    lo = (lo ^ (lo >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    hi ^= lo.rotate_left(23);
    hi = (hi ^ (hi >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    hi = (hi ^ (hi >> 32)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    lo ^= hi >> 31;
    (u128::from(hi) << 64) | u128::from(lo ^ (lo >> 29))
}

/// An Earley item. In a grammar with a recursive `max_tokens` rule, `la_origin` and `la` hold
/// spend points instead of obligations (see [`spent`]): the parent's and the item's own, the
/// minimum over its chain of `max_tokens` occurrences. In a grammar with a recursive `max_chars`
/// rule they hold occurrence numbers instead ([`crate::compiler::CharBudgets`]): the parent's and
/// the item's own, the outermost bounded occurrence around it (`0`: none). In a grammar with both,
/// or with one and lookahead assertions, they hold the index of the triple (spend point,
/// occurrence number, obligations) in the chart's [`Contexts`] (`0`: `(0, 0, LA_NONE)`), so the
/// item stays 16 bytes: the parent's and the item's own budgets, the obligations the item was
/// predicted with and those pending now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub state: StateId,
    pub origin: u32,
    /// Lookahead obligations the item was predicted with (its parents' current ones).
    pub la_origin: u32,
    /// Lookahead obligations pending now (`LA_NONE` in grammars without lookahead).
    pub la: u32,
}

/// A spend point: `0` none, else 1 + the number of accepted tokens at which the budget of the
/// item's innermost-spending `max_tokens` occurrence is spent.
#[inline]
pub fn spent(ctx: u32, clock: u32) -> bool {
    ctx != 0 && ctx <= clock.saturating_add(1)
}

/// The spend point of an occurrence of a `max_tokens=0` rule (and of everything inside it): spent
/// from the start, for strings too (no token budget yields it: theirs are `clock + n + 1`, `n > 0`).
const SPENT_FROM_START: u32 = 1;

/// The spend point of an occurrence of a rule with `max_tokens=n` started at token count `clock`.
#[inline]
fn own_spend(n: u32, clock: u32) -> u32 {
    if n == 0 {
        SPENT_FROM_START
    } else {
        clock.saturating_add(n).saturating_add(1)
    }
}

/// The earlier of two spend points (`0`: none).
#[inline]
fn ctx_min(a: u32, b: u32) -> u32 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (x, y) => x.min(y),
    }
}

/// An item's budgets: (spend point, occurrence number, obligations, chain bits: [`SHADOW`] in
/// the shadows of a left-recursive group's chain, [`RecBudgets::chain`]; in a group with wrapper
/// marks ([`RecBudgets::mark_of`]), from bit 1 on the mark (opener index + 1, in
/// [`RecBudgets::wrapper_bits`] bits) of the opener whose levels the level's chain wraps (an
/// opener in the chain at or below it), and above it `r + 1` for a level its chain called at row
/// `r` (above the chain's first level), so no such level takes the context of a level outside
/// its chain).
type Context = (u32, u32, u32, u32);

/// The chain bit of a shadow's context.
const SHADOW: u32 = 1;

/// The triples (spend point, occurrence number, obligations; with the shadow-chain mark) of a
/// grammar with both recursive budgets, or with one and lookahead assertions, or with a
/// left-recursive group's chains, each stored once: an item's `la` is its
/// triple's index. A part the grammar lacks is `0` (obligations: the interned set of
/// [`crate::compiler::Automata::la_step`], `LA_NONE` the empty one). Grows only (a popped row's
/// triples stay), so equal indices mean equal triples within one chart; row signatures hash the
/// triples, not the indices, as another chart numbers them otherwise.
#[derive(Clone, Debug)]
struct Contexts {
    pairs: Vec<Context>,
    index: std::collections::HashMap<Context, u32, FastState>,
    /// The grammar has lookahead assertions: items' obligations are stepped and added.
    lookahead: bool,
}

impl Contexts {
    fn new(lookahead: bool) -> Contexts {
        let mut index = std::collections::HashMap::default();
        index.insert((0, 0, LA_NONE, 0), 0);
        Contexts { pairs: vec![(0, 0, LA_NONE, 0)], index, lookahead }
    }

    #[inline]
    fn id(&mut self, triple: Context) -> u32 {
        let next = self.pairs.len() as u32;
        let id = *self.index.entry(triple).or_insert(next);
        if id == next {
            self.pairs.push(triple);
        }
        id
    }
}

impl Item {
    #[inline]
    pub fn new(state: StateId, origin: u32) -> Item {
        Item { state, origin, la_origin: LA_NONE, la: LA_NONE }
    }
}

/// A stack of Earley rows.
#[derive(Clone, Debug)]
pub struct Chart {
    items: Vec<Item>,
    /// `row_start[r]` = index in `items` where row `r` begins.
    row_start: Vec<u32>,
    /// `row_sig[r]`: a 128-bit hash of row `r` and, through item origins, of every row it can
    /// complete into. Two rows with equal signatures have the same future (modulo hash
    /// collisions), so masks can be memoized by the last row's signature.
    row_sig: Vec<u128>,
    /// Dedup set used only while closing a large row.
    scratch: HashSet<Item, FastState>,
    /// While closing a row: the row's processed items that wait on each rule.
    waiting: Waiting,
    /// While closing a row: its empty completions (kept between rows so steady-state closing
    /// does not allocate; empty outside `close`).
    empty_ends: Vec<(RuleId, u32, u32)>,
    /// Recursive `max_tokens` budgets: tokens accepted so far (spend points are compared to it).
    clock: u32,
    /// Recursive `max_tokens` budgets: a string is being read, so no budget holds.
    free: bool,
    /// Recursive `max_chars` budgets: the characters (UTF-8 lead bytes) read before each row;
    /// empty without such budgets.
    chars: Vec<u32>,
    /// The number of recursive `max_chars` rules (decodes occurrence numbers; 0: none).
    char_rules: u32,
    /// Both recursive budgets, or one with lookahead: the triples items' `la` fields index (see
    /// [`Item`]).
    contexts: Option<Box<Contexts>>,
    /// [`Chart::set_clock_with`]: the row being rebuilt, kept to restore it when the rebuild
    /// fails (empty outside the call; its capacity is reused).
    spare_row: SavedRow,
}

/// A [`CloseMemo`] key: the identity of the row below the new one ([`CloseMemo::id_of`]) and an
/// order-dependent hash of the new row's kernel items (state, origin, lookahead fields).
type CloseKey = (u32, u128);

/// Seed of [`CloseKey`]'s kernel hash.
const CLOSE_SEED: u128 = 0x4528_21E6_38D0_1377_BE54_66CF_34E9_0C6C;

/// Most items a [`CloseMemo`] keeps (further rows are closed and not kept).
pub const MAX_CLOSE_MEMO_ITEMS: usize = 1 << 15;

/// Rows closed by [`Chart::push_byte_memo`] and [`Chart::push_items_memo`] on top of the rows
/// from `base` on, kept by [`CloseKey`] with an identity of their own.
///
/// Identities: a row below `base` is its index (those rows stay put while the memo is used);
/// a row from `base` on pushed through the memo takes the identity of its key's entry. Invariant:
/// rows of equal identity are equal, item for item (origins included), with the same rows below
/// them. By induction: a row's closure is a function of its kernel and of the rows below it
/// (read at its items' origins), so equal keys close to equal rows. Unlike signatures (equal
/// futures), identities keep origin indices exact: a row copied under a signature could name
/// as origin an index that holds another row on the new path.
/// Only for charts without budgets or contexts (whose closing reads the clock and occurrence
/// counts). The caller keeps the invariant's premise: every row from `base` on that a row is
/// pushed on through the memo was pushed through the memo (a budget walk's: its rows, per walk).
#[derive(Debug, Default)]
pub struct CloseMemo {
    rows: crate::fasthash::FastMap<CloseKey, (u32, u32, u128, u32, u32)>,
    items: Vec<Item>,
    /// The first row pushed through the memo.
    base: usize,
    /// The identity of each row from `base` on, by index (`ids[r - base]`).
    ids: Vec<u32>,
    /// Rows copied from the memo.
    pub hits: usize,
}

impl CloseMemo {
    /// Forgets every row (their capacity kept); rows will be pushed on top of `chart`'s.
    pub fn clear(&mut self, chart: &Chart) {
        self.rows.clear();
        self.items.clear();
        self.ids.clear();
        self.base = chart.num_rows();
    }

    /// The identity of row `r` (see [`CloseMemo`]).
    fn id_of(&self, r: usize) -> u32 {
        if r < self.base {
            r as u32
        } else {
            self.ids[r - self.base]
        }
    }

    /// Sets the identity of row `r` (from `base` on).
    fn set_id(&mut self, r: usize, id: u32) {
        let k = r - self.base;
        if self.ids.len() <= k {
            self.ids.resize(k + 1, u32::MAX);
        }
        self.ids[k] = id;
    }

    /// The memo's capacities summed (entries and items).
    pub fn entries(&self) -> usize {
        self.rows.capacity() + self.items.capacity() + self.ids.capacity()
    }
}

/// A chart's last row with the clock and mode it was built at ([`Chart::save_last_row`]), to
/// put back after a step that rebuilt it failed.
#[derive(Clone, Debug, Default)]
pub struct SavedRow {
    row: usize,
    items: Vec<Item>,
    sig: u128,
    chars: Option<u32>,
    clock: u32,
    free: bool,
}

/// Per-rule lists of the items of the row being closed that wait on the rule (have an edge on
/// it), so an empty completion visits its parents only, not the whole row.
///
/// PERF: rows that predict a chain of optional object properties hold a hundred or more items and
/// complete dozens of nullable rules each; scanning the row per completion made closing them
/// quadratic (half the time of such kernels' walks).
#[derive(Clone, Debug, Default)]
struct Waiting {
    /// First entry of each rule's list in `entries` (`u32::MAX`: none).
    head: Vec<u32>,
    /// (item index, next entry).
    entries: Vec<(u32, u32)>,
    /// Rules whose `head` is set.
    touched: Vec<RuleId>,
}

impl Waiting {
    fn reset(&mut self, rules: usize) {
        if self.head.len() < rules {
            self.head.resize(rules, u32::MAX);
        }
        for r in self.touched.drain(..) {
            self.head[r.index()] = u32::MAX;
        }
        self.entries.clear();
    }

    #[inline]
    fn push(&mut self, rule: RuleId, item: u32) {
        let h = &mut self.head[rule.index()];
        if *h == u32::MAX {
            self.touched.push(rule);
        }
        self.entries.push((item, *h));
        *h = (self.entries.len() - 1) as u32;
    }

    #[inline]
    fn head(&self, rule: RuleId) -> u32 {
        self.head[rule.index()]
    }

    #[inline]
    fn get(&self, e: u32) -> Option<(u32, u32)> {
        self.entries.get(e as usize).copied()
    }
}

thread_local! {
    /// The per-rule tables of this thread's last dropped charts (at most [`POOLED_TABLES`], of
    /// [`MAX_POOLED_RULES`] entries in all),
    /// reused by the next charts closed. Every `head` is `u32::MAX` once [`Waiting::reset`] ran,
    /// which every use starts with.
    /// PERF: a kernel walk's fresh chart filled a table of one entry per rule (26 KB for a
    /// 6,600-rule schema), ~a tenth of a short walk; a fill walking 30 kernels paid it 30 times.
    /// A composition holds a chart per callee edge at once, nested compositions more: with one
    /// table kept, MaskBench o3626's value start after `"not":` (~10 K rules) spent a third of
    /// its fill filling new ones.
    static WAITING_POOL: std::cell::RefCell<Vec<Waiting>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Entries of all the per-rule tables kept for reuse per thread, together (4 MB).
const MAX_POOLED_RULES: usize = 1 << 20;

/// Per-rule tables kept for reuse per thread ([`WAITING_POOL`]).
/// PERF: o3626's `not` composes a tree of choices five deep, each level holding a chart per
/// callee edge: with 8 tables kept, ~450 charts a fill still filled a new 40 KB table (~8% of its
/// instructions on Llama 3).
const POOLED_TABLES: usize = 64;

impl Drop for Chart {
    fn drop(&mut self) {
        let w = std::mem::take(&mut self.waiting);
        if !w.head.is_empty() && w.head.len() <= MAX_POOLED_RULES {
            // `try_with`: a chart dropped while thread-locals are torn down just frees its table.
            let _ = WAITING_POOL.try_with(|p| {
                let mut pool = p.borrow_mut();
                let held: usize = pool.iter().map(|t| t.head.len()).sum();
                if pool.len() < POOLED_TABLES && held + w.head.len() <= MAX_POOLED_RULES {
                    pool.push(w);
                }
            });
        }
    }
}

thread_local! {
    /// Earley work (completion visits and row items, [`Chart::close`]) the rows built on this
    /// thread may still take: set by [`with_work_budget`] for one matcher call (a mask fill, an
    /// accepted token or string), practically unbounded outside one.
    static WORK_LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Runs `f` (one matcher call) with at most `work` units of Earley work for every row it builds,
/// on any chart, and no more than an enclosing call leaves (which is charged what `f` used). Past
/// it the row being closed fails with a `LimitExceeded` error ([`limits::MAX_FILL_WORK`]).
pub fn with_work_budget<R>(work: usize, f: impl FnOnce() -> R) -> R {
    /// Restores the enclosing budget less what `f` used, also when `f` unwinds.
    struct Restore {
        outer: usize,
        start: usize,
    }
    impl Drop for Restore {
        fn drop(&mut self) {
            WORK_LEFT.set(self.outer.saturating_sub(self.start - WORK_LEFT.get()));
        }
    }
    let outer = WORK_LEFT.get();
    let start = outer.min(work);
    let _restore = Restore { outer, start };
    WORK_LEFT.set(start);
    f()
}

/// Takes `n` units from the thread's budget ([`with_work_budget`]); an error when it is spent.
#[inline]
fn charge_work(n: usize) -> Result<()> {
    let left = WORK_LEFT.get();
    if n > left {
        WORK_LEFT.set(0);
        return Err(Error::limit(
            "Earley work for one mask or accepted input (grammar too ambiguous)",
            limits::MAX_FILL_WORK,
        ));
    }
    WORK_LEFT.set(left - n);
    Ok(())
}

/// Rows larger than this are deduplicated with a hash set rather than a linear scan.
const LINEAR_DEDUP_LIMIT: usize = 24;

impl Chart {
    /// A chart whose row 0 is the closure of the root rule's start state.
    pub fn new(a: &Automata) -> Chart {
        Chart::with_start(a, &[a.rule_start(a.root())])
    }

    /// A chart whose row 0 is the closure of the given states (each with origin 0).
    pub fn with_start(a: &Automata, states: &[StateId]) -> Chart {
        let mut c = Chart::empty_rows(a, 1);
        for &s in states {
            let rule = a.state(s).rule;
            let spend = a.rec_budgets().and_then(|rb| rb.bound(rule)).map_or(0, |n| own_spend(n, 0));
            let occ = a.char_budgets().and_then(|cb| cb.start(rule, 0)).unwrap_or(0);
            let s = match a.rec_budgets() {
                Some(rb) if spend == SPENT_FROM_START && s == a.rule_start(rule) => rb.spent_start(a, rule),
                _ => s,
            };
            let la = c.context_id(spend, occ, LA_NONE);
            c.add(Item { la, ..Item::new(s, 0) });
        }
        // Row 0 closure cannot exceed the limit meaningfully; ignore the flag here.
        let _ = c.close(a, 0);
        c.row_sig[0] = c.signature(0);
        c
    }

    /// A chart for walking tokens from one kernel state: row 0 is empty, row 1 is the closure of
    /// `(state, origin 0)`. Only descendants of the kernel item have origin 0, so an item with
    /// origin 0 in a final state means the kernel's rule has ended.
    pub fn with_kernel(a: &Automata, state: StateId) -> Chart {
        let mut c = Chart::empty_rows(a, 2);
        c.add(Item::new(state, 0));
        let _ = c.close(a, 1);
        c.row_sig[1] = c.signature(1);
        c
    }

    /// A chart of `rows` empty rows, no token or character read yet.
    fn empty_rows(a: &Automata, rows: usize) -> Chart {
        let (char_rules, chars) = match a.char_budgets() {
            Some(cb) => (cb.len(), vec![0; rows]),
            None => (0, Vec::new()),
        };
        Chart {
            items: Vec::with_capacity(64),
            row_start: vec![0; rows],
            row_sig: vec![0; rows],
            scratch: HashSet::default(),
            waiting: Waiting::default(),
            empty_ends: Vec::new(),
            clock: 0,
            free: false,
            chars,
            char_rules,
            spare_row: SavedRow::default(),
            contexts: {
                let lookahead = a.has_lookahead();
                let budgets = u8::from(a.rec_budgets().is_some()) + u8::from(char_rules != 0);
                let chains = a.rec_budgets().is_some_and(RecBudgets::has_chains);
                (budgets == 2 || (budgets == 1 && lookahead) || chains).then(|| Box::new(Contexts::new(lookahead)))
            },
        }
    }

    /// The `la` of an item with spend point `spend`, occurrence number `occ` and obligations
    /// `la` (see [`Item`]); with one recursive budget only, the other is `0`, and without
    /// lookahead `la` is `LA_NONE`.
    #[inline]
    fn context_id(&mut self, spend: u32, occ: u32, la: u32) -> u32 {
        match &mut self.contexts {
            Some(c) => c.id((spend, occ, la, 0)),
            None => spend | occ,
        }
    }

    /// `la` marked as the context of a shadow chain (a grammar with [`RecBudgets::has_chains`]:
    /// its items' fields index [`Contexts`]).
    fn shadowed(&mut self, la: u32) -> u32 {
        let c = self.contexts.as_deref_mut().expect("chains run with contexts");
        let (spend, occ, owed, bits) = c.pairs[la as usize];
        c.id((spend, occ, owed, bits | SHADOW))
    }

    /// The wrapper mark in `la` (see [`Context`]; `0`: none, or a grammar without
    /// [`RecBudgets::has_marks`]), whose marks take `bits` bits.
    #[inline]
    fn wrapper(&self, la: u32, bits: u32) -> u32 {
        self.contexts.as_deref().map_or(0, |c| (c.pairs[la as usize].3 >> 1) & ((1 << bits) - 1))
    }

    /// `la` with the chain bits `more` too.
    fn with_bits(&mut self, la: u32, more: u32) -> u32 {
        let c = self.contexts.as_deref_mut().expect("marks run with contexts");
        let (spend, occ, owed, bits) = c.pairs[la as usize];
        c.id((spend, occ, owed, bits | more))
    }

    /// The pending obligations in an item's `la`, in a grammar with recursive budgets
    /// (`LA_NONE` without lookahead).
    #[inline]
    pub(crate) fn obligations_of(&self, la: u32) -> u32 {
        match &self.contexts {
            Some(c) => c.pairs[la as usize].2,
            None => LA_NONE,
        }
    }

    /// Recursive budgets with lookahead: an item's `la` after one more input byte, its
    /// obligations stepped (`None`: one can no longer be satisfied); else `la`.
    #[inline]
    fn step_obligations(&mut self, a: &Automata, la: u32, byte: u8) -> Option<u32> {
        let Some(c) = self.contexts.as_deref_mut() else { return Some(la) };
        let (spend, occ, owed, chain) = c.pairs[la as usize];
        if !c.lookahead || owed == LA_NONE {
            return Some(la);
        }
        let next = a.la_step(owed, byte)?;
        Some(if next == owed { la } else { c.id((spend, occ, next, chain)) })
    }

    /// Recursive budgets: the `la` a parent resumes with when the rule of item `it` ends: its
    /// own budgets (those `it` was predicted with) and, with lookahead, `it`'s pending
    /// obligations plus the rule's own lookahead.
    #[inline]
    fn resumed_la(&mut self, a: &Automata, it: &Item, rule: RuleId) -> u32 {
        match self.contexts.as_deref_mut() {
            Some(c) if c.lookahead => {
                let (spend, occ, before, chain) = c.pairs[it.la_origin as usize];
                let owed = a.la_add(c.pairs[it.la as usize].2, rule);
                if owed == before {
                    it.la_origin
                } else {
                    c.id((spend, occ, owed, chain))
                }
            }
            _ => it.la_origin,
        }
    }

    /// Recursive budgets: the `la` the parents of token edge `it` (an item of token rule `rule`)
    /// resume with once it reads a token of `bytes`: as [`Chart::resumed_la`], `it`'s pending
    /// obligations stepped over the bytes first (`None`: one cannot read them).
    pub(crate) fn token_resumed_la(&mut self, a: &Automata, it: &Item, rule: RuleId, bytes: &[u8]) -> Option<u32> {
        let mut at = *it;
        for &b in bytes {
            at.la = self.step_obligations(a, at.la, b)?;
        }
        Some(self.resumed_la(a, &at, rule))
    }

    /// The spend point in an item's `la` (grammars with a recursive `max_tokens` rule).
    #[inline]
    pub(crate) fn spend_of(&self, la: u32) -> u32 {
        match &self.contexts {
            Some(c) => c.pairs[la as usize].0,
            None => la,
        }
    }

    /// The occurrence number in an item's `la` (grammars with a recursive `max_chars` rule).
    #[inline]
    pub(crate) fn occ_of(&self, la: u32) -> u32 {
        match &self.contexts {
            Some(c) => c.pairs[la as usize].1,
            None => la,
        }
    }

    /// Recursive `max_chars` budgets: records the characters read before a new row, `from`'s
    /// plus one when `byte` starts a character.
    #[inline]
    fn push_chars(&mut self, from: usize, byte: Option<u8>) {
        if self.char_rules != 0 {
            let lead = byte.is_some_and(|b| !(0x80..=0xBF).contains(&b));
            self.chars.push(self.chars[from] + u32::from(lead));
        }
    }

    /// The occurrences of recursive `max_chars` rules that end at row `r`: each has read its
    /// budget and can end there (an item of its own rule, from its origin, is final), so
    /// nothing inside it reads another byte.
    pub(crate) fn ended_occurrences(&self, a: &Automata, cb: &CharBudgets, r: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for it in self.row(r) {
            let occ = self.occ_of(it.la);
            if occ == 0 || out.contains(&occ) {
                continue;
            }
            let (rule, origin, max) = cb.occurrence(occ);
            let st = a.state(it.state);
            if it.origin == origin
                && st.rule == rule
                && st.is_final
                && self.chars[r] - self.chars[origin as usize] >= max
            {
                out.push(occ);
            }
        }
        out
    }

    /// Number of items in all rows.
    #[inline]
    pub fn num_items(&self) -> usize {
        self.items.len()
    }

    /// Number of rows (input bytes consumed + 1).
    #[inline]
    pub fn num_rows(&self) -> usize {
        self.row_start.len()
    }

    #[inline]
    pub fn row(&self, r: usize) -> &[Item] {
        let a = self.row_start[r] as usize;
        let b = self.row_start.get(r + 1).map_or(self.items.len(), |&x| x as usize);
        &self.items[a..b]
    }

    #[inline]
    pub fn last_row(&self) -> &[Item] {
        &self.items[*self.row_start.last().unwrap() as usize..]
    }

    #[inline]
    pub fn last_row_index(&self) -> usize {
        self.row_start.len() - 1
    }

    /// Appends the row reached by reading `byte`. Returns `Ok(false)` (and appends nothing) if no
    /// item can read it.
    pub fn push_byte(&mut self, a: &Automata, byte: u8) -> Result<bool> {
        self.push_byte_from(a, self.last_row_index(), byte)
    }

    /// Appends the row reached by reading `byte` from row `from` (any row, not only the last):
    /// rows then form a graph rather than a stack, which [`crate::mask`] uses to intern the rows
    /// of a token-trie walk. Returns `Ok(false)` (and appends nothing) if no item can read it.
    pub fn push_byte_from(&mut self, a: &Automata, from: usize, byte: u8) -> Result<bool> {
        let new_row = self.begin_row(from, Some(byte));
        self.step_into_new_row(a, from, byte);
        self.finish_row(a, new_row)
    }

    /// Adds to the newest row (begun, not closed) the items of row `from` that read `byte`.
    fn step_into_new_row(&mut self, a: &Automata, from: usize, byte: u8) {
        let (prev, from_end) = self.row_bounds(from);
        if let Some(cb) = a.char_budgets() {
            if self.contexts.as_ref().is_some_and(|c| c.lookahead) {
                return self.step_with_obligations(a, from, byte);
            }
            let ended = self.ended_occurrences(a, cb, from);
            let rb = a.rec_budgets();
            for i in prev..from_end {
                let it = self.items[i];
                let occ = self.occ_of(it.la);
                if occ != 0 && ended.contains(&occ) {
                    continue;
                }
                if let Some(t) = a.step(it.state, byte) {
                    let state = rb.map_or(t, |rb| self.target(rb, it.la, t));
                    self.add(Item { state, ..it });
                }
            }
        } else if let Some(rb) = a.rec_budgets() {
            if self.contexts.as_ref().is_some_and(|c| c.lookahead) {
                return self.step_with_obligations(a, from, byte);
            }
            for i in prev..from_end {
                let it = self.items[i];
                if let Some(t) = a.step(it.state, byte) {
                    self.add(Item { state: self.target(rb, it.la, t), ..it });
                }
            }
        } else {
            for i in prev..from_end {
                let it = self.items[i];
                if let Some(t) = a.step(it.state, byte) {
                    if let Some(la) = a.la_step(it.la, byte) {
                        self.add(Item { state: t, origin: it.origin, la_origin: it.la_origin, la });
                    }
                }
            }
        }
    }

    /// [`Chart::step_into_new_row`] for recursive budgets beside lookahead assertions: the
    /// budgets' steps, and each item's obligations stepped too. Out of line, as
    /// [`Chart::close_rec`], so the other paths compile as before.
    #[inline(never)]
    fn step_with_obligations(&mut self, a: &Automata, from: usize, byte: u8) {
        let (prev, from_end) = self.row_bounds(from);
        let ended = a.char_budgets().map_or_else(Vec::new, |cb| self.ended_occurrences(a, cb, from));
        let rb = a.rec_budgets();
        for i in prev..from_end {
            let it = self.items[i];
            if !ended.is_empty() && ended.contains(&self.occ_of(it.la)) {
                continue;
            }
            let Some(t) = a.step(it.state, byte) else { continue };
            let state = rb.map_or(t, |rb| self.target(rb, it.la, t));
            if let Some(la) = self.step_obligations(a, it.la, byte) {
                self.add(Item { state, la, ..it });
            }
        }
    }

    /// Begins an empty row after row `from`, reached by reading `byte` (`None`: no input byte);
    /// returns its index. [`Chart::finish_row`] closes it.
    fn begin_row(&mut self, from: usize, byte: Option<u8>) -> usize {
        let new_row = self.row_start.len();
        self.row_start.push(self.items.len() as u32);
        self.row_sig.push(0);
        self.push_chars(from, byte);
        new_row
    }

    /// Closes and signs row `r`, the newest, begun by [`Chart::begin_row`] and filled with its
    /// kernel items. Returns `Ok(false)` (and removes the row) if it has no item.
    fn finish_row(&mut self, a: &Automata, r: usize) -> Result<bool> {
        if self.items.len() == self.row_start[r] as usize {
            self.row_start.pop();
            self.row_sig.pop();
            self.chars.truncate(self.row_start.len());
            return Ok(false);
        }
        if let Err(e) = self.close(a, r) {
            self.pop_row();
            return Err(e);
        }
        self.row_sig[r] = self.signature(r);
        Ok(true)
    }

    /// [`Chart::push_byte`] through `memo`: a row whose kernel (its items before closing) was
    /// closed before on top of a row of the same identity is copied from the memo instead of
    /// closed again. See [`CloseMemo`].
    pub fn push_byte_memo(&mut self, a: &Automata, byte: u8, memo: &mut CloseMemo) -> Result<bool> {
        let from = self.last_row_index();
        let new_row = self.begin_row(from, Some(byte));
        self.step_into_new_row(a, from, byte);
        self.finish_row_memo(a, new_row, memo)
    }

    /// [`Chart::push_items`] through `memo` (see [`Chart::push_byte_memo`]).
    pub fn push_items_memo(&mut self, a: &Automata, items: &[Item], memo: &mut CloseMemo) -> Result<bool> {
        if items.is_empty() {
            return Ok(false);
        }
        let new_row = self.begin_row(self.last_row_index(), None);
        for &it in items {
            self.add(it);
        }
        self.finish_row_memo(a, new_row, memo)
    }

    /// [`Chart::finish_row`] through `memo`: the closed row of an equal [`CloseKey`] is copied
    /// (and the work its closing took charged again), else the row is closed and kept there.
    fn finish_row_memo(&mut self, a: &Automata, r: usize, memo: &mut CloseMemo) -> Result<bool> {
        let start = self.row_start[r] as usize;
        // Budgeted charts read more than the kernel and the rows below (clock, contexts).
        let plain =
            self.contexts.is_none() && self.char_rules == 0 && a.rec_budgets().is_none() && a.char_budgets().is_none();
        if !plain || r < memo.base || self.items.len() == start {
            return self.finish_row(a, r);
        }
        let kernel = self.items[start..].iter().fold(CLOSE_SEED, |acc, it| {
            let w = u128::from(it.state.0)
                | u128::from(it.origin) << 32
                | u128::from(it.la_origin) << 64
                | u128::from(it.la) << 96;
            mix128(acc.rotate_left(7) ^ w)
        });
        let below = memo.id_of(r - 1);
        if below == u32::MAX {
            // Below is a row the memo did not keep: neither is this one.
            memo.set_id(r, u32::MAX);
            return self.finish_row(a, r);
        }
        let key: CloseKey = (below, kernel);
        if let Some(&(lo, hi, sig, work, id)) = memo.rows.get(&key) {
            if let Err(e) = charge_work(work as usize) {
                self.pop_row();
                return Err(e);
            }
            self.items.truncate(start);
            self.items.extend_from_slice(&memo.items[lo as usize..hi as usize]);
            self.scratch.clear();
            self.row_sig[r] = sig;
            memo.set_id(r, id);
            memo.hits += 1;
            return Ok(true);
        }
        let before = WORK_LEFT.get();
        let pushed = self.finish_row(a, r)?;
        let work = before.saturating_sub(WORK_LEFT.get());
        if !pushed {
            return Ok(false);
        }
        let fits = memo.items.len() + (self.items.len() - start) <= MAX_CLOSE_MEMO_ITEMS;
        match u32::try_from(work) {
            Ok(work) if fits => {
                // A fresh identity, above every index below `base`.
                let id = (memo.base + memo.rows.len()) as u32;
                memo.set_id(r, id);
                let lo = memo.items.len() as u32;
                memo.items.extend_from_slice(&self.items[start..]);
                memo.rows.insert(key, (lo, memo.items.len() as u32, self.row_sig[r], work, id));
            }
            // Not kept: no key names it, nor the rows pushed on it.
            _ => memo.set_id(r, u32::MAX),
        }
        Ok(pushed)
    }

    /// Appends the row reached by reading `byte` from the last row, with `extra` items added
    /// before the row is closed (a token edge's completions merged into the row its bytes reach;
    /// see `crate::token_edges`). Returns `Ok(false)` (and appends nothing) if the row is empty.
    pub fn push_byte_with(&mut self, a: &Automata, byte: u8, extra: &[Item]) -> Result<bool> {
        let from = self.last_row_index();
        let new_row = self.begin_row(from, Some(byte));
        self.step_into_new_row(a, from, byte);
        for &it in extra {
            self.add(it);
        }
        self.finish_row(a, new_row)
    }

    /// Appends a row holding `items` (which must not already form a row) and closes it.
    /// Returns `Ok(false)` (and appends nothing) if `items` is empty.
    pub fn push_items(&mut self, a: &Automata, items: &[Item]) -> Result<bool> {
        self.push_items_reading(a, items, 0)
    }

    /// [`Chart::push_items`] for a row after `chars` characters read at once (a token edge's
    /// token: recursive `max_chars` budgets count its characters, as XGrammar does).
    pub fn push_items_reading(&mut self, a: &Automata, items: &[Item], chars: u32) -> Result<bool> {
        if items.is_empty() {
            return Ok(false);
        }
        let new_row = self.begin_row(self.last_row_index(), None);
        if let Some(c) = self.chars.last_mut() {
            *c += chars;
        }
        for &it in items {
            self.add(it);
        }
        self.finish_row(a, new_row)
    }

    /// Appends the row reached by completing `rule`, started at row `origin`, right now: the items
    /// of row `origin` that wait on `rule` advance. Used to resume a parent context after a
    /// cached sub-walk ended the rule. Returns `Ok(false)` if nothing waits on the rule.
    pub fn push_completion(&mut self, a: &Automata, origin: usize, rule: RuleId) -> Result<bool> {
        self.push_completion_with(a, origin, rule, None)
    }

    /// [`Chart::push_completion`] for the rule of kernel item `it` ending now: only the parents it
    /// was predicted by advance (in a grammar with recursive budgets, the spend points or
    /// occurrence numbers match).
    pub fn push_completion_of(&mut self, a: &Automata, it: &Item) -> Result<bool> {
        let rule = a.state(it.state).rule;
        let predicted_with = (a.rec_budgets().is_some() || a.char_budgets().is_some()).then_some(it.la_origin);
        self.push_completion_with(a, it.origin as usize, rule, predicted_with)
    }

    /// Appends the row where `rule`, started at row `origin`, ends now; with `predicted_with`
    /// (grammars with recursive budgets) only the parents whose own `la` it is advance.
    fn push_completion_with(
        &mut self,
        a: &Automata,
        origin: usize,
        rule: RuleId,
        predicted_with: Option<u32>,
    ) -> Result<bool> {
        let new_row = self.begin_row(self.last_row_index(), None);
        let (o0, o1) = self.row_bounds(origin);
        for k in o0..o1 {
            let p = self.items[k];
            match predicted_with {
                Some(lo) if p.la == lo => self.advance::<true>(a, a.rec_budgets(), &p, rule, lo, origin as u32),
                Some(_) => {}
                None => self.advance::<false>(a, None, &p, rule, p.la, origin as u32),
            }
        }
        self.finish_row(a, new_row)
    }

    /// Recursive `max_tokens` budgets: sets the tokens accepted so far and whether a string is
    /// being read, then builds the last row again from the row before it (`byte` is the last
    /// input byte; row 0 is kept: nothing is spent there, as every accepted token has a byte).
    /// Every item of a spent occurrence is then in an exhausted twin state, and only the twins'
    /// edges were predicted from.
    pub fn set_clock(&mut self, a: &Automata, clock: u32, free: bool, byte: Option<u8>) -> Result<()> {
        self.set_clock_with(clock, free, |c| match byte {
            Some(b) => c.push_byte(a, b),
            None => Ok(true),
        })
    }

    /// [`Chart::set_clock`] for any last row: when it must be built again, it is popped and
    /// `rebuild` pushes it again from the rows before it (a token edge's row: its completions
    /// again, at the new token count). A `rebuild` that appends nothing is an internal error; a
    /// failed one (an error or nothing appended) leaves the chart, clock and mode as they were.
    pub fn set_clock_with(
        &mut self,
        clock: u32,
        free: bool,
        rebuild: impl FnOnce(&mut Chart) -> Result<bool>,
    ) -> Result<()> {
        let r = self.last_row_index();
        // The row may have been built at another clock or mode (before a rollback): always again.
        if r > 0 && self.last_row().iter().any(|it| it.la != 0) {
            let mut saved = std::mem::take(&mut self.spare_row);
            self.save_last_row(&mut saved);
            (self.clock, self.free) = (clock, free);
            self.pop_row();
            let outcome = rebuild(self);
            let failed = !matches!(outcome, Ok(true)) || self.last_row_index() != r;
            if failed {
                // Invariant: a failed rebuild leaves the chart as it was (rows, clock, mode).
                self.restore_last_row(&saved);
            }
            saved.items.clear();
            self.spare_row = saved;
            outcome?;
            if failed {
                return Err(Error::new(crate::error::ErrorKind::Internal, "a budget emptied a chart row"));
            }
        } else {
            (self.clock, self.free) = (clock, free);
            self.row_sig[r] = self.signature(r);
        }
        Ok(())
    }

    /// Copies the last row, its signature, clock and mode into `into` (its buffer reused).
    pub fn save_last_row(&self, into: &mut SavedRow) {
        let r = self.last_row_index();
        into.row = r;
        into.items.clear();
        into.items.extend_from_slice(self.last_row());
        (into.sig, into.chars, into.clock, into.free) =
            (self.row_sig[r], self.chars.get(r).copied(), self.clock, self.free);
    }

    /// Puts back a row saved by [`Chart::save_last_row`] as the last row: the rows from
    /// `saved`'s on (those there are) are dropped and it is pushed again. Row 0 is never built again, so for it only the
    /// signature, clock and mode return.
    pub fn restore_last_row(&mut self, saved: &SavedRow) {
        let r = saved.row;
        if r == 0 {
            self.truncate_rows(1);
            self.row_sig[0] = saved.sig;
        } else {
            self.truncate_rows(r);
            self.row_start.push(self.items.len() as u32);
            self.items.extend_from_slice(&saved.items);
            self.row_sig.push(saved.sig);
            self.chars.extend(saved.chars);
        }
        (self.clock, self.free) = (saved.clock, saved.free);
    }

    /// Where an item with `la` (its spend point) moving to `t` goes: `t`'s twin once spent; its
    /// open state while a string is read (unless it is spent from the start), so a string goes on
    /// free from where the tokens before it led (the items of rows built spent step on their
    /// twins' edges: a row built again for a string reads its last byte as its token did).
    #[inline]
    pub(crate) fn target(&self, rb: &RecBudgets, la: u32, t: StateId) -> StateId {
        let ctx = self.spend_of(la);
        if self.free && ctx != SPENT_FROM_START {
            rb.open_of(t)
        } else if spent(ctx, self.clock) {
            rb.twin_of(t)
        } else {
            t
        }
    }

    /// Recursive `max_tokens` budgets: whether an occurrence of `rule` that started at row
    /// `child_origin` and ends now may not complete into parent `p`, because `p` is a level
    /// started at the same row that would wrap it in another level of a left-recursive chain
    /// ([`RecBudgets::wraps`]: `p` of the same rule, `e ::= e "+" t`, or `rule` an opener of
    /// `p`'s group of rules left-recursive through each other) and the budget holds there (the
    /// chain of levels at one row shares one spend point): a spent occurrence that can end ends
    /// instead of growing. The caller that predicted the first of those levels (outside the
    /// chain) still takes it, so no parse loses its end.
    #[inline]
    fn spent_left_growth(&self, a: &Automata, rb: &RecBudgets, p: &Item, rule: RuleId, child_origin: u32) -> bool {
        let spend = self.spend_of(p.la);
        p.origin == child_origin
            && rb.wraps(rule, a.state(p.state).rule, self.wrapper(p.la, rb.wrapper_bits()))
            && (!self.free || spend == SPENT_FROM_START)
            && spent(spend, self.clock)
    }

    /// Recursive budgets: the spend point and `la` of a level of `rr` predicted at row `r` by
    /// item `it`: its own budgets inside `it`'s, `it`'s obligations, and the wrapper mark
    /// ([`RecBudgets::mark_of`]: `it`'s for a left call of its chain, else `rr`'s own).
    #[inline]
    fn predicted_la(
        &mut self,
        a: &Automata,
        rb: Option<&RecBudgets>,
        cb: Option<&CharBudgets>,
        it: &Item,
        rr: RuleId,
        r: usize,
    ) -> Result<(u32, u32)> {
        let spend = match rb {
            Some(rb) => {
                let s = self.spend_of(it.la);
                rb.bound(rr).map_or(s, |n| ctx_min(s, own_spend(n, self.clock)))
            }
            None => 0,
        };
        // A recursive `max_chars` rule outside every bounded occurrence starts one.
        let occ = match cb {
            Some(cb) => match self.occ_of(it.la) {
                0 => match cb.start(rr, r as u32) {
                    Some(occ) => occ,
                    None if cb.start(rr, 0).is_some() => {
                        return Err(Error::limit(
                            "input bytes in a grammar with a recursive max_chars rule",
                            (u32::MAX / cb.len()) as usize,
                        ))
                    }
                    None => 0,
                },
                occ => occ,
            },
            None => 0,
        };
        let la = self.context_id(spend, occ, self.obligations_of(it.la));
        match rb.filter(|rb| rb.has_marks()).and_then(|rb| Some((rb, rb.mark_of(a.state(it.state).rule, rr)?))) {
            Some((rb, (same_group, own))) => {
                let w = rb.wrapper_bits();
                let called = same_group && it.origin == r as u32;
                let inherited = if called { self.wrapper(it.la, w) } else { 0 };
                let row = if called {
                    (r as u64 + 1).checked_shl(w + 1).and_then(|x| u32::try_from(x).ok()).ok_or_else(|| {
                        Error::limit(
                            "input bytes in a grammar with left-recursive chain marks",
                            (u32::MAX >> (w + 1)) as usize,
                        )
                    })?
                } else {
                    0
                };
                let bits = row | (if inherited != 0 { inherited } else { own }) << 1;
                Ok((spend, if bits == 0 { la } else { self.with_bits(la, bits) }))
            }
            None => Ok((spend, la)),
        }
    }

    /// Predicts at row `r`, built by a token, the chain of left-recursive levels a spent level
    /// `it` of an opener of a group that opens its chain would be wrapped in once ended, were it free
    /// ([`RecBudgets::chain`]). The chain is shadows marked in their contexts ([`Chart::shadowed`]):
    /// they read nothing, and only levels they predicted complete into them (through their open
    /// states, [`Chart::advance`]), so a chain grows only around an opener level ended while a
    /// string is read, as the stack reference wraps it. Out of line: only grammars with such groups
    /// reach it.
    #[inline(never)]
    fn predict_chain(
        &mut self,
        a: &Automata,
        rb: &RecBudgets,
        cb: Option<&CharBudgets>,
        it: &Item,
        r: usize,
    ) -> Result<()> {
        if rb.is_shadow(it.state) {
            for &rr in rb.chain(it.state) {
                let (spend, la) = self.predicted_la(a, Some(rb), cb, it, rr, r)?;
                if spend == SPENT_FROM_START {
                    continue;
                }
                let level = Item { state: a.rule_start(rr), origin: r as u32, la_origin: it.la, la };
                if rb.chain_wraps(rr, self.wrapper(it.la, rb.wrapper_bits())) {
                    // The level the chain wraps (a twin, as the opener's levels at this row).
                    self.add(Item { state: rb.start(a, it.state, rr), ..level });
                }
                let la = self.shadowed(la);
                for &state in rb.shadows(rr) {
                    self.add(Item { state, la, ..level });
                }
            }
        } else if it.origin == r as u32
            && self.spend_of(it.la) != SPENT_FROM_START
            && rb.chain_wraps(a.state(it.state).rule, self.wrapper(it.la, rb.wrapper_bits()))
        {
            // The chain's outer level: the opener's level `it` itself, wrapping.
            if let Some(state) = rb.shadow_of(it.state) {
                let la = self.shadowed(it.la);
                self.add(Item { state, la, ..*it });
            }
        }
        Ok(())
    }

    /// Recursive `max_tokens` budgets: the state whose rule edges parent `p` takes an ended
    /// level of `rule` (started at row `child_origin`) on, `None` for none. A parent takes only
    /// the rules it called, so its own state's edges (a twin's at a row built spent), but while
    /// a string is read, a level wrapped in a new level of its own rule started at the same row
    /// (left recursion, read free) takes the open state's. A shadow's children are its chain's
    /// ([`Chart::predict_chain`]): it takes them on its open state's edges, an ended level of the
    /// opener its chain wraps only while a string is read (shadows are only at rows built spent).
    #[inline]
    fn completed_from(
        &self,
        a: &Automata,
        rb: &RecBudgets,
        p: &Item,
        rule: RuleId,
        child_origin: u32,
    ) -> Option<StateId> {
        if rb.is_shadow(p.state) {
            return (self.free || !rb.chain_wraps(rule, self.wrapper(p.la, rb.wrapper_bits())))
                .then(|| rb.open_of(p.state));
        }
        let own_wrap = p.origin == child_origin && a.state(p.state).rule == rule;
        let free = self.free && self.spend_of(p.la) != SPENT_FROM_START;
        Some(if free && own_wrap { rb.open_of(p.state) } else { p.state })
    }

    /// Moves the last row's items of token-budgeted rules whose budget is spent to their
    /// exhausted twins (`twin` gives an item's new state, or `None` to keep it; see
    /// `compiler/token_budget.rs`), and signs the row again. A twin has the same rule and
    /// finality as its open state and no rule edges, so the row stays closed.
    pub fn exhaust_last_row(&mut self, mut twin: impl FnMut(&Item) -> Option<StateId>) -> bool {
        let r = self.last_row_index();
        let start = self.row_start[r] as usize;
        let mut changed = false;
        for it in &mut self.items[start..] {
            if let Some(t) = twin(it) {
                it.state = t;
                changed = true;
            }
        }
        if changed {
            self.row_sig[r] = self.signature(r);
        }
        changed
    }

    /// Removes the last row's token-edge items (`crate::token_edges`) that no item of the row
    /// waits on any more: their callers moved to exhausted twins without that token edge, so
    /// masks must not offer the edge's tokens. Invariant after: every token-edge item of the last
    /// row has a caller in it, as [`crate::token_edges::token_completions`] requires.
    pub fn drop_unwaited_token_items(&mut self, a: &Automata) {
        let r = self.last_row_index();
        let start = self.row_start[r] as usize;
        let row = &self.items[start..];
        let waited = |it: &Item| {
            let rule = a.state(it.state).rule;
            row.iter().any(|p| p.la == it.la_origin && a.rule_edges(p.state).iter().any(|&(rr, _)| rr == rule))
        };
        let kept: Vec<Item> =
            row.iter().filter(|it| a.tokens().set_of(a, it.state).is_none() || waited(it)).copied().collect();
        if kept.len() < row.len() {
            self.items.truncate(start);
            self.items.extend(kept);
            self.row_sig[r] = self.signature(r);
        }
    }

    /// Removes the newest row. Row 0 is never removed.
    #[inline]
    pub fn pop_row(&mut self) {
        debug_assert!(self.row_start.len() > 1);
        let start = self.row_start.pop().unwrap() as usize;
        self.row_sig.pop();
        self.chars.truncate(self.row_start.len());
        self.items.truncate(start);
    }

    /// Removes rows until `n` remain.
    pub fn truncate_rows(&mut self, n: usize) {
        debug_assert!(n >= 1 && n <= self.row_start.len());
        let start = self.row_start[n.max(1)..].first().copied();
        if let Some(s) = start {
            self.items.truncate(s as usize);
            self.row_start.truncate(n.max(1));
            self.row_sig.truncate(n.max(1));
            self.chars.truncate(n.max(1));
        }
    }

    /// The signature of row `r` (see `row_sig`).
    #[inline]
    pub fn row_signature(&self, r: usize) -> u128 {
        self.row_sig[r]
    }

    /// The signature of the last row (see `row_sig`).
    #[inline]
    pub fn last_signature(&self) -> u128 {
        *self.row_sig.last().unwrap()
    }

    /// [`Chart::last_signature`] without the last row's *spent* items: a callee's end (a final
    /// state without byte or rule edges, no lookahead) begun in an earlier row other than row 0.
    /// Its completion was done when the row closed, no byte steps it and no completion advances
    /// it, and only items begun in row 0 tell a rule's end ([`Chart::is_complete`], a kernel
    /// walk's ends): two rows equal but for spent items read every byte string alike.
    /// Budgeted charts (contexts, character budgets) keep the full signature.
    /// Each condition: with byte edges it reads on; with rule edges a later completion of its
    /// callee advances it, into a future its origin row decides (test
    /// `final_items_calling_a_rule_are_not_spent`); begun in row 0 it tells the kernel rule's end.
    /// Two only narrow and no test can tell them: begun in this row (an empty rule's end,
    /// completed in the row like the others) and final (a non-final state without edges is dead).
    /// Used to intern a walk's rows: a loop through a call per character (a regex class rule,
    /// `re ::= re_1*`) leaves its last character's end in each row, so that every row differed
    /// from the one before by that item's origin, and never returned to itself.
    pub fn last_future_signature(&self, a: &Automata) -> u128 {
        let r = self.last_row_index();
        if self.contexts.is_some() || self.char_rules != 0 {
            return self.last_signature();
        }
        let spent = |it: &Item| {
            let o = it.origin as usize;
            o != 0
                && o != r
                && it.la == LA_NONE
                && it.la_origin == LA_NONE
                && a.state(it.state).is_final
                && a.byte_edges(it.state).is_empty()
                && a.rule_edges(it.state).is_empty()
        };
        if !self.row(r).iter().any(spent) {
            return self.last_signature();
        }
        self.signature_of(r, |it| !spent(it))
    }

    /// Order-independent hash of row `r`'s items, each with its origin row's signature (or a
    /// marker for items predicted in this row). Rows before `r` already have signatures.
    fn signature(&self, r: usize) -> u128 {
        if self.contexts.is_some() || self.char_rules != 0 {
            let seed = (self.row(r).len() as u128).wrapping_mul(ROW_LEN_SEED);
            return self.sealed(self.budgeted_items_hash(r, seed));
        }
        self.signature_of(r, |_| true)
    }

    /// The signature of row `r` of a chart without budgets made of the items `keep` holds: every
    /// item for [`Chart::signature`], all but the spent ones for
    /// [`Chart::last_future_signature`]. Invariant: the one formula of both, so that a row
    /// without spent items has one signature under either, and a row interned by its future
    /// equals every row found under it (`mask::RowMemo`).
    #[inline]
    fn signature_of(&self, r: usize, keep: impl Fn(&Item) -> bool) -> u128 {
        let (mut n, mut acc) = (0u128, 0u128);
        for it in self.row(r) {
            if keep(it) {
                let la = u128::from(it.la_origin) << 32 | u128::from(it.la);
                acc = acc.wrapping_add(mix128(u128::from(it.state.0) ^ (la << 64) ^ self.origin_hash(r, it)));
                n += 1;
            }
        }
        self.sealed(acc.wrapping_add(n.wrapping_mul(ROW_LEN_SEED)))
    }

    /// A row's signature from the sum of its items' hashes and its length (`acc`): the clock
    /// and mode added, then mixed.
    #[inline]
    fn sealed(&self, mut acc: u128) -> u128 {
        // Spend points are absolute: the future depends on the clock too.
        if self.clock != 0 || self.free {
            acc ^= mix128(u128::from(self.clock) << 1 | u128::from(self.free) | 1 << 100);
        }
        mix128(acc)
    }

    /// The signature part of item `it` of row `r` that its origin gives: the origin row's
    /// signature, or a marker for an item predicted in row `r`.
    #[inline]
    fn origin_hash(&self, r: usize, it: &Item) -> u128 {
        const SELF_ORIGIN: u128 = 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C834;
        let o = it.origin as usize;
        let ctx = if o == r { SELF_ORIGIN } else { self.row_sig[o] };
        ctx.rotate_left(17)
    }

    /// [`Chart::signature`]'s items of row `r`, added to `acc`, where items' fields index
    /// [`Contexts`] or hold occurrence numbers.
    /// PERF: kept out of line and apart, so grammars without such fields (lookahead ones among
    /// them) hash their rows as before (+1.0 M instructions, +5% in `signature`, on a 12-token
    /// lookahead walk with the branches inline).
    #[inline(never)]
    fn budgeted_items_hash(&self, r: usize, mut acc: u128) -> u128 {
        for it in self.row(r) {
            let mut la = u128::from(it.la_origin) << 32 | u128::from(it.la);
            if let Some(c) = &self.contexts {
                // The triples, not their chart-local indices (`Contexts`).
                let ((s0, o0, l0, c0), (s1, o1, l1, c1)) = (c.pairs[it.la_origin as usize], c.pairs[it.la as usize]);
                la = mix128(u128::from(s0) << 96 | u128::from(o0) << 64 | u128::from(s1) << 32 | u128::from(o1))
                    ^ (u128::from(l0) << 32 | u128::from(l1))
                    ^ (u128::from(c0) << 97 | u128::from(c1) << 96);
            }
            // When an occurrence may end depends on the characters it has read (bits 32..64).
            let mut read = 0;
            if self.char_rules != 0 {
                let occ = self.occ_of(it.la);
                if occ != 0 {
                    let start = CharBudgets::origin_of(occ, self.char_rules) as usize;
                    read = u128::from(self.chars[r] - self.chars[start]) << 32;
                }
            }
            acc = acc.wrapping_add(mix128(u128::from(it.state.0) ^ read ^ (la << 64) ^ self.origin_hash(r, it)));
        }
        acc
    }

    fn row_bounds(&self, r: usize) -> (usize, usize) {
        let a = self.row_start[r] as usize;
        let b = self.row_start.get(r + 1).map_or(self.items.len(), |&x| x as usize);
        (a, b)
    }

    /// True if the root rule, started at row 0, can end at the last row.
    pub fn is_complete(&self, a: &Automata) -> bool {
        let root = a.root();
        // With recursive budgets `la` is the root's own budgets (and its pending obligations).
        let own_ok = a.rec_budgets().is_some() || a.char_budgets().is_some();
        self.last_row().iter().any(|it| {
            it.origin == 0
                && it.la_origin == LA_NONE
                && (it.la == LA_NONE || (own_ok && self.obligations_of(it.la) == LA_NONE))
                && a.state(it.state).rule == root
                && a.state(it.state).is_final
        })
    }

    /// Adds `it` to the newest row unless it is already there.
    #[inline]
    fn add(&mut self, it: Item) {
        let start = *self.row_start.last().unwrap() as usize;
        let len = self.items.len() - start;
        if len < LINEAR_DEDUP_LIMIT {
            if self.items[start..].contains(&it) {
                return;
            }
            self.items.push(it);
            return;
        }
        if len == LINEAR_DEDUP_LIMIT && self.scratch.is_empty() {
            self.scratch.extend(self.items[start..].iter().copied());
        }
        if self.scratch.insert(it) {
            self.items.push(it);
        }
    }

    /// Advances parent `p` over `rule` (with obligations `la` after it), which started at row
    /// `child_origin`.
    #[inline]
    fn advance<const REC: bool>(
        &mut self,
        a: &Automata,
        rb: Option<&RecBudgets>,
        p: &Item,
        rule: RuleId,
        la: u32,
        child_origin: u32,
    ) {
        match rb {
            Some(rb) if REC => {
                if self.spent_left_growth(a, rb, p, rule, child_origin) {
                    return;
                }
                let Some(from) = self.completed_from(a, rb, p, rule, child_origin) else { return };
                for &(rr, t) in a.rule_edges(from) {
                    if rr == rule {
                        self.add(Item {
                            state: self.target(rb, p.la, t),
                            origin: p.origin,
                            la_origin: p.la_origin,
                            la,
                        });
                    }
                }
            }
            _ => {
                for &(rr, t) in a.rule_edges(p.state) {
                    if rr == rule {
                        self.add(Item { state: t, origin: p.origin, la_origin: p.la_origin, la });
                    }
                }
            }
        }
    }

    /// Closes the newest row (index `r`) under prediction and completion.
    ///
    /// Rules that end empty at this row are remembered (`empty_ends`), so parents added to the row
    /// later still advance over them (the textbook fix for nullable rules; it keeps lookahead
    /// obligations exact, which advancing at prediction time would not).
    fn close(&mut self, a: &Automata, r: usize) -> Result<()> {
        let start = self.row_start[r] as usize;
        // (rule, obligations it was predicted with, obligations after it) for empty completions.
        let mut empty_ends = std::mem::take(&mut self.empty_ends);
        // Items visited while completing: bounded, so ambiguous grammars fail fast, not hang.
        let mut work = 0usize;
        let mut waiting = std::mem::take(&mut self.waiting);
        if waiting.head.is_empty() {
            waiting = WAITING_POOL.try_with(|p| p.borrow_mut().pop()).ok().flatten().unwrap_or_default();
        }
        waiting.reset(a.num_rules());
        let res = match (a.rec_budgets(), a.char_budgets()) {
            (None, None) => self.close_with::<false>(a, None, None, r, start, &mut empty_ends, &mut work, &mut waiting),
            (rb, cb) => self.close_rec(a, rb, cb, r, start, &mut empty_ends, &mut work, &mut waiting),
        };
        // The call's budget (`with_work_budget`): this row's completion visits and items.
        let res = res.and_then(|()| charge_work(work + (self.items.len() - start)));
        self.waiting = waiting;
        empty_ends.clear();
        self.empty_ends = empty_ends;
        self.scratch.clear();
        res
    }

    /// [`Chart::close_with`] for grammars with recursive budgets, kept out of line.
    /// PERF: inlined into `close` beside the common path, the budget code changed how that path
    /// compiled (+1.4% instructions in `close` on a JSON Schema walk, with no budget in it).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn close_rec(
        &mut self,
        a: &Automata,
        rb: Option<&RecBudgets>,
        cb: Option<&CharBudgets>,
        r: usize,
        start: usize,
        empty_ends: &mut Vec<(RuleId, u32, u32)>,
        work: &mut usize,
        waiting: &mut Waiting,
    ) -> Result<()> {
        self.close_with::<true>(a, rb, cb, r, start, empty_ends, work, waiting)
    }

    /// `REC`: the grammar has recursive budgets (`rb` or `cb`): items carry spend points or
    /// occurrence numbers (see [`Item`]).
    #[allow(clippy::too_many_arguments)]
    fn close_with<const REC: bool>(
        &mut self,
        a: &Automata,
        rb: Option<&RecBudgets>,
        cb: Option<&CharBudgets>,
        r: usize,
        start: usize,
        empty_ends: &mut Vec<(RuleId, u32, u32)>,
        work: &mut usize,
        waiting: &mut Waiting,
    ) -> Result<()> {
        let mut j = start;
        while j < self.items.len() {
            let it = self.items[j];
            j += 1;
            let st = a.state(it.state);
            if st.is_final {
                let rule = st.rule;
                // With budgets the parent keeps its own (those the item was predicted with).
                let la = if REC { self.resumed_la(a, &it, rule) } else { a.la_add(it.la, rule) };
                let origin = it.origin as usize;
                if origin == r {
                    if !empty_ends.contains(&(rule, it.la_origin, la)) {
                        empty_ends.push((rule, it.la_origin, la));
                    }
                    // Parents in this row already processed wait in `waiting`; later ones see
                    // `empty_ends` when they are processed.
                    let mut w = waiting.head(rule);
                    while let Some((k, next)) = waiting.get(w) {
                        w = next;
                        *work += 1;
                        let p = self.items[k as usize];
                        if p.la != it.la_origin {
                            continue;
                        }
                        self.advance::<REC>(a, rb, &p, rule, la, it.origin);
                    }
                } else {
                    let (o0, o1) = self.row_bounds(origin);
                    *work += o1 - o0;
                    for k in o0..o1 {
                        let p = self.items[k];
                        if p.la != it.la_origin {
                            continue;
                        }
                        self.advance::<REC>(a, rb, &p, rule, la, it.origin);
                    }
                }
                if *work > limits::MAX_ROW_WORK {
                    return Err(Error::limit(
                        "Earley work for one input byte (grammar too ambiguous)",
                        limits::MAX_ROW_WORK,
                    ));
                }
            }
            for &(rr, _) in a.rule_edges(it.state) {
                waiting.push(rr, (j - 1) as u32);
                if REC {
                    let (spend, la) = self.predicted_la(a, rb, cb, &it, rr, r)?;
                    let state = match rb {
                        Some(rb) if spend == SPENT_FROM_START => rb.spent_start(a, rr),
                        Some(rb) => rb.start(a, it.state, rr),
                        None => a.rule_start(rr),
                    };
                    self.add(Item { state, origin: r as u32, la_origin: it.la, la });
                } else {
                    self.add(Item { state: a.rule_start(rr), origin: r as u32, la_origin: it.la, la: it.la });
                }
                for &(er, lo, la) in empty_ends.iter() {
                    if er == rr && lo == it.la {
                        self.advance::<REC>(a, rb, &it, rr, la, r as u32);
                    }
                }
            }
            if let Some(rb) = rb.filter(|rb| REC && rb.has_chains() && !self.free && rb.in_chain(it.state)) {
                self.predict_chain(a, rb, cb, &it, r)?;
            }
            if self.items.len() - start > limits::MAX_ITEMS_PER_ROW {
                return Err(Error::limit("Earley items in one row (grammar too ambiguous)", limits::MAX_ITEMS_PER_ROW));
            }
        }
        Ok(())
    }
}
