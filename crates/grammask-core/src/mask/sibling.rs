//! Sibling kernels: kernel states of one grammar that differ only in literal strings no token
//! can read to their end, classified once.
//!
//! Pipeline place: asked by [`crate::compiled::CompiledGrammar`] before a new kernel is
//! classified; takes the automata, the grammar's [`ExcludedWords`] and the vocabulary's
//! [`QuoteEnds`], and gives a key under which equal kernels are found ([`sibling_key`]).
//!
//! After each `,` of an open object with many optional properties, the row holds two items per
//! property still to come, each in a rule of its own: `ws "\"" ("key_k" "\"" ... | key_not_in
//! "\"" ... ws "," ws)`. The rules differ only in the literal `key_k"` beside the call of the
//! excluded-key rule `key_not_in`, which reads every key text but finitely many words.
//!
//! **Dropped edges.** A byte edge `q --l1--> ...` is *dropped* when it starts a tree of literal
//! states ([`literal_tree`]: single bytes, no rule edges, not final; one chain per key, or keys
//! sharing a prefix) whose every path reads some `l = l1..ln` up to the first `"` after `l1` (a
//! key and its closing quote) such that some callee of `q` reads `l1..l(n-1)` without its rule
//! ending ([`Inside::reads_text`]; for a key, the extra-key rule `"` `key_not_in`, whose
//! excluded-words rule reads any string text, as every string extends past its finitely many
//! words) and no token of the vocabulary contains `l`. Then removing the edge changes no kernel
//! classification: a token read through the tree cannot reach a path's end (it would contain
//! that `l`), so it ends inside a path, accepted (the tree's states are neither final nor call
//! anything: no rule end on the way); and the callee, predicted in the same row as `q`, reads the
//! same bytes and stays alive, so it accepts the token as well.
//!
//! **Dropped calls.** A rule edge `(X, t)` of `q` is dropped likewise when `X`'s start (through
//! at most [`ALIAS_DEPTH`] aliases: a start whose only edge is one call) reads a literal tree
//! whose every path `l` no token contains and `q` reads `l1..l(n-1)` itself, through a kept byte
//! edge and what follows it in its rule (a quoted key `"key" ws ":" ...` beside the inlined
//! extra-key path `"` `key_not_in`, as `oneOf` alternatives of open objects are compiled,
//! MaskBench o3626). A token read into `X` ends inside a path, read alive by `q` as well; `X`
//! completes nothing, so `t` and what follows it are never reached. Byte edges are dropped for
//! callees, calls for kept byte edges only, so no two dropped edges rest on each other.
//!
//! **The key.** A kernel classification depends only on the automaton below the kernel state:
//! the states of its own rule (whose items have origin 0 in the kernel chart, the others only
//! through calls), the rules they call (the same states, within one grammar) and the rule's
//! FOLLOW set. [`sibling_key`] lists exactly that with the dropped edges left out: the own-rule
//! states reachable from the kernel state, numbered in discovery order, each with its finality,
//! its byte edges and its rule edges (rule, callee start, return state); plus FOLLOW where one of
//! them is final (FOLLOW filters rule ends only; the states after a dropped edge are not final
//! and no token passes the tree's `"`, so none ends the rule there). Equal keys
//! (compared in full, not by hash) mean automata equal up to dropped edges, hence equal
//! classifications.
//!
//! Two refinements let rules that differ only in their names share. A call of the kernel's own
//! rule is listed by its start's number, the start then listed as an own-rule state: the calls
//! of `R` and `R'` from isomorphic listings start isomorphic items (whatever else calls `R`
//! calls it in both charts, beside them). A callee whose own listing from its start meets a
//! dropped edge is listed by that listing ([`SiblingEdges::class_of`], its callees by rule):
//! callees with equal listings read alike up to dropped edges, which change nothing in any chart
//! within a token (a token entering a dropped call ends inside its tree, which the caller's
//! state reads alive). MaskBench o3626 (`oneOf`s of five open objects, nested recursively)
//! compiles one object rule per path; after a key's value they differ in the later keys only.
//!
//! PERF: `Github_hard---o30633` (94 optional properties, open) took ~13 ms on Llama 3 after its
//! first `,`: 188 new kernels (~60-75 us each) that are two classifications.
use crate::compiler::{Automata, StateId};
use crate::follow::ByteSet;
use crate::grammar::{ExcludedWords, RuleId};
use crate::vocab::Vocabulary;
use std::sync::OnceLock;

/// Rules nearest the root ([`SiblingEdges::rules_from_root`]) whose sibling edges, listings
/// and chain ends the class-body thread finds before its slower cover searches; of the others it
/// finds only the edges, after them.
/// PERF: MaskBench testenvironments (11.5 k rules, a `oneOf` of four objects, each an any-order
/// key set) took ~132 M instructions for every rule's, after ~44 M of key-start searches: its fill
/// at t12 came first and found ~360 rules' edges itself (3.9 M instructions), all among the
/// first ~900 rules from the root (by the calls of its EBNF text).
pub const NEAR_RULES: usize = 1024;

/// Own-rule states a [`sibling_key`] lists at most; past them there is no key.
pub const SIBLING_KEY_STATES: usize = 64;

/// The word before a self-call's start in a [`sibling_key`] (a rule edge's word holds a rule id
/// and a state id, both below `u32::MAX`).
const SELF_CALL: u64 = u64::MAX - 2;

/// The word before a callee's class (its length, then its words) in a [`sibling_key`].
const CALLEE_CLASS: u64 = u64::MAX - 3;

/// The word a rule's next rule in a chain is listed by ([`SiblingEdges::chain_end`]).
const CHAIN_NEXT: u64 = u64::MAX - 4;

test_counter! {
    /// How many kernels this thread took from their chain's last rule (for tests).
    pub fn chain_kernels => CHAIN_KERNELS
}

/// Counts a kernel taken from its chain's last rule ([`chain_kernels`]).
pub(crate) fn count_chain_kernel() {
    CHAIN_KERNELS.set(CHAIN_KERNELS.get() + 1);
}

/// Every occurrence of `"` in the vocabulary's tokens, as the token text up to and including it,
/// sorted by that text read backwards: the tokens that contain a string ending in `"` are one
/// range.
#[derive(Debug)]
pub struct QuoteEnds {
    vocab: std::sync::Arc<Vocabulary>,
    /// (token, index of the `"`), by the reversed text `token[..=index]`.
    ends: Vec<(u32, u32)>,
}

impl QuoteEnds {
    /// PERF: a scan of the vocabulary's bytes token by token, then a sort comparing reversed
    /// texts, was ~10.9 M instructions on Llama 3, paid by the first fill that asked for sibling
    /// edges (MaskBench o8487 at `"provision": {"`, 1.5-3.4 ms); now one pass over the bytes
    /// back to back, eight at a time, and a sort by the last eight bytes first.
    pub fn new(vocab: &std::sync::Arc<Vocabulary>) -> QuoteEnds {
        let (bytes, offsets) = vocab.decoded_buffer();
        let mut ends = Vec::new();
        // `t` is the token holding byte `p`: offsets ascend, and an empty token holds none.
        let mut t = 0usize;
        each_quote(bytes, |p| {
            while offsets[t + 1] <= p {
                t += 1;
            }
            ends.push((t as u32, (p - offsets[t]) as u32));
        });
        let text = |&(t, i): &(u32, u32)| &vocab.token_bytes(t)[..=i as usize];
        // The text's last eight bytes, last first, zero-padded: ordered as the reversed texts are
        // up to ties, which the full comparison breaks.
        let tail_key = |e: &(u32, u32)| text(e).iter().rev().take(8).fold(0u64, |k, &b| k << 8 | u64::from(b));
        let key_of = |e: &(u32, u32)| tail_key(e) << (8 * 8usize.saturating_sub(text(e).len().min(8)));
        let mut keyed: Vec<(u64, (u32, u32))> = ends.iter().map(|e| (key_of(e), *e)).collect();
        keyed.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| text(&x.1).iter().rev().cmp(text(&y.1).iter().rev())));
        let ends = keyed.into_iter().map(|(_, e)| e).collect();
        QuoteEnds { vocab: vocab.clone(), ends }
    }

    fn text(&self, k: usize) -> &[u8] {
        let (t, i) = self.ends[k];
        &self.vocab.token_bytes(t)[..=i as usize]
    }

    /// Whether some token contains `l`, which ends in `"`.
    pub fn some_token_contains(&self, l: &[u8]) -> bool {
        debug_assert_eq!(l.last(), Some(&b'"'));
        let k = self.ends.partition_point(|&e| {
            let (t, i) = e;
            self.vocab.token_bytes(t)[..=i as usize].iter().rev().lt(l.iter().rev())
        });
        k < self.ends.len() && self.text(k).ends_with(l)
    }

    pub fn memory_size(&self) -> usize {
        self.ends.capacity() * 8
    }
}

/// Calls `f` with the index of every `"` in `bytes`, ascending.
fn each_quote(bytes: &[u8], mut f: impl FnMut(usize)) {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    let quotes = ONES * u64::from(b'"');
    let mut chunks = bytes.chunks_exact(8);
    for (k, chunk) in chunks.by_ref().enumerate() {
        let x = u64::from_le_bytes(chunk.try_into().unwrap()) ^ quotes;
        // Nonzero iff some byte of `x` is zero (a `"`); which ones is checked byte by byte.
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            chunk.iter().enumerate().filter(|(_, &c)| c == b'"').for_each(|(i, _)| f(8 * k + i));
        }
    }
    let rest = chunks.remainder();
    let at = bytes.len() - rest.len();
    rest.iter().enumerate().filter(|(_, &c)| c == b'"').for_each(|(i, _)| f(at + i));
}

/// The dropped edges of a grammar (see the module doc), found rule by rule on first ask: per
/// state, the bytes of its dropped edges; a kernel reads only those of its own rule's states
/// ([`sibling_key`], [`Self::kept_bytes`]).
/// PERF: finding them for every state at the first kernel was ~109 M instructions of MaskBench
/// o44208's compile (320k states, 21k rules, most of them any-order key sets that no first mask
/// reaches).
#[derive(Debug)]
pub struct SiblingEdges {
    /// The states of rule `r`: `states[end[r - 1]..end[r]]` (`end[-1]` = 0), ascending.
    end: Vec<u32>,
    states: Vec<StateId>,
    /// Per rule, its states' dropped edges, set on first ask.
    dropped: Vec<OnceLock<RuleDropped>>,
    /// Per rule, its listing from its start ([`SiblingEdges::class_of`]), set on first ask.
    classes: Vec<OnceLock<Option<Box<[u64]>>>>,
    /// Per rule, the last rule of the chain it begins ([`SiblingEdges::chain_end`]), set on
    /// first ask.
    chain_ends: Vec<OnceLock<RuleId>>,
    /// By callee start, the paths of its literal tree ([`literal_start`]) where no token
    /// contains one, found on first ask ([`SiblingEdges::key_paths`]).
    key_paths: std::sync::Mutex<crate::fasthash::FastMap<StateId, Option<KeyPaths>>>,
}

/// The paths of a callee's literal tree, none in a token ([`SiblingEdges::key_paths`]).
type KeyPaths = std::sync::Arc<[Vec<u8>]>;

/// The dropped edges of one state: the bytes of its dropped byte edges and the callees of its
/// dropped rule edges (see the module doc).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Dropped {
    pub bytes: ByteSet,
    pub calls: Box<[RuleId]>,
}

impl Dropped {
    fn is_empty(&self) -> bool {
        self.bytes == ByteSet::default() && self.calls.is_empty()
    }
}

/// The states of one rule with dropped edges, ascending, each with those edges.
type RuleDropped = Box<[(StateId, Dropped)]>;

/// What finding a state's dropped edges reads besides the automata: the grammar's
/// excluded-words rules, the longest token's length and whether some token contains a text
/// (ending in `"`; asked only for texts no longer than `max_depth` bytes, as no token reads a
/// longer one).
pub struct DropRules<'a> {
    pub excluded: &'a ExcludedWords,
    pub max_depth: u32,
    pub contains: &'a dyn Fn(&[u8]) -> bool,
}

impl SiblingEdges {
    /// The index of `a`'s states by rule; no dropped edge is found yet.
    pub fn new(a: &Automata) -> SiblingEdges {
        let rules = a.num_rules();
        let mut end = vec![0u32; rules + 1];
        for st in a.states() {
            end[st.rule.index() + 1] += 1;
        }
        for r in 0..rules {
            end[r + 1] += end[r];
        }
        let mut at = end[..rules].to_vec();
        let mut states = vec![StateId(0); a.states().len()];
        for (s, st) in a.states().iter().enumerate() {
            let slot = &mut at[st.rule.index()];
            states[*slot as usize] = StateId(s as u32);
            *slot += 1;
        }
        end.remove(0);
        let mut dropped = Vec::new();
        dropped.resize_with(rules, OnceLock::new);
        let mut classes = Vec::new();
        classes.resize_with(rules, OnceLock::new);
        let mut chain_ends = Vec::new();
        chain_ends.resize_with(rules, OnceLock::new);
        SiblingEdges { end, states, dropped, classes, chain_ends, key_paths: std::sync::Mutex::default() }
    }

    /// The states of rule `r`, ascending.
    fn rule_states(&self, r: RuleId) -> &[StateId] {
        let from = if r.index() == 0 { 0 } else { self.end[r.index() - 1] as usize };
        &self.states[from..self.end[r.index()] as usize]
    }

    /// The paths that callee start `s0` reads as a literal tree ([`literal_start`],
    /// [`literal_tree`]), each up to its first `"` after its first byte; `None` where it reads
    /// none, or some token contains one of them.
    /// PERF: a key rule is called from every state of every object rule that offers it
    /// (MaskBench o3626: hundreds); its tree was found again for each (~1.5 K instructions).
    fn key_paths(&self, a: &Automata, s0: StateId, with: &DropRules) -> Option<KeyPaths> {
        let lock = || self.key_paths.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = lock().get(&s0) {
            return p.clone();
        }
        let find = || {
            let s = literal_start(a, s0)?;
            let mut all = Vec::new();
            for e in a.byte_edges(s) {
                all.extend(literal_tree(a, e.lo, e.target, with.max_depth)?);
            }
            let in_token = |l: &[u8]| l.len() <= with.max_depth as usize && (with.contains)(l);
            all.iter().all(|l| l.len() >= 2 && !in_token(l)).then(|| all.into())
        };
        let p = find();
        lock().insert(s0, p.clone());
        p
    }

    /// The listing of rule `r` from its start as a callee ([`list_states`], its own callees by
    /// rule and start): rules with equal listings read alike up to dropped edges, so a caller's
    /// key lists the callee by it. `None` where the listing meets no dropped edge (the rule is
    /// then listed by its id) or the rule has too many states.
    fn class_of(&self, a: &Automata, r: RuleId, with: &DropRules) -> Option<&[u64]> {
        // PERF: finding the dropped edges of every state of a large callee (a string body, a
        // key trie) cost ~40 K instructions a rule, for listings longer than a key takes anyway.
        if self.rule_states(r).len() > SIBLING_KEY_STATES {
            return None;
        }
        let build = || {
            let mut words = Vec::new();
            let met = list_states(a, self, with, a.rule_start(r), &mut words, &mut |_, _, _| None)?;
            met.dropped.then(|| words.into())
        };
        self.classes[r.index()].get_or_init(build).as_deref()
    }

    /// The last rule of the chain that rule `r` begins (`r` itself where it begins none): rules
    /// `R_1 ::= A_1 | R_2`, `R_2 ::= A_2 | R_3`, ..., each start calling the next rule as a
    /// tail call (the return state final, without edges) and nowhere else in its listing, and
    /// each `A_j` equal to `A_(j+1)` up to dropped edges (listed with callees by rule and
    /// start, the next rule by a placeholder). Then every `R_j` reads the same tokens as the
    /// last, `R_m`: the tokens of `R_j` are those of `A_j` and of `R_(j+1)`, and `R_(j+1)` reads
    /// those of `A_(j+1)`, equal to `A_j`'s up to dropped edges (which change no
    /// classification); by induction from `R_m` down, each `R_j` reads `R_m`'s. This is an open
    /// object's properties in schema order (`obj.K_0_1 ::= ws "," ws (obj_extra ws "," ws)*
    /// "\"" "key_K" "\"" ... | obj.(K+1)_0_1`, MaskBench markdownlint-config-schema), where
    /// the literal keys are dropped edges.
    /// PERF: a kernel at the start of such a chain composed 8 rules deep and walked the rest:
    /// every rule of the rest predicted in each row, ~2 ms on Llama 3 for a 135-property
    /// object, at every property's value end.
    pub fn chain_end(&self, a: &Automata, r: RuleId, with: &DropRules) -> RuleId {
        if let Some(&end) = self.chain_ends[r.index()].get() {
            return end;
        }
        // Down the links `R_j -> R_(j+1)` (equal shapes), to the first rule without one or
        // whose end is known; a cycle of links ends where it closes.
        let mut members = vec![r];
        let mut shape = self.chain_shape(a, r, with);
        let end = loop {
            let last = *members.last().expect("r is a member");
            let Some((next, words)) = shape.take() else { break last };
            let after = self.chain_shape(a, next, with);
            if after.as_ref().map(|x| &x.1) != Some(&words) || members.contains(&next) {
                break last;
            }
            if let Some(&end) = self.chain_ends[next.index()].get() {
                break end;
            }
            members.push(next);
            shape = after;
        };
        for m in members {
            self.chain_ends[m.index()].get_or_init(|| end);
        }
        *self.chain_ends[r.index()].get().expect("set above")
    }

    /// Rule `r`'s next rule in a chain ([`Self::chain_end`]) with `r`'s listing from its start,
    /// the next rule's calls listed as a placeholder; `None` where its start calls no other rule
    /// as a tail call, or calls the tail elsewhere too, or the listing meets no dropped edge.
    /// (No bound on the rule's states, unlike [`Self::class_of`]: a rule that inlines its value
    /// (an enum's strings) would end the run; the listing itself stops at [`SIBLING_KEY_STATES`].)
    /// PERF: MaskBench o30544's 133 rules ran in 7 pieces at rules of 82-94 states, and each
    /// piece's end composed the next (2 ms at its first value).
    fn chain_shape(&self, a: &Automata, r: RuleId, with: &DropRules) -> Option<(RuleId, Vec<u64>)> {
        let s0 = a.rule_start(r);
        let tail = |&&(c, t): &&(RuleId, StateId)| {
            c != r && a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty()
        };
        let mut tails = a.rule_edges(s0).iter().filter(tail);
        let (&(next, _), None) = (tails.next()?, tails.next()) else { return None };
        if a.callee_start(s0, next) != a.rule_start(next) {
            return None;
        }
        let mut words = Vec::new();
        let mut calls = 0;
        let mut placeholder = |c: RuleId, _: StateId, w: &mut Vec<u64>| {
            (c == next).then(|| {
                calls += 1;
                w.push(CHAIN_NEXT);
                false
            })
        };
        let met = list_states(a, self, with, s0, &mut words, &mut placeholder)?;
        (met.dropped && calls == 1).then_some((next, words))
    }

    /// The dropped edges of rule `r`'s states, by state (found on the first ask).
    pub fn of_rule(&self, a: &Automata, r: RuleId, with: &DropRules) -> &[(StateId, Dropped)] {
        let states = self.rule_states(r);
        self.dropped[r.index()]
            .get_or_init(|| states.iter().filter_map(|&q| Some((q, dropped_edges(a, self, q, with)?))).collect())
    }

    /// Finds the dropped edges, listing as a callee and chain end of `rules` ([`Self::of_rule`],
    /// [`Self::class_of`], [`Self::chain_end`]; each a pure answer, found once): the class-body
    /// thread's job, in the order [`Self::rules_from_root`] gives, so that the rules a
    /// document's first fills reach are found first.
    pub fn find_rules(&self, a: &Automata, rules: &[RuleId], with: &DropRules) {
        for &r in rules {
            self.of_rule(a, r, with);
            self.class_of(a, r, with);
            self.chain_end(a, r, with);
        }
    }

    /// Every rule once: those the root calls, directly or not, by their calls' depth from it
    /// (breadth first), then the others by id.
    pub fn rules_from_root(&self, a: &Automata) -> Vec<RuleId> {
        let mut seen = vec![false; a.num_rules()];
        let mut order = vec![a.root()];
        seen[a.root().index()] = true;
        let mut k = 0;
        while let Some(&r) = order.get(k) {
            for &s in self.rule_states(r) {
                for &(c, _) in a.rule_edges(s) {
                    if !std::mem::replace(&mut seen[c.index()], true) {
                        order.push(c);
                    }
                }
            }
            k += 1;
        }
        order.extend((0..a.num_rules() as u32).map(RuleId).filter(|r| !seen[r.index()]));
        order
    }

    /// How many rules have their dropped edges, callee listing and chain end found (tests).
    #[doc(hidden)]
    pub fn found(&self) -> [usize; 3] {
        [
            self.dropped.iter().filter(|d| d.get().is_some()).count(),
            // A rule of more states has no listing and sets none ([`Self::class_of`]).
            (0..self.classes.len())
                .filter(|&r| {
                    self.classes[r].get().is_some() || self.rule_states(RuleId(r as u32)).len() > SIBLING_KEY_STATES
                })
                .count(),
            self.chain_ends.iter().filter(|c| c.get().is_some()).count(),
        ]
    }

    /// Whether kernels of rule `r` take a [`sibling_key`]: one of its states has a dropped edge.
    pub fn applies(&self, a: &Automata, r: RuleId, with: &DropRules) -> bool {
        !self.of_rule(a, r, with).is_empty()
    }

    /// The bytes of `q`'s byte edges but its dropped ones: a kernel chart of `q` reads the
    /// tokens whose first byte is dropped through a callee as well (see the module doc).
    pub fn kept_bytes(&self, a: &Automata, q: StateId, with: &DropRules) -> ByteSet {
        let dropped = dropped_at(self.of_rule(a, a.state(q).rule, with), q).map_or_else(ByteSet::default, |d| d.bytes);
        let mut kept = ByteSet::default();
        for e in a.byte_edges(q).iter().filter(|e| !(e.lo == e.hi && dropped.contains(e.lo))) {
            kept.insert_range(e.lo, e.hi);
        }
        kept
    }

    pub fn memory_size(&self) -> usize {
        let found: usize = self
            .dropped
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|d| d.iter())
            .map(|(_, d)| 52 + d.calls.len() * 4)
            .sum();
        let classes: usize = self.chain_ends.len() * 8
            + self.classes.iter().filter_map(|c| c.get().and_then(Option::as_ref)).map(|c| c.len() * 8).sum::<usize>();
        // A key-paths entry: its key, its `Option<Arc<[Vec<u8>]>>` and a table control byte;
        // each list: the `Arc`'s two counts, its `Vec`s and their bytes.
        let key_paths: usize = self
            .key_paths
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(|p| 4 + 16 + 1 + p.as_ref().map_or(0, |l| 16 + l.iter().map(|v| 24 + v.capacity()).sum::<usize>()))
            .sum();
        (self.end.len() + self.states.len()) * 4 + self.dropped.len() * 48 + found + classes + key_paths
    }
}

/// `q`'s dropped edges in a rule's list ([`SiblingEdges::of_rule`]); `None` when none.
fn dropped_at(list: &[(StateId, Dropped)], q: StateId) -> Option<&Dropped> {
    list.binary_search_by_key(&q, |d| d.0).ok().map(|k| &list[k].1)
}

/// State `q`'s dropped edges (see the module doc), `None` when it has none: the byte edges
/// first, then the rule edges, which only kept byte edges shadow (so no two dropped edges
/// shadow each other: each drop leaves the classification as it was with the others made).
fn dropped_edges(a: &Automata, edges: &SiblingEdges, q: StateId, with: &DropRules) -> Option<Dropped> {
    if a.rule_edges(q).is_empty() {
        return None;
    }
    let bytes = dropped_bytes(a, q, with);
    let calls = dropped_calls(a, edges, q, &bytes, with);
    let d = Dropped { bytes, calls };
    (!d.is_empty()).then_some(d)
}

/// Whether rule `r` is an excluded-words rule of `with`.
fn is_excluded_rule(with: &DropRules, r: RuleId) -> bool {
    let excluded = with.excluded;
    r == excluded.any || excluded.rules.binary_search_by_key(&r, |e| e.0).is_ok()
}

/// The callees of `q` whose start reads a [`literal_tree`] (a quoted key rule: `"key" ws ":"
/// ...`) whose every path `l` but its last byte `q` reads itself, through a kept byte edge (not
/// in `dropped`) and what follows it in `q`'s rule ([`Inside::reads_text`]; for a key, the
/// inlined extra-key path `"` `key_not_in`), and that no token contains. Removing such a rule
/// edge changes no kernel classification: a token read into the callee ends inside one of its
/// paths (it would contain `l`), which `q` reads alive too, so the callee adds no accepted
/// token; its tree's states are neither final nor call anything, so it completes nothing and
/// leaves no rule end on the way, and its return state is never reached. `q`'s own rule is never
/// dropped (its calls are the self-calls [`sibling_key`] lists).
fn dropped_calls(a: &Automata, edges: &SiblingEdges, q: StateId, dropped: &ByteSet, with: &DropRules) -> Box<[RuleId]> {
    let own = a.state(q).rule;
    let is_excluded = |r: RuleId| is_excluded_rule(with, r);
    let inside = Inside { a, is_excluded: &is_excluded };
    let read_by_q = |text: &[u8]| {
        let (&first, rest) = text.split_first().expect("a path reads its first byte and a quote");
        let mut budget = READS_ALIVE_BUDGET;
        !dropped.contains(first)
            && a.step(q, first).is_some_and(|u| inside.reads_text(own, u, rest, CALL_DEPTH, &mut budget))
    };
    let mut calls: Vec<RuleId> = Vec::new();
    for &(r, _) in a.rule_edges(q) {
        if r == own || calls.contains(&r) {
            continue;
        }
        let paths = edges.key_paths(a, a.callee_start(q, r), with);
        if paths.is_some_and(|paths| paths.iter().all(|l| read_by_q(&l[..l.len() - 1]))) {
            calls.push(r);
        }
    }
    calls.into()
}

/// Aliases a callee's start may pass through to a literal start ([`literal_start`]).
const ALIAS_DEPTH: u32 = 2;

/// The state from which callee start `s0` reads its literal tree: `s0` itself where it reads
/// single bytes only (no rule edges, not final); else, where `s0` is an alias's start (no byte
/// edges, not final, one call), that callee's, at most
/// [`ALIAS_DEPTH`] aliases down. A token read into such a callee is read into the tree first;
/// the alias ends only after its callee does.
fn literal_start(a: &Automata, s0: StateId) -> Option<StateId> {
    let mut s = s0;
    for _ in 0..=ALIAS_DEPTH {
        if a.state(s).is_final {
            return None;
        }
        let (bytes, calls) = (a.byte_edges(s), a.rule_edges(s));
        match (bytes.is_empty(), calls) {
            (false, []) if bytes.iter().all(|e| e.lo == e.hi) => return Some(s),
            (true, &[(r, _)]) => s = a.callee_start(s, r),
            _ => return None,
        }
    }
    None
}

/// The bytes of state `q`'s dropped byte edges (see the module doc); empty when none.
fn dropped_bytes(a: &Automata, q: StateId, with: &DropRules) -> ByteSet {
    let is_excluded = |r: RuleId| is_excluded_rule(with, r);
    let mut bytes = ByteSet::default();
    for e in a.byte_edges(q).iter().filter(|e| e.lo == e.hi) {
        let Some(paths) = literal_tree(a, e.lo, e.target, with.max_depth) else { continue };
        // Every path's text but its last byte, read by some callee of `q`; no path in a token.
        let dropped = paths.iter().all(|l| {
            let mut budget = READS_ALIVE_BUDGET;
            let before_end = &l[..l.len() - 1];
            let shadowed = a.rule_edges(q).iter().any(|&(r, _)| {
                let inside = Inside { a, is_excluded: &is_excluded };
                inside.reads_text(r, a.callee_start(q, r), before_end, CALL_DEPTH, &mut budget)
            });
            shadowed && (l.len() > with.max_depth as usize || !(with.contains)(l))
        });
        if dropped {
            bytes.insert_range(e.lo, e.lo);
        }
    }
    bytes
}

/// Calls nested at most, and states stepped at most, by one [`Inside::reads_text`] search.
const CALL_DEPTH: u32 = 4;
const READS_ALIVE_BUDGET: u32 = 256;

/// Printable ASCII string text: no `"`, no `\`.
fn is_text(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'
}

/// Paths a [`literal_tree`] lists at most; past them the edge is kept.
const TREE_PATHS: usize = 256;

/// The texts that `first` and the literal states from `next` read, each up to and including its
/// first `"` after `first`, or cut after `max_depth + 1` bytes (no token reads that far): a
/// literal state here reads single bytes only (one or several: keys sharing a prefix), calls
/// nothing and is not final; `None` where another state comes first, or past [`TREE_PATHS`]
/// paths. A token read through the edge ends inside one of these texts or contains one.
fn literal_tree(a: &Automata, first: u8, next: StateId, max_depth: u32) -> Option<Vec<Vec<u8>>> {
    // A literal state's edges; `None` for another state.
    let literal_edges = |s: StateId| {
        let edges = a.byte_edges(s);
        let literal = !edges.is_empty() && a.rule_edges(s).is_empty() && !a.state(s).is_final;
        (literal && edges.iter().all(|e| e.lo == e.hi)).then_some(edges)
    };
    // Most edges lead to no literal state: that is found before any allocation.
    if max_depth >= 1 {
        literal_edges(next)?;
    }
    // Depth first along one path buffer `l`: `todo` holds (length before the byte, byte, state
    // after it); a path is copied out only where it ends.
    // PERF: a copy of the path per byte read (malloc, copy, free) was ~55 M of the 132 M
    // instructions of finding every rule's dropped edges in MaskBench testenvironments.
    let (mut paths, mut todo, mut l) = (Vec::new(), vec![(0, first, next)], Vec::new());
    while let Some((len, b, s)) = todo.pop() {
        l.truncate(len);
        l.push(b);
        if l.len() > max_depth as usize {
            paths.push(l.clone());
        } else {
            for e in literal_edges(s)? {
                match e.lo {
                    b'"' => paths.push([&l[..], b"\""].concat()),
                    _ => todo.push((l.len(), e.lo, e.target)),
                }
            }
        }
        if paths.len() + todo.len() > TREE_PATHS {
            return None;
        }
    }
    Some(paths)
}

/// Derivations inside a callee, for [`SiblingEdges::new`].
struct Inside<'a> {
    a: &'a Automata,
    is_excluded: &'a dyn Fn(RuleId) -> bool,
}

impl Inside<'_> {
    /// Whether an item at `s` (of rule `r`, called from the kernel's rule) can read all of
    /// `text` without its rule ending: stepping bytes, or calling a rule that reads the rest,
    /// at most `depth` calls deep; an excluded-words rule started at its start reads every run of
    /// string text ([`is_text`]), as every string extends past its finitely many words. False
    /// once `budget` steps are spent (the edge is then kept).
    fn reads_text(&self, r: RuleId, s: StateId, text: &[u8], depth: u32, budget: &mut u32) -> bool {
        let a = self.a;
        let Some(rest) = budget.checked_sub(1) else { return false };
        *budget = rest;
        if (self.is_excluded)(r) && s == a.rule_start(r) && text.iter().all(|&b| is_text(b)) {
            return true;
        }
        let Some((&b, tail)) = text.split_first() else { return true };
        if a.step(s, b).is_some_and(|t| self.reads_text(r, t, tail, depth, budget)) {
            return true;
        }
        depth > 0
            && a.rule_edges(s).iter().any(|&(c, _)| self.reads_text(c, a.callee_start(s, c), text, depth - 1, budget))
    }
}

/// How [`list_states`] lists a callee `(rule, start)` into its words: `Some(met a dropped edge)`
/// where it did, `None` to list it by rule and start.
type ListCallee<'a> = dyn FnMut(RuleId, StateId, &mut Vec<u64>) -> Option<bool> + 'a;

/// What [`list_states`] met: a dropped edge (or a callee listed by its class), a final state.
struct Met {
    dropped: bool,
    final_state: bool,
}

/// Appends to `words` the states of `state`'s rule reachable from it without the rule's
/// dropped edges, numbered in discovery order, each with its finality, byte edges and rule
/// edges: a call of the rule itself by its start's number (an own-rule state, listed like the
/// others), another by `callee(rule, start, words)` where that lists it (returning whether it
/// met a dropped edge), else by its rule and start. `None` past [`SIBLING_KEY_STATES`] states.
fn list_states(
    a: &Automata,
    edges: &SiblingEdges,
    with: &DropRules,
    state: StateId,
    words: &mut Vec<u64>,
    callee: &mut ListCallee<'_>,
) -> Option<Met> {
    let rule = a.state(state).rule;
    let own = edges.of_rule(a, rule, with);
    let mut order = vec![state];
    let mut met = Met { dropped: false, final_state: false };
    let number = |t: StateId, order: &mut Vec<StateId>| -> Option<u64> {
        let k = match order.iter().position(|&s| s == t) {
            Some(k) => k,
            None if order.len() < SIBLING_KEY_STATES => {
                order.push(t);
                order.len() - 1
            }
            None => return None,
        };
        Some(k as u64)
    };
    let none = Dropped::default();
    let mut k = 0;
    while k < order.len() {
        let s = order[k];
        let dropped = dropped_at(own, s).unwrap_or(&none);
        met.dropped |= !dropped.is_empty();
        met.final_state |= a.state(s).is_final;
        words.push(u64::from(a.state(s).is_final));
        for e in a.byte_edges(s).iter().filter(|e| !(e.lo == e.hi && dropped.bytes.contains(e.lo))) {
            words.push(u64::from(e.lo) | u64::from(e.hi) << 8 | number(e.target, &mut order)? << 16);
        }
        words.push(u64::MAX);
        for &(r, t) in a.rule_edges(s).iter().filter(|(r, _)| !dropped.calls.contains(r)) {
            let start = a.callee_start(s, r);
            if r == rule {
                words.push(SELF_CALL);
                words.push(number(start, &mut order)?);
            } else {
                match callee(r, start, words) {
                    Some(d) => met.dropped |= d,
                    None => words.push(u64::from(r.0) | u64::from(start.0) << 32),
                }
            }
            words.push(number(t, &mut order)?);
        }
        words.push(u64::MAX - 1);
        k += 1;
    }
    Some(met)
}

/// The key of kernel `state` in `a` (see the module doc): its rule's states as [`list_states`]
/// lists them, each callee that has a class ([`SiblingEdges::class_of`]) by that class, after
/// the FOLLOW set `follow` of the rule. `None` past [`SIBLING_KEY_STATES`] states, or when no
/// dropped edge is among them (nor in a class listed).
pub fn sibling_key(
    a: &Automata,
    edges: &SiblingEdges,
    with: &DropRules,
    follow: &ByteSet,
    state: StateId,
) -> Option<Box<[u64]>> {
    let mut words: Vec<u64> = follow.words().to_vec();
    // A callee started elsewhere than its rule's start (a bounded recursion) is no class.
    let mut by_class = |r: RuleId, start: StateId, words: &mut Vec<u64>| {
        let class = edges.class_of(a, r, with).filter(|_| start == a.rule_start(r))?;
        words.extend([CALLEE_CLASS, class.len() as u64]);
        words.extend_from_slice(class);
        Some(true)
    };
    let met = list_states(a, edges, with, state, &mut words, &mut by_class)?;
    // FOLLOW is read only where the kernel's rule ends (an own-rule item of origin 0 completes):
    // with no final state listed, no token ends it, so kernels of rules that differ in FOLLOW
    // alone are equal (an object's first key start in `root` and in `obj.N_0_0`).
    if !met.final_state {
        words[..follow.words().len()].fill(0);
    }
    // A key without dropped edges would only find the state itself.
    met.dropped.then(|| words.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{VocabType, VocabularyOptions};
    use std::sync::Arc;

    /// Rules come from the root breadth first, each once, then the rules it does not reach:
    /// `deep` (defined first, the lowest id) after `mid`, which the root calls. Fails in id
    /// order, or depth first (`deep` before `other`).
    #[test]
    fn rules_from_root_go_by_call_depth() {
        // Each rule recursive, so that none is inlined into its caller.
        let text = r#"deep ::= "x" | "x" deep
mid ::= "(" deep ")" | "(" mid ")"
other ::= "o" | "o" other
root ::= mid "!" | other "?" | "+" root"#;
        let g = crate::ebnf::parse_ebnf(text, "root").unwrap();
        let a = Automata::build(&g).unwrap();
        let order = SiblingEdges::new(&a).rules_from_root(&a);
        let names: Vec<&str> = order.iter().map(|&r| a.rule_name(r)).collect();
        let mut ids: Vec<u32> = order.iter().map(|r| r.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..a.num_rules() as u32).collect::<Vec<_>>(), "{names:?}");
        let at = |n: &str| names.iter().position(|&m| m == n).unwrap_or_else(|| panic!("{n} in {names:?}"));
        assert_eq!(at("root"), 0, "{names:?}");
        assert!(at("mid") < at("deep") && at("other") < at("deep"), "{names:?}");
    }

    /// `each_quote` against a byte-by-byte scan, at every offset of a `"` within and after the
    /// 8-byte chunks, beside the bytes whose XOR with `"` is 1 (`#`) or 0x80 (the zero test's
    /// near misses).
    #[test]
    fn each_quote_finds_every_quote() {
        for len in 0..40usize {
            for seed in 0..len.max(1) {
                let bytes: Vec<u8> =
                    (0..len).map(|i| [b'"', b'#', 0xA2, b'a', 0, b'"'][(i * 7 + seed * 3 + i / 5) % 6]).collect();
                let mut found = Vec::new();
                each_quote(&bytes, |p| found.push(p));
                let want: Vec<usize> = (0..len).filter(|&i| bytes[i] == b'"').collect();
                assert_eq!(found, want, "{bytes:?}");
            }
        }
    }

    /// The sorted quote ends equal those of a plain scan and a sort by reversed text, and
    /// `some_token_contains` answers as a scan of every token does.
    #[test]
    fn quote_ends_match_a_plain_scan() {
        let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
        for t in ["\"gamma\":", "ma\"", "xxxxxxxxxgamma\"", "\"", "\"\"", "a\"b\"", "zzzzzzzzzzzzzzzz\"#", "#\"", "é\""]
        {
            toks.push(t.as_bytes().to_vec());
        }
        toks.push(Vec::new());
        toks.push(b"\"tail".to_vec());
        let opts =
            VocabularyOptions { stop_token_ids: Some(vec![]), vocab_size: Some(toks.len() + 3), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        let q = QuoteEnds::new(&vocab);
        let mut want = Vec::new();
        for t in 0..vocab.vocab_size() as u32 {
            let b = vocab.token_bytes(t);
            want.extend(b.iter().enumerate().filter(|(_, &c)| c == b'"').map(|(i, _)| (t, i as u32)));
        }
        let text = |&(t, i): &(u32, u32)| vocab.token_bytes(t)[..=i as usize].to_vec();
        want.sort_by(|x, y| text(x).iter().rev().cmp(text(y).iter().rev()).then(x.cmp(y)));
        let mut got = q.ends.clone();
        got.sort_by(|x, y| text(x).iter().rev().cmp(text(y).iter().rev()).then(x.cmp(y)));
        assert_eq!(got, want);
        assert!(q.ends.windows(2).all(|w| text(&w[0]).iter().rev().le(text(&w[1]).iter().rev())));
        for l in ["\"", "a\"", "ma\"", "gamma\"", "xgamma\"", "\"gamma\"", "b\"", "z\"", "é\"", "#\"", "q\"", "\"\""] {
            let scan = (0..vocab.vocab_size() as u32)
                .any(|t| vocab.token_bytes(t).windows(l.len()).any(|w| w == l.as_bytes()));
            assert_eq!(q.some_token_contains(l.as_bytes()), scan, "{l}");
        }
    }
}
