//! The JSON string-body slice of a vocabulary: a shortcut for kernel classification
//! ([`crate::mask::classify_kernel`]) inside JSON strings.
//!
//! Inside a string (a value, or a key of an open object) nearly every token is allowed, and a
//! plain trie walk visits every node of the vocabulary. Instead, the tokens whose bytes are a run
//! of string-body text (unescaped characters >= U+0020 other than `"` and `\`, and the short
//! escapes `\" \\ \b \f \n \r \t`, possibly ending inside a UTF-8 sequence or after `\`) are
//! found once per vocabulary ([`BodySlice::slice`]). A kernel state qualifies
//! ([`BodySlice::covers`]) when, from it, the automaton reads every body byte the body automaton
//! reads, staying in states without rule references, and rejects every byte the body automaton
//! rejects outright; then every slice token is accepted, and only the subtrees that start with
//! `"` (from a character boundary), `\u` or `\/` need a real walk ([`BodySlice::frontier`]), plus, when
//! the rule can end on the way (final states), those that start with a dead byte, whose tokens may
//! still be uncertain (the text after the rule's end is checked in the real context).
//!
//! Invariant: a node is in the frontier iff its path up to its parent is body text and its own
//! byte is not (`"` at a character boundary, `u` or `/` after `\`: walk; anything else: dead).
//! `\/` is walked rather than read because the canonical spelling (`spelling="canonical"`, the
//! JSON Schema default) refuses it: with it in the slice no canonical string body was covered,
//! and every new string position took a full trie walk (~10 ms on Llama 3).
use super::cover::{cover_search, cover_search_after_fills, cover_search_refuted, CoverMemo, Refutation, SliceKey};
use super::{walk_chars, Body, CharCounts, FrontierNode};
use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::trie::TokenTrie;

/// The byte-level body automaton: 0 = character boundary, 1 = after `\`, 2..=8 = inside a
/// UTF-8 sequence (a state past 8 steps as 8).
/// PERF: a table look-up ([`BODY_STEPS`]): the cover searches' setup steps every byte of every
/// slice state per slice and compile (~16 M calls on the 605 schemas of the compile band, 3% of
/// its instructions as a call of the `match` below).
#[inline]
pub(super) fn body_step(b: u8, x: u8) -> Body {
    BODY_STEPS[usize::from(if b < 8 { b } else { 8 })][usize::from(x)]
}

/// [`body_step`] for every body state and byte, built at compile time by [`body_step_of`].
static BODY_STEPS: [[Body; 256]; 9] = {
    let mut t = [[Body::Dead; 256]; 9];
    let mut b = 0;
    while b < 9 {
        let mut x = 0;
        while x < 256 {
            t[b][x] = body_step_of(b as u8, x as u8);
            x += 1;
        }
        b += 1;
    }
    t
};

/// The body automaton's step, by cases ([`body_step`] reads it as a table).
pub(super) const fn body_step_of(b: u8, x: u8) -> Body {
    use Body::{Dead, To, Walk};
    const fn cont(x: u8, lo: u8, hi: u8, next: u8) -> Body {
        if lo <= x && x <= hi {
            To(next)
        } else {
            Dead
        }
    }
    match b {
        0 => match x {
            b'"' => Walk,
            b'\\' => To(1),
            0x20..=0x7F => To(0),
            0xC2..=0xDF => To(2),
            0xE0 => To(4),
            0xE1..=0xEC | 0xEE..=0xEF => To(3),
            0xED => To(5),
            0xF0 => To(7),
            0xF1..=0xF3 => To(6),
            0xF4 => To(8),
            _ => Dead,
        },
        1 => match x {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => To(0),
            // `\/` is JSON but not canonical spelling (`spelling="canonical"` refuses it), and
            // `\u` escapes vary with the spelling too: both are walked for real, so one slice
            // serves both spellings.
            b'/' | b'u' => Walk,
            _ => Dead,
        },
        2 => cont(x, 0x80, 0xBF, 0),
        3 => cont(x, 0x80, 0xBF, 2),
        4 => cont(x, 0xA0, 0xBF, 2),
        5 => cont(x, 0x80, 0x9F, 2),
        6 => cont(x, 0x80, 0xBF, 3),
        7 => cont(x, 0x90, 0xBF, 3),
        _ => cont(x, 0x80, 0x8F, 3),
    }
}

/// Per-vocabulary string-body data (see the module doc).
#[derive(Debug)]
pub struct BodySlice {
    pub slice: Bitset,
    pub frontier: Vec<FrontierNode>,
    /// The slice tokens by the characters they begin (see [`chars_begun`]).
    counts: CharCounts,
    /// Boundary nodes by characters read ([`Self::boundary_nodes`]), built on first use.
    boundaries: std::sync::OnceLock<Boundaries>,
}

/// [`BodySlice::boundary_nodes`] by characters, and how many nodes lie below them.
#[derive(Debug)]
struct Boundaries {
    nodes: Vec<std::sync::Arc<[u32]>>,
    below: Vec<u32>,
}

/// One character level of a counted string body (`json_char{0,n}`), see [`body_level`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Every character readable here leads to this state.
    Next(StateId),
    /// No character can begin here (the repetition is exhausted).
    Zero,
}

/// How a kernel state qualifies for the slice shortcut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cover {
    /// The kernel's rule may end inside body text.
    pub may_end: bool,
    /// Walk every dead frontier subtree, whatever FOLLOW says.
    pub walk_dead: bool,
}

impl BodySlice {
    /// The slice tokens by the characters they begin.
    pub(super) fn counts(&self) -> &CharCounts {
        &self.counts
    }

    /// Bytes held.
    pub fn memory_size(&self) -> usize {
        let boundaries = self.boundaries.get().map_or(0, |b| b.nodes.iter().map(|v| 4 * v.len() + 28).sum());
        self.slice.memory_size() + super::frontier_memory(&self.frontier) + self.counts.memory_size() + boundaries
    }

    /// PERF: one trie walk for the slice, its frontier and the characters each token begins,
    /// with the body step a table lookup, and each cumulative set the union of the one below it
    /// and the tokens of exactly its count (it took 8.5 ms on Llama 3 with two walks and every
    /// token set in up to 33 sets, at the first compile of each vocabulary).
    pub fn new(trie: &TokenTrie, vocab_size: usize) -> BodySlice {
        let (table, _) = body_table();
        let mut slice = Bitset::new(vocab_size);
        let mut frontier = Vec::new();
        let mut counts = CharCounts::new(vocab_size);
        let step = |b: u8, x: u8| match table[usize::from(b)][usize::from(x)] {
            Body::To(next) => Some(next),
            _ => None,
        };
        let token = |k: u32, t: u32| {
            slice.set(t as usize);
            counts.insert(k, t);
        };
        let leave = |node: u32, path: &[u8], (b, _): (u8, u32), x: u8| {
            let dead = table[usize::from(b)][usize::from(x)] == Body::Dead;
            frontier.push(FrontierNode { node, path: path.into(), dead });
        };
        walk_chars(trie, 0u8, step, |b| b == 0, |_, _| {}, token, leave);
        counts.finish();
        BodySlice { slice, frontier, counts, boundaries: std::sync::OnceLock::new() }
    }

    /// The trie nodes with children whose path is body text (read by the slice automaton from
    /// state 0) that ends at a character boundary after exactly `chars` characters
    /// (`chars >= 1`): the tokens below them are those that go on past `chars` characters.
    /// PERF: a `json_char{1024}` block's last positions took a walk of the whole vocabulary each
    /// (~7 ms on Llama 3, MaskBench o82710); their tokens past the block's end are found here.
    /// Built on first use, in one pass with a slot per depth and leaves left out (with a stack
    /// and every boundary node, ~17 M instructions on Llama 3).
    pub fn boundary_nodes(&self, trie: &TokenTrie, chars: u32) -> &[u32] {
        self.prepare_boundaries(trie);
        let b = self.boundaries.get().expect("set by prepare_boundaries");
        b.nodes.get(chars as usize).map_or(&[], |v| &**v)
    }

    /// The trie nodes below [`Self::boundary_nodes`] of `chars` (the nodes a walk of their
    /// subtrees visits at most).
    pub fn nodes_past(&self, trie: &TokenTrie, chars: u32) -> usize {
        self.prepare_boundaries(trie);
        let b = self.boundaries.get().expect("set by prepare_boundaries");
        b.below.get(chars as usize).map_or(0, |&n| n as usize)
    }

    /// Builds [`Self::boundary_nodes`] unless set: apart, then set (the first set wins; both are
    /// equal), so that no lock is held across a build (the token index builds them with the
    /// slice, [`crate::token_index::TokenIndex`]).
    pub fn prepare_boundaries(&self, trie: &TokenTrie) {
        if self.boundaries.get().is_some() {
            return;
        }
        let (table, _) = body_table();
        let mut by_chars: Vec<Vec<u32>> = Vec::new();
        let nodes = &trie.nodes;
        let step = |b: u8, x: u8| match table[usize::from(b)][usize::from(x)] {
            Body::To(next) => Some(next),
            _ => None,
        };
        // A node with children whose path ends a character (slice state 0) after `k` of them.
        let read = |i: u32, (next, k): (u8, u32)| {
            if next == 0 && nodes[i as usize].subtree_end > i + 1 {
                if by_chars.len() <= k as usize {
                    by_chars.resize(k as usize + 1, Vec::new());
                }
                by_chars[k as usize].push(i);
            }
        };
        walk_chars(trie, 0u8, step, |b| b == 0, read, |_, _| {}, |_, _, _, _| {});
        let below =
            by_chars.iter().map(|v| v.iter().map(|&n| nodes[n as usize].subtree_end - n - 1).sum::<u32>()).collect();
        let _ = self.boundaries.set(Boundaries { nodes: by_chars.into_iter().map(Into::into).collect(), below });
    }

    /// [`Self::boundary_nodes`], shared (a kernel keeps them, see [`crate::mask::Beyond`]).
    pub fn boundary_nodes_shared(&self, trie: &TokenTrie, chars: u32) -> std::sync::Arc<[u32]> {
        self.boundary_nodes(trie, chars);
        let b = self.boundaries.get().expect("set by prepare_boundaries");
        b.nodes.get(chars as usize).cloned().unwrap_or_else(|| std::sync::Arc::from(Vec::new()))
    }

    /// The characters begun by body text `path` read from slice state 0, and the slice state
    /// after it; `None` when the slice automaton leaves on the way.
    pub fn chars_and_state(path: &[u8]) -> Option<(u32, u8)> {
        let (table, _) = body_table();
        let (mut b, mut k) = (0u8, 0u32);
        for &x in path {
            match table[usize::from(b)][usize::from(x)] {
                Body::To(next) => {
                    k += u32::from(b == 0);
                    b = next;
                }
                _ => return None,
            }
        }
        Some((k, b))
    }

    /// The byte offset in body text `path` (read from slice state 0) where exactly `chars`
    /// characters are complete (`chars >= 1`), if the path gets there.
    pub fn boundary_offset(path: &[u8], chars: u32) -> Option<usize> {
        let (table, _) = body_table();
        let (mut b, mut k) = (0u8, 0u32);
        for (at, &x) in path.iter().enumerate() {
            let Body::To(next) = table[usize::from(b)][usize::from(x)] else { return None };
            k += u32::from(b == 0);
            b = next;
            if b == 0 && k == chars {
                return Some(at + 1);
            }
            if k > chars {
                return None;
            }
        }
        None
    }

    /// Adds to `out` the slice tokens that begin at most `capacity` characters.
    pub fn add_within(&self, capacity: u32, out: &mut Bitset) {
        self.counts.add_within(capacity, out);
    }

    /// Whether kernel state `s` qualifies for the shortcut (see the module doc): `None` if not.
    /// A state whose only way on is rule references qualifies when each referenced rule's start
    /// does (the token is read inside them); then every frontier node must be walked
    /// ([`Cover::walk_dead`]), since the text after such a rule ends belongs to the kernel's rule.
    /// Searches already decided in `memo` (the grammar's) are not redone.
    pub fn covers(a: &Automata, s: StateId, memo: &CoverMemo) -> Option<Cover> {
        Self::covers_or_misread(a, s, memo).ok()
    }

    /// [`Self::covers`], or else what the search from `s` itself misread (see
    /// [`super::cover::cover_search`]), for [`super::walked_cover`].
    pub fn covers_or_misread(a: &Automata, s: StateId, memo: &CoverMemo) -> Result<Cover, Option<super::Misread>> {
        Self::covers_or_refuted(a, s, memo).map_err(|r| r.misread)
    }

    /// [`Self::covers_or_misread`], with where the search from `s` itself met its misread
    /// ([`super::cover::MisreadAt`], for [`super::bounded_short`]).
    pub fn covers_or_refuted(a: &Automata, s: StateId, memo: &CoverMemo) -> Result<Cover, Refutation> {
        if let Some(cover) = Self::covers_through_quoted_calls(a, s, memo) {
            return Ok(cover);
        }
        let refuted = match cover_search_refuted(a, s, SliceKey::Body, body_step, memo) {
            Ok(ends) => return Ok(Cover { may_end: ends.may_end, walk_dead: false }),
            Err(r) => r,
        };
        let edges = a.rule_edges(s);
        if edges.is_empty() || !a.byte_edges(s).is_empty() {
            return Err(refuted);
        }
        for &(r, _) in edges {
            Self::covers_plain(a, a.callee_start(s, r), memo).ok_or(refuted)?;
        }
        Ok(Cover { may_end: true, walk_dead: true })
    }

    /// [`Self::covers`] for a state that only calls rules which return to an *inert* state (not
    /// final, no rule edges, reading only `"`: a string's closing quote after its body rule), by
    /// searches from the callees' starts alone; `None` if it does not apply or they fail.
    /// Exact: after a callee ends at a character boundary the kernel's row holds the inert state,
    /// which reads no body byte and never ends the rule, so the kernel reads the slice as its
    /// callees do and never ends inside it; a callee that may end inside a character or an
    /// escape (where `"` is body text) does not qualify.
    /// PERF: the callees' sets are those of the body's later positions (kernel items of the
    /// callee itself), so one search serves both: `Github_hard---o79409`'s `trace_id` (a regex
    /// string with `minLength`, ~9k sets) was searched twice, after `"` and after `"1`, ~6 ms each.
    ///
    /// A state that also reads bytes itself (a key start: the first letters of pattern keys
    /// beside a call of the key pattern, `key.re`) qualifies the same way when the text its byte
    /// edges begin reads no dead byte and calls no rule ([`byte_branches_end`]): the callees keep
    /// every body text alive, the branches add no token outside the slice but the frontier, and
    /// the rule may end inside body text only where a branch reaches a final state.
    /// PERF: o65323's `"tender": {"` (six pattern keys' letters beside `key.re`): the search from
    /// the state itself explored the branches' sets beside the callee's until its budget ran out
    /// (22 M instructions), then the whole trie was walked.
    fn covers_through_quoted_calls(a: &Automata, s: StateId, memo: &CoverMemo) -> Option<Cover> {
        let edges = a.rule_edges(s);
        if !Self::calls_quoted(a, s) {
            return None;
        }
        let may_end = byte_branches_end(a, s)?;
        for &(r, _) in edges {
            let ends = cover_search(a, a.callee_start(s, r), SliceKey::Body, body_step, memo).ok()?;
            if ends.inside {
                return None;
            }
        }
        if !a.byte_edges(s).is_empty() {
            BRANCHES_BESIDE_CALLS.set(BRANCHES_BESIDE_CALLS.get() + 1);
        }
        Some(Cover { may_end, walk_dead: false })
    }

    /// Whether `s` is not final and only calls rules, at least one, that return to *inert*
    /// states (see [`Self::covers_through_quoted_calls`]).
    fn calls_quoted(a: &Automata, s: StateId) -> bool {
        let inert = |t: StateId| {
            let quote_only = |e: &crate::compiler::ByteEdge| (e.lo..=e.hi).all(|x| body_step(0, x) == Body::Walk);
            !a.state(t).is_final && a.rule_edges(t).is_empty() && a.byte_edges(t).iter().all(quote_only)
        };
        let edges = a.rule_edges(s);
        !a.state(s).is_final && !edges.is_empty() && edges.iter().all(|&(_, t)| inert(t))
    }

    /// The callee starts, each once, of the states that read bytes themselves beside quoted
    /// calls (key starts: pattern keys' first letters beside the key pattern's call,
    /// [`Self::covers_through_quoted_calls`]), then those of the other states that only call
    /// quoted rules (string value starts) not among the first, for [`Self::search_callees`];
    /// and those key starts themselves, for [`Self::search_key_starts`].
    pub fn quoted_callees(a: &Automata) -> QuotedCallees {
        let mut q = QuotedCallees::default();
        for s in (0..a.states().len() as u32).map(StateId) {
            if !Self::calls_quoted(a, s) {
                continue;
            }
            let starts = if a.byte_edges(s).is_empty() {
                &mut q.values
            } else {
                q.key_states.push(s);
                &mut q.keys
            };
            starts.extend(a.rule_edges(s).iter().map(|&(r, _)| a.callee_start(s, r)));
        }
        for starts in [&mut q.keys, &mut q.values] {
            starts.sort_unstable();
            starts.dedup();
        }
        q.values.retain(|v| q.keys.binary_search(v).is_err());
        q
    }

    /// Runs the body cover search from each key start of `states` ([`QuotedCallees::key_states`])
    /// whose callees alone do not decide it ([`Self::covers_through_quoted_calls`] fails: a
    /// callee refuses text a byte branch reads, such as `x-` for the pattern key `^x-` beside the
    /// key regex that excludes it), off the fill path as [`Self::search_callees`] does, so that a
    /// fill classifying it finds the search from the state itself decided. Call after the
    /// callees' searches (their verdicts are then memoized).
    /// PERF: MaskBench clang-format t1 (`{"`): state 38123 of `obj_extra` (`x` beside `key.re`,
    /// a JSON string less ~150 names and `x-...`) searched the names' trie from itself in the
    /// fill, 21.7 M of its 29.7 M instructions.
    pub fn search_key_starts(a: &Automata, states: &[StateId], memo: &CoverMemo) {
        for &s in states {
            let alone = byte_branches_end(a, s).is_some()
                && a.rule_edges(s).iter().all(|&(r, _)| {
                    cover_search_after_fills(a, a.callee_start(s, r), SliceKey::Body, body_step, memo)
                        .is_ok_and(|ends| !ends.inside)
                });
            if !alone {
                let _ = cover_search_after_fills(a, s, SliceKey::Body, body_step, memo);
            }
        }
    }

    /// Runs the body cover search from each of `starts` ([`Self::quoted_callees`]) into `memo`,
    /// off the fill path (the class-body thread), so that a fill classifying a key start or a
    /// string value start finds its callees decided. One search at a time holds the memo, and none begins while a fill
    /// waits for it ([`cover_search_after_fills`]); a search past the caller's budget leaves its
    /// pairs undecided, for the fill to search again.
    /// PERF: o65323's `"tender": {"`: `key.re`'s search was 5.55 M of the first such fill's
    /// 8.9 M instructions. In the compile, the 89 callee starts of its 124 key starts took 60 M
    /// (7% of the compile's instructions). o79409's `trace_id` value start (a regex body with
    /// `minLength`, no byte of its own): its callee's search was 12.9 M of a 13.2 M fill.
    pub fn search_callees(a: &Automata, starts: &[StateId], memo: &CoverMemo) {
        for &start in starts {
            let _ = cover_search_after_fills(a, start, SliceKey::Body, body_step, memo);
        }
    }

    /// [`Self::covers`] without the nested case: whether a final state is reachable on body text
    /// (the rule may end inside a token, so dead subtrees may hold uncertain tokens).
    fn covers_plain(a: &Automata, s: StateId, memo: &CoverMemo) -> Option<bool> {
        cover_search(a, s, SliceKey::Body, body_step, memo).ok().map(|e| e.may_end)
    }
}

/// The states [`BodySlice::quoted_callees`] finds for the class-body thread's cover searches.
#[derive(Debug, Default)]
pub struct QuotedCallees {
    /// The callee starts of key starts (states reading bytes beside quoted calls), each once.
    pub keys: Vec<StateId>,
    /// The callee starts of the other quoted-call states (string value starts), not in `keys`.
    pub values: Vec<StateId>,
    /// The key starts themselves.
    pub key_states: Vec<StateId>,
}

/// Most configurations [`byte_branches_end`] explores.
const MAX_BRANCH_CONFIGS: usize = 4096;

/// For [`BodySlice::covers_through_quoted_calls`]: the configurations that `s`'s own byte edges
/// reach on body text, callees followed, as (state, body state, whether no call is pending):
/// a callee's end returns to every state some explored call of its rule returns to (a superset
/// of the real configurations, whatever their stacks). `None` if one of them reads a byte the
/// body automaton refuses there (a dead byte), `s` is met again with no call pending (its
/// callees would begin inside the text), or there are too many; otherwise whether the rule
/// may end on the way (a final state with no call pending). `Some(false)` for a state without
/// byte edges.
fn byte_branches_end(a: &Automata, s: StateId) -> Option<bool> {
    use crate::fasthash::FastMap;
    type Branch = (StateId, u8, bool);
    struct Search {
        seen: std::collections::HashSet<Branch, crate::fasthash::FastState>,
        todo: Vec<Branch>,
        /// Per callee rule, the states its explored calls return to.
        returns: FastMap<crate::grammar::RuleId, Vec<(StateId, bool)>>,
        /// Per callee rule, the body states in which it ended.
        ends: FastMap<crate::grammar::RuleId, Vec<u8>>,
    }
    impl Search {
        fn meet(&mut self, c: Branch, s: StateId) -> Option<()> {
            if c.0 == s && c.2 {
                return None;
            }
            if self.seen.insert(c) {
                if self.seen.len() > MAX_BRANCH_CONFIGS {
                    return None;
                }
                self.todo.push(c);
            }
            Some(())
        }
    }
    let mut w = Search {
        seen: std::collections::HashSet::default(),
        todo: Vec::new(),
        returns: FastMap::default(),
        ends: FastMap::default(),
    };
    let mut may_end = false;
    let (mut q, mut b, mut top) = (s, 0u8, true);
    loop {
        for e in a.byte_edges(q) {
            // The body states the edge's bytes lead to, one bit each (one meeting per state).
            let mut nexts = 0u16;
            for x in e.lo..=e.hi {
                match body_step(b, x) {
                    Body::To(next) => nexts |= 1 << next,
                    Body::Walk => {}
                    Body::Dead => return None,
                }
            }
            while nexts != 0 {
                w.meet((e.target, nexts.trailing_zeros() as u8, top), s)?;
                nexts &= nexts - 1;
            }
        }
        if q != s || !top {
            for &(r, t) in a.rule_edges(q) {
                let start = a.callee_start(q, r);
                let rule = a.state(start).rule;
                let returns = w.returns.entry(rule).or_default();
                if !returns.contains(&(t, top)) {
                    returns.push((t, top));
                    for end in w.ends.get(&rule).cloned().unwrap_or_default() {
                        w.meet((t, end, top), s)?;
                    }
                }
                w.meet((start, b, false), s)?;
            }
            if a.state(q).is_final {
                if top {
                    may_end = true;
                } else {
                    let rule = a.state(q).rule;
                    let ends = w.ends.entry(rule).or_default();
                    if !ends.contains(&b) {
                        ends.push(b);
                        for (t, up) in w.returns.get(&rule).cloned().unwrap_or_default() {
                            w.meet((t, b, up), s)?;
                        }
                    }
                }
            }
        }
        let Some(next) = w.todo.pop() else { return Some(may_end) };
        (q, b, top) = next;
    }
}

test_counter! {
    /// How many times a state with byte edges beside its quoted calls covered the body slice on this
    /// thread ([`BodySlice::covers_through_quoted_calls`]), for tests.
    pub fn branches_beside_calls => BRANCHES_BESIDE_CALLS
}

/// Every slice token with the number of characters it begins (the reference [`BodySlice::new`]'s
/// counts are tested against): a character begins at each byte
/// read from the body automaton's boundary state (an ASCII character, a UTF-8 lead byte, a backslash),
/// so a token ending inside a character counts it.
#[cfg(test)]
pub(super) fn chars_begun(trie: &TokenTrie) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    // (body state, characters begun) after d+1 bytes of the current path.
    let mut stack: Vec<(u8, u32)> = Vec::new();
    let nodes = &trie.nodes;
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        stack.truncate(n.depth as usize - 1);
        let (b, k) = stack.last().copied().unwrap_or((0, 0));
        match body_step(b, n.byte) {
            Body::To(next) => {
                let k = k + u32::from(b == 0);
                stack.push((next, k));
                out.extend(trie.node_tokens(&n).iter().map(|&t| (t, k)));
                i += 1;
            }
            _ => i = n.subtree_end as usize,
        }
    }
    out
}

/// One character level of a counted string body at automaton state `r` (plain: no rule edges):
/// `Next(s)` when every body character (ASCII, UTF-8 sequence, short escape) is read from `r`
/// through plain, non-final states and all of them end in the same state `s` (plain; it may be
/// final: the rule may end after the character), and every byte that can never be in a string is
/// refused on the way; `Zero` when no body character can even begin at `r` (and dead bytes are
/// refused); `None` otherwise. `"` at a boundary and `\u` escapes are free (they are frontier
/// bytes, walked for real).
///
/// A chain `r = s_c -> ... -> s_1 -> s_0` of `Next` levels ending in `Zero` reads exactly the
/// body text that begins at most `c` characters ([`BodySlice::add_within`]); the rule may end
/// only at the character boundaries whose state is final ([`body_capacity`]).
pub fn body_level(a: &Automata, r: StateId) -> Option<Level> {
    body_level_ending(a, r, false)
}

/// [`body_level`], except that the state every character ends in may call rules: the last level
/// of a chain into a state that calls counted bodies ([`counted_calls`]).
pub fn body_level_into_calls(a: &Automata, r: StateId) -> Option<Level> {
    body_level_ending(a, r, true)
}

fn body_level_ending(a: &Automata, r: StateId, into_calls: bool) -> Option<Level> {
    let plain = |t: StateId| a.rule_edges(t).is_empty();
    let ok = |t: StateId| plain(t) && !a.state(t).is_final;
    if !plain(r) {
        return None;
    }
    let (table, to_bytes) = body_table();
    let mut next: Option<StateId> = None;
    let mut stack: Vec<(StateId, u8)> = vec![(r, 0)];
    let mut seen: Vec<(StateId, u8)> = Vec::new();
    // PERF: only the bytes on `q`'s edges are looked at; the body bytes it cannot read are
    // counted, not searched (a chain of a few hundred levels is checked in well under 1 ms, and a
    // state that is no string body fails on its first edges).
    while let Some((q, b)) = stack.pop() {
        let mut read = 0usize;
        for e in a.byte_edges(q) {
            for x in e.lo..=e.hi {
                match table[usize::from(b)][usize::from(x)] {
                    Body::Dead => return None,
                    Body::Walk => {}
                    Body::To(nb) => {
                        read += 1;
                        let t = e.target;
                        if !(if nb == 0 { into_calls || plain(t) } else { ok(t) }) {
                            return None;
                        }
                        if nb == 0 {
                            if *next.get_or_insert(t) != t {
                                return None;
                            }
                        } else if !seen.contains(&(t, nb)) {
                            if seen.len() >= MAX_LEVEL_PAIRS {
                                return None;
                            }
                            seen.push((t, nb));
                            stack.push((t, nb));
                        }
                    }
                }
            }
        }
        if read < to_bytes[usize::from(b)] {
            // A body byte is refused: only allowed at the boundary, for all of them at once.
            return (q == r && b == 0 && read == 0).then_some(Level::Zero);
        }
    }
    next.map(Level::Next)
}

/// Most (state, body state) pairs inside one character of a [`body_level`] (a JSON string's
/// automaton has about a dozen).
const MAX_LEVEL_PAIRS: usize = 64;

/// [`body_step`] as a table, `[body state][byte]`, and the number of `To` bytes of each body state.
pub(crate) fn body_table() -> &'static ([[Body; 256]; 9], [usize; 9]) {
    static TABLE: std::sync::OnceLock<([[Body; 256]; 9], [usize; 9])> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [[Body::Dead; 256]; 9];
        let mut n = [0usize; 9];
        for (b, row) in t.iter_mut().enumerate() {
            for (x, cell) in row.iter_mut().enumerate() {
                *cell = body_step(b as u8, x as u8);
                n[b] += usize::from(matches!(cell, Body::To(_)));
            }
        }
        (t, n)
    })
}

/// A counted string body ([`body_capacity`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counted {
    /// Characters the chain reads at most, capped at `max_chars` (then every slice token fits).
    pub chars: u32,
    /// Some boundary state after the first character is final: the rule may end inside a token.
    /// Then `chars` is at least `max_chars`, so no token outruns the chain.
    pub ends: bool,
    /// The state only calls rules whose starts are counted bodies of at least `max_chars`: a
    /// token is read inside a callee, and the text after a callee ends is the state's own rule
    /// (as [`BodySlice::covers`]'s nested case: every frontier node is walked).
    pub calls: bool,
}

/// The capacity of a counted string body at `s`: the `c` of a [`body_level`] chain from `s` to
/// `Zero`, or `max_chars` when the chain reads at least that many characters (loops included):
/// then no token can exceed it. `level` gives each state's level (memoized by the caller),
/// `is_final` its finality. `None` when a boundary on a chain shorter than `max_chars` is final:
/// a token longer than the chain ends the rule there and is uncertain, which a walk decides (a
/// `json_char{1024}` block's last positions, `json_char{0,n}` inside its own rule near `n`).
///
/// PERF: a state that is its own next level (`json_char*` inside a larger rule: a string value
/// of a structural tag) is unbounded at once; it used to follow its chain `max_chars` times.
pub fn body_capacity(
    s: StateId,
    max_chars: u32,
    mut level: impl FnMut(StateId) -> Option<Level>,
    is_final: impl Fn(StateId) -> bool,
) -> Option<Counted> {
    let mut r = s;
    let mut ends = false;
    for c in 0..max_chars {
        match level(r)? {
            Level::Zero => return (!ends).then_some(Counted { chars: c, ends, calls: false }),
            Level::Next(t) if t == r => {
                return Some(Counted { chars: max_chars, ends: ends || is_final(t), calls: false })
            }
            Level::Next(t) => {
                ends |= is_final(t);
                r = t;
            }
        }
    }
    Some(Counted { chars: max_chars, ends, calls: false })
}

/// A state whose only way on is calls of counted string bodies that no token outruns (a string
/// with a long `maxLength`, after its quote: blocks of `json_char{1024}` or a shorter rest): it
/// reads every slice token inside a callee ([`Counted::calls`]). `capacity` gives a state's
/// [`body_capacity`].
pub fn counted_calls(
    a: &Automata,
    s: StateId,
    max_chars: u32,
    mut capacity: impl FnMut(StateId) -> Option<Counted>,
) -> Option<Counted> {
    let edges = a.rule_edges(s);
    if edges.is_empty() || !a.byte_edges(s).is_empty() {
        return None;
    }
    for &(r, _) in edges {
        if capacity(a.callee_start(s, r))?.chars < max_chars {
            return None;
        }
    }
    Some(Counted { chars: max_chars, ends: true, calls: true })
}
