//! Token masks: which tokens keep the input a valid prefix of the grammar.
//!
//! The chart's last row holds *kernel* items (those not created by prediction; for row 0 the root
//! start item). Every parse continuation starts at some kernel item `(state, origin)` and either
//! stays inside that item's rule for the whole token, or ends the rule after `k` bytes and then
//! continues in the context that waits at row `origin`.
//!
//! The first part depends only on `state`, so it is computed once per state by walking the token
//! trie from a chart seeded with just that state, and cached in the compiled grammar for every
//! matcher to share ([`KernelMask`]): tokens that stay inside are *accepted*, tokens that end the
//! rule after `k < len` bytes are *uncertain* with suffix `token[k..]`. At fill time the mask is the
//! union of the kernels' accepted sets, plus the uncertain tokens whose suffix the real context
//! accepts; each distinct suffix is checked once per kernel item by resuming the parent context
//! ([`Chart::push_completion`]) and reading the suffix bytes.
//!
//! Soundness of the split: a kernel-local walk is a sub-derivation of the real parse (same items,
//! origins shifted), so a token it accepts is accepted globally; a token that no kernel accepts
//! locally can only be accepted by ending some kernel's rule, which is what the uncertain check
//! replays exactly.

use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::earley::{Chart, Item};
use crate::error::Result;
use crate::fasthash::FastMap;
use crate::follow::ByteSet;
use crate::slice::{BodySlice, ClassSlice, RunIndex, LEAD_LISTS};
use crate::trie::{TokenTrie, WIDE_MIN_CHILDREN};
use std::collections::HashMap;
use std::sync::Arc;

/// The per-vocabulary shortcuts a kernel classification may take (all optional: without them
/// the walk visits the whole trie).
#[derive(Clone, Copy, Default)]
pub struct Shortcuts<'a> {
    /// String-body slice.
    pub body: Option<&'a BodySlice>,
    /// FOLLOW set of the kernel's rule.
    pub follow: Option<&'a ByteSet>,
    /// Free-text class slice for the kernel state's loop class.
    pub class: Option<&'a ClassSlice>,
    /// The kernel state is a counted string body of this capacity
    /// ([`crate::slice::body_capacity`]); used with `body`.
    pub capacity: Option<u32>,
    /// Run indexes by (ASCII class, UTF-8 too), for class runs met anywhere in the walk.
    pub runs: Option<&'a dyn Fn(u128, bool) -> Option<Arc<RunIndex>>>,
    /// The run index that applies at a plain state (see `KernelWalk::runs_at`), memoized by the
    /// compiled grammar: deciding it takes a cover search.
    pub state_runs: Option<&'a dyn Fn(StateId) -> Option<Arc<RunIndex>>>,
}

/// Per-state token classification, shared by all matchers of a compiled grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelMask {
    /// Tokens that can be read entirely without ending the state's rule.
    pub accepted: Bitset,
    /// `(token, suffix index)`: the token ends the rule and leaves `suffixes[i]` to read after it.
    pub uncertain: Vec<(u32, u32)>,
    pub suffixes: Vec<Box<[u8]>>,
    /// Suffix indices in byte order, each with its longest common prefix with the previous one:
    /// the suffixes form a trie walked once per fill, pruning every suffix under a rejected prefix.
    pub suffix_walk: Vec<(u32, u32)>,
}

impl KernelMask {
    pub fn memory_size(&self) -> usize {
        self.accepted.memory_size()
            + self.uncertain.len() * 8
            + self.suffixes.iter().map(|s| s.len() + 16).sum::<usize>()
    }
}

/// Classifies every token for a kernel item in `state` (see the module doc).
///
/// PERF: most trie nodes are read inside a terminal-like region (a single item whose state has
/// no rule edges, e.g. the inside of a JSON string; see `is_plain`). Such steps are taken on a
/// "virtual" item without materializing a chart row; no later row can refer to them, because
/// only rows that predict (states with rule edges) are ever an item's origin. This cut the first
/// classification of a JSON string interior on Llama 3 from ~30 ms to a few ms.
pub fn classify_kernel(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    body: Option<&BodySlice>,
    follow: Option<&ByteSet>,
    class: Option<&ClassSlice>,
) -> Result<KernelMask> {
    let mut never = || false;
    let sc = Shortcuts { body, follow, class, capacity: None, runs: None, state_runs: None };
    let km = classify_kernel_budget(a, trie, vocab_size, state, sc, usize::MAX, &mut never)?;
    Ok(km.expect("a walk that is never abandoned completes"))
}

/// [`classify_kernel`], calling `on_budget` once the walk has visited `budget` trie nodes: if it
/// returns true the walk is abandoned and the result is `None` (the caller found the
/// classification elsewhere, e.g. in the cross-grammar cache).
///
/// PERF: the cross-grammar cache key (a structural hash of the reachable automaton) used to be
/// computed for every new kernel, and cost more than the whole walk for most of them (states that
/// prune the trie within a few hundred nodes); now only walks that turn out long pay for it.
pub fn classify_kernel_budget(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    budget: usize,
    on_budget: &mut dyn FnMut() -> bool,
) -> Result<Option<KernelMask>> {
    // Interned rows first; a walk whose rows do not repeat enough to fit the memo is redone on
    // a plain stack of rows (bounded by the token depth).
    classify_walk(a, trie, vocab_size, state, sc, budget, on_budget, &[true, false])
}

/// [`classify_kernel`] on a plain stack of rows, without the row memo and run indexes: the
/// reference the full walk is tested against.
#[doc(hidden)]
pub fn classify_kernel_uninterned(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
) -> Result<KernelMask> {
    let sc = Shortcuts { runs: None, state_runs: None, ..sc };
    let km = classify_walk(a, trie, vocab_size, state, sc, usize::MAX, &mut || false, &[false])?;
    Ok(km.expect("a walk that is never abandoned completes"))
}

#[allow(clippy::too_many_arguments)]
fn classify_walk(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    budget: usize,
    on_budget: &mut dyn FnMut() -> bool,
    modes: &[bool],
) -> Result<Option<KernelMask>> {
    for &interned in modes {
        let mut w = KernelWalk::new(a, trie, vocab_size, state, &sc, interned, budget, &mut *on_budget);
        match w.classify(state, sc)? {
            false if w.memo.as_ref().is_some_and(|m| m.full) => {}
            false => return Ok(None),
            true => {
                let KernelWalk { uncertain, suffixes, accepted, .. } = w;
                return Ok(Some(kernel_mask(accepted, uncertain, suffixes)));
            }
        }
    }
    unreachable!("the last mode is the stack walk, which has no memo to fill")
}

impl<'a> KernelWalk<'a> {
    /// A walk from a fresh kernel chart of `state`, with interned rows when `interned`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        a: &'a Automata,
        trie: &'a TokenTrie,
        vocab_size: usize,
        state: StateId,
        sc: &Shortcuts<'a>,
        interned: bool,
        budget: usize,
        on_budget: &'a mut dyn FnMut() -> bool,
    ) -> KernelWalk<'a> {
        let chart = Chart::with_kernel(a, state);
        let memo = interned.then(|| RowMemo::new(&chart));
        KernelWalk {
            visits: 0,
            budget,
            on_budget,
            a,
            trie,
            follow: sc.follow.copied(),
            chart,
            memo,
            accepted: Bitset::new(vocab_size),
            uncertain: Vec::new(),
            suffix_ids: HashMap::new(),
            suffixes: Vec::new(),
            frames: Vec::new(),
            ends: Vec::new(),
            path: Vec::new(),
            runs: sc.runs,
            shared_state_runs: sc.state_runs,
            state_runs: FastMap::default(),
            row_runs: FastMap::default(),
            readable_states: FastMap::default(),
            readable_rows: FastMap::default(),
        }
    }
}

/// The kernel mask of a classification, in canonical form: suffixes in byte order, `uncertain`
/// sorted and free of accepted tokens and duplicates (equal classifications compare equal however
/// they were found).
fn kernel_mask(accepted: Bitset, mut uncertain: Vec<(u32, u32)>, suffixes: Vec<Box<[u8]>>) -> KernelMask {
    let mut order: Vec<u32> = (0..suffixes.len() as u32).collect();
    order.sort_unstable_by(|&x, &y| suffixes[x as usize].cmp(&suffixes[y as usize]));
    let mut rank = vec![0u32; suffixes.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i as usize] = r as u32;
    }
    uncertain.retain(|&(t, _)| !accepted.get(t as usize));
    let mut used = vec![false; suffixes.len()];
    for u in &mut uncertain {
        u.1 = rank[u.1 as usize];
        used[u.1 as usize] = true;
    }
    uncertain.sort_unstable();
    uncertain.dedup();
    let mut slots: Vec<Option<Box<[u8]>>> = suffixes.into_iter().map(Some).collect();
    let mut sorted: Vec<Box<[u8]>> = order.iter().map(|&i| slots[i as usize].take().unwrap_or_default()).collect();
    // Drop the suffixes no remaining token uses, renumbering the rest.
    if used.iter().any(|&u| !u) {
        let mut new_id = vec![u32::MAX; sorted.len()];
        let mut kept = Vec::new();
        for (i, sfx) in sorted.into_iter().enumerate() {
            if used[i] {
                new_id[i] = kept.len() as u32;
                kept.push(sfx);
            }
        }
        for u in &mut uncertain {
            u.1 = new_id[u.1 as usize];
        }
        sorted = kept;
    }
    let suffix_walk = suffix_walk_order(&sorted);
    KernelMask { accepted, uncertain, suffixes: sorted, suffix_walk }
}

/// Composes the classification of kernel state `s` (of rule `R`) from its callees': for each rule
/// edge `(X, t)` of `s`, a non-nullable `X` whose rule-start classification is `callees[i].0`,
/// with `t = callees[i].1`; `own` classifies the tokens whose first byte `s` reads itself
/// ([`classify_kernel_from_bytes`]; `None` when it reads none). `follow` is FOLLOW(R).
///
/// Why it is exact: a token read from `s` is read inside some callee `X` (the callee's accepted
/// tokens), or ends `X` after a prefix and reads the rest `σ` from `t` in `R`; `X`'s uncertain
/// tokens are exactly those splits (the ones whose `σ` starts outside FOLLOW(X) cannot be read
/// from `t`, nor follow `R` when `t` ends it, since FOLLOW(R) ⊆ FOLLOW(X) then). Each distinct
/// `σ` is read once from a fresh kernel chart of `t`: read to its end, the token is accepted; else
/// the places where `R` ended on the way leave the token's uncertain suffixes, as in the walk.
///
/// PERF: the states that begin an expression (after `= `, `(`, `, `, an operator) each walked the
/// whole expression language again (~90 µs on Llama 3); they now share the expression's own
/// classification and read a few dozen suffixes each.
pub fn compose_kernel(
    a: &Automata,
    vocab_size: usize,
    follow: &ByteSet,
    own: Option<KernelMask>,
    callees: &[(Arc<KernelMask>, StateId)],
) -> Result<KernelMask> {
    let mut suffix_ids = HashMap::new();
    let mut suffixes = Vec::new();
    let (mut accepted, mut uncertain) = match own {
        Some(km) => {
            let ids: Vec<u32> = km.suffixes.iter().map(|s| intern_suffix(&mut suffix_ids, &mut suffixes, s)).collect();
            (km.accepted, km.uncertain.iter().map(|&(t, i)| (t, ids[i as usize])).collect())
        }
        None => (Bitset::new(vocab_size), Vec::new()),
    };
    for (km, t) in callees {
        accepted.or_assign(&km.accepted);
        let mut resumed: Vec<Option<Vec<u32>>> = Vec::with_capacity(km.suffixes.len());
        for sfx in &km.suffixes {
            resumed.push(resume_suffix(a, *t, sfx, follow)?.map(|ends| {
                ends.into_iter().map(|c| intern_suffix(&mut suffix_ids, &mut suffixes, &sfx[c..])).collect()
            }));
        }
        for &(tok, sid) in &km.uncertain {
            match &resumed[sid as usize] {
                None => accepted.set(tok as usize),
                Some(ids) => uncertain.extend(ids.iter().map(|&id| (tok, id))),
            }
        }
    }
    Ok(kernel_mask(accepted, uncertain, suffixes))
}

/// [`classify_kernel`] restricted to the tokens whose first byte is in `first` (with every
/// shortcut below the first byte): the part of a kernel's classification that its own byte edges
/// start, for [`compose_kernel`].
pub fn classify_kernel_from_bytes(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    first: &ByteSet,
) -> Result<KernelMask> {
    let mut never = || false;
    for interned in [true, false] {
        let mut w = KernelWalk::new(a, trie, vocab_size, state, &sc, interned, usize::MAX, &mut never);
        let base = Frame::Rows(w.chart.num_rows());
        let mut c = 0;
        let mut done = true;
        while c < trie.nodes.len() {
            let end = trie.nodes[c].subtree_end as usize;
            if first.contains(trie.nodes[c].byte) && !w.walk(c, end, base)? {
                done = false;
                break;
            }
            c = end;
        }
        if done {
            let KernelWalk { uncertain, suffixes, accepted, .. } = w;
            return Ok(kernel_mask(accepted, uncertain, suffixes));
        }
    }
    unreachable!("the stack walk has no memo to fill and is never abandoned")
}

/// Reads `suffix` from a fresh kernel chart of `t`: `None` if all of it is read (the rule may end
/// right at its end), else the byte counts `c` after which the rule had ended before the chart
/// died, where `suffix[c]` is in `follow` (the suffixes `record_uncertain` would keep).
fn resume_suffix(a: &Automata, t: StateId, suffix: &[u8], follow: &ByteSet) -> Result<Option<Vec<usize>>> {
    let mut chart = Chart::with_kernel(a, t);
    let mut ends = Vec::new();
    for (c, &b) in suffix.iter().enumerate() {
        if kernel_ended(a, chart.last_row()) && follow.contains(b) {
            ends.push(c);
        }
        if !chart.push_byte(a, b)? {
            return Ok(Some(ends));
        }
    }
    Ok(None)
}

impl KernelWalk<'_> {
    /// Runs the classification (see [`classify_kernel_budget`]); false if abandoned.
    fn classify(&mut self, state: StateId, sc: Shortcuts<'_>) -> Result<bool> {
        let Shortcuts { body, follow, class, capacity, .. } = sc;
        let (a, trie) = (self.a, self.trie);
        let w = self;
        let base = Frame::Rows(w.chart.num_rows());
        match body {
            Some(sl) if let Some(c) = capacity => {
                // A counted string body: its slice tokens that fit are read inside the rule, the
                // others are refused without a rule end on the way (the states are not final), so
                // only the non-dead frontier needs a walk (a replay too long for `c` just fails).
                sl.add_within(c, &mut w.accepted);
                for f in sl.frontier.iter().filter(|f| !f.dead) {
                    if !w.walk_frontier(f, base)? {
                        return Ok(false);
                    }
                }
            }
            Some(sl) if let Some(cover) = BodySlice::covers(a, state) => {
                // Every body-text token stays inside the rule; walk only the frontier subtrees, each
                // after replaying its (body-text) parent path exactly as the full walk would.
                w.accepted.or_assign(&sl.slice);
                // A dead subtree matters only through a rule end whose suffix some context can
                // continue: its first byte (a later path byte, or the dead byte) must be in FOLLOW.
                let may_continue = |f: &crate::slice::FrontierNode| {
                    let dead_byte = trie.nodes[f.node as usize].byte;
                    follow.is_none_or(|fo| fo.contains(dead_byte) || f.path.iter().skip(1).any(|&b| fo.contains(b)))
                };
                // A dead byte right at the root follows no rule end of a plain kernel state.
                let walk = |f: &&crate::slice::FrontierNode| {
                    !f.dead || cover.walk_dead || (cover.may_end && !f.path.is_empty() && may_continue(f))
                };
                for f in sl.frontier.iter().filter(walk) {
                    if !w.walk_frontier(f, base)? {
                        return Ok(false);
                    }
                }
            }
            _ if let Some(cs) = class.filter(|cs| ClassSlice::covers(a, state, cs.ascii)) => {
                // Free text of one class: its runs stay inside the rule; everything else is walked.
                w.accepted.or_assign(&cs.slice);
                for f in &cs.frontier {
                    if !w.walk_frontier(f, base)? {
                        return Ok(false);
                    }
                }
            }
            _ if let Some(ri) = w.runs_at(base)? => {
                // The kernel state itself reads every run of a class.
                if !w.walk_run_children(0, trie.nodes.len(), 0, &ri, base, None)? {
                    return Ok(false);
                }
            }
            _ => {
                if !w.walk(0, trie.nodes.len(), base)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

/// The state of one kernel classification walk over the trie.
struct KernelWalk<'a> {
    /// Trie nodes stepped so far; at `budget`, `on_budget` decides whether to go on.
    visits: usize,
    budget: usize,
    on_budget: &'a mut dyn FnMut() -> bool,
    a: &'a Automata,
    trie: &'a TokenTrie,
    /// Bytes that may follow the kernel's rule in some context (`None`: any).
    follow: Option<ByteSet>,
    chart: Chart,
    /// Interned rows (`None`: the chart is a stack of the current path's rows).
    memo: Option<RowMemo>,
    accepted: Bitset,
    uncertain: Vec<(u32, u32)>,
    suffix_ids: HashMap<Box<[u8]>, u32>,
    suffixes: Vec<Box<[u8]>>,
    // Per depth d (after d+1 bytes of the current path): the frame reached, and whether the
    // kernel's rule ended there.
    frames: Vec<Frame>,
    ends: Vec<bool>,
    path: Vec<u8>,
    runs: Option<&'a dyn Fn(u128, bool) -> Option<Arc<RunIndex>>>,
    shared_state_runs: Option<&'a dyn Fn(StateId) -> Option<Arc<RunIndex>>>,
    /// The run index that applies at a virtual item's state or an interned row, once looked up.
    state_runs: FastMap<StateId, Option<Arc<RunIndex>>>,
    row_runs: FastMap<usize, Option<Arc<RunIndex>>>,
    /// The bytes a state, or an interned row (by frame), has edges on, once looked up.
    readable_states: FastMap<StateId, ByteSet>,
    readable_rows: FastMap<usize, ByteSet>,
}

impl KernelWalk<'_> {
    /// Walks the subtree of frontier node `f` after replaying its parent path exactly as the full
    /// walk would (frames and rule ends included). The path is slice text, which the kernel's
    /// rule reads (see `covers`), so the replay cannot fail. Returns false if abandoned.
    fn walk_frontier(&mut self, f: &crate::slice::FrontierNode, base: Frame) -> Result<bool> {
        let a = self.a;
        // Interned frames stay valid for the whole walk: the previous frontier node's path (in
        // trie order) is replayed only past the prefix it shares with this one.
        // PERF: free text of a Chinese-heavy vocabulary has thousands of frontier nodes.
        let keep = self.shared_prefix(&f.path);
        self.truncate_path(keep);
        let mut parent = keep.checked_sub(1).map_or(base, |k| self.frames[k]);
        for &b in &f.path[keep..] {
            let Some(frame) = self.step(parent, b)? else {
                return Ok(!self.memo_full());
            };
            self.frames.push(frame);
            self.ends.push(frame_ended(a, &self.chart, frame));
            self.path.push(b);
            parent = frame;
        }
        let i = f.node as usize;
        self.walk(i, self.trie.nodes[i].subtree_end as usize, base)
    }

    /// Walks trie nodes `start..end` (a node and its subtree, or the whole trie), with `frames`,
    /// `ends` and `path` holding the frames above `start`. Returns false if abandoned (see
    /// [`classify_kernel_budget`]).
    fn walk(&mut self, start: usize, end: usize, base: Frame) -> Result<bool> {
        let (a, trie) = (self.a, self.trie);
        let nodes = &trie.nodes;
        let mut i = start;
        while i < end {
            self.visits += 1;
            if self.visits == self.budget && (self.on_budget)() {
                return Ok(false);
            }
            let n = nodes[i];
            let d = n.depth as usize;
            // The previous sibling's row, when this byte steps every item of the parent alike.
            // PERF: digits after a number, or letters in a key, used to close one identical row
            // per sibling (a row that predicts a chain of optional properties costs ~5 us).
            let reuse = match self.frames.get(d - 1) {
                Some(&Frame::Rows(k)) if self.memo.is_none() && self.chart.row(k - 1).len() >= REUSE_MIN_ROW => {
                    let parent = if d >= 2 { self.frames[d - 2] } else { base };
                    same_steps(a, &self.chart, parent, self.path[d - 1], n.byte).then_some(Frame::Rows(k))
                }
                _ => None,
            };
            self.frames.truncate(d - 1);
            self.ends.truncate(d - 1);
            self.path.truncate(d - 1);
            self.path.push(n.byte);
            let parent = self.frames.last().copied().unwrap_or(base);
            let next = match reuse {
                Some(Frame::Rows(k)) => {
                    self.chart.truncate_rows(k);
                    reuse
                }
                _ => self.step(parent, n.byte)?,
            };
            let Some(frame) = next else {
                if self.memo_full() {
                    return Ok(false);
                }
                // Every token below fails inside the rule; those whose path ended the rule earlier
                // are uncertain with the matching suffixes.
                if self.ends.iter().any(|&e| e) {
                    let out = (&mut self.suffix_ids, &mut self.suffixes, &mut self.uncertain);
                    record_uncertain(trie, i, &self.path, &self.ends, self.follow.as_ref(), out);
                }
                i = n.subtree_end as usize;
                continue;
            };
            self.frames.push(frame);
            self.ends.push(frame_ended(a, &self.chart, frame));
            for &t in trie.node_tokens(&n) {
                self.accepted.set(t as usize);
            }
            let sub = n.subtree_end as usize;
            if sub - i > RUN_MIN_SUBTREE && d < MAX_RUN_DEPTH {
                if let Some(ri) = self.runs_at(frame)? {
                    if !self.walk_runs(i, &ri, base)? {
                        return Ok(false);
                    }
                    i = sub;
                    continue;
                }
            }
            // Only a node with that many descendants can have that many children.
            if let Some(kids) = (sub - i > WIDE_MIN_CHILDREN).then(|| trie.wide_children(i)).flatten() {
                if let Some(visit) = self.children_to_visit(frame) {
                    for &c in kids {
                        let c = c as usize;
                        if visit.contains(nodes[c].byte) && !self.walk(c, nodes[c].subtree_end as usize, base)? {
                            return Ok(false);
                        }
                    }
                    i = sub;
                    continue;
                }
            }
            i += 1;
        }
        Ok(true)
    }

    /// The child bytes worth visiting below the current path's last node, whose frame is `frame`:
    /// those `frame` can read, plus FOLLOW when the kernel's rule ended right there. A child
    /// outside them fails at once and records nothing (`record_uncertain` keeps no rule end of
    /// its path). `None` when an earlier end on the path could record such a child's tokens.
    fn children_to_visit(&mut self, frame: Frame) -> Option<ByteSet> {
        let d = self.ends.len();
        let follows = |x: u8| self.follow.as_ref().is_none_or(|f| f.contains(x));
        if (0..d.saturating_sub(1)).any(|k| self.ends[k] && follows(self.path[k + 1])) {
            return None;
        }
        let mut visit = match frame {
            Frame::Virtual(it, _) => *self.readable_states.entry(it.state).or_insert_with(|| state_bytes(self.a, it.state)),
            Frame::Rows(n) if self.memo.is_some() => match self.readable_rows.get(&n) {
                Some(&r) => r,
                None => {
                    let r = row_bytes(self.a, self.chart.row(n - 1));
                    self.readable_rows.insert(n, r);
                    r
                }
            },
            Frame::Rows(n) => row_bytes(self.a, self.chart.row(n - 1)),
        };
        if self.ends.last() == Some(&true) {
            match &self.follow {
                Some(f) => visit.union(f),
                None => return None,
            };
        }
        Some(visit)
    }

    /// The run index that applies at `frame`: a virtual item whose state reads every run of its
    /// loop class ([`ClassSlice::covers`]), or an interned row that every byte of an ASCII class
    /// leads back to.
    fn runs_at(&mut self, frame: Frame) -> Result<Option<Arc<RunIndex>>> {
        let Some(runs) = self.runs else { return Ok(None) };
        let a = self.a;
        let single = match frame {
            Frame::Virtual(it, _) => Some(it.state),
            Frame::Rows(n) => match self.chart.row(n - 1) {
                [it] if a.rule_edges(it.state).is_empty() => Some(it.state),
                _ => None,
            },
        };
        match frame {
            _ if let Some(s) = single => {
                let shared = self.shared_state_runs;
                let ri = self.state_runs.entry(s).or_insert_with(|| match shared {
                    Some(f) => f(s),
                    None => state_run_index(a, s, runs),
                });
                Ok(ri.clone())
            }
            Frame::Rows(n) if self.memo.is_some() => {
                if let Some(ri) = self.row_runs.get(&n) {
                    return Ok(ri.clone());
                }
                // Only bytes some item loops on are tried (a row loops on a byte through an item
                // that does, in practice; missing a rarer loop only forgoes the shortcut).
                let candidates = self.chart.row(n - 1).iter().fold(0u128, |c, it| c | ascii_loop(a, it.state));
                if candidates.count_ones() < MIN_ROW_RUN_BYTES {
                    self.row_runs.insert(n, None);
                    return Ok(None);
                }
                // Bytes that step every item alike lead to the same row: one step per group.
                let mut groups: Vec<(u8, u128)> = Vec::new();
                for b in (0..0x80u8).filter(|&b| candidates >> b & 1 == 1) {
                    match groups.iter_mut().find(|(r, _)| same_steps(a, &self.chart, frame, *r, b)) {
                        Some((_, bytes)) => *bytes |= 1 << b,
                        None => groups.push((b, 1 << b)),
                    }
                }
                let mut class = 0u128;
                for (r, bytes) in groups {
                    match self.step(frame, r)? {
                        Some(Frame::Rows(m)) if m == n => class |= bytes,
                        None if self.memo_full() => return Ok(None),
                        _ => {}
                    }
                }
                let ri = (class.count_ones() >= MIN_ROW_RUN_BYTES).then(|| runs(class, false)).flatten();
                self.row_runs.insert(n, ri.clone());
                Ok(ri)
            }
            _ => Ok(None),
        }
    }

    /// Walks the subtree below node `i` (its frame on top of `frames`), whose place reads every
    /// run of `ri`'s class: tokens that continue with a run are accepted from the index, and only
    /// the nodes where such a run stops are walked, each after replaying its run. Returns false if
    /// abandoned.
    fn walk_runs(&mut self, i: usize, ri: &RunIndex, base: Frame) -> Result<bool> {
        let n = self.trie.nodes[i];
        self.walk_run_children(i + 1, n.subtree_end as usize, n.depth as usize, ri, base, Some(i))
    }

    /// [`Self::walk_runs`] over the children `first..end` of a node at depth `d` (the root
    /// when `d` is 0).
    fn walk_run_children(
        &mut self,
        first: usize,
        end: usize,
        d: usize,
        ri: &RunIndex,
        base: Frame,
        node: Option<usize>,
    ) -> Result<bool> {
        let trie = self.trie;
        // An ASCII run leads back to the frame at depth `d`. A break byte that frame refuses fails
        // its whole subtree, and records nothing when no rule end on the path leaves a suffix that
        // starts in FOLLOW (see `record_uncertain`): none before the run, none inside it (its
        // bytes are class bytes), and none right before the break byte.
        let here = if d == 0 { base } else { self.frames[d - 1] };
        let ended = frame_ended(self.a, &self.chart, here);
        let follow = self.follow;
        let follows = move |x: u8| follow.as_ref().is_none_or(|f| f.contains(x));
        let prefix_quiet = (0..d.saturating_sub(1)).all(|k| !(self.ends[k] && follows(self.path[k + 1])));
        let run_quiet = !ended || ri.ascii & follow.map_or(u128::MAX, |f| f.ascii()) == 0;
        let quiet = !ri.utf8 && prefix_quiet && run_quiet;
        let quiet_byte = |x: u8| !ended || !follows(x);
        // Per byte: 0 not known yet, 1 refused at `here`, 2 read.
        let mut refused = [0u8; 256];
        // The run tokens below the node, from a precomputed set when there is one (the root's,
        // or a large subtree's); else child by child below.
        let whole = match node {
            None => Some(ri.whole.clone()),
            Some(i) => ri.subtree_runs(trie, i),
        };
        if let Some(w) = &whole {
            self.accepted.or_assign(w);
        }
        if d < LEAD_LISTS {
            let skip = |x: u8| quiet && quiet_byte(x);
            return self.walk_listed_breaks(first, end, d, ri, base, whole.is_none(), here, &skip, &mut refused);
        }
        let mut c = first;
        let mut k = ri.first_break(0, c);
        while c < end {
            let c_end = trie.nodes[c].subtree_end as usize;
            let byte = trie.nodes[c].byte;
            if quiet && !ri.reads_ascii(byte) && quiet_byte(byte) {
                match self.refuses(here, byte, &mut refused)? {
                    None => return Ok(false),
                    Some(true) => {
                        c = c_end;
                        continue;
                    }
                    Some(false) => {}
                }
            }
            if ri.utf8 && (0x80..=0xBF).contains(&byte) {
                // Inside a UTF-8 sequence, not at a run's boundary: walk as usual.
                self.truncate_path(d);
                if !self.walk(c, c_end, base)? {
                    return Ok(false);
                }
                c = c_end;
                continue;
            }
            if whole.is_none() {
                ri.add_runs(trie, c, d, &mut self.accepted);
            }
            // The breaks whose run starts at or above depth `d`; every other break below `c`
            // lies under one of them, so their subtrees are skipped by binary search.
            k = ri.first_break(k, c);
            while let Some((m, lead, byte)) = ri.break_at(k).filter(|&(m, _, _)| m < c_end) {
                if lead > d {
                    k += 1;
                    continue;
                }
                if quiet && quiet_byte(byte) {
                    match self.refuses(here, byte, &mut refused)? {
                        None => return Ok(false),
                        // The breaks below it start their runs deeper: skipped one by one.
                        Some(true) => {
                            k += 1;
                            continue;
                        }
                        Some(false) => {}
                    }
                }
                if !self.walk_break(m, d, base, !ri.utf8)? {
                    return Ok(false);
                }
                k = ri.first_break(k, trie.nodes[m].subtree_end as usize);
            }
            c = c_end;
        }
        self.truncate_path(d);
        Ok(true)
    }

    /// [`Self::walk_run_children`] for a run from depth `d < LEAD_LISTS`, by the index's lead
    /// lists: the run tokens of all children at once (`add`: not in a precomputed set), then the
    /// breaks of leads up to `d`. That is every break the child-by-child loop walks: the breaks of
    /// a child it skips as refused are that child itself (refused again here) or start their runs
    /// below it (not listed for `d`), and so do the breaks below a walked break. A UTF-8
    /// continuation byte right below the node is a break of the index (no character starts with
    /// it), walked as usual. `skip(byte)`: a break with that byte is skipped when `here` refuses it
    /// (see `walk_run_children`).
    /// PERF: an identifier's state used to step over ~3,000 breaks and a few thousand children
    /// one by one.
    #[allow(clippy::too_many_arguments)]
    fn walk_listed_breaks(
        &mut self,
        first: usize,
        end: usize,
        d: usize,
        ri: &RunIndex,
        base: Frame,
        add: bool,
        here: Frame,
        skip: &dyn Fn(u8) -> bool,
        refused: &mut [u8; 256],
    ) -> Result<bool> {
        if add {
            ri.add_runs_range(self.trie, first, end, d, &mut self.accepted);
        }
        // An ASCII run leads back to `here`; a UTF-8 one is replayed.
        let looping = !ri.utf8;
        if d == 0 && first == 0 && end == self.trie.nodes.len() {
            for (byte, nodes) in ri.root_breaks_by_byte() {
                if skip(*byte) {
                    match self.refuses(here, *byte, refused)? {
                        None => return Ok(false),
                        Some(true) => continue,
                        Some(false) => {}
                    }
                }
                for &m in nodes {
                    if !self.walk_break(m as usize, d, base, looping)? {
                        return Ok(false);
                    }
                }
            }
        } else {
            for l in 0..=d {
                let (nodes, bytes) = ri.breaks_of_lead(l, first, end);
                for (&m, &byte) in nodes.iter().zip(bytes) {
                    if skip(byte) {
                        match self.refuses(here, byte, refused)? {
                            None => return Ok(false),
                            Some(true) => continue,
                            Some(false) => {}
                        }
                    }
                    if !self.walk_break(m as usize, d, base, looping)? {
                        return Ok(false);
                    }
                }
            }
        }
        self.truncate_path(d);
        Ok(true)
    }

    /// Whether `frame` refuses `byte`, cached in `known` (see `walk_run_children`); `None` if
    /// the row memo filled up (the walk is abandoned and redone).
    fn refuses(&mut self, frame: Frame, byte: u8, known: &mut [u8; 256]) -> Result<Option<bool>> {
        if known[byte as usize] == 0 {
            let read = self.step(frame, byte)?.is_some();
            if !read && self.memo_full() {
                return Ok(None);
            }
            known[byte as usize] = if read { 2 } else { 1 };
        }
        Ok(Some(known[byte as usize] == 1))
    }

    /// Walks break node `m`'s subtree after replaying its run from depth `d` (frames, rule ends
    /// and path bytes, as the full walk would have them).
    fn walk_break(&mut self, m: usize, d: usize, base: Frame, looping: bool) -> Result<bool> {
        let (a, trie) = (self.a, self.trie);
        let node = trie.nodes[m];
        let below = node.depth as usize - 1;
        // The run's bytes, read off the parent chain; interned frames already stepped over the
        // same bytes (by the previous break, in trie order) are kept.
        let known = if self.memo.is_some() { self.frames.len().min(self.path.len()) } else { d };
        let mut keep = known.min(below).max(d);
        self.path.resize(below.max(self.path.len()), 0);
        let mut p = node.parent;
        for k in (d..below).rev() {
            let b = trie.nodes[p as usize].byte;
            if self.path[k] != b {
                keep = keep.min(k);
            }
            self.path[k] = b;
            p = trie.nodes[p as usize].parent;
        }
        let keep = if looping { d } else { keep };
        self.frames.truncate(keep);
        self.ends.truncate(keep);
        self.path.truncate(below);
        let first = if d == 0 { base } else { self.frames[d - 1] };
        if looping {
            // Every byte of an ASCII run leads back to the same frame (a refused break byte was
            // skipped by the caller when nothing could be recorded below it).
            let ended = frame_ended(a, &self.chart, first);
            self.frames.resize(below, first);
            self.ends.resize(below, ended);
        } else {
            let mut frame = keep.checked_sub(1).filter(|&k| k >= d).map_or(first, |k| self.frames[k]);
            for k in keep..below {
                // The run is read from this place (see `runs_at`), so the replay cannot fail.
                let Some(next) = self.step(frame, self.path[k])? else { return Ok(!self.memo_full()) };
                frame = next;
                self.frames.push(frame);
                self.ends.push(frame_ended(a, &self.chart, frame));
            }
        }
        self.walk(m, node.subtree_end as usize, base)
    }

    /// How many leading bytes of `path` the current path shares with frames stepped (interned
    /// walks only; frames of a stack walk do not outlive their subtree).
    fn shared_prefix(&self, path: &[u8]) -> usize {
        if self.memo.is_none() {
            return 0;
        }
        let n = self.frames.len().min(self.path.len()).min(path.len());
        (0..n).take_while(|&k| self.path[k] == path[k]).count()
    }

    fn truncate_path(&mut self, d: usize) {
        self.frames.truncate(d);
        self.ends.truncate(d);
        self.path.truncate(d);
    }
}

/// The run index that applies at plain state `s`: free text (any character but some ASCII ones)
/// that `s` reads every run of, or a loop on ASCII bytes.
pub fn state_run_index(a: &Automata, s: StateId, runs: &dyn Fn(u128, bool) -> Option<Arc<RunIndex>>) -> Option<Arc<RunIndex>> {
    match ClassSlice::loop_class(a, s).filter(|&c| ClassSlice::covers(a, s, c)).or_else(|| first_char_class(a, s)) {
        Some(c) => runs(c, true),
        None => Some(ascii_loop(a, s)).filter(|c| c.count_ones() >= MIN_ROW_RUN_BYTES).and_then(|c| runs(c, false)),
    }
}

/// For a state that starts a loop without being its own (`[^ \n|"]+ | "\"" ...` before its
/// first character): the class a state it steps to loops on, when `s` reads every run of it too.
/// PERF: the first character of a free-text value walked every multi-byte character's subtree
/// node by node (40k nodes on Qwen2.5, 1.3 ms).
fn first_char_class(a: &Automata, s: StateId) -> Option<u128> {
    let mut tried: Vec<StateId> = Vec::new();
    for e in a.byte_edges(s) {
        let t = e.target;
        if t == s || tried.contains(&t) {
            continue;
        }
        tried.push(t);
        let c = ascii_loop(a, t);
        if c.count_ones() >= MIN_ROW_RUN_BYTES && ClassSlice::loop_class(a, t) == Some(c) && ClassSlice::covers(a, s, c) {
            return Some(c);
        }
    }
    None
}

/// The ASCII bytes on which `s` loops back to itself.
pub fn ascii_loop(a: &Automata, s: StateId) -> u128 {
    let looping = a.byte_edges(s).iter().filter(|e| e.target == s && e.lo < 0x80);
    looping.fold(0u128, |c, e| c | crate::bitset::ascii_range(e.lo, e.hi.min(0x7F)))
}

/// Subtrees at least this large are worth a run-index lookup (a row's costs up to 128 steps).
const RUN_MIN_SUBTREE: usize = 32;
/// Run indexes record leads up to 255 bytes.
const MAX_RUN_DEPTH: usize = 255;
/// Fewest ASCII bytes a row must loop on (the ten digits qualify).
pub const MIN_ROW_RUN_BYTES: u32 = 10;

impl KernelWalk<'_> {
    /// Reads `byte` from `frame`, through the row memo when there is one.
    fn step(&mut self, frame: Frame, byte: u8) -> Result<Option<Frame>> {
        match &mut self.memo {
            Some(m) => m.step(self.a, &mut self.chart, frame, byte),
            None => step_frame(self.a, &mut self.chart, frame, byte),
        }
    }

    fn memo_full(&self) -> bool {
        self.memo.as_ref().is_some_and(|m| m.full)
    }
}

/// The rows of a kernel walk interned by signature, with their byte transitions: the chart is
/// an arena of distinct rows (rows never pop; [`Chart::push_byte_from`] steps any of them), and a
/// trie node whose row was reached before from the same row by the same byte costs one table
/// lookup instead of an Earley step.
///
/// PERF: an SQL `SELECT ` state reaches ~60 distinct rows over ~52,000 trie nodes (every
/// identifier byte completes the same chain of rules); its walk went from ~15 ms of Earley steps
/// to table lookups.
///
/// Invariant: equal signatures mean the same future (see [`Chart`]), so a row found under a
/// signature stands for every row with that signature. Rows at or below `first` belong to the
/// walk's start and are never interned away.
struct RowMemo {
    /// The walk's start row; rows from it on are memoized.
    first: usize,
    by_sig: FastMap<u128, u32>,
    /// `(row - first) * 256 + byte`: the row reached, [`DEAD`], or [`UNKNOWN`].
    next: Vec<u32>,
    /// Set when the arena reached [`MEMO_MAX_ROWS`] or [`MEMO_MAX_ITEMS`]: the walk must be
    /// redone without the memo.
    full: bool,
}

impl Drop for RowMemo {
    fn drop(&mut self) {
        let next = std::mem::take(&mut self.next);
        if next.capacity() <= MAX_POOLED_NEXT {
            NEXT_POOL.with(|p| *p.borrow_mut() = next);
        }
    }
}

const UNKNOWN: u32 = u32::MAX;
const DEAD: u32 = u32::MAX - 1;
/// Bounds on a walk's interned rows (4 MB of transitions) and their items (8 MB).
const MEMO_MAX_ROWS: usize = 4096;
const MEMO_MAX_ITEMS: usize = 1 << 19;

thread_local! {
    /// The transition table of this thread's last kernel walk, reused by the next one.
    /// PERF: a fresh table of a few hundred rows came from fresh pages (page faults and growth
    /// copies were ~8% of an expression-start kernel).
    static NEXT_POOL: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Largest transition table kept for reuse (1,024 rows).
const MAX_POOLED_NEXT: usize = 1024 * 256;

impl RowMemo {
    fn new(chart: &Chart) -> RowMemo {
        let first = chart.last_row_index();
        let mut by_sig = FastMap::default();
        by_sig.insert(chart.last_signature(), first as u32);
        let mut next = NEXT_POOL.with(|p| std::mem::take(&mut *p.borrow_mut()));
        next.clear();
        next.resize(256, UNKNOWN);
        RowMemo { first, by_sig, next, full: false }
    }

    fn step(&mut self, a: &Automata, chart: &mut Chart, frame: Frame, byte: u8) -> Result<Option<Frame>> {
        let r = match frame {
            Frame::Virtual(it, _) => return self.step_virtual(a, chart, it, byte),
            Frame::Rows(n) => n - 1,
        };
        if let [it] = chart.row(r) {
            if a.rule_edges(it.state).is_empty() {
                return self.step_virtual(a, chart, *it, byte);
            }
        }
        let slot = (r - self.first) * 256 + byte as usize;
        match self.next[slot] {
            DEAD => return Ok(None),
            UNKNOWN => {}
            row => return Ok(Some(Frame::Rows(row as usize + 1))),
        }
        if !chart.push_byte_from(a, r, byte)? {
            self.next[slot] = DEAD;
            return Ok(None);
        }
        let Some(row) = self.intern(chart) else {
            return Ok(None);
        };
        self.next[slot] = row as u32;
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
            return Ok(Some(Frame::Virtual(next, 0)));
        }
        chart.push_items(a, &[next])?;
        Ok(self.intern(chart).map(|row| Frame::Rows(row + 1)))
    }

    /// Interns the chart's newest row: an equal row found before replaces it. `None` (with
    /// `full` set) when the arena is at its bounds.
    fn intern(&mut self, chart: &mut Chart) -> Option<usize> {
        let sig = chart.last_signature();
        if let Some(&row) = self.by_sig.get(&sig) {
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
        Some(row)
    }
}

fn suffix_walk_order(suffixes: &[Box<[u8]>]) -> Vec<(u32, u32)> {
    let mut order: Vec<u32> = (0..suffixes.len() as u32).collect();
    order.sort_unstable_by(|&x, &y| suffixes[x as usize].cmp(&suffixes[y as usize]));
    let mut out = Vec::with_capacity(order.len());
    let mut prev: &[u8] = &[];
    for &i in &order {
        let s = &suffixes[i as usize];
        let lcp = prev.iter().zip(s.iter()).take_while(|(a, b)| a == b).count();
        out.push((i, lcp as u32));
        prev = s;
    }
    out
}

/// Where a kernel walk stands after some bytes: the chart with this many rows, or a single
/// virtual item (in a state with no rule edges) on top of the chart's rows.
#[derive(Clone, Copy, Debug)]
enum Frame {
    Rows(usize),
    /// The item, and the number of chart rows below it.
    Virtual(Item, usize),
}

/// The bytes `s` has an edge on.
pub fn state_bytes(a: &Automata, s: StateId) -> ByteSet {
    let mut set = ByteSet::default();
    for e in a.byte_edges(s) {
        set.insert_range(e.lo, e.hi);
    }
    set
}

/// The bytes some item of `row` has an edge on (a superset of what the row reads: lookaheads
/// may refuse some).
fn row_bytes(a: &Automata, row: &[Item]) -> ByteSet {
    let mut set = ByteSet::default();
    for it in row {
        set.union(&state_bytes(a, it.state));
    }
    set
}

/// Whether `it`, alone in a row, can be read byte by byte without touching the chart: its state
/// has no rule edges, and it is either not final or the kernel item itself (origin 0, whose
/// origin row in a kernel chart is empty, so ending it completes nothing).
///
/// PERF: the kernel item's own final states (a value's trailing whitespace, a key that may end
/// anywhere) used to materialize a chart row per trie node, ~200 ns each.
#[inline]
fn is_plain(a: &Automata, it: &Item) -> bool {
    a.rule_edges(it.state).is_empty() && (it.origin == 0 || !a.state(it.state).is_final)
}

/// The kernel's rule ended at `frame` (see [`kernel_ended`]).
#[inline]
fn frame_ended(a: &Automata, chart: &Chart, frame: Frame) -> bool {
    match frame {
        Frame::Virtual(it, _) => it.origin == 0 && a.state(it.state).is_final,
        Frame::Rows(n) => kernel_ended(a, chart.row(n - 1)),
    }
}

/// Rows at least this long are reused across siblings (see `KernelWalk::walk`); shorter ones
/// close faster than the check.
const REUSE_MIN_ROW: usize = 12;

/// Whether bytes `x` and `y` step every item of `frame` to the same item (then they lead to the
/// same row).
fn same_steps(a: &Automata, chart: &Chart, frame: Frame, x: u8, y: u8) -> bool {
    let same = |it: &Item| a.step(it.state, x) == a.step(it.state, y) && a.la_step(it.la, x) == a.la_step(it.la, y);
    match frame {
        Frame::Virtual(it, _) => same(&it),
        Frame::Rows(n) => chart.row(n - 1).iter().all(same),
    }
}

/// Reads `byte` from `frame`, materializing a chart row only when needed.
fn step_frame(a: &Automata, chart: &mut Chart, frame: Frame, byte: u8) -> Result<Option<Frame>> {
    // Drop rows of a deeper, abandoned path first.
    let single = match frame {
        Frame::Virtual(it, n) => {
            chart.truncate_rows(n);
            Some(it)
        }
        Frame::Rows(n) => {
            chart.truncate_rows(n);
            match chart.last_row() {
                [it] if a.rule_edges(it.state).is_empty() => Some(*it),
                _ => None,
            }
        }
    };
    if let Some(it) = single {
        let Some(t) = a.step(it.state, byte) else {
            return Ok(None);
        };
        let next = Item { state: t, ..it };
        if is_plain(a, &next) {
            return Ok(Some(Frame::Virtual(next, chart.num_rows())));
        }
        return Ok(chart.push_items(a, &[next])?.then(|| Frame::Rows(chart.num_rows())));
    }
    Ok(chart.push_byte(a, byte)?.then(|| Frame::Rows(chart.num_rows())))
}

/// The kernel item (origin 0 in a kernel chart) reached a final state in this row.
#[inline]
fn kernel_ended(a: &Automata, row: &[Item]) -> bool {
    row.iter().any(|it| it.origin == 0 && a.state(it.state).is_final)
}

/// Records every token in the subtree of node `i` (whose byte path is `path`) as uncertain for
/// each depth at which the path ended the kernel's rule (`ends[k]`: after `k + 1` bytes).
#[allow(clippy::type_complexity)] // the walk's three output lists, borrowed together
fn record_uncertain(
    trie: &TokenTrie,
    i: usize,
    path: &[u8],
    ends: &[bool],
    follow: Option<&ByteSet>,
    (ids, suffixes, uncertain): (&mut HashMap<Box<[u8]>, u32>, &mut Vec<Box<[u8]>>, &mut Vec<(u32, u32)>),
) {
    // An end after k + 1 bytes leaves bytes[k + 1..], whose first byte is on the path; no
    // context continues with a byte outside FOLLOW, so such suffixes are not recorded.
    // PERF: deciding this before visiting the subtree skips whole subtrees (a value's trailing
    // whitespace used to visit every whitespace-led token, ~1 ms).
    let live: Vec<usize> =
        (0..ends.len()).filter(|&k| ends[k] && follow.is_none_or(|f| f.contains(path[k + 1]))).collect();
    if live.is_empty() {
        return;
    }
    let end = trie.nodes[i].subtree_end as usize;
    let base_depth = trie.nodes[i].depth as usize;
    let mut bytes: Vec<u8> = path.to_vec();
    for n in &trie.nodes[i..end] {
        let d = n.depth as usize;
        if d > base_depth {
            bytes.truncate(d - 1);
            bytes.push(n.byte);
        }
        for &t in trie.node_tokens(n) {
            for &k in &live {
                let sid = intern_suffix(ids, suffixes, &bytes[k + 1..]);
                uncertain.push((t, sid));
            }
        }
    }
}

fn intern_suffix(ids: &mut HashMap<Box<[u8]>, u32>, list: &mut Vec<Box<[u8]>>, s: &[u8]) -> u32 {
    if let Some(&id) = ids.get(s) {
        return id;
    }
    let id = list.len() as u32;
    list.push(s.into());
    ids.insert(s.into(), id);
    id
}

/// The kernel items of the chart's last row: `(state, origin)` pairs, see the module doc.
pub fn kernel_items(a: &Automata, chart: &Chart) -> Vec<Item> {
    let r = chart.last_row_index() as u32;
    let row = chart.last_row();
    if r == 0 {
        let s = a.rule_start(a.root());
        return row.iter().copied().filter(|it| it.state == s && it.origin == 0).collect();
    }
    row.iter().copied().filter(|it| it.origin < r).collect()
}

/// Fills `out` with the tokens allowed after the chart's input, using and extending `cache`
/// through `get_kernel`. Stop tokens are not set here.
pub fn fill_mask(
    a: &Automata,
    chart: &mut Chart,
    trie: &TokenTrie,
    out: &mut Bitset,
    get_kernel: &mut dyn FnMut(StateId) -> Result<std::sync::Arc<KernelMask>>,
) -> Result<()> {
    out.clear();
    if a.has_lookahead() {
        // Kernel classifications assume no pending obligations; walk the real chart instead.
        return fill_mask_direct(a, chart, trie, out);
    }
    let kernels = kernel_items(a, chart);
    let mut masks = Vec::with_capacity(kernels.len());
    for it in &kernels {
        let km = get_kernel(it.state)?;
        out.or_assign(&km.accepted);
        masks.push(km);
    }
    let rows = chart.num_rows();
    for (it, km) in kernels.iter().zip(&masks) {
        if km.uncertain.is_empty() || km.uncertain.iter().all(|&(t, _)| out.get(t as usize)) {
            continue;
        }
        let rule = a.state(it.state).rule;
        let verdict = if chart.push_completion(a, it.origin as usize, rule)? {
            let v = walk_suffixes(a, chart, km)?;
            chart.truncate_rows(rows);
            v
        } else {
            vec![false; km.suffixes.len()]
        };
        for &(t, s) in &km.uncertain {
            if verdict[s as usize] {
                out.set(t as usize);
            }
        }
    }
    Ok(())
}

/// Which suffixes the chart (positioned just after the kernel's rule ended) accepts, walking
/// them in trie order and skipping every suffix that extends a rejected prefix.
fn walk_suffixes(a: &Automata, chart: &mut Chart, km: &KernelMask) -> Result<Vec<bool>> {
    let base = chart.num_rows();
    let mut verdict = vec![false; km.suffixes.len()];
    // Rows above `base` hold the bytes of the current path; a byte at depth `dead` or less
    // failed, so suffixes sharing more than `dead` bytes with the path fail too.
    let mut dead = usize::MAX;
    let mut depth = 0usize;
    for &(i, lcp) in &km.suffix_walk {
        let lcp = lcp as usize;
        let s = &km.suffixes[i as usize];
        if lcp > dead {
            continue;
        }
        dead = usize::MAX;
        let keep = lcp.min(depth);
        chart.truncate_rows(base + keep);
        depth = keep;
        let mut ok = true;
        for &b in &s[keep..] {
            if !chart.push_byte(a, b)? {
                dead = depth;
                ok = false;
                break;
            }
            depth += 1;
        }
        verdict[i as usize] = ok;
    }
    chart.truncate_rows(base);
    Ok(verdict)
}

/// The mask by walking the whole token trie on the real chart (exact for any grammar, slower):
/// used for grammars with lookahead assertions.
pub fn fill_mask_direct(a: &Automata, chart: &mut Chart, trie: &TokenTrie, out: &mut Bitset) -> Result<()> {
    let base = chart.num_rows();
    let nodes = &trie.nodes;
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        chart.truncate_rows(base + n.depth as usize - 1);
        if !chart.push_byte(a, n.byte)? {
            i = n.subtree_end as usize;
            continue;
        }
        for &t in trie.node_tokens(&n) {
            out.set(t as usize);
        }
        i += 1;
    }
    chart.truncate_rows(base);
    Ok(())
}
