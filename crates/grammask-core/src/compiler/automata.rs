//! The rule automata of a grammar: the compiler's output and the Earley parser's input.
//!
//! Pipeline place: [`Automata::build`] (in `build.rs`) produces an [`Automata`] from a
//! [`Grammar`](crate::grammar::Grammar); [`crate::earley`], [`crate::mask`] and [`crate::slice`]
//! read it through the accessors here. States of all rules live in one array ([`StateId`] is
//! global); each state's byte edges and rule edges are ranges of two shared edge arrays.
//!
//! Invariants (see also the module doc of [`crate::compiler`]):
//! - the byte edges of a state are sorted, disjoint ranges; at most one target per byte;
//! - a state's rule edges name each rule at most once;
//! - every state can reach a final state of its rule (live), and every rule edge names a
//!   productive rule.
use super::lookahead::LaTable;
use crate::follow::ByteSet;
use crate::grammar::RuleId;
use std::sync::Mutex;

/// Index of a state in [`Automata::states`] (global over all rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId(pub u32);

/// One automaton state. Edges live in the shared arrays of [`Automata`].
#[derive(Clone, Debug)]
pub struct State {
    pub rule: RuleId,
    pub is_final: bool,
    pub(super) byte_edges: (u32, u32),
    pub(super) rule_edges: (u32, u32),
}

/// A byte-range edge `lo..=hi -> target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteEdge {
    pub lo: u8,
    pub hi: u8,
    pub target: StateId,
}

/// The automata of every rule of a grammar.
#[derive(Debug)]
pub struct Automata {
    pub(super) states: Vec<State>,
    pub(super) byte_edges: Vec<ByteEdge>,
    pub(super) rule_edges: Vec<(RuleId, StateId)>,
    pub(super) rule_start: Vec<StateId>,
    /// Start of the automaton of each rule's lookahead assertion (`None`: no lookahead, or one
    /// that the empty string satisfies).
    pub(super) lookahead_start: Vec<Option<StateId>>,
    /// Whether some `lookahead_start` is set (asked on every mask fill).
    pub(super) any_lookahead: bool,
    /// Interned sets of pending lookahead obligations (see [`Automata::la_step`]).
    pub(super) la: Mutex<LaTable>,
    pub(super) rule_names: Vec<String>,
    pub(super) root: RuleId,
    /// The rules that are one token edge (`token_edges.rs`); empty without token expressions.
    pub(super) tokens: super::token_edges::TokenRules,
    /// The rules with a `max_tokens` budget (`token_budget.rs`); empty without one.
    pub(super) budgets: super::token_budget::TokenBudgets,
    /// Per `capture_hidden_stop_rule` rule, the automata that split an occurrence (captures).
    pub(super) stop_splits: Vec<(RuleId, StopSplit)>,
    /// Twins for a recursive `max_tokens` rule (`token_budget.rs`); `None` without one.
    pub(super) rec: Option<Box<super::token_budget::RecBudgets>>,
    /// The recursive `max_chars` rules (`char_budget.rs`); `None` without one.
    pub(super) chars: Option<Box<super::char_budget::CharBudgets>>,
}

/// The DFAs of a `capture_hidden_stop_rule` rule's body rule and stop rule (every rule they use
/// inlined).
#[derive(Clone, Debug, Default)]
pub(super) struct StopSplit {
    pub(super) body: super::dfa::Dfa,
    pub(super) stop: super::dfa::Dfa,
}

impl Automata {
    pub fn states(&self) -> &[State] {
        &self.states
    }

    #[inline]
    pub fn state(&self, s: StateId) -> &State {
        &self.states[s.0 as usize]
    }

    #[inline]
    pub fn byte_edges(&self, s: StateId) -> &[ByteEdge] {
        let (a, b) = self.states[s.0 as usize].byte_edges;
        &self.byte_edges[a as usize..b as usize]
    }

    #[inline]
    pub fn rule_edges(&self, s: StateId) -> &[(RuleId, StateId)] {
        let (a, b) = self.states[s.0 as usize].rule_edges;
        &self.rule_edges[a as usize..b as usize]
    }

    /// Every state's byte edges, in no particular order (the shared array holds exactly those):
    /// a scan of the whole automaton reads them here rather than state by state.
    pub fn all_byte_edges(&self) -> &[ByteEdge] {
        &self.byte_edges
    }

    /// The target of `s` on `byte`, if any.
    #[inline]
    pub fn step(&self, s: StateId, byte: u8) -> Option<StateId> {
        // Edges are few (typically < 8) and sorted: a linear scan beats a binary search here.
        for e in self.byte_edges(s) {
            if byte < e.lo {
                return None;
            }
            if byte <= e.hi {
                return Some(e.target);
            }
        }
        None
    }

    /// The token-budgeted rules (`max_tokens`) and their exhausted twins.
    #[inline]
    pub fn budgets(&self) -> &super::token_budget::TokenBudgets {
        &self.budgets
    }

    /// The twins of a grammar with a recursive `max_tokens` rule (see `token_budget.rs`).
    #[inline]
    pub fn rec_budgets(&self) -> Option<&super::token_budget::RecBudgets> {
        self.rec.as_deref()
    }

    /// The recursive `max_chars` rules (see `char_budget.rs`), if any.
    #[inline]
    pub fn char_budgets(&self) -> Option<&super::char_budget::CharBudgets> {
        self.chars.as_deref()
    }

    /// For an open state of a token-budgeted rule: the rule's budget and the state's exhausted
    /// twin (see `token_budget.rs`).
    #[inline]
    pub fn token_budget(&self, s: StateId) -> Option<(u32, StateId)> {
        if self.budgets.is_empty() {
            return None;
        }
        self.budgets.open(self.states[s.0 as usize].rule, s)
    }

    #[inline]
    pub fn rule_start(&self, r: RuleId) -> StateId {
        self.rule_start[r.index()]
    }

    /// The state an item in `caller` predicts rule `r` at: `r`'s start, or the start of its
    /// exhausted twin when `caller` is an exhausted twin or `r` has `max_tokens=0` (spent from
    /// the start, as [`crate::earley`] predicts it; `token_budget.rs`).
    #[inline]
    pub fn callee_start(&self, caller: StateId, r: RuleId) -> StateId {
        match &self.rec {
            Some(rb) if rb.bound(r) == Some(0) => rb.spent_start(self, r),
            Some(rb) => rb.start(self, caller, r),
            None => self.rule_start[r.index()],
        }
    }

    pub fn root(&self) -> RuleId {
        self.root
    }

    /// For an occurrence `text` of a `capture_hidden_stop_rule` rule `r`: the length of its body
    /// part, the shortest prefix that the body matches with the rest matched by the stop (the
    /// longest stop text, as XGrammar splits). `None` when `r` has no such split or `text` has
    /// none.
    pub fn hidden_stop_cut(&self, r: RuleId, text: &[u8]) -> Option<usize> {
        let (_, split) = self.stop_splits.iter().find(|(q, _)| *q == r)?;
        let ends = dfa_prefix_ends(&split.body, text);
        (0..=text.len()).find(|&p| ends[p] && dfa_accepts(&split.stop, &text[p..]))
    }

    /// True if some rule has a lookahead assertion the empty string does not satisfy.
    #[inline]
    pub fn has_lookahead(&self) -> bool {
        self.any_lookahead
    }

    pub fn rule_name(&self, r: RuleId) -> &str {
        &self.rule_names[r.index()]
    }

    pub fn num_rules(&self) -> usize {
        self.rule_start.len()
    }

    /// Approximate heap size in bytes.
    pub fn memory_size(&self) -> usize {
        self.states.len() * std::mem::size_of::<State>()
            + self.byte_edges.len() * std::mem::size_of::<ByteEdge>()
            + self.rule_edges.len() * std::mem::size_of::<(RuleId, StateId)>()
            + self.rule_start.len() * 8
    }

    /// A hash of everything a token walk from `state` can observe: the states reachable from it
    /// within `depth` bytes (following byte edges, and entering referenced rules), their finality,
    /// edges and rule membership, numbered canonically in breadth-first order (automata are
    /// deterministic, so the order is canonical). Equal hashes mean the kernel classification of
    /// the two states is the same, even across grammars, for tokens of at most `depth` bytes.
    /// `None` when more than `limit` states are reachable.
    ///
    /// PERF: bounding the depth by the longest token makes the positions of a long counted
    /// repetition (`json_char{0,4096}`: every position is a distinct state) share one
    /// classification, except the last `depth` positions; each used to cost a full trie walk.
    pub fn structure_hash(&self, state: StateId, limit: usize, depth: u32) -> Option<u128> {
        with_search(self, |b| self.structure_hash_in(state, limit, depth, b).ok())
    }

    /// [`Self::structure_hash`], or when more than `limit` states are reachable, `Err` with a
    /// hash of the first `limit` states reached (in the same canonical order): states with equal
    /// structure hashes (under any larger limit) have equal prefix hashes, so a prefix hash no
    /// shared kernel has rules a cache hit out without the whole hash.
    pub fn structure_key(&self, state: StateId, limit: usize, depth: u32) -> Result<u128, u128> {
        with_search(self, |b| {
            self.structure_hash_in(state, limit, depth, b)
                .map_err(|()| self.prefix_hash(&b.order[..limit], &b.depths[..limit], depth))
        })
    }

    /// [`Self::structure_hash`] with `b.canon` all `u32::MAX` and the other buffers empty on
    /// entry; `b.order` receives the states reached (whose `canon` entries the caller resets),
    /// and past the limit (`Err`) holds its first `limit` states with their depths in `b.depths`.
    fn structure_hash_in(&self, state: StateId, limit: usize, depth: u32, b: &mut SearchBuffers) -> Result<u128, ()> {
        // Canonical ids in discovery order; each state expanded once, at its least depth (rule
        // edges cost no byte): a 0-1 breadth-first search, rule edges' states queued at the front,
        // byte edges' at the back, so states leave the queue by depth and an entry whose state
        // was reached closer since is stale.
        // PERF: a plain queue re-expanded a state whenever its depth dropped: ~4 expansions a
        // state in a counted pattern's reach (MaskBench o21456: 33 k for 8,192 states, ~5 M
        // instructions a search that passes its limit).
        let id = |s: StateId| s.0 as usize;
        let SearchBuffers { canon, order, depths, queue } = b;
        order.push(state);
        depths.push(0);
        queue.push_back((0, 0));
        canon[id(state)] = 0;
        while let Some((ci, d)) = queue.pop_front() {
            if d > depths[ci as usize] {
                continue; // stale: expanded at a lesser depth
            }
            let s = order[ci as usize];
            if d >= depth {
                continue; // a frontier state: present, but its edges are beyond any token
            }
            let next = self
                .byte_edges(s)
                .iter()
                .map(|e| (e.target, d + 1))
                .chain(self.rule_edges(s).iter().flat_map(|&(r, t)| [(self.callee_start(s, r), d), (t, d)]));
            for (t, td) in next {
                let c = match canon[id(t)] {
                    u32::MAX => {
                        if order.len() >= limit {
                            return Err(());
                        }
                        let c = order.len() as u32;
                        canon[id(t)] = c;
                        order.push(t);
                        depths.push(td);
                        c
                    }
                    c if td < depths[c as usize] => {
                        depths[c as usize] = td;
                        c
                    }
                    _ => continue,
                };
                if td == d {
                    queue.push_front((c, td));
                } else {
                    queue.push_back((c, td));
                }
            }
        }
        let rule_canon = |r: RuleId| canon[id(self.rule_start(r))];
        let mut h = WordHash::default();
        for (&s, &d) in order.iter().zip(depths.iter()) {
            let st = self.state(s);
            if d >= depth {
                h.push(u64::MAX - 2); // frontier
                continue;
            }
            h.push(u64::from(st.is_final) | u64::from(rule_canon(st.rule)) << 8);
            h.push(u64::from(st.rule == self.state(state).rule));
            for e in self.byte_edges(s) {
                h.push(u64::from(e.lo) | u64::from(e.hi) << 8 | u64::from(canon[id(e.target)]) << 16);
            }
            h.push(u64::MAX);
            for &(r, t) in self.rule_edges(s) {
                let callee = canon[id(self.callee_start(s, r))];
                h.push(u64::from(callee) | u64::from(canon[id(t)]) << 32);
            }
            h.push(u64::MAX - 1);
        }
        Ok(h.finish())
    }

    /// A hash of the states of `order` (per state: finality, edge counts, the first byte edge's
    /// range; a state at `depth` or deeper as a frontier), for [`Self::structure_key`]'s `Err`:
    /// only what the whole hash covers too, one word a state.
    /// PERF: every edge with its target's id took ~23 k instructions per kernel state past the
    /// early limit (+0.8% of the fill instructions of 40 MaskBench schemas).
    fn prefix_hash(&self, order: &[StateId], depths: &[u32], depth: u32) -> u128 {
        let mut h = WordHash::default();
        for (&s, &d) in order.iter().zip(depths) {
            if d >= depth {
                h.push(u64::MAX - 2);
                continue;
            }
            let (bytes, rules) = (self.byte_edges(s), self.rule_edges(s));
            let first = bytes.first().map_or(0, |e| u64::from(e.lo) | u64::from(e.hi) << 8);
            h.push(
                u64::from(self.state(s).is_final)
                    | (bytes.len() as u64) << 1
                    | (rules.len() as u64) << 24
                    | first << 48,
            );
        }
        h.finish()
    }
}

/// [`Automata::bounded_key`]'s memos: by (state, bytes left, first byte or 256 for any), the key
/// and the fewest bytes to an end of the state's rule instance within them ([`NO_END`]: none);
/// by state, its first bytes and whether it may end its rule instance with none. `None` while
/// in progress.
#[derive(Debug, Default)]
pub struct BoundedKeys {
    keys: crate::fasthash::FastMap<u64, Option<(u128, u32)>>,
    firsts: crate::fasthash::FastMap<u32, Option<(ByteSet, bool)>>,
}

impl BoundedKeys {
    pub fn len(&self) -> usize {
        self.keys.len() + self.firsts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&mut self) {
        self.keys.clear();
        self.firsts.clear();
    }
}

/// No end of a rule instance within the bytes left ([`BoundedKeys`]).
const NO_END: u32 = u32::MAX;
/// Edges followed in a row past which [`Automata::bounded_key`] gives up (its stack).
const BOUNDED_KEY_NESTING: u32 = 512;
/// [`Automata::bounded_key`]'s `only` for any first byte.
const ANY_BYTE: u32 = 256;

impl Automata {
    /// Whether [`Self::bounded_key`] and [`Self::first_bytes`] apply: no token edges or budgets.
    pub fn plain_for_keys(&self) -> bool {
        !self.has_token_edges() && self.budgets.is_empty() && self.rec.is_none() && self.chars.is_none()
    }

    /// The bytes `state`'s rule instance may read first (through calls, and past callees that
    /// may end with no byte), and whether it may end with none: what a kernel chart of `state`
    /// reads, and whether it has ended the rule. `None` for a call that reaches itself with no
    /// byte read, or past `budget` new entries (the memo keeps what was found).
    pub fn first_bytes(&self, state: StateId, memo: &mut BoundedKeys, budget: &mut usize) -> Option<(ByteSet, bool)> {
        self.first_bytes_in(state, memo, budget, 0)
    }

    fn first_bytes_in(
        &self,
        s: StateId,
        memo: &mut BoundedKeys,
        budget: &mut usize,
        nesting: u32,
    ) -> Option<(ByteSet, bool)> {
        if let Some(&e) = memo.firsts.get(&s.0) {
            return e;
        }
        if *budget == 0 || nesting > BOUNDED_KEY_NESTING {
            return None;
        }
        *budget -= 1;
        memo.firsts.insert(s.0, None);
        let mut found = || {
            let mut bytes = ByteSet::default();
            for e in self.byte_edges(s) {
                bytes.insert_range(e.lo, e.hi);
            }
            let mut ends = self.state(s).is_final;
            for &(r, t) in self.rule_edges(s) {
                let (first, empty) = self.first_bytes_in(self.callee_start(s, r), memo, budget, nesting + 1)?;
                bytes.union(&first);
                if empty {
                    let (after, t_ends) = self.first_bytes_in(t, memo, budget, nesting + 1)?;
                    bytes.union(&after);
                    ends |= t_ends;
                }
            }
            Some((bytes, ends))
        };
        let found = found();
        match found {
            Some(e) => memo.firsts.insert(s.0, Some(e)),
            None => memo.firsts.remove(&s.0),
        };
        found
    }

    /// A key of what a token walk from `state` observes within `depth` bytes whose first byte is
    /// `only` (any byte: `None`), built as a tree over (state, bytes left, first byte) and
    /// memoized in `memo` across states: a state's key hashes its finality, its byte edges (the
    /// one on `only`, else each range) with their targets' keys one byte deeper, and the set of
    /// its calls, each as the callee start's key and the return state's key after the callee's
    /// fewest bytes to an end (past the depth: a marker; with no byte, also the return state's
    /// key one byte deeper for any byte); a state with no bytes left is a frontier (present,
    /// nothing else). Equal keys mean equal languages of the unfolded trees within the depth
    /// (a return after more bytes reads a truncation of a key hashed; equal alternatives
    /// collapse). `None` where [`Self::plain_for_keys`] does not hold, a call reaches itself
    /// with no byte read, edges nest past [`BOUNDED_KEY_NESTING`], or past `budget` new entries
    /// (the memo keeps the keys found).
    ///
    /// Equal keys of two states of rules of one FOLLOW set mean one kernel classification of the
    /// tokens of at most `depth` bytes that begin with `only`: the walk reads the language.
    pub fn bounded_key(
        &self,
        state: StateId,
        depth: u32,
        only: Option<u8>,
        memo: &mut BoundedKeys,
        budget: &mut usize,
    ) -> Option<u128> {
        if !self.plain_for_keys() {
            return None;
        }
        let only = only.map_or(ANY_BYTE, u32::from);
        self.bounded_key_in(state, depth, only, memo, budget, 0).map(|(h, _)| h)
    }

    fn bounded_key_in(
        &self,
        s: StateId,
        d: u32,
        only: u32,
        memo: &mut BoundedKeys,
        budget: &mut usize,
        nesting: u32,
    ) -> Option<(u128, u32)> {
        let at = u64::from(s.0) << 32 | u64::from(d.min(0x7F_FFFF)) << 9 | u64::from(only);
        if let Some(&e) = memo.keys.get(&at) {
            return e;
        }
        if *budget == 0 || nesting > BOUNDED_KEY_NESTING || d > 0x7F_FFFF {
            return None;
        }
        *budget -= 1;
        memo.keys.insert(at, None);
        let found = self.bounded_key_new(s, d, only, memo, budget, nesting);
        match found {
            Some(e) => memo.keys.insert(at, Some(e)),
            None => memo.keys.remove(&at),
        };
        found
    }

    /// [`Self::bounded_key_in`] of a triple not in the memo.
    fn bounded_key_new(
        &self,
        s: StateId,
        d: u32,
        only: u32,
        memo: &mut BoundedKeys,
        budget: &mut usize,
        nesting: u32,
    ) -> Option<(u128, u32)> {
        let st = self.state(s);
        let mut end = if st.is_final { 0 } else { NO_END };
        let mut h = WordHash::default();
        if d == 0 {
            h.push(u64::MAX - 2);
            return Some((h.finish(), end));
        }
        let push2 = |h: &mut WordHash, k: u128| {
            h.push(k as u64);
            h.push((k >> 64) as u64);
        };
        h.push(u64::from(st.is_final));
        let next = nesting + 1;
        for e in self.byte_edges(s) {
            let range = u64::from(e.lo) | u64::from(e.hi) << 8;
            let word = match only {
                ANY_BYTE => range,
                b if u32::from(e.lo) <= b && b <= u32::from(e.hi) => u64::from(b),
                _ => continue,
            };
            let (k, m) = self.bounded_key_in(e.target, d - 1, ANY_BYTE, memo, budget, next)?;
            h.push(word);
            push2(&mut h, k);
            if m != NO_END {
                end = end.min(1 + m);
            }
        }
        h.push(u64::MAX);
        let mut calls: Vec<(u128, u128, u128)> = Vec::with_capacity(self.rule_edges(s).len());
        for &(r, t) in self.rule_edges(s) {
            let (k, m) = self.bounded_key_in(self.callee_start(s, r), d, only, memo, budget, next)?;
            if m > d {
                calls.push((k, u128::MAX, u128::MAX));
                continue;
            }
            // With no byte read, `t` reads the first byte too, and any byte after one.
            let t_only = if m == 0 { only } else { ANY_BYTE };
            let (kt, mt) = self.bounded_key_in(t, d - m, t_only, memo, budget, next)?;
            let later = match (m, only) {
                (0, b) if b != ANY_BYTE => self.bounded_key_in(t, d - 1, ANY_BYTE, memo, budget, next)?.0,
                _ => 0,
            };
            calls.push((k, kt, later));
            if mt != NO_END {
                end = end.min(m + mt);
            }
        }
        calls.sort_unstable();
        calls.dedup();
        for (k, kt, later) in calls {
            push2(&mut h, k);
            push2(&mut h, kt);
            push2(&mut h, later);
        }
        h.push(u64::MAX - 1);
        Some((h.finish(), if end <= d { end } else { NO_END }))
    }
}

/// The buffers of a structure search, kept per thread between searches.
#[derive(Default)]
struct SearchBuffers {
    /// Canonical id by state (`u32::MAX`: not reached), reset after each search through `order`.
    canon: Vec<u32>,
    order: Vec<StateId>,
    depths: Vec<u32>,
    /// (canonical id, depth) entries of the 0-1 breadth-first search.
    queue: std::collections::VecDeque<(u32, u32)>,
}

/// Runs `f` with this thread's search buffers ready for a search of `a`, and resets them after.
/// PERF: a hash map for `canon` was ~60% of the hash of a long counted body position (MaskBench
/// o82710's `json_char{0,1023}`: ~2.7 M of a ~4 M instruction fill, at every position); fresh
/// vectors and queue per search grew by doubling, ~15% of a search past 8,192 states.
fn with_search<R>(a: &Automata, f: impl FnOnce(&mut SearchBuffers) -> R) -> R {
    thread_local! {
        static BUFFERS: std::cell::RefCell<SearchBuffers> = std::cell::RefCell::new(SearchBuffers::default());
    }
    BUFFERS.with(|c| {
        let mut b = c.borrow_mut();
        if b.canon.len() < a.states.len() {
            b.canon.resize(a.states.len(), u32::MAX);
        }
        let r = f(&mut b);
        let SearchBuffers { canon, order, depths, queue } = &mut *b;
        for s in order.iter() {
            canon[s.0 as usize] = u32::MAX;
        }
        order.clear();
        depths.clear();
        queue.clear();
        r
    })
}

/// Two independent 64-bit FNV-style streams over a sequence of words, with a final avalanche: a
/// 128-bit structural hash.
struct WordHash(u64, u64);

impl Default for WordHash {
    fn default() -> Self {
        WordHash(0xCBF2_9CE4_8422_2325, 0x8422_2325_CBF2_9CE4)
    }
}

impl WordHash {
    #[inline]
    fn push(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(0x0000_0100_0000_01B3);
        self.1 = (self.1 ^ w.rotate_left(31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.1 ^= self.1 >> 29;
    }

    fn finish(self) -> u128 {
        let WordHash(mut a, mut b) = self;
        a ^= a >> 33;
        a = a.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        a ^= a >> 33;
        b ^= b >> 32;
        b = b.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        b ^= b >> 29;
        (u128::from(a) << 64) | u128::from(b)
    }
}

/// `out[p]`: whether `d` accepts `text[..p]`.
fn dfa_prefix_ends(d: &super::dfa::Dfa, text: &[u8]) -> Vec<bool> {
    let mut out = vec![false; text.len() + 1];
    if d.len() == 0 {
        return out;
    }
    let mut q = 0usize;
    out[0] = d.finals[0];
    for (i, &b) in text.iter().enumerate() {
        match d.bytes_of(q).iter().find(|e| e.lo <= b && b <= e.hi) {
            Some(e) => q = e.target as usize,
            None => break,
        }
        out[i + 1] = d.finals[q];
    }
    out
}

/// Whether `d` accepts `text`.
fn dfa_accepts(d: &super::dfa::Dfa, text: &[u8]) -> bool {
    if d.len() == 0 {
        return false;
    }
    let mut q = 0usize;
    for &b in text {
        match d.bytes_of(q).iter().find(|e| e.lo <= b && b <= e.hi) {
            Some(e) => q = e.target as usize,
            None => return false,
        }
    }
    d.finals[q]
}
