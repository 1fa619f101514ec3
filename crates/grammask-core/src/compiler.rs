//! Grammar IR to byte-level automata.
//!
//! Each rule body becomes a deterministic automaton whose edges are either byte ranges or
//! references to other rules ("regular right-part grammar"). The Earley parser in [`crate::earley`]
//! runs over these automata, so repetition, groups and character classes never create helper rules.
//!
//! Construction: Thompson NFA per rule (character classes become UTF-8 byte-range sequences), then
//! subset construction treating each referenced rule as one more input symbol (subsets are keyed
//! by their NFA states that have edges, interned in an arena table), then minimization by
//! partition refinement. Rules inlined everywhere they are used get no automaton of their own.
//! Afterwards rules that cannot derive any string are cut away, and so are states from which no
//! final state can be reached, so every live item of a parse can be completed (no dead ends,
//! given no lookahead).
//!
//! Invariants of [`Automata`]:
//! - the byte edges of a state are sorted, disjoint ranges; at most one target per byte;
//! - a state's rule edges name each rule at most once;
//! - every state can reach a final state of its rule (live), and every rule edge names a
//!   productive rule.

use crate::error::{Error, ErrorKind, Result};
use crate::grammar::{Expr, ExprId, Grammar, RuleId};
use crate::limits;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Index of a state in [`Automata::states`] (global over all rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId(pub u32);

/// One automaton state. Edges live in the shared arrays of [`Automata`].
#[derive(Clone, Debug)]
pub struct State {
    pub rule: RuleId,
    pub is_final: bool,
    byte_edges: (u32, u32),
    rule_edges: (u32, u32),
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
    states: Vec<State>,
    byte_edges: Vec<ByteEdge>,
    rule_edges: Vec<(RuleId, StateId)>,
    rule_start: Vec<StateId>,
    /// Start of the automaton of each rule's lookahead assertion (`None`: no lookahead, or one
    /// that the empty string satisfies).
    lookahead_start: Vec<Option<StateId>>,
    /// Interned sets of pending lookahead obligations (see [`Automata::la_step`]).
    la: Mutex<LaTable>,
    rule_names: Vec<String>,
    root: RuleId,
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

    #[inline]
    pub fn rule_start(&self, r: RuleId) -> StateId {
        self.rule_start[r.index()]
    }

    pub fn root(&self) -> RuleId {
        self.root
    }

    /// True if some rule has a lookahead assertion the empty string does not satisfy.
    #[inline]
    pub fn has_lookahead(&self) -> bool {
        self.lookahead_start.iter().any(Option::is_some)
    }

    /// The obligation set `la` plus rule `r`'s lookahead, if any (`LA_NONE` is the empty set).
    pub fn la_add(&self, la: u32, r: RuleId) -> u32 {
        match self.lookahead_start[r.index()] {
            None => la,
            Some(start) => {
                let mut t = self.la.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut set: Vec<StateId> = t.sets[la as usize].to_vec();
                set.push(start);
                t.intern(set)
            }
        }
    }

    /// The obligations of `la` after one more input byte: `None` if one of them can no longer be
    /// satisfied; obligations that reach a final state are discharged.
    pub fn la_step(&self, la: u32, byte: u8) -> Option<u32> {
        if la == LA_NONE {
            return Some(LA_NONE);
        }
        let mut t = self.la.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&next) = t.trans.get(&(la, byte)) {
            return (next != u32::MAX).then_some(next);
        }
        let mut next: Vec<StateId> = Vec::new();
        let mut dead = false;
        for &q in t.sets[la as usize].iter() {
            match self.step(q, byte) {
                None => dead = true,
                Some(q2) if self.state(q2).is_final => {}
                Some(q2) => next.push(q2),
            }
        }
        let id = if dead { u32::MAX } else { t.intern(next) };
        t.trans.insert((la, byte), id);
        (id != u32::MAX).then_some(id)
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
        // Canonical ids in discovery order; depths relaxed to their minimum (rule edges cost no
        // byte), re-expanding a state whenever its depth drops, so every state within `depth`
        // bytes is expanded exactly as the walk could see it.
        let mut canon: HashMap<StateId, u32> = HashMap::new();
        let mut order: Vec<StateId> = vec![state];
        let mut depths: Vec<u32> = vec![0];
        let mut queue: std::collections::VecDeque<u32> = std::collections::VecDeque::from([0]);
        canon.insert(state, 0);
        while let Some(ci) = queue.pop_front() {
            let (s, d) = (order[ci as usize], depths[ci as usize]);
            if d >= depth {
                continue; // a frontier state: present, but its edges are beyond any token
            }
            let next = self
                .byte_edges(s)
                .iter()
                .map(|e| (e.target, d + 1))
                .chain(self.rule_edges(s).iter().flat_map(|&(r, t)| [(self.rule_start(r), d), (t, d)]));
            for (t, td) in next {
                match canon.get(&t) {
                    Some(&c) => {
                        if td < depths[c as usize] {
                            depths[c as usize] = td;
                            queue.push_back(c);
                        }
                    }
                    None => {
                        if order.len() >= limit {
                            return None;
                        }
                        let c = order.len() as u32;
                        canon.insert(t, c);
                        order.push(t);
                        depths.push(td);
                        queue.push_back(c);
                    }
                }
            }
        }
        let rule_canon = |r: RuleId| canon.get(&self.rule_start(r)).copied().unwrap_or(u32::MAX);
        let mut words: Vec<u64> = Vec::with_capacity(order.len() * 8);
        for (&s, &d) in order.iter().zip(&depths) {
            let st = self.state(s);
            if d >= depth {
                words.push(u64::MAX - 2); // frontier
                continue;
            }
            words.push(u64::from(st.is_final) | u64::from(rule_canon(st.rule)) << 8);
            words.push(u64::from(st.rule == self.state(state).rule));
            for e in self.byte_edges(s) {
                words.push(u64::from(e.lo) | u64::from(e.hi) << 8 | u64::from(canon[&e.target]) << 16);
            }
            words.push(u64::MAX);
            for &(r, t) in self.rule_edges(s) {
                words.push(u64::from(rule_canon(r)) | u64::from(canon[&t]) << 32);
            }
            words.push(u64::MAX - 1);
        }
        Some(hash_words(&words))
    }

    /// Builds the automata of `grammar`.
    pub fn build(grammar: &Grammar) -> Result<Automata> {
        let inline = inline_plan(grammar);
        // The rules with an automaton of their own. An inlined rule is copied into every
        // automaton that uses it and never named by a rule edge: its own automaton would be
        // unreachable, so it gets an empty one.
        let todo: Vec<usize> = (0..grammar.rules().len()).filter(|&r| !inline[r]).collect();
        let budget = AtomicUsize::new(limits::MAX_AUTOMATON_STATES);
        let workers = build_threads().min(todo.len() / RULES_PER_THREAD).max(1);
        let next = AtomicUsize::new(0);
        // Each worker takes the next rule until none is left: (rule, its automaton).
        let work = || -> Result<Vec<(usize, Dfa)>> {
            let mut nfa = Nfa { inline: &inline, ..Nfa::default() };
            let (mut scratch, mut min_scratch) = (Scratch::default(), SccScratch::default());
            let mut out = Vec::new();
            while let Some(&r) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                let body = grammar.rules()[r].body;
                let dfa = with_budget(&budget, |b| {
                    nfa.clear();
                    let (start, end) = nfa.build(grammar, body, b)?;
                    nfa.freeze();
                    Ok(minimize(determinize(&nfa, start, end, b, &mut scratch)?, &mut min_scratch))
                });
                match dfa {
                    Ok(d) => out.push((r, d)),
                    Err(e) => {
                        // The other workers stop at their next rule.
                        next.store(todo.len(), Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            Ok(out)
        };
        let parts: Vec<Result<Vec<(usize, Dfa)>>> = if workers == 1 {
            vec![work()]
        } else {
            std::thread::scope(|sc| {
                let handles: Vec<_> = (1..workers).map(|_| sc.spawn(&work)).collect();
                let mut parts = vec![work()];
                parts.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))));
                parts
            })
        };
        let mut built: Vec<Option<Dfa>> = (0..grammar.rules().len()).map(|_| None).collect();
        for part in parts {
            for (r, d) in part? {
                built[r] = Some(d);
            }
        }
        let dfas: Vec<Dfa> = built
            .into_iter()
            .map(|d| {
                d.unwrap_or_else(|| {
                    let mut empty = Dfa::default();
                    empty.end_state(false);
                    empty
                })
            })
            .collect();
        let mut budget = budget.into_inner();
        let mut nfa = Nfa { inline: &inline, ..Nfa::default() };
        let (mut scratch, mut min_scratch) = (Scratch::default(), SccScratch::default());
        // Lookaheads must be regular: every rule they use is inlined.
        let mut la_dfas = Vec::new();
        for (r, rule) in grammar.rules().iter().enumerate() {
            if let Some(la) = rule.lookahead {
                nfa.clear();
                nfa.inline_all = true;
                let (start, end) = nfa.build(grammar, la, &mut budget)?;
                nfa.freeze();
                let dfa = minimize(determinize(&nfa, start, end, &mut budget, &mut scratch)?, &mut min_scratch);
                if !dfa.finals[0] {
                    la_dfas.push((r, dfa));
                }
            }
        }
        let mut a = assemble(grammar, dfas, la_dfas);
        a.prune()?;
        Ok(a)
    }
}

/// Rule automata are built on up to this many threads, one per this many rules.
/// PERF: a typical JSON Schema has dozens of rule automata (properties, key sets, values), built
/// independently; two threads take a third off a sub-millisecond compile.
const MAX_BUILD_THREADS: usize = 4;
const RULES_PER_THREAD: usize = 48;

/// The threads rule automata may be built on. Looked up once: the standard library reads the
/// cgroup quota files on every call.
fn build_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from).min(MAX_BUILD_THREADS))
}

/// Runs `f` with a share of the grammar's state budget: all that is left when it starts, then
/// takes what it used from `budget`; a budget other rules used up meanwhile is exceeded.
fn with_budget<T>(budget: &AtomicUsize, f: impl FnOnce(&mut usize) -> Result<T>) -> Result<T> {
    let start = budget.load(Ordering::Relaxed);
    let mut left = start;
    let out = f(&mut left)?;
    let used = start - left;
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| cur.checked_sub(used))
        .map_err(|_| Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES))?;
    Ok(out)
}

/// The empty obligation set.
pub const LA_NONE: u32 = 0;

/// Interned sets of lookahead automaton states (pending obligations), with a transition cache.
/// Invariant: `sets[0]` is the empty set; sets are sorted and deduplicated.
#[derive(Debug)]
struct LaTable {
    sets: Vec<Box<[StateId]>>,
    ids: HashMap<Box<[StateId]>, u32>,
    trans: HashMap<(u32, u8), u32>,
}

impl LaTable {
    fn new() -> LaTable {
        let empty: Box<[StateId]> = Box::new([]);
        LaTable { sets: vec![empty.clone()], ids: [(empty, 0)].into_iter().collect(), trans: HashMap::new() }
    }

    fn intern(&mut self, mut set: Vec<StateId>) -> u32 {
        set.sort_unstable();
        set.dedup();
        let key: Box<[StateId]> = set.into();
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(key.clone());
        self.ids.insert(key, id);
        id
    }
}

/// Two independent 64-bit FNV-style streams with a final avalanche: a 128-bit structural hash.
fn hash_words(words: &[u64]) -> u128 {
    let (mut a, mut b) = (0xCBF2_9CE4_8422_2325u64, 0x8422_2325_CBF2_9CE4u64);
    for &w in words {
        a = (a ^ w).wrapping_mul(0x0000_0100_0000_01B3);
        b = (b ^ w.rotate_left(31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        b ^= b >> 29;
    }
    a ^= a >> 33;
    a = a.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    a ^= a >> 33;
    b ^= b >> 32;
    b = b.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    b ^= b >> 29;
    (u128::from(a) << 64) | u128::from(b)
}

/// Rules small enough to be copied into their callers' automata instead of being referenced.
/// PERF: inlining leaf rules (`char`, `escape`, `digit`, ...) leaves terminal-like rules such as a
/// JSON string with no rule edges, so kernel walks step them without the Earley machinery and
/// their classification is shared wherever the rule is used.
/// A rule referenced from one place is inlined up to this size; a shared rule (e.g. `string`
/// used by every property) only when tiny, so its states, and their cached masks, stay shared.
const INLINE_MAX_STATES: usize = 4096;
const INLINE_SHARED_MAX_STATES: usize = 32;
/// A shared rule that references no other (non-inlined) rule, like `json_char`, is inlined up to
/// this size: plain regions walk fast, and equal copies hash alike for the shared kernel cache.
const INLINE_LEXICAL_MAX_STATES: usize = 512;
/// ... and, when it uses other rules, while its copies add up to at most this many states: the
/// property rules of an open object are used by each of its up to 2^n subset rules, and copying
/// them into every one multiplied the automata's build time. Leaf rules (`json_char`, `ws`) are
/// always copied: string bodies without rule edges are what the kernel shortcuts of `slice.rs`
/// recognise.
const INLINE_LEXICAL_TOTAL_STATES: usize = 1024;
/// Inlined rules may nest at most this deep (bounds the automaton builder's recursion).
const INLINE_MAX_DEPTH: u32 = 8;

/// Which rules to inline: non-recursive rules (every rule they reach is decided before them,
/// Kahn's order) whose estimated automaton is small. The root is never inlined.
fn inline_plan(g: &Grammar) -> Vec<bool> {
    let n = g.rules().len();
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut refs = vec![0usize; n];
    // seen[e] == r + 1: expression e was visited for rule r.
    let mut seen = vec![0u32; g.exprs().len()];
    let mut stack = Vec::new();
    for (r, rule) in g.rules().iter().enumerate() {
        stack.push(rule.body);
        while let Some(e) = stack.pop() {
            if seen[e.index()] == r as u32 + 1 {
                continue;
            }
            seen[e.index()] = r as u32 + 1;
            if let Expr::RuleRef(x) = g.expr(e) {
                deps[r].push(x.index());
                refs[x.index()] += 1;
            }
            stack.extend_from_slice(g.children(e));
        }
        deps[r].sort_unstable();
        deps[r].dedup();
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut pending: Vec<usize> = deps.iter().map(Vec::len).collect();
    for (r, ds) in deps.iter().enumerate() {
        for &d in ds {
            users[d].push(r);
        }
    }
    let mut inline = vec![false; n];
    let mut size = vec![usize::MAX; n];
    let mut depth = vec![0u32; n];
    // lexical[r]: r's expansion (with inlined rules) references no rule.
    let mut lexical = vec![false; n];
    let mut ready: Vec<usize> = (0..n).filter(|&r| pending[r] == 0).collect();
    let mut memo = vec![None; g.exprs().len()];
    while let Some(r) = ready.pop() {
        let (sz, dp) = estimate(g, g.rules()[r].body, &inline, &size, &depth, &mut memo);
        size[r] = sz;
        depth[r] = dp;
        lexical[r] = deps[r].iter().all(|&d| inline[d] && lexical[d]);
        let limit = if refs[r] <= 1 {
            INLINE_MAX_STATES
        } else if lexical[r] && (deps[r].is_empty() || sz.saturating_mul(refs[r]) <= INLINE_LEXICAL_TOTAL_STATES) {
            INLINE_LEXICAL_MAX_STATES
        } else {
            INLINE_SHARED_MAX_STATES
        };
        // A rule with a lookahead keeps its identity: its completion carries the assertion.
        inline[r] = r != g.root().index() && g.rules()[r].lookahead.is_none() && sz <= limit && dp < INLINE_MAX_DEPTH;
        for &u in &users[r] {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(u);
            }
        }
    }
    inline
}

/// Estimated NFA states of `e` with inlined rules expanded, and the inline nesting depth.
/// `memo` (indexed by expression) is shared by all calls: an expression's estimate only depends
/// on the rules it references, which are all decided before any rule using it (Kahn's order).
fn estimate(
    g: &Grammar,
    e: ExprId,
    inline: &[bool],
    size: &[usize],
    depth: &[u32],
    memo: &mut [Option<(usize, u32)>],
) -> (usize, u32) {
    let mut stack = vec![(e, false)];
    while let Some((x, expanded)) = stack.pop() {
        if memo[x.index()].is_some() {
            continue;
        }
        if !expanded {
            stack.push((x, true));
            stack.extend(g.children(x).iter().map(|&c| (c, false)));
            continue;
        }
        let kids = |memo: &[Option<(usize, u32)>]| {
            g.children(x).iter().fold((0usize, 0u32), |(s, d), c| {
                let (cs, cd) = memo[c.index()].unwrap_or((0, 0));
                (s.saturating_add(cs), d.max(cd))
            })
        };
        let v = match g.expr(x) {
            Expr::Bytes(b) => (b.len() + 1, 0),
            Expr::CharClass(r) => (2 + 3 * r.len(), 0),
            Expr::Seq(_) | Expr::Choice(_) => {
                let (s, d) = kids(memo);
                (s + 2, d)
            }
            &Expr::Repeat { min, max, .. } => {
                let (s, d) = kids(memo);
                let copies = max.unwrap_or(min).max(min) as usize + 1;
                (s.saturating_mul(copies).saturating_add(2), d)
            }
            Expr::RuleRef(r) if inline[r.index()] => (size[r.index()], depth[r.index()] + 1),
            Expr::RuleRef(_) => (2, 0),
            // About six states per key character (raw, `\`, `\u` and three hex digits).
            Expr::JsonStringIn(keys) | Expr::JsonStringExcept(keys) => {
                (24 + 6 * keys.iter().map(|k| k.len()).sum::<usize>(), 0)
            }
        };
        memo[x.index()] = Some(v);
    }
    memo[e.index()].unwrap_or((0, 0))
}

/// The UTF-8 byte-range sequences of a character class (see [`utf8_sequences`]).
type Utf8Seqs = std::rc::Rc<[Vec<(u8, u8)>]>;

/// A Thompson NFA: edges are appended to flat lists while building, then [`Nfa::freeze`] groups
/// them by source state (compressed rows).
/// PERF: one allocation per list instead of three vectors per state; the buffers and the UTF-8
/// sequences of character classes are reused across the rules of a grammar.
#[derive(Default)]
struct Nfa<'a> {
    n: u32,
    eps_edges: Vec<(u32, u32)>,
    byte_edges: Vec<(u32, (u8, u8, u32))>,
    rule_edges: Vec<(u32, (RuleId, u32))>,
    /// Frozen rows: the edges of state `s` are `x[x_start[s]..x_start[s + 1]]`.
    eps_start: Vec<u32>,
    eps: Vec<u32>,
    bytes_start: Vec<u32>,
    bytes: Vec<(u8, u8, u32)>,
    rules_start: Vec<u32>,
    rules: Vec<(RuleId, u32)>,
    /// UTF-8 byte sequences of the character classes seen so far.
    classes: HashMap<ExprId, Utf8Seqs>,
    inline: &'a [bool],
    /// Inline every rule (lookahead automata), refusing recursion.
    inline_all: bool,
    /// Rules being inlined in `inline_all` mode, innermost last.
    inlining: Vec<RuleId>,
}

impl Nfa<'_> {
    fn new_state(&mut self, budget: &mut usize) -> Result<u32> {
        if *budget == 0 {
            return Err(Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES));
        }
        *budget -= 1;
        self.n += 1;
        Ok(self.n - 1)
    }

    fn len(&self) -> usize {
        self.n as usize
    }

    /// Starts a new automaton (keeps the buffers and the class cache).
    fn clear(&mut self) {
        self.n = 0;
        self.eps_edges.clear();
        self.byte_edges.clear();
        self.rule_edges.clear();
    }

    /// Groups the edges by source state (stable: each state keeps its edges' order).
    fn freeze(&mut self) {
        fn rows<T: Copy>(n: usize, edges: &[(u32, T)], start: &mut Vec<u32>, out: &mut Vec<T>) {
            start.clear();
            start.resize(n + 2, 0);
            for &(s, _) in edges {
                start[s as usize + 2] += 1;
            }
            for i in 2..start.len() {
                start[i] += start[i - 1];
            }
            out.clear();
            if let Some(&(_, fill)) = edges.first() {
                out.resize(edges.len(), fill);
            }
            for &(s, x) in edges {
                let slot = &mut start[s as usize + 1];
                out[*slot as usize] = x;
                *slot += 1;
            }
            start.pop();
        }
        let n = self.len();
        rows(n, &self.eps_edges, &mut self.eps_start, &mut self.eps);
        rows(n, &self.byte_edges, &mut self.bytes_start, &mut self.bytes);
        rows(n, &self.rule_edges, &mut self.rules_start, &mut self.rules);
    }

    fn eps_of(&self, s: u32) -> &[u32] {
        &self.eps[self.eps_start[s as usize] as usize..self.eps_start[s as usize + 1] as usize]
    }

    fn bytes_of(&self, s: u32) -> &[(u8, u8, u32)] {
        &self.bytes[self.bytes_start[s as usize] as usize..self.bytes_start[s as usize + 1] as usize]
    }

    fn rules_of(&self, s: u32) -> &[(RuleId, u32)] {
        &self.rules[self.rules_start[s as usize] as usize..self.rules_start[s as usize + 1] as usize]
    }

    /// Builds a fragment for `e`, returning (start, end). Recursion depth is bounded by the
    /// grammar's nesting limit (an IR invariant).
    /// A fragment for the character class `e` (UTF-8 byte sequences, cached per expression).
    fn build_class(&mut self, e: ExprId, ranges: &[(u32, u32)], budget: &mut usize) -> Result<(u32, u32)> {
        let start = self.new_state(budget)?;
        let end = self.new_state(budget)?;
        let seqs = if let Some(seqs) = self.classes.get(&e) {
            seqs.clone()
        } else {
            let seqs: Utf8Seqs = utf8_sequences(ranges).into();
            self.classes.insert(e, seqs.clone());
            seqs
        };
        for seq in seqs.iter() {
            let mut cur = start;
            for (i, &(lo, hi)) in seq.iter().enumerate() {
                let next = if i + 1 == seq.len() { end } else { self.new_state(budget)? };
                self.byte_edges.push((cur, (lo, hi, next)));
                cur = next;
            }
        }
        Ok((start, end))
    }

    /// PERF: sequences and inlined rules reuse their parts' start and end states instead of
    /// adding epsilon glue (fragments only ever gain edges out of their end and into their start).
    fn build(&mut self, g: &Grammar, e: ExprId, budget: &mut usize) -> Result<(u32, u32)> {
        match g.expr(e) {
            Expr::Bytes(b) => {
                let start = self.new_state(budget)?;
                let mut cur = start;
                for &byte in b.iter() {
                    let next = self.new_state(budget)?;
                    self.byte_edges.push((cur, (byte, byte, next)));
                    cur = next;
                }
                Ok((start, cur))
            }
            Expr::CharClass(ranges) => self.build_class(e, ranges, budget),
            Expr::JsonStringIn(keys) | Expr::JsonStringExcept(keys) => {
                let except = matches!(g.expr(e), Expr::JsonStringExcept(_));
                let dfa = crate::json_string::string_dfa(keys, except, *budget)?;
                let base = self.n;
                for _ in 0..dfa.states.len() {
                    self.new_state(budget)?;
                }
                let end = self.new_state(budget)?;
                for (i, (accepting, edges)) in dfa.states.iter().enumerate() {
                    let s = base + i as u32;
                    self.byte_edges.extend(edges.iter().map(|&(lo, hi, t)| (s, (lo, hi, base + t))));
                    if *accepting {
                        self.eps_edges.push((s, end));
                    }
                }
                Ok((base + dfa.start, end))
            }
            Expr::Seq(items) => {
                let Some((&first, rest)) = items.split_first() else {
                    let s = self.new_state(budget)?;
                    return Ok((s, s));
                };
                let (start, mut cur) = self.build(g, first, budget)?;
                for &x in rest {
                    let (s, t) = self.build(g, x, budget)?;
                    self.eps_edges.push((cur, s));
                    cur = t;
                }
                Ok((start, cur))
            }
            Expr::Choice(items) => {
                let start = self.new_state(budget)?;
                let end = self.new_state(budget)?;
                for &x in items.iter() {
                    let (s, t) = self.build(g, x, budget)?;
                    self.eps_edges.push((start, s));
                    self.eps_edges.push((t, end));
                }
                Ok((start, end))
            }
            Expr::RuleRef(r) if self.inline_all => {
                if self.inlining.contains(r) {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!("a lookahead assertion uses the recursive rule '{}'; lookaheads must be regular", g.rule(*r).name),
                    ));
                }
                if self.inlining.len() >= INLINE_MAX_DEPTH as usize * 8 {
                    return Err(Error::limit("rule nesting inside a lookahead assertion", INLINE_MAX_DEPTH as usize * 8));
                }
                self.inlining.push(*r);
                let fragment = self.build(g, g.rule(*r).body, budget)?;
                self.inlining.pop();
                Ok(fragment)
            }
            Expr::RuleRef(r) if self.inline[r.index()] => self.build(g, g.rule(*r).body, budget),
            Expr::RuleRef(r) => {
                let start = self.new_state(budget)?;
                let end = self.new_state(budget)?;
                self.rule_edges.push((start, (*r, end)));
                Ok((start, end))
            }
            &Expr::Repeat { expr, min, max } => {
                let start = self.new_state(budget)?;
                let mut cur = start;
                for _ in 0..min {
                    let (s, t) = self.build(g, expr, budget)?;
                    self.eps_edges.push((cur, s));
                    cur = t;
                }
                match max {
                    None => {
                        // cur -> loop: x* with the loop state as both entry and exit.
                        let (s, t) = self.build(g, expr, budget)?;
                        self.eps_edges.push((cur, s));
                        self.eps_edges.push((t, cur));
                        Ok((start, cur))
                    }
                    Some(max) => {
                        // x (x (x)?)? ... : every copy may exit to `end`, so subset states stay small.
                        let end = self.new_state(budget)?;
                        self.eps_edges.push((cur, end));
                        for _ in min..max {
                            let (s, t) = self.build(g, expr, budget)?;
                            self.eps_edges.push((cur, s));
                            self.eps_edges.push((t, end));
                            cur = t;
                        }
                        Ok((start, end))
                    }
                }
            }
        }
    }
}

/// Interned sequences of `u32` (NFA state sets), stored back to back in one arena, with an
/// open-addressing index keyed by a fast multiplicative hash.
/// PERF: replaces `HashMap<Vec<u32>, u32>` (`SipHash`, one allocation per key) in the hot loop
/// of subset construction.
struct SeqTable {
    data: Vec<u32>,
    /// `ends[i]`: end of sequence `i` in `data` (it starts at `ends[i - 1]`, or 0).
    ends: Vec<u32>,
    hashes: Vec<u64>,
    /// Sequence id + 1 per slot, 0 when free; the length is a power of two, at most half full.
    slots: Vec<u32>,
}

impl Default for SeqTable {
    fn default() -> SeqTable {
        SeqTable { data: Vec::new(), ends: Vec::new(), hashes: Vec::new(), slots: vec![0; 64] }
    }
}

impl SeqTable {
    /// Empties the table (a big index is dropped rather than cleared).
    fn reset(&mut self) {
        self.data.clear();
        self.ends.clear();
        self.hashes.clear();
        if self.slots.len() > 4096 {
            self.slots = vec![0; 64];
        } else {
            self.slots.fill(0);
        }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, id: u32) -> &[u32] {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.data[start..self.ends[i] as usize]
    }

    fn hash(seq: &[u32]) -> u64 {
        let mut h = seq.len() as u64;
        for &w in seq {
            h = (h.rotate_left(5) ^ u64::from(w)).wrapping_mul(0x517C_C1B7_2722_0A95);
        }
        h ^ (h >> 29)
    }

    /// The id of `seq`, and whether it was inserted now.
    fn intern(&mut self, seq: &[u32]) -> (u32, bool) {
        let h = Self::hash(seq);
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        loop {
            match self.slots[i] {
                0 => break,
                v => {
                    let id = v - 1;
                    if self.hashes[id as usize] == h && self.get(id) == seq {
                        return (id, false);
                    }
                }
            }
            i = (i + 1) & mask;
        }
        let id = self.ends.len() as u32;
        self.data.extend_from_slice(seq);
        self.ends.push(self.data.len() as u32);
        self.hashes.push(h);
        self.slots[i] = id + 1;
        if self.ends.len() * 2 > self.slots.len() {
            self.grow();
        }
        (id, true)
    }

    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        self.slots.clear();
        self.slots.resize(size, 0);
        let mask = size - 1;
        for (id, &h) in self.hashes.iter().enumerate() {
            let mut i = (h as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = id as u32 + 1;
        }
    }
}

/// One rule's DFA before the rules are concatenated. The edges of state `s` are the ranges
/// ending at `byte_end[s]` and `rule_end[s]` (compressed rows, states in order).
#[derive(Clone, Default)]
struct Dfa {
    finals: Vec<bool>,
    byte_end: Vec<u32>,
    bytes: Vec<ByteEdgeLocal>,
    rule_end: Vec<u32>,
    rules: Vec<(RuleId, u32)>,
}

impl Dfa {
    fn len(&self) -> usize {
        self.finals.len()
    }

    fn bytes_of(&self, s: usize) -> &[ByteEdgeLocal] {
        let start = if s == 0 { 0 } else { self.byte_end[s - 1] as usize };
        &self.bytes[start..self.byte_end[s] as usize]
    }

    fn rules_of(&self, s: usize) -> &[(RuleId, u32)] {
        let start = if s == 0 { 0 } else { self.rule_end[s - 1] as usize };
        &self.rules[start..self.rule_end[s] as usize]
    }

    /// Appends a byte edge to the state being built, merging it into the previous edge when
    /// adjacent with the same target; `first` is where the state's edges begin.
    fn push_byte(&mut self, first: usize, e: ByteEdgeLocal) {
        let mine = self.bytes.len() > first;
        match self.bytes.last_mut() {
            Some(last) if mine && last.target == e.target && u16::from(last.hi) + 1 == u16::from(e.lo) => last.hi = e.hi,
            _ => self.bytes.push(e),
        }
    }

    /// Closes the state being built: its edges are those pushed since the previous one.
    fn end_state(&mut self, is_final: bool) {
        self.finals.push(is_final);
        self.byte_end.push(self.bytes.len() as u32);
        self.rule_end.push(self.rules.len() as u32);
    }
}

#[derive(Clone, Copy)]
struct ByteEdgeLocal {
    lo: u8,
    hi: u8,
    target: u32,
}

/// Scratch state of the subset construction.
#[derive(Default)]
struct Closure {
    /// `mark[s] == stamp`: NFA state `s` was visited by the current closure.
    mark: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
    /// NFA states with a byte or rule edge, or the end state: the rest only lead elsewhere by
    /// epsilon edges, so two closures with the same important states behave the same.
    important: Vec<bool>,
}

impl Closure {
    /// The important states of the epsilon closure of `seeds`, sorted, into `out`.
    fn run(&mut self, nfa: &Nfa, seeds: &[u32], out: &mut Vec<u32>) {
        out.clear();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.mark.fill(0);
            self.stamp = 1;
        }
        let stamp = self.stamp;
        self.stack.clear();
        self.stack.extend_from_slice(seeds);
        while let Some(s) = self.stack.pop() {
            if self.mark[s as usize] == stamp {
                continue;
            }
            self.mark[s as usize] = stamp;
            if self.important[s as usize] {
                out.push(s);
            }
            for &t in nfa.eps_of(s) {
                if self.mark[t as usize] != stamp {
                    self.stack.push(t);
                }
            }
        }
        out.sort_unstable();
    }
}

/// Subset construction. DFA states are identified by the important NFA states of their closure
/// (see [`Closure::important`]), numbered in discovery order with the start state 0.
fn determinize(nfa: &Nfa, start: u32, end: u32, budget: &mut usize, sc: &mut Scratch) -> Result<Dfa> {
    let n = nfa.len();
    let mut cl = std::mem::take(&mut sc.closure);
    cl.important.clear();
    cl.important.extend(
        (0..n).map(|s| s == end as usize || !nfa.bytes_of(s as u32).is_empty() || !nfa.rules_of(s as u32).is_empty()),
    );
    // Marks left by earlier rules are older than any new stamp.
    if cl.mark.len() < n {
        cl.mark.resize(n, 0);
    }
    let mut table = std::mem::take(&mut sc.table);
    table.reset();
    let mut dfa = Dfa::default();
    let mut set = std::mem::take(&mut sc.set);
    let mut targets = std::mem::take(&mut sc.targets);
    let mut closed = std::mem::take(&mut sc.closed);
    let mut triples = std::mem::take(&mut sc.triples);
    let mut bounds = std::mem::take(&mut sc.bounds);
    let mut active = std::mem::take(&mut sc.active);
    let mut by_rule = std::mem::take(&mut sc.by_rule);
    // single[t]: the DFA state of the closure of NFA state t alone, once known.
    // PERF: most edges lead to one NFA state; this skips their closure and interning.
    let mut single = std::mem::take(&mut sc.single);
    single.clear();
    single.resize(n, u32::MAX);
    let mut step = |targets: &[u32], table: &mut SeqTable, closed: &mut Vec<u32>, budget: &mut usize| -> Result<u32> {
        if let [t] = *targets {
            if single[t as usize] != u32::MAX {
                return Ok(single[t as usize]);
            }
        }
        cl.run(nfa, targets, closed);
        let id = intern_set(table, closed, budget)?;
        if let [t] = *targets {
            single[t as usize] = id;
        }
        Ok(id)
    };
    step(&[start], &mut table, &mut closed, budget)?;
    let mut next = 0;
    while next < table.len() {
        set.clear();
        set.extend_from_slice(table.get(next as u32));
        next += 1;
        let first = dfa.bytes.len();
        // Byte edges: sweep the interval bounds, keeping the NFA edges that cover the current
        // interval in `active`; each interval's targets form one DFA state.
        triples.clear();
        for &s in &set {
            triples.extend_from_slice(nfa.bytes_of(s));
        }
        if !triples.is_empty() {
            triples.sort_unstable_by_key(|t| t.0);
            bounds.clear();
            for &(lo, hi, _) in &triples {
                bounds.push(u16::from(lo));
                bounds.push(u16::from(hi) + 1);
            }
            bounds.sort_unstable();
            bounds.dedup();
            active.clear();
            let mut i = 0;
            for w in bounds.windows(2) {
                let (lo, hi) = (w[0], w[1] - 1);
                active.retain(|&(h, _)| h >= lo);
                while i < triples.len() && u16::from(triples[i].0) <= lo {
                    active.push((u16::from(triples[i].1), triples[i].2));
                    i += 1;
                }
                if active.is_empty() {
                    continue;
                }
                targets.clear();
                targets.extend(active.iter().map(|&(_, t)| t));
                let id = step(&targets, &mut table, &mut closed, budget)?;
                dfa.push_byte(first, ByteEdgeLocal { lo: lo as u8, hi: hi as u8, target: id });
            }
        }
        // Rule edges: one per referenced rule.
        by_rule.clear();
        for &s in &set {
            by_rule.extend_from_slice(nfa.rules_of(s));
        }
        by_rule.sort_unstable();
        let mut i = 0;
        while i < by_rule.len() {
            let r = by_rule[i].0;
            targets.clear();
            while i < by_rule.len() && by_rule[i].0 == r {
                targets.push(by_rule[i].1);
                i += 1;
            }
            let id = step(&targets, &mut table, &mut closed, budget)?;
            dfa.rules.push((r, id));
        }
        dfa.end_state(set.binary_search(&end).is_ok());
    }
    *sc = Scratch { closure: cl, table, set, targets, closed, triples, bounds, active, by_rule, single };
    Ok(dfa)
}

/// Buffers of [`determinize`], kept from one rule to the next (none of their contents is
/// reused, only the allocations).
#[derive(Default)]
struct Scratch {
    closure: Closure,
    table: SeqTable,
    set: Vec<u32>,
    targets: Vec<u32>,
    closed: Vec<u32>,
    triples: Vec<(u8, u8, u32)>,
    bounds: Vec<u16>,
    active: Vec<(u16, u32)>,
    by_rule: Vec<(RuleId, u32)>,
    single: Vec<u32>,
}

/// Rule automata larger than this are not minimized (see [`minimize`]).
const MINIMIZE_MAX_STATES: usize = 2_000;

/// Appends state `s`'s signature under a partition (`class` of each state): its byte ranges with
/// their target classes (adjacent ranges with the same class merged), a separator, its rule edges
/// with their target classes. States with equal signatures are equivalent under the partition.
fn push_signature(dfa: &Dfa, s: usize, class: &[u32], out: &mut Vec<u32>) {
    push_edges(dfa, s, |t| class[t as usize], out);
}

/// Partition refinement for [`minimize`]. Blocks are contiguous ranges of `elems`.
///
/// Invariant between examinations: the members of a block that is neither queued nor touched
/// by a pending move have equal signatures (see [`Refiner::sig`]) under the current partition.
struct Refiner<'a> {
    dfa: &'a Dfa,
    block_of: Vec<u32>,
    elems: Vec<u32>,
    loc: Vec<u32>,
    first: Vec<u32>,
    past: Vec<u32>,
    /// Blocks waiting for a full examination.
    queued: Vec<bool>,
    queue: Vec<u32>,
    /// Predecessors of each state (compressed rows).
    pred_start: Vec<u32>,
    preds: Vec<u32>,
    /// `mark[s] == stamp`: `s` is touched by the current batch of moves.
    mark: Vec<u32>,
    stamp: u32,
    /// States moved to new blocks, whose predecessors are not re-examined yet.
    moved: Vec<u32>,
    sig_data: Vec<u32>,
    sig_span: Vec<(u32, u32)>,
    sig_hash: Vec<u64>,
    /// Scratch buffers of `examine` and `propagate`.
    order: Vec<u32>,
    groups: Vec<(usize, usize)>,
    buf: Vec<u32>,
    pairs: Vec<(u32, u32)>,
    touched: Vec<u32>,
}

impl Refiner<'_> {
    /// A state's signature under the current partition ([`push_signature`]), appended to
    /// `sig_data`.
    fn sig(&mut self, s: u32) -> (u32, u32) {
        let start = self.sig_data.len() as u32;
        push_signature(self.dfa, s as usize, &self.block_of, &mut self.sig_data);
        (start, self.sig_data.len() as u32)
    }

    fn sig_slice(&self, span: (u32, u32)) -> &[u32] {
        &self.sig_data[span.0 as usize..span.1 as usize]
    }

    /// Moves `states` (members of block `b`) into a new block.
    fn move_out(&mut self, b: usize, states: &[u32]) {
        let z = self.first.len();
        let old_past = self.past[b];
        for &s in states {
            let last = self.past[b] - 1;
            let pos = self.loc[s as usize];
            let other = self.elems[last as usize];
            self.elems[pos as usize] = other;
            self.loc[other as usize] = pos;
            self.elems[last as usize] = s;
            self.loc[s as usize] = last;
            self.past[b] = last;
            self.block_of[s as usize] = z as u32;
        }
        self.first.push(self.past[b]);
        self.past.push(old_past);
        self.queued.push(false);
        self.moved.extend_from_slice(states);
    }

    /// Splits block `b` by signature, given the members `touched` whose signature may differ
    /// from the others' (all members marked with the current stamp; the unmarked ones share one
    /// signature). The largest group keeps the block; the others move out.
    fn examine(&mut self, b: usize, touched: &[u32]) {
        let size = (self.past[b] - self.first[b]) as usize;
        if size <= 1 {
            return;
        }
        self.sig_data.clear();
        self.sig_span.clear();
        self.sig_hash.clear();
        for &s in touched {
            let span = self.sig(s);
            self.sig_span.push(span);
            self.sig_hash.push(SeqTable::hash(self.sig_slice(span)));
        }
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(0..touched.len() as u32);
        // By hash, then by the signature itself (only compared on equal hashes).
        order.sort_unstable_by(|&x, &y| {
            let (x, y) = (x as usize, y as usize);
            self.sig_hash[x]
                .cmp(&self.sig_hash[y])
                .then_with(|| self.sig_slice(self.sig_span[x]).cmp(self.sig_slice(self.sig_span[y])))
        });
        // Groups of equal signatures among the touched members, as ranges of `order`.
        let mut groups = std::mem::take(&mut self.groups);
        groups.clear();
        for i in 0..order.len() {
            let (x, y) = (order[i] as usize, order[i.saturating_sub(1)] as usize);
            let same = i > 0
                && self.sig_hash[x] == self.sig_hash[y]
                && self.sig_slice(self.sig_span[x]) == self.sig_slice(self.sig_span[y]);
            match groups.last_mut() {
                Some(g) if same => g.1 = i + 1,
                _ => groups.push((i, i + 1)),
            }
        }
        self.split_groups(b, touched, &order, &groups);
        self.order = order;
        self.groups = groups;
    }

    /// The second half of [`Refiner::examine`]: `groups` (ranges of `order`, indices into
    /// `touched`) have distinct signatures.
    fn split_groups(&mut self, b: usize, touched: &[u32], order: &[u32], groups: &[(usize, usize)]) {
        let size = (self.past[b] - self.first[b]) as usize;
        // The untouched members form one more group; a touched group with their signature
        // joins them.
        let untouched = size - touched.len();
        let mut rest_group: Option<usize> = None;
        if untouched > 0 {
            let range = self.first[b]..self.past[b];
            let rep = range.map(|i| self.elems[i as usize]).find(|&s| self.mark[s as usize] != self.stamp);
            if let Some(rep) = rep {
                let span = self.sig(rep);
                rest_group = groups.iter().position(|&(a, _)| {
                    self.sig_slice(self.sig_span[order[a] as usize]) == self.sig_slice(span)
                });
            }
        }
        let rest_size = untouched + rest_group.map_or(0, |g| groups[g].1 - groups[g].0);
        let n_groups = groups.len() - usize::from(rest_group.is_some()) + usize::from(rest_size > 0);
        if n_groups <= 1 {
            return;
        }
        // The keeper: the largest group (`None`: the untouched one).
        let mut keeper: Option<usize> = None;
        let mut best = rest_size;
        for (g, &(a, z)) in groups.iter().enumerate() {
            if Some(g) != rest_group && z - a > best {
                best = z - a;
                keeper = Some(g);
            }
        }
        let mut buf = std::mem::take(&mut self.buf);
        for (g, &(a, z)) in groups.iter().enumerate() {
            if Some(g) == keeper || Some(g) == rest_group {
                continue;
            }
            buf.clear();
            buf.extend(order[a..z].iter().map(|&i| touched[i as usize]));
            self.move_out(b, &buf);
        }
        if keeper.is_some() && rest_size > 0 {
            buf.clear();
            let stamp = self.stamp;
            buf.extend(
                (self.first[b]..self.past[b]).map(|i| self.elems[i as usize]).filter(|&s| self.mark[s as usize] != stamp),
            );
            if let Some(g) = rest_group {
                let (a, z) = groups[g];
                buf.extend(order[a..z].iter().map(|&i| touched[i as usize]));
            }
            self.move_out(b, &buf);
        }
        self.buf = buf;
    }

    /// Re-examines the blocks of the predecessors of the moved states.
    fn propagate(&mut self) {
        let moved = std::mem::take(&mut self.moved);
        self.stamp += 1;
        let mut pairs = std::mem::take(&mut self.pairs);
        pairs.clear();
        for &t in &moved {
            for i in self.pred_start[t as usize]..self.pred_start[t as usize + 1] {
                let p = self.preds[i as usize];
                let b = self.block_of[p as usize];
                if self.mark[p as usize] != self.stamp && !self.queued[b as usize] {
                    self.mark[p as usize] = self.stamp;
                    pairs.push((b, p));
                }
            }
        }
        pairs.sort_unstable();
        let mut i = 0;
        let mut touched = std::mem::take(&mut self.touched);
        while i < pairs.len() {
            let b = pairs[i].0;
            touched.clear();
            while i < pairs.len() && pairs[i].0 == b {
                touched.push(pairs[i].1);
                i += 1;
            }
            self.examine(b as usize, &touched);
        }
        self.touched = touched;
        self.pairs = pairs;
        // Keep the allocation of the batch just processed for the next one.
        let mut moved = moved;
        moved.clear();
        moved.extend_from_slice(&self.moved);
        self.moved = moved;
    }

    /// Every block's members have the same signature.
    fn is_stable(&mut self) -> bool {
        for b in 0..self.first.len() {
            self.sig_data.clear();
            let rep = self.elems[self.first[b] as usize];
            let rs = self.sig(rep);
            for i in self.first[b] + 1..self.past[b] {
                let s = self.elems[i as usize];
                let span = self.sig(s);
                if self.sig_slice(span) != self.sig_slice(rs) {
                    return false;
                }
            }
        }
        true
    }
}

impl<'a> Refiner<'a> {
    /// Predecessor rows, and the initial blocks (non-final states, final states) all queued.
    fn new(dfa: &'a Dfa) -> Refiner<'a> {
        let n = dfa.len();
        let mut pred_start = vec![0u32; n + 2];
        let targets = |s: usize| dfa.bytes_of(s).iter().map(|e| e.target).chain(dfa.rules_of(s).iter().map(|&(_, t)| t));
        for s in 0..n {
            for t in targets(s) {
                pred_start[t as usize + 2] += 1;
            }
        }
        for i in 2..pred_start.len() {
            pred_start[i] += pred_start[i - 1];
        }
        let mut preds = vec![0u32; pred_start[n + 1] as usize];
        for s in 0..n {
            for t in targets(s) {
                let slot = &mut pred_start[t as usize + 1];
                preds[*slot as usize] = s as u32;
                *slot += 1;
            }
        }
        pred_start.pop();
        // Initial blocks: non-final states, then final ones.
        let mut elems: Vec<u32> = (0..n as u32).filter(|&s| !dfa.finals[s as usize]).collect();
        let n_nonfinal = elems.len() as u32;
        elems.extend((0..n as u32).filter(|&s| dfa.finals[s as usize]));
        let mut loc = vec![0u32; n];
        for (i, &s) in elems.iter().enumerate() {
            loc[s as usize] = i as u32;
        }
        let (mut first, mut past) = (Vec::new(), Vec::new());
        let mut block_of = vec![0u32; n];
        for (lo, hi) in [(0, n_nonfinal), (n_nonfinal, n as u32)] {
            if lo < hi {
                for &s in &elems[lo as usize..hi as usize] {
                    block_of[s as usize] = first.len() as u32;
                }
                first.push(lo);
                past.push(hi);
            }
        }
        let n_initial = first.len();
        Refiner {
            dfa,
            block_of,
            elems,
            loc,
            first,
            past,
            queued: vec![true; n_initial],
            queue: (0..n_initial as u32).collect(),
            pred_start,
            preds,
            mark: vec![0; n],
            stamp: 0,
            moved: Vec::new(),
            sig_data: Vec::new(),
            sig_span: Vec::new(),
            sig_hash: Vec::new(),
            order: Vec::new(),
            groups: Vec::new(),
            buf: Vec::new(),
            pairs: Vec::new(),
            touched: Vec::new(),
        }
    }
}

/// Marks, in a signature of [`scc_partition`], an edge back into the class being decided (a
/// self-loop).
const SELF: u32 = u32::MAX - 1;

/// Strongly connected components above this size make [`minimize`] fall back to refining the
/// whole automaton (Moore's rounds inside a component take up to one round per state).
const SCC_MOORE_MAX_STATES: usize = 128;

/// At most this many looping classes are tried per state as an unrolled self-loop (see
/// [`scc_partition`]).
const MAX_LOOP_CANDIDATES: usize = 8;

/// Buffers of [`scc_partition`], kept from one rule to the next.
#[derive(Default)]
struct SccScratch {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<u32>,
    call: Vec<(u32, u32)>,
    /// Components back to back, each ending at `comp_end`, sinks first.
    comps: Vec<u32>,
    comp_end: Vec<u32>,
    class: Vec<u32>,
    /// The number of cyclic components (of more than one state) met by the last partition; at
    /// least 2 also when some state's loop candidates were cut short.
    cyclic: usize,
    /// Class of each interned signature.
    class_of_sig: Vec<u32>,
    /// Per class: whether its signature has a `SELF` edge, and then whether it accepts (only
    /// such classes can take in an unrolled self-loop).
    class_loops: Vec<Option<bool>>,
    table: SeqTable,
    local_table: SeqTable,
    local: Vec<u32>,
    next_local: Vec<u32>,
    sig: Vec<u32>,
    targets: Vec<u32>,
}

/// Appends the signature of state `s` to `out`: whether it accepts, its byte ranges with the
/// token `token` gives each target (adjacent ranges with one token merged), a separator, and its
/// rule edges with their targets' tokens.
fn push_tokens(dfa: &Dfa, s: usize, token: impl Fn(u32) -> u32, out: &mut Vec<u32>) {
    out.push(u32::from(dfa.finals[s]));
    push_edges(dfa, s, token, out);
}

/// [`push_tokens`] without the finality: the byte ranges with their targets' tokens (adjacent
/// ranges with one token merged), a separator, the rule edges with their targets' tokens.
fn push_edges(dfa: &Dfa, s: usize, token: impl Fn(u32) -> u32, out: &mut Vec<u32>) {
    let mut last: Option<(u8, u8, u32)> = None;
    for e in dfa.bytes_of(s) {
        let c = token(e.target);
        match &mut last {
            Some(l) if l.2 == c && u16::from(l.1) + 1 == u16::from(e.lo) => l.1 = e.hi,
            _ => {
                if let Some((lo, hi, c)) = last {
                    out.extend_from_slice(&[u32::from(lo) | u32::from(hi) << 8, c]);
                }
                last = Some((e.lo, e.hi, c));
            }
        }
    }
    if let Some((lo, hi, c)) = last {
        out.extend_from_slice(&[u32::from(lo) | u32::from(hi) << 8, c]);
    }
    out.push(u32::MAX);
    for &(r, t) in dfa.rules_of(s) {
        out.extend_from_slice(&[r.0, token(t)]);
    }
}

/// The strongly connected components of `dfa` (byte and rule edges) into `sc.comps`, sinks
/// first (Tarjan's algorithm, iterative).
fn sccs(dfa: &Dfa, sc: &mut SccScratch) {
    let n = dfa.len();
    let SccScratch { index, low, on_stack, stack, call, comps, comp_end, .. } = sc;
    index.clear();
    index.resize(n, u32::MAX);
    low.clear();
    low.resize(n, 0);
    on_stack.clear();
    on_stack.resize(n, false);
    comps.clear();
    comp_end.clear();
    let succ = |v: usize, i: usize| -> Option<u32> {
        let b = dfa.bytes_of(v);
        match b.get(i) {
            Some(e) => Some(e.target),
            None => dfa.rules_of(v).get(i - b.len()).map(|&(_, t)| t),
        }
    };
    let mut next = 0u32;
    for root in 0..n as u32 {
        if index[root as usize] != u32::MAX {
            continue;
        }
        index[root as usize] = next;
        low[root as usize] = next;
        next += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        call.push((root, 0));
        while let Some(&mut (v, ref mut i)) = call.last_mut() {
            let (v, at) = (v as usize, *i as usize);
            if let Some(w) = succ(v, at) {
                *i += 1;
                let w = w as usize;
                if index[w] == u32::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    call.push((w as u32, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            call.pop();
            if let Some(&(u, _)) = call.last() {
                low[u as usize] = low[u as usize].min(low[v]);
            }
            if low[v] == index[v] {
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w as usize] = false;
                    comps.push(w);
                    if w as usize == v {
                        break;
                    }
                }
                comp_end.push(comps.len() as u32);
            }
        }
    }
}

/// A partition of `dfa`'s states into equivalent ones, into `sc.class`; returns the number of
/// classes, or `None` when a strongly connected component is too large (see
/// [`SCC_MOORE_MAX_STATES`]).
///
/// Components are decided sinks first, so every edge that leaves a component leads to decided
/// classes. A single state (with or without self-loops) joins the class of equal signature, its
/// self-loops written [`SELF`]; it also joins a class `C` it has edges into when its signature
/// with those edges written [`SELF`] is `C`'s own (a self-loop unrolled by the subset
/// construction). A larger component is refined by Moore's rounds inside it, its exits fixed.
/// Every merge is of equivalent states. The partition is the coarsest one except that equivalent
/// states in two different cyclic components stay apart (twins of a loop); `sc.cyclic` counts
/// those components.
/// PERF: most rule automata are chains and trees (keys, key exclusions) with self-loops
/// (whitespace): one pass decides them, where Moore's rounds took one pass per link of the
/// longest chain and the worklist a sort per split.
fn scc_partition(dfa: &Dfa, sc: &mut SccScratch) -> Option<usize> {
    sccs(dfa, sc);
    let n = dfa.len();
    let mut comps = std::mem::take(&mut sc.comps);
    let comp_end = std::mem::take(&mut sc.comp_end);
    let mut sizes = comp_end.iter().scan(0u32, |start, &end| Some(end - std::mem::replace(start, end)));
    if sizes.any(|len| len as usize > SCC_MOORE_MAX_STATES) {
        sc.comps = comps;
        sc.comp_end = comp_end;
        return None;
    }
    let SccScratch { class, class_of_sig, class_loops, table, local_table, local, next_local, sig, targets, .. } = sc;
    class.clear();
    class.resize(n, u32::MAX);
    class_of_sig.clear();
    class_loops.clear();
    table.reset();
    let mut n_classes = 0u32;
    let mut sc_cyclic = 0usize;
    let mut start = 0usize;
    for &end in &comp_end {
        let comp = &mut comps[start..end as usize];
        start = end as usize;
        if let [s] = *comp {
            let s = s as usize;
            sig.clear();
            push_tokens(dfa, s, |t| if t as usize == s { SELF } else { class[t as usize] }, sig);
            let (id, new) = table.intern(sig);
            if !new && class_of_sig[id as usize] != u32::MAX {
                class[s] = class_of_sig[id as usize];
                continue;
            }
            if new {
                class_of_sig.push(u32::MAX);
            }
            // The looping classes of the same finality `s` has edges into: candidates for an
            // unrolled self-loop.
            targets.clear();
            let others = dfa.bytes_of(s).iter().map(|e| e.target).chain(dfa.rules_of(s).iter().map(|&(_, t)| t));
            let looped = others.clone().any(|t| t as usize == s);
            let fin = dfa.finals[s];
            let looping = |c: u32| c != u32::MAX && class_loops[c as usize] == Some(fin);
            targets.extend(others.map(|t| class[t as usize]).filter(|&c| looping(c)));
            targets.sort_unstable();
            targets.dedup();
            // Bounded: a state with many looping targets tries a few, and the partition may then
            // miss a merge, which the worklist finishes (`sc.cyclic` is raised).
            if targets.len() > MAX_LOOP_CANDIDATES {
                targets.truncate(MAX_LOOP_CANDIDATES);
                sc_cyclic = sc_cyclic.max(2);
            }
            let mut joined = None;
            for &c in targets.iter() {
                sig.clear();
                let token = |x: u32| if x as usize == s || class[x as usize] == c { SELF } else { class[x as usize] };
                push_tokens(dfa, s, token, sig);
                let (id2, new2) = table.intern(sig);
                if new2 {
                    class_of_sig.push(u32::MAX);
                } else if class_of_sig[id2 as usize] == c {
                    joined = Some(c);
                    break;
                }
            }
            let c = joined.unwrap_or_else(|| {
                class_loops.push(looped.then_some(fin));
                n_classes += 1;
                n_classes - 1
            });
            class[s] = c;
            class_of_sig[id as usize] = c;
            continue;
        }
        // Moore's rounds inside the component: members are numbered by their position in it.
        sc_cyclic = sc_cyclic.saturating_add(1);
        comp.sort_unstable();
        let pos = |t: u32| comp.binary_search(&t).ok();
        local.clear();
        local.extend(comp.iter().map(|&s| u32::from(dfa.finals[s as usize])));
        let mut count = 0usize;
        loop {
            local_table.reset();
            next_local.clear();
            for (k, &s) in comp.iter().enumerate() {
                sig.clear();
                sig.push(local[k]);
                push_tokens(dfa, s as usize, |t| pos(t).map_or(class[t as usize], |p| n as u32 + local[p]), sig);
                next_local.push(local_table.intern(sig).0);
            }
            std::mem::swap(local, next_local);
            let distinct = local_table.len();
            if distinct == count {
                break;
            }
            count = distinct;
        }
        for (k, &s) in comp.iter().enumerate() {
            class[s as usize] = n_classes + local[k];
        }
        // Register each class's signature (edges into itself written `SELF`), so that a state
        // upstream equivalent to it joins it; a component of one class equal to a decided class
        // (a self-loop or loop decided before) joins that class instead.
        let mut joined = None;
        class_loops.resize(n_classes as usize + count, None);
        next_local.clear();
        next_local.resize(count, 0);
        for k in 0..comp.len() {
            let (s, c) = (comp[k] as usize, class[comp[k] as usize]);
            if std::mem::replace(&mut next_local[local[k] as usize], 1) == 1 {
                continue;
            }
            sig.clear();
            push_tokens(dfa, s, |t| if class[t as usize] == c { SELF } else { class[t as usize] }, sig);
            if sig.contains(&SELF) {
                class_loops[c as usize] = Some(dfa.finals[s]);
            }
            let (id, new) = table.intern(sig);
            if new {
                class_of_sig.push(c);
            } else if class_of_sig[id as usize] == u32::MAX {
                class_of_sig[id as usize] = c;
            } else if count == 1 {
                joined = Some(class_of_sig[id as usize]);
            }
        }
        match joined {
            Some(c) => {
                comp.iter().for_each(|&s| class[s as usize] = c);
                class_loops.truncate(n_classes as usize);
            }
            None => n_classes += count as u32,
        }
    }
    sc.comps = comps;
    sc.comp_end = comp_end;
    sc.cyclic = sc_cyclic;
    Some(n_classes as usize)
}

/// Merges the states with the same finality and the same edges (byte ranges, rule references)
/// up to equivalence: component by component ([`scc_partition`]), or, when a cyclic component is
/// large, by partition refinement of the whole automaton with a worklist: after a full first
/// pass, only the predecessors of states that changed block are examined again, and a splitting
/// block keeps its largest part (the others move), so states move O(log n) times each
/// (Hopcroft's argument). A missing edge differs from an edge to a dead state (dead states are
/// pruned later, over all rules). Keeps state 0 as the start.
fn minimize(dfa: Dfa, sc: &mut SccScratch) -> Dfa {
    let n = dfa.finals.len();
    if n > MINIMIZE_MAX_STATES || n <= 1 {
        return dfa;
    }
    match scc_partition(&dfa, sc) {
        // Loops may have twins (`cyclic >= 2`): the worklist finishes on the (smaller) quotient.
        Some(k) if k < n => {
            let q = quotient(&dfa, &sc.class, k);
            if sc.cyclic < 2 { q } else { refined(q) }
        }
        Some(_) if sc.cyclic < 2 => dfa,
        _ => refined(dfa),
    }
}

/// `dfa` merged by worklist refinement (kept as it is when already minimal: the quotient would
/// renumber every state to itself).
fn refined(dfa: Dfa) -> Dfa {
    let (class, n_classes) = refine_partition(&dfa);
    if n_classes < dfa.len() { quotient(&dfa, &class, n_classes) } else { dfa }
}

/// The coarsest partition of `dfa`'s states by worklist refinement: the block of each state,
/// and the number of blocks.
fn refine_partition(dfa: &Dfa) -> (Vec<u32>, usize) {
    let mut r = Refiner::new(dfa);
    let mut all: Vec<u32> = Vec::new();
    loop {
        if !r.moved.is_empty() {
            r.propagate();
        } else if let Some(b) = r.queue.pop() {
            let b = b as usize;
            r.queued[b] = false;
            r.stamp += 1;
            all.clear();
            all.extend_from_slice(&r.elems[r.first[b] as usize..r.past[b] as usize]);
            for &s in &all {
                r.mark[s as usize] = r.stamp;
            }
            r.examine(b, &all);
        } else {
            break;
        }
    }
    // The refinement only splits blocks whose members differ; it is also complete (tested
    // against Moore's algorithm in `minimize_matches_moore`).
    debug_assert!(r.is_stable(), "minimize: unstable partition");
    (std::mem::take(&mut r.block_of), r.first.len())
}

/// The quotient of `dfa` by a partition (`class` of each state, `n_classes` classes) that its
/// edges respect. Keeps state 0 as the start.
fn quotient(dfa: &Dfa, class: &[u32], n_classes: usize) -> Dfa {
    let n = dfa.len();
    // Renumber so the start state's class is 0, in first-seen order.
    let mut renum: Vec<u32> = vec![u32::MAX; n_classes];
    let mut order: Vec<usize> = Vec::with_capacity(n_classes);
    for s in 0..n {
        let c = class[s] as usize;
        if renum[c] == u32::MAX {
            renum[c] = order.len() as u32;
            order.push(s);
        }
    }
    let mut out = Dfa::default();
    for &s in &order {
        let first = out.bytes.len();
        for e in dfa.bytes_of(s) {
            let t = renum[class[e.target as usize] as usize];
            out.push_byte(first, ByteEdgeLocal { lo: e.lo, hi: e.hi, target: t });
        }
        out.rules.extend(dfa.rules_of(s).iter().map(|&(r, t)| (r, renum[class[t as usize] as usize])));
        out.end_state(dfa.finals[s]);
    }
    out
}

/// The DFA state of the NFA state set `set`, counting a new one against `budget`.
fn intern_set(table: &mut SeqTable, set: &[u32], budget: &mut usize) -> Result<u32> {
    let (id, new) = table.intern(set);
    if new {
        if *budget == 0 {
            return Err(Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES));
        }
        *budget -= 1;
    }
    Ok(id)
}

fn assemble(grammar: &Grammar, dfas: Vec<Dfa>, la_dfas: Vec<(usize, Dfa)>) -> Automata {
    let mut a = Automata {
        states: Vec::new(),
        byte_edges: Vec::new(),
        rule_edges: Vec::new(),
        rule_start: Vec::new(),
        lookahead_start: vec![None; dfas.len()],
        la: Mutex::new(LaTable::new()),
        rule_names: grammar.rules().iter().map(|r| r.name.clone()).collect(),
        root: grammar.root(),
    };
    let all = dfas.into_iter().enumerate().map(|(r, d)| (r, d, false)).chain(la_dfas.into_iter().map(|(r, d)| (r, d, true)));
    for (r, dfa, is_lookahead) in all {
        let base = a.states.len() as u32;
        if is_lookahead {
            a.lookahead_start[r] = Some(StateId(base));
        } else {
            a.rule_start.push(StateId(base));
        }
        for i in 0..dfa.len() {
            let b0 = a.byte_edges.len() as u32;
            a.byte_edges.extend(
                dfa.bytes_of(i).iter().map(|e| ByteEdge { lo: e.lo, hi: e.hi, target: StateId(base + e.target) }),
            );
            let r0 = a.rule_edges.len() as u32;
            a.rule_edges.extend(dfa.rules_of(i).iter().map(|&(rr, t)| (rr, StateId(base + t))));
            a.states.push(State {
                rule: RuleId(r as u32),
                is_final: dfa.finals[i],
                byte_edges: (b0, a.byte_edges.len() as u32),
                rule_edges: (r0, a.rule_edges.len() as u32),
            });
        }
    }
    a
}

impl Automata {
    /// Removes unproductive rules and dead states (see module invariants).
    fn prune(&mut self) -> Result<()> {
        let n_rules = self.rule_start.len();
        let n = self.states.len();
        // live[s]: s reaches a final state of its rule using bytes and productive rules.
        let mut productive = vec![false; n_rules];
        let mut live = vec![false; n];
        loop {
            let mut changed = false;
            for s in (0..n).rev() {
                if live[s] {
                    continue;
                }
                let sid = StateId(s as u32);
                let ok = self.states[s].is_final
                    || self.byte_edges(sid).iter().any(|e| live[e.target.0 as usize])
                    || self.rule_edges(sid).iter().any(|&(r, t)| productive[r.index()] && live[t.0 as usize]);
                if ok {
                    live[s] = true;
                    changed = true;
                }
            }
            for r in 0..n_rules {
                if !productive[r] && live[self.rule_start[r].0 as usize] {
                    productive[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if !productive[self.root.index()] {
            return Err(Error::new(
                ErrorKind::InvalidGrammar,
                format!("the root rule '{}' matches no string", self.rule_name(self.root)),
            ));
        }
        // Drop edges into dead states or unproductive rules.
        let mut byte_edges = Vec::with_capacity(self.byte_edges.len());
        let mut rule_edges = Vec::with_capacity(self.rule_edges.len());
        for s in 0..n {
            let sid = StateId(s as u32);
            let b0 = byte_edges.len() as u32;
            byte_edges.extend(self.byte_edges(sid).iter().filter(|e| live[e.target.0 as usize]).copied());
            let r0 = rule_edges.len() as u32;
            rule_edges.extend(
                self.rule_edges(sid).iter().filter(|&&(r, t)| productive[r.index()] && live[t.0 as usize]).copied(),
            );
            self.states[s].byte_edges = (b0, byte_edges.len() as u32);
            self.states[s].rule_edges = (r0, rule_edges.len() as u32);
        }
        self.byte_edges = byte_edges;
        self.rule_edges = rule_edges;
        Ok(())
    }
}

/// Splits Unicode scalar ranges (surrogates excluded) into sequences of byte ranges whose
/// concatenations are exactly the UTF-8 encodings of the codepoints in the ranges.
pub fn utf8_sequences(ranges: &[(u32, u32)]) -> Vec<Vec<(u8, u8)>> {
    let mut out = Vec::new();
    let mut work: Vec<(u32, u32)> = Vec::new();
    for &(lo, hi) in ranges {
        // Remove the surrogate block.
        if lo < 0xD800 {
            work.push((lo, hi.min(0xD7FF)));
        }
        if hi > 0xDFFF {
            work.push((lo.max(0xE000), hi));
        }
    }
    while let Some((lo, hi)) = work.pop() {
        if lo > hi {
            continue;
        }
        // Split at encoding-length boundaries.
        let mut split = false;
        for &b in &[0x7F, 0x7FF, 0xFFFF] {
            if lo <= b && hi > b {
                work.push((lo, b));
                work.push((b + 1, hi));
                split = true;
                break;
            }
        }
        if split {
            continue;
        }
        if hi <= 0x7F {
            out.push(vec![(lo as u8, hi as u8)]);
            continue;
        }
        // Split so that all but a prefix of continuation bytes span their full range.
        let n = if hi <= 0x7FF { 2 } else if hi <= 0xFFFF { 3 } else { 4 };
        let mut done = false;
        for i in 1..n {
            let m = (1u32 << (6 * i)) - 1;
            if lo & !m != hi & !m {
                if lo & m != 0 {
                    work.push((lo, lo | m));
                    work.push(((lo | m) + 1, hi));
                    done = true;
                    break;
                }
                if hi & m != m {
                    work.push((lo, (hi & !m) - 1));
                    work.push((hi & !m, hi));
                    done = true;
                    break;
                }
            }
        }
        if done {
            continue;
        }
        let a = encode_utf8(lo);
        let b = encode_utf8(hi);
        out.push(a.iter().zip(b.iter()).map(|(&x, &y)| (x, y)).collect());
    }
    out.sort();
    out
}

fn encode_utf8(c: u32) -> Vec<u8> {
    char::from_u32(c).map(|ch| ch.to_string().into_bytes()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buffers of [`moore_partition`].
    #[derive(Default)]
    struct MooreScratch {
        class: Vec<u32>,
        next: Vec<u32>,
        sig: Vec<u32>,
        span: Vec<(u32, u32)>,
        slots: Vec<u32>,
    }

    /// The coarsest partition of `dfa`'s states into `sc.class` (class ids in first-seen state
    /// order), by rounds: a state's signature is its class, its byte ranges with their target
    /// classes (adjacent ranges with the same class merged) and its rule edges with their target
    /// classes. A round only splits classes (the old class is part of the signature), so an equal
    /// class count means the partition is stable. Returns the number of classes; `None` past
    /// `max_rounds`. The reference for [`minimize`] and [`refine_partition`].
    fn moore_partition(dfa: &Dfa, sc: &mut MooreScratch, max_rounds: usize) -> Option<usize> {
        let n = dfa.len();
        let MooreScratch { class, next, sig, span, slots } = sc;
        class.clear();
        class.extend(dfa.finals.iter().map(|&f| u32::from(f)));
        let mut count = 0usize;
        let size = (2 * n).next_power_of_two();
        for _ in 0..max_rounds {
            sig.clear();
            span.clear();
            for s in 0..n {
                let start = sig.len() as u32;
                sig.push(class[s]);
                push_signature(dfa, s, class, sig);
                span.push((start, sig.len() as u32));
            }
            // Open addressing over representatives (state + 1; 0 is empty).
            slots.clear();
            slots.resize(size, 0);
            next.clear();
            let mut ids = 0u32;
            let of = |s: usize| &sig[span[s].0 as usize..span[s].1 as usize];
            for s in 0..n {
                let mut i = (SeqTable::hash(of(s)) as usize) & (size - 1);
                let id = loop {
                    match slots[i] {
                        0 => {
                            slots[i] = s as u32 + 1;
                            ids += 1;
                            break ids - 1;
                        }
                        rep if of(rep as usize - 1) == of(s) => break next[rep as usize - 1],
                        _ => i = (i + 1) & (size - 1),
                    }
                };
                next.push(id);
            }
            std::mem::swap(class, next);
            if ids as usize == count {
                return Some(count);
            }
            count = ids as usize;
        }
        None
    }


    /// A state's class, byte ranges and rule edges with the classes of their targets.
    type MooreSig = (u32, Vec<(u8, u8, u32)>, Vec<(RuleId, u32)>);

    /// Moore's refinement, the reference for [`minimize`]: classes of states.
    fn moore_classes(dfa: &Dfa) -> Vec<u32> {
        let n = dfa.len();
        let mut class: Vec<u32> = dfa.finals.iter().map(|&f| u32::from(f)).collect();
        let mut count = 0;
        loop {
            let mut ids: HashMap<MooreSig, u32> = HashMap::new();
            let mut next = vec![0; n];
            for s in 0..n {
                let mut bytes: Vec<(u8, u8, u32)> = Vec::new();
                for e in dfa.bytes_of(s) {
                    let c = class[e.target as usize];
                    match bytes.last_mut() {
                        Some(l) if l.2 == c && u16::from(l.1) + 1 == u16::from(e.lo) => l.1 = e.hi,
                        _ => bytes.push((e.lo, e.hi, c)),
                    }
                }
                let rules = dfa.rules_of(s).iter().map(|&(r, t)| (r, class[t as usize])).collect();
                let len = ids.len() as u32;
                next[s] = *ids.entry((class[s], bytes, rules)).or_insert(len);
            }
            class = next;
            if ids.len() == count {
                return class;
            }
            count = ids.len();
        }
    }

    /// Random DFAs over a few bytes and rules; with `twin`, every state has an equivalent copy.
    fn random_dfa(next: &mut impl FnMut(usize) -> usize, twin: bool) -> Dfa {
        // Per state: finality, byte edges, rule edges.
        type Shape = (bool, Vec<(u8, u8, usize)>, Vec<(u32, usize)>);
        let k = 1 + next(12);
        let n = if twin { 2 * k } else { k };
        let mut dfa = Dfa::default();
        let mut shapes: Vec<Shape> = Vec::new();
        for _ in 0..k {
            let mut bytes = Vec::new();
            let mut lo = 0u8;
            while lo < 8 {
                let hi = lo + next(3) as u8;
                if next(3) > 0 {
                    bytes.push((lo, hi, next(k)));
                }
                lo = hi + 1;
            }
            let mut rules = Vec::new();
            for r in 0..3 {
                if next(4) == 0 {
                    rules.push((r, next(k)));
                }
            }
            shapes.push((next(3) == 0, bytes, rules));
        }
        for s in 0..n {
            let (fin, bytes, rules) = &shapes[s % k];
            let first = dfa.bytes.len();
            for &(lo, hi, t) in bytes {
                let t = if twin && next(2) == 0 { t + k } else { t };
                dfa.push_byte(first, ByteEdgeLocal { lo, hi, target: t as u32 });
            }
            dfa.rules.extend(rules.iter().map(|&(r, t)| (RuleId(r), (if twin && next(2) == 0 { t + k } else { t }) as u32)));
            dfa.end_state(*fin);
        }
        dfa
    }

    #[test]
    fn minimize_matches_moore() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for i in 0..3000 {
            let dfa = random_dfa(&mut next, i % 2 == 0);
            let classes = moore_classes(&dfa);
            let want = classes.iter().copied().collect::<std::collections::HashSet<_>>().len();
            let mut sc = MooreScratch::default();
            let moore = moore_partition(&dfa, &mut sc, usize::MAX).expect("rounds are unbounded here");
            let (class, refined) = refine_partition(&dfa);
            assert_eq!((moore, refined), (want, want), "case {i}");
            let flat = |d: &Dfa| {
                let bytes: Vec<(u8, u8, u32)> = d.bytes.iter().map(|e| (e.lo, e.hi, e.target)).collect();
                (d.finals.clone(), d.byte_end.clone(), bytes, d.rule_end.clone(), d.rules.clone())
            };
            assert_eq!(flat(&quotient(&dfa, &class, refined)), flat(&quotient(&dfa, &sc.class, moore)), "case {i}");
            // The component-wise partition: only equivalent states share a class, and every
            // class is found when at most one component is cyclic (no twin loops).
            let mut ss = SccScratch::default();
            let Some(k) = scc_partition(&dfa, &mut ss) else { panic!("case {i}: components are small here") };
            let mut used = vec![false; k];
            for a in 0..dfa.len() {
                used[ss.class[a] as usize] = true;
                for b in 0..dfa.len() {
                    if ss.class[a] == ss.class[b] {
                        assert_eq!(classes[a], classes[b], "case {i}: states {a} and {b} merged");
                    }
                }
            }
            assert!(used.iter().all(|&u| u), "case {i}: class ids are dense");
            if ss.cyclic < 2 {
                assert_eq!(k, want, "case {i}");
            }
            let out = minimize(dfa.clone(), &mut ss);
            assert_eq!(out.len(), want, "case {i}");
            assert!(bisimilar(&dfa, &out), "case {i}");
        }
    }

    /// Whether two DFAs (rule edges included) accept the same language from their starts.
    fn bisimilar(a: &Dfa, b: &Dfa) -> bool {
        let step = |d: &Dfa, s: usize, x: u8| d.bytes_of(s).iter().find(|e| e.lo <= x && x <= e.hi).map(|e| e.target);
        let mut seen = std::collections::HashSet::from([(0u32, 0u32)]);
        let mut work = vec![(0u32, 0u32)];
        while let Some((p, q)) = work.pop() {
            let (p, q) = (p as usize, q as usize);
            if a.finals[p] != b.finals[q] || a.rules_of(p).len() != b.rules_of(q).len() {
                return false;
            }
            let mut next: Vec<(u32, u32)> = Vec::new();
            for (&(r, t), &(r2, t2)) in a.rules_of(p).iter().zip(b.rules_of(q)) {
                if r != r2 {
                    return false;
                }
                next.push((t, t2));
            }
            for x in 0..=255u8 {
                match (step(a, p, x), step(b, q, x)) {
                    (Some(t), Some(t2)) => next.push((t, t2)),
                    (None, None) => {}
                    _ => return false,
                }
            }
            for pair in next {
                if seen.insert(pair) {
                    work.push(pair);
                }
            }
        }
        true
    }

    #[test]
    fn loop_joins_an_equal_self_loop() {
        // 0 -a-> 1 (self-loop on a); 0 -b-> 2 <-a-> 3: states 1, 2 and 3 all accept a*, and the
        // component {2, 3} is decided after state 1.
        let mut dfa = Dfa::default();
        let states =
            [(false, vec![(b'a', 1u32), (b'b', 2)]), (true, vec![(b'a', 1)]), (true, vec![(b'a', 3)]), (true, vec![(b'a', 2)])];
        for (fin, edges) in states {
            let first = dfa.bytes.len();
            for (b, t) in edges {
                dfa.push_byte(first, ByteEdgeLocal { lo: b, hi: b, target: t });
            }
            dfa.end_state(fin);
        }
        let mut ss = SccScratch::default();
        assert_eq!(scc_partition(&dfa, &mut ss), Some(2));
    }

    fn matches(seqs: &[Vec<(u8, u8)>], bytes: &[u8]) -> bool {
        seqs.iter().any(|s| s.len() == bytes.len() && s.iter().zip(bytes).all(|(&(lo, hi), &b)| lo <= b && b <= hi))
    }

    #[test]
    fn utf8_sequences_are_exact() {
        let ranges = [(0x41, 0x5A), (0x7F, 0x800), (0xD000, 0xE100), (0xFFF0, 0x10_0010)];
        let seqs = utf8_sequences(&ranges);
        for c in (0..0x11_0000u32).step_by(7).chain([0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10_0010]) {
            let Some(ch) = char::from_u32(c) else { continue };
            let inside = ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
            assert_eq!(matches(&seqs, ch.to_string().as_bytes()), inside, "U+{c:04X}");
        }
        // Surrogate encodings (ED A0..BF xx) are never produced.
        assert!(!matches(&seqs, &[0xED, 0xA0, 0x80]));
    }
}
