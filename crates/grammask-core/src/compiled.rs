//! Compiled grammars: a grammar's automata paired with a vocabulary's [`TokenIndex`].
//!
//! Pipeline place: takes a [`Grammar`] and a [`Vocabulary`], builds the rule automata
//! ([`Automata::build`]) and the per-vocabulary slices and run indexes the grammar's loops need,
//! and produces a [`CompiledGrammar`]: immutable apart from its caches (kernel classifications,
//! counted string-body levels, run indexes by state, and full masks by chart signature), which only
//! grow and are shared (behind locks) by every [`crate::matcher::Matcher`] made from it.
use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::error::Result;
use crate::fasthash::FastMap;
use crate::follow::{follow_sets, nullable_and_follow, nullable_states, ByteSet};
use crate::grammar::{Grammar, RuleId};
use crate::limits;
use crate::mask::{
    ascii_loop, ascii_steps_to, call_loop, call_loop_refused, callee_ascii, callee_refused, class_covers,
    classify_after_lead, classify_byte_region, classify_kernel_asking, classify_kernel_budget,
    classify_kernel_from_bytes, classify_kernel_from_bytes_walked, classify_kernel_uninterned, classify_literal,
    classify_literal_chain, compose_kernel, kernel_mask, lead_into_literal_lead, lead_run, literal_byte,
    literal_own_kernel, loop_refused, offering_rows, run_class_candidates, shift_kernel, sibling_key, state_bytes,
    state_run_class_in, state_run_index, BodyEnds, BudgetAsk, DropRules, KernelMask, LeadLeaf, LeadNodes, Loops,
    Shortcuts, SiblingEdges, SuffixMemo, MIN_ROW_RUN_BYTES,
};
use crate::slice::{
    body_capacity, body_level, body_level_into_calls, counted_calls, with_cover_budget, BodySlice, ClassBodies,
    ClassBodySlice, ClassChain, ClassSlice, Counted, CoverMemo, Level, QuotedCallees, RunIndex,
};
use crate::token_index::{read, write, TokenIndex};
use crate::token_set::TokenSet;
use crate::trie::TokenTrie;
use crate::vocab::Vocabulary;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// Kernels whose reachable automaton is larger than this are not shared across grammars (the
/// structural hash would cost more than it saves).
const STRUCTURE_HASH_LIMIT: usize = 8192;
/// ... or this many when a region walk asks before walking (`walk_region`): a search costs
/// ~0.2 K instructions a state, so this one costs about what the budget's walk would have, and
/// a search that passes it is given up (the region walk is not shared) rather than paid in full.
/// The key of a state within both limits is the same, so whatever is shared is found alike.
/// PERF: MaskBench o47674 t7 (after `{"dpp_version": 1`): five region walks of the object's
/// rest (~0.4 M instructions each, warm) each asked first and searched 8,192 states before
/// giving up (1.8 M each, 8.8 M of the fill's 23.3 M).
const REGION_ASK_STATES: usize = 2048;

/// Trie nodes a new kernel's walk visits before the cross-grammar cache is consulted: shorter
/// walks cost less than the cache key's structural hash.
const SHARE_AFTER_VISITS: usize = 4096;
/// ... or this many when the whole automaton has at most [`SMALL_AUTOMATON_STATES`] states, whose
/// structural hash costs a few microseconds (llama.cpp's `english.gbnf`: free text that the
/// cache answers after 4,096 visits, ~100 us, in each new compile of the grammar).
const SHARE_AFTER_VISITS_SMALL: usize = 256;
const SMALL_AUTOMATON_STATES: usize = 64;
test_counter! {
    /// How many region walks asked the cross-grammar cache before walking with a state that
    /// reaches more than [`REGION_ASK_STATES`] states (so went unkeyed and unshared), for tests.
    pub fn region_asks_unkeyed => REGION_ASKS_UNKEYED
}

/// A kernel state that reaches at most this many states asks the cross-grammar cache before
/// walking, and shares its walk however short: its structural hash costs a few microseconds
/// (a final state's rule may end before any byte, so every token whose first byte is in FOLLOW
/// is recorded uncertain; a string value's body records the tokens that read past its quote).
/// PERF: a value's trailing whitespace (`[ \n\t\r]{0,64}`, 65 states) walked up to the budget,
/// ~100 us, in every grammar before the cache answered.
const EARLY_SHARE_STATES: usize = 72;

/// A choice of at most this many literal leads (`"{" ws obj_N ws "}" | ...`) is composed from
/// their kernels ([`CompiledGrammar::literal_lead_kernel`]); a wider one is walked.
const LITERAL_LEAD_CHOICE_MAX: usize = 8;
/// New memo entries past which a literal lead is not keyed ([`CompiledGrammar::literal_lead_key`]):
/// its walk is then left as it is.
const LITERAL_LEAD_KEY_ENTRIES: usize = 4096;
/// Entries of that memo past which it starts again.
const BOUNDED_KEYS_MAX: usize = 1 << 16;

/// Unequal kernels kept per [`KernelMask::content_key`] (a key samples the accepted set, so
/// kernels that differ only in its other words share one).
const KEY_COLLISIONS: usize = 4;
/// Kernels composed into one another at most this deep (bounds the recursion through rule starts;
/// deeper ones are walked).
const MAX_COMPOSE_DEPTH: usize = 8;
/// Callee kernels with more uncertain tokens, or distinct suffixes, than this are not composed.
const COMPOSE_MAX_UNCERTAIN: usize = 4096;
const COMPOSE_MAX_SUFFIXES: usize = 512;
/// A callee that only reads bytes is composed when the kernel row of the state after it holds at
/// least this many items (see `composed_kernel_in`).
const COMPOSE_WIDE_ROW: usize = 64;
/// A callee that only reads bytes is composed beside own edges into literal states
/// ([`literal_own_kernel`]) when its start reads at most this many bytes.
const LITERAL_OWN_CALLEE_BYTES: u32 = 4;
/// A kernel is shifted from a reference state ([`shift_kernel`]) only when the trie subtrees of
/// the first bytes on which they differ hold at most this share (1/n) of the trie's nodes.
const SHIFT_MAX_SHARE: usize = 4;
/// ... and only when the two states step at least this many bytes to the same state.
const SHIFT_MIN_ALIKE: u32 = 32;
/// A quote cut ([`CompiledGrammar::quote_cut_kernel`]) is taken only where the trie subtrees of
/// the kernel state's first bytes hold at most this share (1/n) of the trie's nodes.
const QUOTE_CUT_MAX_SHARE: usize = 4;
/// Fewest distinct bytes a state (or its one callee's start) reads for [`CompiledGrammar::new`] to
/// take its class-body slice ([`CompiledGrammar::build_class_bodies`]; a slice needs a class of
/// at least 32 characters).
const MIN_WIDE_CLASS_BYTES: u32 = 16;
/// States of one class tried at most for its slice at compile ([`CompiledGrammar::build_class_bodies`]).
const CLASS_BODY_TRIES: usize = 4;
/// Call-loop classes ([`CallLoopRuns`]) whose run indexes a grammar builds at most.
const MAX_CALL_LOOP_RUNS: usize = 8;
/// Plain loops' wide indexes ([`CallLoopRuns`]) a grammar builds at most, and the loop states
/// whose refused characters it looks for at most ([`loop_refused`]).
const MAX_PLAIN_LOOP_RUNS: usize = 4;
const PLAIN_LOOP_TRIES: usize = 64;
/// Wide call-loop indexes ([`CallLoopRuns`]) a compile builds at most on its own thread (~7 M
/// instructions each on Llama 3); the others are built on the class-body thread.
const WIDE_RUNS_AT_COMPILE: usize = 2;

/// The run indexes of a grammar's call-per-character loops (a state that loops back to itself
/// through a regex class rule, [`call_loop`]): a kernel walk's interned row returns to itself on
/// such a class's bytes, and takes its run index where one is built. Built after compile, on the
/// class-body thread after its slices ([`CompiledGrammar::build_class_bodies`]), never in a fill:
/// a fill reads an index only once set and never waits for one, so a fill before the thread is
/// done, or in a forked child (no such thread), walks those rows node by node as before.
/// PERF: building one in a fill (~9 M instructions on Llama 3) or at compile regressed the
/// seed-2929 sample's band or the time to first mask (session 38).
///
/// Each loop state whose callee reads every multi-byte character but a few
/// ([`call_loop_refused`]) also takes a UTF-8 index of its class less those characters
/// (`wide`): a row holding that state's item reads every run of it. Those are set with the
/// compile (the vocabulary's, else built on the compiling thread and cached per vocabulary,
/// [`TokenIndex::run_index_less_off_fill`]; at most [`WIDE_RUNS_AT_COMPILE`] built), so that the
/// first fills take them; the rest are built on the class-body thread.
/// PERF: with the ASCII index alone, every non-ASCII trie node was a break below o68280's key
/// `[^,:&\s]+` (which refuses 19 Unicode spaces), and stepped node by node (~100 K steps, 3.5-8 ms).
/// Built on the thread only, the first fill into the loop (o68280 token 19) came before it in
/// every sample run (5.2-5.7 ms, against 1.3 ms with the index); its build is ~7.3 M
/// instructions on Llama 3 (session 43).
///
/// So does each plain state (no rule edges) that loops on its bytes through every multi-byte
/// character but a few ([`loop_refused`]): a regex body's `.` (less U+2028 and U+2029) or
/// `[^:\s]`. Those follow the call loops' in `wide` (from `plain_from`): the compile takes them
/// only from the vocabulary's cache, and the thread builds them last, once the walked-body
/// indexes' thread is done ([`TokenIndex::wait_walked`]: a fill that needs those before they
/// are set builds its own, ~3 ms). A state that enters such a loop or a call loop on each of its
/// characters (`wide_of`) takes it too.
/// PERF: o64996's `mediatype` `^(.+)/(.+)$` (22 M instructions, ~2.5 ms at the string's first
/// position and after its first token) walked every multi-byte trie node as a break.
#[derive(Debug, Default)]
struct CallLoopRuns {
    classes: Vec<(u128, OnceLock<Arc<RunIndex>>)>,
    /// Each (class, refused characters): call loops' first, at most [`MAX_CALL_LOOP_RUNS`], then plain
    /// loops', at most [`MAX_PLAIN_LOOP_RUNS`].
    wide: Vec<WideLoopRun>,
    /// The loop states that take an entry of `wide`, by index.
    wide_of: FastMap<StateId, usize>,
    /// The first entry of `wide` that is a plain loop's ([`Self::add_plain_loops`]).
    plain_from: usize,
    /// Entries of `wide` set with the compile ([`Self::take_cached`]), for tests.
    wide_with_compile: AtomicUsize,
}

/// A loop's UTF-8 run index less the characters it (or its callee) refuses ([`CallLoopRuns`]).
#[derive(Debug)]
struct WideLoopRun {
    class: u128,
    refused: Vec<Box<[u8]>>,
    index: OnceLock<Arc<RunIndex>>,
}

impl CallLoopRuns {
    /// The classes of `a`'s call loops: each loop state's [`call_loop`] bytes with its own
    /// [`ascii_loop`] ones, of at least [`MIN_ROW_RUN_BYTES`] bytes, at most
    /// [`MAX_CALL_LOOP_RUNS`]; and those states' wide indexes.
    fn of(a: &Automata) -> CallLoopRuns {
        let mut runs = CallLoopRuns::default();
        for s in (0..a.states().len() as u32).map(StateId) {
            if !a.rule_edges(s).iter().any(|&(_, t)| t == s) {
                continue;
            }
            let calls = call_loop(a, s);
            let class = calls | ascii_loop(a, s);
            if calls == 0 || class.count_ones() < MIN_ROW_RUN_BYTES {
                continue;
            }
            if let Some(refused) = call_loop_refused(a, s) {
                let i = runs.wide.iter().position(|w| w.class == class && w.refused == refused);
                let i = match i {
                    Some(i) => Some(i),
                    None if runs.wide.len() < MAX_CALL_LOOP_RUNS => {
                        runs.wide.push(WideLoopRun { class, refused, index: OnceLock::new() });
                        Some(runs.wide.len() - 1)
                    }
                    None => None,
                };
                if let Some(i) = i {
                    runs.wide_of.insert(s, i);
                }
            }
            if runs.classes.len() < MAX_CALL_LOOP_RUNS && !runs.classes.iter().any(|c| c.0 == class) {
                runs.classes.push((class, OnceLock::new()));
            }
            if runs.classes.len() == MAX_CALL_LOOP_RUNS && runs.wide.len() == MAX_CALL_LOOP_RUNS {
                break;
            }
        }
        runs.add_plain_loops(a);
        runs
    }

    /// Adds to `wide` the plain loop states of at least [`MIN_ROW_RUN_BYTES`] ASCII bytes that
    /// refuse a few multi-byte characters ([`loop_refused`], some refused: a state reading them
    /// all takes its class's UTF-8 index already), at most [`MAX_PLAIN_LOOP_RUNS`] indexes; and
    /// the states that enter such a loop, or a call loop of `wide`, on every class byte and every
    /// character it reads (a pattern's first character, read by the state or by its one callee,
    /// which then returns to the loop), which read every run of its class too. At most
    /// [`PLAIN_LOOP_TRIES`] states searched for refused characters.
    fn add_plain_loops(&mut self, a: &Automata) {
        let (first, mut tries) = (self.wide.len(), 0);
        self.plain_from = first;
        let reads_utf8 =
            |s: StateId| a.rule_edges(s).is_empty() && a.byte_edges(s).last().is_some_and(|e| e.hi >= 0x80);
        for s in (0..a.states().len() as u32).map(StateId) {
            if tries == PLAIN_LOOP_TRIES {
                break;
            }
            let class = ascii_loop(a, s);
            if class.count_ones() < MIN_ROW_RUN_BYTES || !reads_utf8(s) {
                continue;
            }
            tries += 1;
            let Some(refused) = loop_refused(a, s, s).filter(|r| !r.is_empty()) else { continue };
            let i = match self.wide[first..].iter().position(|w| w.class == class && w.refused == refused) {
                Some(i) => first + i,
                None if self.wide.len() - first < MAX_PLAIN_LOOP_RUNS => {
                    self.wide.push(WideLoopRun { class, refused, index: OnceLock::new() });
                    self.wide.len() - 1
                }
                None => continue,
            };
            self.wide_of.insert(s, i);
        }
        // The loops, call loops too, that entries may lead to.
        let loops: Vec<StateId> = self.wide_of.keys().copied().collect();
        // An entry reads the first character itself, or through its one rule edge's callee
        // (a regex's first `.` read as a call) that returns to the loop.
        for q in (0..a.states().len() as u32).map(StateId) {
            if tries == PLAIN_LOOP_TRIES {
                break;
            }
            if self.wide_of.contains_key(&q) {
                continue;
            }
            let call = match *a.rule_edges(q) {
                [] if reads_utf8(q) => None,
                [(r, s)] if loops.contains(&s) && a.byte_edges(q).is_empty() => Some((r, s)),
                _ => continue,
            };
            let entered = match call {
                Some((_, s)) => Some(s),
                None => a.byte_edges(q).iter().map(|e| e.target).find(|t| loops.contains(t)),
            };
            let Some(s) = entered else { continue };
            let w = &self.wide[self.wide_of[&s]];
            let read = call.map_or_else(|| ascii_steps_to(a, q, s), |(r, _)| callee_ascii(a, q, r));
            if w.class & !read != 0 {
                continue;
            }
            tries += 1;
            let refused = call.map_or_else(|| loop_refused(a, q, s), |(r, _)| callee_refused(a, q, r));
            if refused.is_some_and(|r| r.iter().all(|c| w.refused.contains(c))) {
                self.wide_of.insert(q, self.wide_of[&s]);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The run index of `class` if it is set.
    fn get(&self, class: u128) -> Option<Arc<RunIndex>> {
        self.classes.iter().find(|c| c.0 == class).and_then(|c| c.1.get().cloned())
    }

    /// The wide run index of loop state `s` if it is set.
    fn wide(&self, s: StateId) -> Option<Arc<RunIndex>> {
        self.wide_of.get(&s).and_then(|&i| self.wide[i].index.get().cloned())
    }

    /// Sets the indexes the vocabulary has cached, and the call loops' wide ones (the
    /// vocabulary's, else built here, at most [`WIDE_RUNS_AT_COMPILE`]; plain loops' only the
    /// vocabulary's); whether some are left to [`Self::build`].
    fn take_cached(&self, index: &TokenIndex) -> bool {
        let mut left = false;
        for (class, ri) in &self.classes {
            match index.cached_run_index(*class, false) {
                Some(cached) => {
                    let _ = ri.set(cached);
                }
                None => left |= ri.get().is_none(),
            }
        }
        let mut built = 0;
        for (i, w) in self.wide.iter().enumerate() {
            let ri = match index.cached_run_index_less(w.class, &w.refused) {
                Some(cached) => Some(cached),
                None if built < WIDE_RUNS_AT_COMPILE && i < self.plain_from => {
                    built += 1;
                    index.run_index_less_off_fill(w.class, &w.refused)
                }
                None => None,
            };
            match ri {
                Some(ri) => {
                    let _ = w.index.set(ri);
                    self.wide_with_compile.fetch_add(1, Ordering::Relaxed);
                }
                None => left |= w.index.get().is_none(),
            }
        }
        left
    }

    fn memory_size(&self) -> usize {
        let wide = self.wide.iter().filter_map(|w| w.index.get()).map(|ri| ri.memory_size()).sum::<usize>();
        self.classes.iter().filter_map(|c| c.1.get()).map(|ri| ri.memory_size()).sum::<usize>()
            + wide
            + self.classes.len() * 32
            + self.wide.len() * 64
            + self.wide_of.len() * 16
    }

    /// Builds (or takes from the vocabulary's cache) the indexes not set yet
    /// ([`TokenIndex::run_index_off_fill`], [`TokenIndex::run_index_less_off_fill`]).
    fn build(&self, index: &TokenIndex) {
        for (class, ri) in &self.classes {
            if ri.get().is_none() {
                if let Some(built) = index.run_index_off_fill(*class, false) {
                    let _ = ri.set(built);
                }
            }
        }
        let (calls, plain) = self.wide.split_at(self.plain_from);
        for w in calls {
            w.build(index);
        }
        if plain.iter().any(|w| w.index.get().is_none()) {
            index.wait_walked();
        }
        for w in plain {
            w.build(index);
        }
    }
}

impl WideLoopRun {
    /// Builds (or takes from the vocabulary's cache) the index if it is not set.
    fn build(&self, index: &TokenIndex) {
        if self.index.get().is_none() {
            if let Some(built) = index.run_index_less_off_fill(self.class, &self.refused) {
                let _ = self.index.set(built);
            }
        }
    }
}

thread_local! {
    /// Compiles on this thread leave their class-body slices reserved, with no thread to build
    /// them (as when the first fills come before the compile's thread): [`hold_class_bodies`].
    static HOLD_CLASS_BODIES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// For tests: while `hold`, grammars compiled on this thread start no class-body thread
/// ([`CompiledGrammar::build_class_bodies`]): their reserved slices stay pending, as when the
/// first fills come before that thread (a fill that needs one builds it).
#[doc(hidden)]
pub fn hold_class_bodies(hold: bool) {
    HOLD_CLASS_BODIES.set(hold);
}

/// Trie nodes and cover-search pairs a kernel whose class-body slice the compile's thread has not
/// set yet may spend on the other shortcuts before the slice is built or waited for
/// ([`CompiledGrammar::classify`]; ~0.4 ms together, against 0.7-2 ms for a slice on Llama 3).
const PENDING_VISITS: usize = 8192;
const PENDING_COVER_PAIRS: usize = 512;
/// Literal chain kernels classified with the grammar at most ([`CompiledGrammar::new`]; ~0.25 us
/// each on Llama 3): the rest are classified on first use.
const LITERAL_CHAINS_AT_COMPILE: usize = 16_384;

/// What groups the states [`CompiledGrammar::build_class_bodies`] tries: the bytes a state reads,
/// the ASCII bytes of its widest one-byte characters (those leading to the state most ASCII bytes
/// lead to: the other ones are side bytes, left out of its class), and the bytes read after its
/// UTF-8 lead bytes. Two states of different classes can read the same bytes (`[a-zA-Z-]` and
/// `[a-zA-Z]` with `-` a side byte; `[À-ß]` and `[à-ÿ]`, both led by `0xC3`): the second one
/// tried after the first took its slice was skipped, and its slice built by a fill.
/// Classes told apart only by a third or fourth byte still share a group. So are the bytes read
/// after its side bytes (the ASCII bytes out of the widest ones): a string of any character but a
/// newline (`^.*$`, its `\` escape reads no `n`) reads the bytes of a JSON string body, whose
/// states never take a class-body slice (they take the body slice); grouped with them, it was
/// skipped after four string bodies and its slice built by a fill (MaskBench o69161's
/// `patternProperties` key, 2.7 ms on Llama 3).
type ClassSignature = ([u64; 4], u128, [u64; 4], [u64; 4]);

/// PERF: ranges are set a word at a time; byte by byte they were ~2% of the instructions of a
/// sample of the 20-100 ms TTFM band (string positions' edges span up to 128 bytes each).
fn class_signature(a: &Automata, q: StateId) -> ClassSignature {
    let (mut bytes, mut after_leads) = (ByteSet::default(), ByteSet::default());
    let mut ascii_by_target: Vec<(StateId, u128)> = Vec::new();
    for e in a.byte_edges(q) {
        bytes.insert_range(e.lo, e.hi);
        if e.lo < 0x80 {
            let m = crate::bitset::ascii_range(e.lo, e.hi.min(0x7F));
            match ascii_by_target.iter_mut().find(|(t, _)| *t == e.target) {
                Some((_, bits)) => *bits |= m,
                None => ascii_by_target.push((e.target, m)),
            }
        }
        if e.hi >= 0xC0 {
            for f in a.byte_edges(e.target) {
                after_leads.insert_range(f.lo, f.hi);
            }
        }
    }
    let widest = ascii_by_target.iter().max_by_key(|(_, m)| m.count_ones()).copied();
    let mut after_sides = ByteSet::default();
    for &(t, _) in ascii_by_target.iter().filter(|&&(t, _)| Some(t) != widest.map(|w| w.0)) {
        for f in a.byte_edges(t) {
            after_sides.insert_range(f.lo, f.hi);
        }
    }
    (bytes.words(), widest.map_or(0, |w| w.1), after_leads.words(), after_sides.words())
}

/// How the kernels of a compiled grammar were classified so far (for tests and profiling).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Trie walks from the kernel state (with slices and run indexes where they apply).
    pub walked: usize,
    /// Composed from callees' kernels ([`compose_kernel`]).
    pub composed: usize,
    /// Shifted from a reference state's kernel ([`shift_kernel`]).
    pub shifted: usize,
    /// Found in the vocabulary's cross-grammar cache after a walk proved long (or before walking
    /// a small final state, `EARLY_SHARE_STATES`, or a counted string body that may end).
    pub shared: usize,
    /// Derived from a string body's kernel, less some words (open-object key positions).
    pub excluded: usize,
    /// Found under the key of a sibling state classified before ([`sibling_key`]).
    pub siblings: usize,
    /// Of `shared`, those found before any walk: a state that reaches few states (a value's
    /// whitespace, a string value's body), a counted string body that may end and that no
    /// token outruns, or a state whose prefix key a shared kernel had.
    pub shared_early: usize,
    /// Of `shifted`, those whose differing subtrees took a walked body's frontier
    /// ([`crate::slice::start_run_cover`]) rather than a walk.
    pub shifted_walked: usize,
    /// Of `shared_early`, states past `EARLY_SHARE_STATES` whose prefix key a shared kernel had
    /// (see `TokenIndex::shared_prefix`).
    pub shared_by_prefix: usize,
    /// Of `composed`, leads before a tree of small choices over literal leads whose run tokens
    /// were composed from the literal leads' ([`lead_into_literal_lead`]) rather than walked.
    pub lead_trees: usize,
    /// Of the literal leads composed so, those whose first bytes after the inner run were known
    /// from their own classification, without a kernel chart of their own for them
    /// ([`lead_into_literal_lead`]'s `v_reads`).
    pub lead_leaves_read_known: usize,
    /// Of `shifted`, those whose reference state reads a character per call of a rule
    /// ([`call_loop_start`]; a pattern key's loop after its excluded words' trie).
    pub shifted_call_loop: usize,
    /// Inside a plain inlined string body: its quote cut's tokens, with a walk of only the
    /// tokens that read past a `"` ([`CompiledGrammar::quote_cut_kernel`]).
    pub quote_cuts: usize,
    /// Of `composed`, literal leads whose classification a literal lead alike had
    /// ([`CompiledGrammar::literal_lead_kernel`]'s structure key), with no walk of their own.
    pub literal_leads_alike: usize,
}
/// [`CompiledGrammar::lead_tree_kernel`]'s key of a literal lead's part: its kernel's address,
/// byte, inner run (class hash, bound), first bytes after it (hash) and outer run.
type LeadLeafKey = (usize, u8, u128, u32, u128, (u128, u32));
/// A literal lead's kernel (kept for its address) and its part.
type LeadLeafEntry = (Arc<KernelMask>, Arc<KernelMask>);
/// A literal lead's kernel with the bytes its `v` reads (`None`: it does not apply), shared by the
/// literal leads alike ([`CompiledGrammar::literal_lead_key`]).
type LiteralLeadAlike = Option<(Arc<KernelMask>, ByteSet)>;

/// A grammar compiled against a vocabulary.
#[derive(Debug)]
pub struct CompiledGrammar {
    grammar: Grammar,
    /// Shared with the class-body thread ([`Self::build_class_bodies`]).
    automata: Arc<Automata>,
    index: Arc<TokenIndex>,
    kernels: RwLock<FastMap<StateId, Arc<KernelMask>>>,
    /// The distinct cached kernels by [`KernelMask::content_key`] (the first
    /// [`KEY_COLLISIONS`] cached with that key), whose `Arc` the kernels equal to one share
    /// ([`Self::cache_kernel`]).
    distinct_kernels: RwLock<FastMap<u64, Vec<Arc<KernelMask>>>>,
    /// The lazy DFA of the kernels classified as regular regions ([`crate::mask::RegionDfa`]).
    region: Mutex<crate::mask::RegionDfa>,
    /// [`lead_run`] of each rule start asked for so far ([`Self::lead_run_at`]).
    lead_runs: RwLock<FastMap<StateId, Option<(ByteSet, u32)>>>,
    /// [`Self::lead_tree_kernel`] of each state asked for so far, by state, run class and bound.
    lead_trees: RwLock<FastMap<(StateId, u128, u32), Arc<KernelMask>>>,
    /// The parts of literal leads alike in [`Self::lead_tree_kernel`], each with the kernel whose
    /// address keys it.
    lead_leaves: RwLock<FastMap<LeadLeafKey, LeadLeafEntry>>,
    /// By the state `v` after a literal lead's run, that run's class and the bytes `v`'s kernel
    /// row reads, where [`Self::literal_lead_kernel`] classified it (`v` reads no byte of the
    /// class and has not ended the rule).
    literal_lead_reads: RwLock<FastMap<StateId, (ByteSet, ByteSet)>>,
    /// [`Self::literal_lead_kernel`] by the literal lead's structure key ([`Self::literal_lead_key`]),
    /// with the bytes its `v` reads (`None`: it does not apply).
    literal_leads_alike: RwLock<FastMap<u128, LiteralLeadAlike>>,
    /// The memo of those keys' trees ([`Automata::bounded_key`]).
    bounded_keys: Mutex<crate::compiler::BoundedKeys>,
    /// FOLLOW set of each rule, computed on the first kernel classification.
    follow: OnceLock<Vec<ByteSet>>,
    nullable: OnceLock<Vec<bool>>,
    /// The words each state's rule rest does not match, where known ([`Self::residual_words`]).
    residual_words: OnceLock<HashMap<StateId, Vec<Box<[u8]>>>>,
    /// The string body's kernel that those states' kernels are derived from, indexed
    /// ([`Self::excluded_kernel_in`]).
    body_ends: OnceLock<Arc<BodyEnds>>,
    /// Counted string-body levels by state ([`body_level`]).
    levels: RwLock<FastMap<StateId, Option<Level>>>,
    /// Counted string bodies by kernel state ([`Self::counted_body`]).
    capacities: RwLock<FastMap<StateId, Option<Counted>>>,
    /// Counted class bodies: levels by state, classes and their slices (shared with the thread
    /// that builds the slices reserved at compile, [`Self::build_class_bodies`]).
    class_bodies: Arc<ClassBodies>,
    /// That thread, until a test waits for it.
    class_body_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The thread that builds the run indexes the compile left ([`TokenIndex::build_later`]),
    /// until a test waits for it.
    run_index_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The run indexes of the grammar's call-per-character loops, set by that thread too.
    call_runs: Arc<CallLoopRuns>,
    /// Kernels classified without a class-body slice the thread had not set ([`Self::classify`]).
    pending_class_bodies_passed: AtomicUsize,
    /// Shifted kernels whose own walk went without a class-body slice the thread had not set
    /// ([`Self::shifted_kernel_in`]).
    pending_class_bodies_shifted: AtomicUsize,
    /// Run indexes that apply at plain states ([`state_run_index`]).
    state_runs: RwLock<FastMap<StateId, Option<Arc<RunIndex>>>>,
    /// The states the compile found to read every run of a UTF-8 class, with its ASCII bytes
    /// ([`state_run_class_in`]): an interned row holding one of their items takes that class's
    /// index where the vocabulary has it built ([`Shortcuts::built_wide`]).
    /// PERF: a row of several items (o68280's string value `[^\x00-\x1f"&,:\\]` beside its
    /// rule's end) built the class's ASCII-only index in a fill (4.1 M instructions), though the
    /// compile had built the UTF-8 one.
    utf8_states: FastMap<StateId, u128>,
    /// Full masks by chart signature ([`Chart::last_signature`]), without stop tokens.
    /// Keyed by a 128-bit signature, hashed by the seeded [`FastMap`] (a memo hit is a few
    /// hundred nanoseconds; SipHash took a tenth of it).
    masks: RwLock<FastMap<u128, Arc<TokenSet>>>,
    mask_bytes: AtomicUsize,
    /// Uncertain-suffix verdicts by (completion row signature, suffix list).
    suffix_memo: SuffixMemo,
    /// Cover-search verdicts (which states read a slice), shared by the searches of all kernels.
    /// Shared with the class-body thread, which searches key starts' callees into it.
    cover: Arc<CoverMemo>,
    /// Shortest completions per state, for token budgets (computed on first use).
    completion: OnceLock<Arc<crate::budget::Completion>>,
    /// The allowed tokens of each token edge set (empty without token expressions).
    token_masks: crate::token_edges::TokenMasks,
    /// The edges sibling keys leave out: states indexed by rule on the first kernel
    /// classification, each rule's found when a kernel of it is, or before by the class-body
    /// thread ([`Self::build_class_bodies`]) (`None`: no sibling keys here).
    sibling_edges: Arc<OnceLock<Option<SiblingEdges>>>,
    /// Kernels by [`sibling_key`].
    siblings: RwLock<HashMap<Box<[u64]>, Arc<KernelMask>>>,
    /// Counts of [`KernelStats`], in its field order.
    stats: [AtomicUsize; 14],
}

/// Excluded words from which an excluded-words callee is composed rather than walked by its
/// caller (an open object's known keys).
/// PERF: ESLint's `rules` (hundreds of keys) took ~4.6 ms per kernel walked; composing beside a
/// few keys made the mask p99 of MaskBench's open objects ~5% slower.
const COMPOSE_EXCLUDED_WORDS: usize = 64;

/// [`CompiledGrammar::sibling_edges`], kept in `cell`: `a`'s edges where the grammar records
/// `excluded` words and `a` has no lookaheads or budgets (which a sibling key does not describe).
fn sibling_edges_in<'c>(
    cell: &'c OnceLock<Option<SiblingEdges>>,
    a: &Automata,
    excluded: Option<&crate::grammar::ExcludedWords>,
) -> Option<&'c SiblingEdges> {
    let build = || {
        excluded?;
        let budgets = !a.budgets().is_empty() || a.rec_budgets().is_some() || a.char_budgets().is_some();
        if a.has_lookahead() || budgets {
            return None;
        }
        Some(SiblingEdges::new(a))
    };
    cell.get_or_init(build).as_ref()
}

/// The cover-search substitutes of `a` ([`CoverMemo::with_substitutes`]): the start of each
/// excluded-words rule with an automaton of its own (an open object's other keys: every string
/// body but a few words W, none with a `"` or a backslash, [`crate::grammar::ExcludedWords`])
/// for the start of the string-body rule. Both read the same next bytes after any string (W is
/// finite, so every string body extends outside W) and may end after every string but W's;
/// only rules that may end before any byte (W without the empty word), as the body rule does.
pub(crate) fn excluded_substitutes(grammar: &Grammar, a: &Automata) -> crate::fasthash::FastMap<StateId, StateId> {
    let mut map = crate::fasthash::FastMap::default();
    let Some(excluded) = grammar.excluded_words() else { return map };
    let any = a.rule_start(excluded.any);
    if a.state(any).rule != excluded.any {
        return map;
    }
    for (r, _) in &excluded.rules {
        let start = a.rule_start(*r);
        // A rule that may not end before any byte (the empty key is known) keeps its own search.
        if a.state(start).rule == *r && a.state(start).is_final {
            map.insert(start, any);
        }
    }
    map
}

/// Whether some rule edge of state `s` may read byte `b` first: its callee's start may end or
/// call, or has a byte edge on `b`.
fn calls_read(a: &Automata, s: StateId, b: u8) -> bool {
    a.rule_edges(s).iter().any(|&(c, _)| {
        let start = a.callee_start(s, c);
        a.state(start).is_final
            || !a.rule_edges(start).is_empty()
            || a.byte_edges(start).iter().any(|e| (e.lo..=e.hi).contains(&b))
    })
}

/// Whether a grammar's start mask `mask` (text tokens only) allows at least half the
/// vocabulary: its decodes open with free text (a structural tag's text before its triggers),
/// so their masks at fixed strings come once per tag, after runs of memoized free-text masks.
fn opens_with_free_text(mask: &Bitset) -> bool {
    2 * mask.count_ones() >= mask.len()
}

impl CompiledGrammar {
    pub fn new(grammar: &Grammar, vocab: &Arc<Vocabulary>) -> Result<CompiledGrammar> {
        Self::new_on(grammar, vocab, usize::MAX)
    }

    /// [`Self::new`] on at most `max_threads` threads, the calling one included.
    pub fn new_on(grammar: &Grammar, vocab: &Arc<Vocabulary>, max_threads: usize) -> Result<CompiledGrammar> {
        Self::new_cow(Cow::Borrowed(grammar), vocab, max_threads)
    }

    /// [`Self::new_on`] keeping `grammar` itself rather than a copy.
    /// PERF: a JSON Schema grammar's copy and its drop were ~2.5% of a MaskBench p50 compile.
    pub fn new_owned(grammar: Grammar, vocab: &Arc<Vocabulary>, max_threads: usize) -> Result<CompiledGrammar> {
        Self::new_cow(Cow::Owned(grammar), vocab, max_threads)
    }

    fn new_cow(grammar: Cow<'_, Grammar>, vocab: &Arc<Vocabulary>, max_threads: usize) -> Result<CompiledGrammar> {
        let index = TokenIndex::for_vocab(vocab);
        let automata = Automata::build_shared(&grammar, max_threads, Some(&index.rule_dfas))?;
        let token_masks = crate::token_edges::TokenMasks::new(&automata, vocab)?;
        // Free-text class slices and run indexes are per vocabulary and take a trie walk each
        // (~1 ms on a 128k vocabulary): they are built with the grammar that first needs one
        // rather than in its first mask. The classes are those whose run index a state takes
        // ([`state_run_class`]: UTF-8 too only where the state reads every run of the class) or a
        // row of a state looping on ASCII bytes may take; string bodies need no class slice (they
        // take the body slice).
        // PERF: every loop class was built with UTF-8 too, though a class slice or UTF-8 run index
        // serves only a state that reads all of it: an identifier's `[a-zA-Z_0-9]` is ASCII only
        // (llama.cpp's `c.gbnf` built 14 classes, 10 with UTF-8, now 5: its cold compile on
        // Llama 3 went from 14.4 to 6.1 ms CPU).
        // Each class is built once per vocabulary (`classes_seen`), but its cover searches run
        // with every grammar: they also fill this grammar's cover memo, and a later search that
        // starts outside the class loop (a regex-bodied string's first positions) relies on
        // those verdicts, so skipping them in a process that saw the class made the first mask
        // differ from a fresh process's (o79409 `trace_id`: 2 M -> 67 M instructions).
        // (class, UTF-8 too, some state of the class is not a string body)
        let mut fresh: Vec<(u128, bool, bool)> = Vec::new();
        // The states found to read every run of a UTF-8 class ([`CompiledGrammar::utf8_states`]).
        let mut utf8_states: FastMap<StateId, u128> = FastMap::default();
        let cover = CoverMemo::with_substitutes(excluded_substitutes(&grammar, &automata));
        // Whether some state takes the string-body slice.
        let bodies = std::cell::Cell::new(false);
        let note = |fresh: &mut Vec<(u128, bool, bool)>, c: u128, utf8: bool, s: StateId| {
            let i = match fresh.iter().position(|&(x, u, _)| (x, u) == (c, utf8)) {
                Some(i) => i,
                None => {
                    fresh.push((c, utf8, false));
                    fresh.len() - 1
                }
            };
            if !fresh[i].2 {
                fresh[i].2 = BodySlice::covers(&automata, s, &cover).is_none();
                bodies.set(bodies.get() || !fresh[i].2);
            }
        };
        let loops = Loops::table(&automata);
        with_cover_budget(limits::MAX_COMPILE_RUN_CLASS_PAIRS, || {
            for s in (0..automata.states().len() as u32).map(StateId) {
                // A state whose every possible class is noted already, as free text, adds nothing:
                // its cover searches are skipped (they fill the memo, and a fill that reaches the
                // state searches then; ~2% of the largest key-set compiles). The searches that do
                // run share the compile's budget: a counted run beside a loop (`\d{40000}|\w+t`)
                // gave 40k states whose searches all failed (~30 µs each, 1.3 s to compile).
                let mut all_noted = true;
                run_class_candidates(&automata, s, &loops, |c, utf8| {
                    all_noted &= fresh.iter().any(|&(x, u, free)| (x, u) == (c, utf8) && free);
                });
                if all_noted {
                    continue;
                }
                let run_class = state_run_class_in(&automata, s, &cover, &loops);
                if let Some((c, utf8)) = run_class {
                    note(&mut fresh, c, utf8, s);
                    if utf8 {
                        utf8_states.insert(s, c);
                    }
                }
                // A state that reads every run of its loop class, UTF-8 too, takes that index; the
                // ASCII-only index of the same bytes would serve only rows of several items.
                let c = loops.ascii(s);
                if c.count_ones() >= MIN_ROW_RUN_BYTES && run_class != Some((c, true)) {
                    note(&mut fresh, c, false, s);
                }
            }
        });
        // A grammar with string bodies may walk some of their characters: the indexes that needs
        // are built on a thread of their own from here (the first fill that misreads a body also
        // asks), so that a fill rarely finds them unbuilt.
        // PERF: asked first by a misread, a loaded machine's thread often had not built them by
        // the fill that needed them, which then built its own (~3 ms).
        if bodies.get() {
            index.prepare_walked();
        }
        // A string body's run index serves walks that enter the body below the root (after an
        // escape, a quote or a key). Every class of the grammar, seen before or not: one dropped
        // since, or never built once the per-vocabulary budget was spent, is built again here
        // rather than walked in the masks ([`TokenIndex::build_run_indexes`]).
        let runs: Vec<(u128, bool)> = fresh.iter().filter(|f| f.2 || f.1).map(|f| (f.0, f.1)).collect();
        // In a grammar without string bodies (no JSON value), the ASCII-only classes other than
        // call loops' are built after the first mask, on a thread of their own (that mask builds
        // those it reads): no fill or compile looks for them in the vocabulary's cache alone (call
        // loops' take theirs from it with the compile, [`CallLoopRuns::take_cached`]; UTF-8
        // classes' serve `utf8_states` and class slices).
        // PERF: with string bodies too, MaskBench o10532's fills a few tokens in (tokens 59 and
        // 63, the thread's builds not done) built them: 2.5 and 5.0 ms, under 0.4 ms before.
        let call_runs = Arc::new(CallLoopRuns::of(&automata));
        let later = |(c, utf8): (u128, bool)| !bodies.get() && !utf8 && !call_runs.classes.iter().any(|x| x.0 == c);
        let (tick, left) = index.build_run_indexes_but(&runs, later);
        fresh.retain(|&(c, utf8, _)| !index.class_seen(c, utf8));
        for (c, utf8, free_text) in fresh {
            index.see_class(c, utf8);
            if free_text && utf8 {
                index.class_slice(c);
            }
        }
        // Which rules read bounded strings only, for the region walks' plain-text search.
        let region = Mutex::new(crate::mask::RegionDfa::for_grammar(&grammar));
        let cg = CompiledGrammar {
            grammar: grammar.into_owned(),
            index,
            kernels: RwLock::new(FastMap::default()),
            distinct_kernels: RwLock::new(FastMap::default()),
            region,
            lead_runs: RwLock::new(FastMap::default()),
            lead_trees: RwLock::new(FastMap::default()),
            lead_leaves: RwLock::new(FastMap::default()),
            literal_lead_reads: RwLock::new(FastMap::default()),
            literal_leads_alike: RwLock::new(FastMap::default()),
            bounded_keys: Mutex::new(crate::compiler::BoundedKeys::default()),
            follow: OnceLock::new(),
            nullable: OnceLock::new(),
            residual_words: OnceLock::new(),
            body_ends: OnceLock::new(),
            levels: RwLock::new(FastMap::default()),
            capacities: RwLock::new(FastMap::default()),
            class_bodies: Arc::default(),
            class_body_thread: Mutex::new(None),
            run_index_thread: Mutex::new(None),
            call_runs,
            pending_class_bodies_passed: AtomicUsize::new(0),
            pending_class_bodies_shifted: AtomicUsize::new(0),
            state_runs: RwLock::new(FastMap::default()),
            utf8_states,
            masks: RwLock::new(FastMap::default()),
            mask_bytes: AtomicUsize::new(0),
            suffix_memo: SuffixMemo::default(),
            cover: Arc::new(cover),
            completion: OnceLock::new(),
            sibling_edges: Arc::new(OnceLock::new()),
            siblings: RwLock::new(HashMap::new()),
            stats: Default::default(),
            automata: Arc::new(automata),
            token_masks,
        };
        // Every kernel classification reads the FOLLOW sets: built with the grammar (linear in
        // its states) rather than in the first mask.
        // PERF: ~0.4 ms of a 50-tool structural tag's first mask (14k states), against a ~25 ms
        // compile.
        let (nullable, follow) = nullable_and_follow(&cg.automata);
        let _ = (cg.nullable.set(nullable), cg.follow.set(follow));
        cg.build_class_bodies();
        // Every matcher starts at the same row: its mask (the start state's kernels) is filled
        // with the grammar, so that a new matcher's first mask is a memoized copy. An error is
        // left for that first fill to report.
        // PERF: the free text before a structural tag's trigger was a ~150 us kernel walk in
        // each compiled grammar's first mask (50 tools: against a ~40 ms compile).
        let mut start = crate::earley::Chart::new(&cg.automata);
        let sig = start.last_signature();
        let mut mask = Bitset::new(vocab.vocab_size());
        if cg.compute_text_mask(&mut start, &mut mask, sig).is_ok() && opens_with_free_text(&mask) {
            cg.classify_literal_chains();
        }
        let thread = cg.index.build_later(left, tick);
        *cg.run_index_thread.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = thread;
        Ok(cg)
    }

    /// Waits for the thread that builds the run indexes the compile left
    /// ([`TokenIndex::build_later`]; tests: then every one is built, unless a fill built it).
    #[doc(hidden)]
    pub fn wait_run_indexes(&self) {
        let thread = self.run_index_thread.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Computes and memoizes the mask of what the text after `chart`'s last row allows (no stop
    /// tokens, no token edges), for that row's signature `sig`, which missed the memo.
    pub(crate) fn compute_text_mask(
        &self,
        chart: &mut crate::earley::Chart,
        out: &mut Bitset,
        sig: u128,
    ) -> Result<()> {
        let mut get = |s: StateId| self.kernel(s);
        let reads = |s: StateId| self.reads_body(s);
        let memo = Some(&self.suffix_memo);
        let set = crate::mask::fill_mask_memo(&self.automata, chart, self.trie(), out, &mut get, memo, Some(&reads))?;
        self.memoize_mask(sig, set.unwrap_or_else(|| TokenSet::of_bitset(out)));
        Ok(())
    }

    /// [`CompiledGrammar::compute_text_mask`] written straight into `row` (exactly the
    /// vocabulary's words; its old content is overwritten) and memoized from there. `false`,
    /// with nothing written, where the mask is not computed from kernels
    /// ([`crate::mask::kernels_apply`]).
    ///
    /// PERF: a miss computed into the matcher's own mask was then copied into the row (16 KB on
    /// Llama 3); a dense result is now copied once, into the memo.
    pub(crate) fn compute_text_mask_into(
        &self,
        chart: &mut crate::earley::Chart,
        row: &mut [u32],
        sig: u128,
    ) -> Result<bool> {
        if !crate::mask::kernels_apply(&self.automata) {
            return Ok(false);
        }
        let len = self.vocab().vocab_size();
        let mut get = |s: StateId| self.kernel(s);
        let reads = |s: StateId| self.reads_body(s);
        let (a, trie, memo) = (&self.automata, self.trie(), Some(&self.suffix_memo));
        let set = crate::mask::fill_mask_kernels(a, chart, trie, row, len, &mut get, memo, Some(&reads))?;
        self.memoize_mask(sig, set.unwrap_or_else(|| TokenSet::of_words(row, len)));
        Ok(true)
    }

    /// The allowed tokens of each token edge set (`crate::token_edges`).
    pub fn token_masks(&self) -> &crate::token_edges::TokenMasks {
        &self.token_masks
    }

    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    pub fn automata(&self) -> &Automata {
        &self.automata
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.index.vocab
    }

    pub fn trie(&self) -> &TokenTrie {
        &self.index.trie
    }

    /// The vocabulary's shared token index.
    pub fn index(&self) -> &TokenIndex {
        &self.index
    }

    fn follow(&self) -> &[ByteSet] {
        self.follow.get_or_init(|| follow_sets(&self.automata, self.nullable()))
    }

    fn nullable(&self) -> &[bool] {
        self.nullable.get_or_init(|| nullable_states(&self.automata))
    }

    /// The cached classification of kernel `state`, computed on first use.
    pub fn kernel(&self, state: StateId) -> Result<Arc<KernelMask>> {
        self.kernel_in(state, &mut Vec::new())
    }

    /// [`Self::kernel`], inside the compositions of the states on `stack`.
    fn kernel_in(&self, state: StateId, stack: &mut Vec<StateId>) -> Result<Arc<KernelMask>> {
        if let Some(k) = read(&self.kernels).get(&state) {
            return Ok(k.clone());
        }
        // `state` on the stack: its chain's end is being classified, and reaches it again.
        if let Some(end) = self.chain_end_start(state).filter(|_| !stack.contains(&state)) {
            stack.push(state);
            let km = self.kernel_in(end, stack);
            stack.pop();
            crate::mask::count_chain_kernel();
            // The end's kernel is cached (and deduplicated by content) already.
            return Ok(write(&self.kernels).entry(state).or_insert(km?).clone());
        }
        let key = self.sibling_key(state);
        if let Some(km) = key.as_ref().and_then(|k| read(&self.siblings).get(k).cloned()) {
            self.count(5);
            return Ok(self.cache_kernel(state, km));
        }
        let km = self.new_kernel_in(state, stack)?;
        if let Some(k) = key {
            write(&self.siblings).entry(k).or_insert_with(|| km.clone());
        }
        Ok(km)
    }

    /// The start of the last rule of the chain that `state` starts ([`SiblingEdges::chain_end`]),
    /// whose kernel is `state`'s; `None` where `state` is no rule's start, its rule ends its
    /// chain, or the end's FOLLOW differs (a kernel lists the rule ends FOLLOW lets on).
    fn chain_end_start(&self, state: StateId) -> Option<StateId> {
        let a = &self.automata;
        let rule = a.state(state).rule;
        if a.rule_start(rule) != state {
            return None;
        }
        let end = self.with_sibling_edges(|edges, with| edges.chain_end(a, rule, with))?;
        let follow = self.follow();
        (end != rule && follow[end.index()] == follow[rule.index()]).then(|| a.rule_start(end))
    }

    /// The key under which `state` finds the kernel of a sibling ([`sibling_key`]), if any.
    fn sibling_key(&self, state: StateId) -> Option<Box<[u64]>> {
        let rule = self.automata.state(state).rule;
        self.with_sibling_edges(|edges, with| {
            if !edges.applies(&self.automata, rule, with) {
                return None;
            }
            sibling_key(&self.automata, edges, with, &self.follow()[rule.index()], state)
        })?
    }

    /// `f` of the [`SiblingEdges`] and what finding them reads, where the grammar has them.
    fn with_sibling_edges<T>(&self, f: impl FnOnce(&SiblingEdges, &DropRules) -> T) -> Option<T> {
        let edges = self.sibling_edges()?;
        let excluded = self.grammar.excluded_words()?;
        let contains = |l: &[u8]| self.index.quote_ends().some_token_contains(l);
        Some(f(edges, &DropRules { excluded, max_depth: self.index.trie.max_depth, contains: &contains }))
    }

    /// The edges that [`sibling_key`]s leave out (found rule by rule), where the grammar may
    /// have some: it records excluded-words rules (open objects) and has no lookaheads or
    /// budgets (which the key does not describe).
    fn sibling_edges(&self) -> Option<&SiblingEdges> {
        sibling_edges_in(&self.sibling_edges, &self.automata, self.grammar.excluded_words())
    }

    /// A kernel not cached yet, classified and cached.
    fn new_kernel_in(&self, state: StateId, stack: &mut Vec<StateId>) -> Result<Arc<KernelMask>> {
        if let Some(km) = self.derived_kernel_in(state, stack)? {
            return Ok(km);
        }
        self.walked_kernel(state)
    }

    /// A kernel not cached yet, classified without a walk of its own (from other kernels, or
    /// by a walk of a few nodes) and cached; `None` where only [`Self::walked_kernel`] applies.
    fn derived_kernel_in(&self, state: StateId, stack: &mut Vec<StateId>) -> Result<Option<Arc<KernelMask>>> {
        if let Some(km) = self.excluded_kernel_in(state, stack)? {
            self.count(4);
            // The body's own kernel is cached already (and shared as it is).
            if Arc::ptr_eq(&km, &self.body_ends.get().expect("set by excluded_kernel_in").base) {
                return Ok(Some(write(&self.kernels).entry(state).or_insert(km).clone()));
            }
            return Ok(Some(self.cache_kernel(state, km)));
        }
        if let Some(km) = self.literal_lead_kernel_alike(state)? {
            self.count(1);
            return Ok(Some(km));
        }
        if let Some(km) = self.literal_kernel(state)? {
            self.count(0);
            return Ok(Some(self.cache_kernel(state, Arc::new(km))));
        }
        if let Some(km) = self.lead_kernel_in(state, stack)? {
            self.count(1);
            return Ok(Some(self.cache_kernel(state, Arc::new(km))));
        }
        if let Some(km) = self.composed_kernel_in(state, stack)? {
            self.count(1);
            return Ok(Some(self.cache_kernel(state, Arc::new(km))));
        }
        if let Some(km) = self.shifted_kernel_in(state, stack)? {
            self.count(2);
            return Ok(Some(self.cache_kernel(state, Arc::new(km))));
        }
        if let Some(km) = self.byte_region_kernel(state) {
            self.count(0);
            return Ok(Some(self.cache_kernel(state, Arc::new(km))));
        }
        if let Some(km) = self.quote_cut_kernel(state)? {
            self.count(12);
            return Ok(Some(self.cache_kernel(state, Arc::new(km))));
        }
        Ok(None)
    }

    /// The classification of a kernel state inside a plain inlined string body (a `pattern`
    /// string's, [`crate::slice::quote_form`]) from the vocabulary's [`crate::slice::QuoteCut`] of the body's
    /// form: its inside tokens, plus a walk of the tokens that read past a `"` (this state's own
    /// rest of rule). `None` where that does not apply: lookaheads, no form, or a state that a
    /// counted, closing or class body's slice or a free-text class slice classifies.
    ///
    /// PERF: MaskBench `JsonSchemaStore---meta` (`^[a-z][a-z0-9_]+$` in nine object variants)
    /// walked nine kernels per position, equal but for the tokens past the quote (~2.9 M
    /// instructions each, with a cross-grammar key that never matched: what follows the quote
    /// differs).
    #[doc(hidden)]
    pub fn quote_cut_kernel(&self, state: StateId) -> Result<Option<KernelMask>> {
        let a = &self.automata;
        if a.has_lookahead() {
            return Ok(None);
        }
        let Some(form) = crate::slice::quote_form(a, state) else {
            return Ok(None);
        };
        // The states' own slices first (each cheaper than a walk of the exits, or built for them).
        let sliced = self.counted_body(state).is_some()
            || self.closing_body(state).is_some()
            || self.class_body_chain(state).is_some()
            || ClassSlice::loop_class(a, state).is_some_and(|c| self.index.cached_class_slice(c).is_some());
        if sliced {
            return Ok(None);
        }
        // A region that reads much of the trie (`.+`, `[\w ]+`) is left to the body and class
        // shortcuts, and a form is cut only once a second kernel state has it: a single walk
        // with run indexes beats building the cut.
        // PERF: cutting every form regressed MaskBench o82300 (`.+`), o26111 (`[\w ]+`) and
        // o29393 (`^[a-zA-Z_][a-zA-Z0-9_]*$`, one kernel) from ~0.2 to ~2.1-2.4 ms.
        let trie = &self.index.trie;
        let first = crate::mask::state_bytes(a, state);
        let reads: usize = trie
            .root_children
            .iter()
            .map(|&c| c as usize)
            .filter(|&c| first.contains(trie.nodes[c].byte))
            .map(|c| trie.nodes[c].subtree_end as usize - c)
            .sum();
        if reads * QUOTE_CUT_MAX_SHARE > trie.nodes.len() {
            return Ok(None);
        }
        let Some(cut) = self.index.quote_cut_if_seen(form) else {
            return Ok(None);
        };
        let vocab_size = self.index.vocab.vocab_size();
        self.with_walk_shortcuts(state, |sc| crate::mask::classify_quote_cut(a, trie, vocab_size, state, sc, &cut))
            .map(Some)
    }

    /// A kernel not cached yet, walked (through the cross-grammar cache) and cached.
    fn walked_kernel(&self, state: StateId) -> Result<Arc<KernelMask>> {
        let follow = self.follow()[self.automata.state(state).rule.index()];
        // The classification depends on the rule's FOLLOW set too (it filters rule ends). The
        // key is computed only once the walk proves long (see `classify_kernel_budget`), or
        // before the walk for a state that reaches few states (see `EARLY_SHARE_STATES`).
        let depth = self.index.trie.max_depth;
        let key_within = |limit| self.automata.structure_hash(state, limit, depth).map(|h| h ^ follow.hash128());
        // Any state that reaches at most `EARLY_SHARE_STATES` states asks before walking too, and
        // shares its walk however short (`keyed_small`): a string value's body (`json_char* "\""`, its
        // rule ending after the quote) is one walk for every grammar and FOLLOW set alike.
        // PERF: the first position inside each grammar's first string value walked the body's
        // slice and recorded the ~173 tokens that read past the quote, ~0.1 ms on Llama 3 (the
        // largest `walked` group of the session-47 band driver, ~600 of its 1,100 walked fills).
        // A state past the early limit keeps the early search's prefix key (`structure_key`).
        let (mut key, prefix) = match self.automata.structure_key(state, EARLY_SHARE_STATES, depth) {
            Ok(h) => (Some(h ^ follow.hash128()), None),
            Err(p) => (None, Some(p ^ follow.hash128())),
        };
        let keyed_small = key.is_some();
        // A counted body that may end inside a token and that no token outruns records every
        // body-text token that reads a quote uncertain, past the budget: its key is needed anyway.
        // PERF: the positions of a long `json_char{0,1023}` (MaskBench o82710's `maxLength: 5000`
        // description) walked ~4,096 units (~0.7 M instructions) before the cache answered.
        let early = key.is_none() && self.counted_body(state).is_some_and(|c| c.ends && c.chars >= depth);
        // A state whose prefix key a shared kernel has asks with its whole key before walking.
        // PERF: a `format: uri` string's state after `https://` (~47 k tokens read, 7.8 M
        // instructions walked on Llama 3) is the same in most grammars that have one, but each
        // walked 4,096 trie nodes (~2.3 M instructions, ~0.5 ms) before asking the cache.
        let prefixed = key.is_none() && prefix.is_some_and(|p| self.index.shared_prefix(p));
        if early || prefixed {
            key = key_within(STRUCTURE_HASH_LIMIT);
        }
        if let Some(km) = key.and_then(|k| self.index.shared_kernel(k)) {
            self.count(3);
            self.count(6);
            if prefixed {
                self.count(8);
            }
            return Ok(self.cache_kernel(state, km));
        }
        // Only walks that reach the budget are shared (the cache holds the costly kernels), and
        // the states keyed before the walk (small ones, counted bodies: later grammars ask first).
        let (mut escalated, mut shared) = (false, None);
        let mut escalate = |ask: BudgetAsk| {
            escalated = true;
            if key.is_none() && !early && !prefixed {
                if ask == BudgetAsk::BeforeRegion {
                    key = key_within(REGION_ASK_STATES);
                    if key.is_none() {
                        REGION_ASKS_UNKEYED.set(REGION_ASKS_UNKEYED.get() + 1);
                    }
                } else {
                    key = key_within(STRUCTURE_HASH_LIMIT);
                }
            }
            shared = key.and_then(|k| self.index.shared_kernel(k));
            shared.is_some()
        };
        let small = self.automata.states().len() <= SMALL_AUTOMATON_STATES;
        let share_after = if small { SHARE_AFTER_VISITS_SMALL } else { SHARE_AFTER_VISITS };
        let walked = self.classify_asking(state, share_after, &mut escalate)?;
        let km = match (walked, shared) {
            (Some(km), _) => {
                self.count(0);
                let km = Arc::new(km);
                if let Some(k) = key.filter(|_| escalated || early || keyed_small) {
                    self.index.share_kernel(k, prefix, &km);
                }
                km
            }
            (None, Some(km)) => {
                self.count(3);
                km
            }
            (None, None) => unreachable!("a walk is abandoned only for a shared classification"),
        };
        Ok(self.cache_kernel(state, km))
    }

    /// Caches `km` as the kernel of `state`, as the `Arc` of an equal classification already
    /// cached when there is one: kernel items that share an `Arc` add their accepted set to a
    /// mask once ([`fill_mask_memo`]).
    ///
    /// PERF: after each `,` of an object with ~94 optional properties (MaskBench
    /// `Github_hard---o30633`), ~188 kernel items each had an equal 16 KB accepted set on
    /// Llama 3, and OR-ing them all took ~0.4 ms of every such fill.
    fn cache_kernel(&self, state: StateId, km: Arc<KernelMask>) -> Arc<KernelMask> {
        let key = km.content_key();
        let km = {
            let mut distinct = write(&self.distinct_kernels);
            let same_key = distinct.entry(key).or_default();
            match same_key.iter().find(|k| ***k == *km) {
                Some(k) => k.clone(),
                None => {
                    // Past `KEY_COLLISIONS` unequal kernels under one key, `km` stays unshared.
                    if same_key.len() < KEY_COLLISIONS {
                        same_key.push(km.clone());
                    }
                    km
                }
            }
        };
        write(&self.kernels).entry(state).or_insert(km).clone()
    }

    /// Caches the kernels of the literal positions that [`classify_literal_chain`] classifies, up
    /// to [`LITERAL_CHAINS_AT_COMPILE`] of them: called with a grammar that opens with free text
    /// ([`opens_with_free_text`]), whose other kernels are classified on first use.
    ///
    /// PERF: each such kernel is a trie descent of a few nodes, but the first mask at a tag's
    /// fixed string paid it with the trie out of cache: ~3-4 us for ~1.5 K instructions (Llama 3;
    /// the median first mask of a 50-tool `get_model_structural_tag` walk). All 2,142 of that
    /// grammar take ~0.5 ms together, against a ~25 ms compile. A grammar that opens
    /// constrained (a JSON Schema's) is not classified so: there the compile is what a request
    /// waits for (~0.1 ms of the median MaskBench schema's ~1.3 ms, up to 23 ms), and a fixed
    /// string's first mask is small beside its other first visits.
    fn classify_literal_chains(&self) {
        if self.automata.has_lookahead() {
            return;
        }
        let vocab_size = self.index.vocab.vocab_size();
        let states = (0..self.automata.states().len() as u32).map(StateId);
        let chains = states
            .filter_map(|s| classify_literal_chain(&self.automata, &self.index.trie, vocab_size, s).map(|km| (s, km)));
        for (s, km) in chains.take(LITERAL_CHAINS_AT_COMPILE) {
            self.count(0);
            self.cache_kernel(s, Arc::new(km));
        }
    }

    /// The classification of a literal position ([`classify_literal`]): a plain walk of the one
    /// subtree it reads, when that is short; `None` otherwise.
    #[doc(hidden)]
    pub fn literal_kernel(&self, state: StateId) -> Result<Option<KernelMask>> {
        if self.automata.has_lookahead() {
            return Ok(None);
        }
        let vocab_size = self.index.vocab.vocab_size();
        if let Some(km) = classify_literal_chain(&self.automata, &self.index.trie, vocab_size, state) {
            return Ok(Some(km));
        }
        let follow = self.follow()[self.automata.state(state).rule.index()];
        classify_literal(&self.automata, &self.index.trie, vocab_size, state, Some(&follow))
    }

    /// The classification of `state` by the region DFA ([`crate::mask::classify_region_kernel`]).
    #[doc(hidden)]
    pub fn region_kernel(&self, state: StateId) -> Option<KernelMask> {
        if !crate::mask::RegionDfa::applies(&self.automata) {
            return None;
        }
        let follow = self.follow()[self.automata.state(state).rule.index()];
        let vocab_size = self.index.vocab.vocab_size();
        let mut dfa = self.region.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        crate::mask::classify_region_kernel(
            &self.automata,
            &self.index.trie,
            vocab_size,
            state,
            Some(&follow),
            &mut dfa,
            self.index.text_slice(),
        )
    }

    /// The kernels the region DFA classified so far (for tests: see `mask/region.rs`).
    #[doc(hidden)]
    pub fn region_kernels_served(&self) -> usize {
        self.region.lock().map_or(0, |r| r.served)
    }

    /// The classification of a kernel state from which only byte edges are reachable, by a plain
    /// automaton walk of the subtrees it reads ([`classify_byte_region`]), when those are small;
    /// `None` otherwise.
    #[doc(hidden)]
    pub fn byte_region_kernel(&self, state: StateId) -> Option<KernelMask> {
        if self.automata.has_lookahead() {
            return None;
        }
        let follow = self.follow()[self.automata.state(state).rule.index()];
        let vocab_size = self.index.vocab.vocab_size();
        classify_byte_region(&self.automata, &self.index.trie, vocab_size, state, Some(&follow))
    }

    /// The classification of a kernel state from which the rest of its rule matches every string
    /// body but the words W ([`Self::residual_words`], [`crate::grammar::ExcludedWords`]), derived
    /// from the kernel `K` of the string body rule's start: the same tokens stay inside (W is
    /// finite, so every prefix of a string body extends to one outside W), and a token ends the
    /// rule after its prefix `u` exactly when it ends `K`'s rule after `u` and `u` is not in W
    /// (the same FOLLOW set filters both ends). `None` where that does not apply: other states,
    /// lookaheads, a string body rule without an automaton of its own, or FOLLOW sets that differ.
    ///
    /// PERF: every position inside an open object's key (a node of the excluded-key trie) was a
    /// walk of its own (~0.3-0.5 ms on Llama 3); they now share the string body's kernel, and
    /// take it as it is (its `Arc`) where no uncertain token reads a whole word ([`BodyEnds`]).
    fn excluded_kernel_in(&self, state: StateId, stack: &mut Vec<StateId>) -> Result<Option<Arc<KernelMask>>> {
        let a = &self.automata;
        let (Some(excluded), Some(words)) = (self.grammar.excluded_words(), self.residual_words().get(&state)) else {
            return Ok(None);
        };
        let any = a.rule_start(excluded.any);
        let follow = self.follow();
        let same_follow = follow[a.state(state).rule.index()] == follow[excluded.any.index()];
        if !same_follow || a.state(any).rule != excluded.any || a.has_lookahead() || stack.contains(&any) {
            return Ok(None);
        }
        if self.body_ends.get().is_none() {
            // Per vocabulary, under the body kernel's cross-grammar key (its automaton and FOLLOW
            // set): a grammar that finds it there takes its base as `any`'s kernel.
            // PERF: each grammar with an open object walked the body kernel (~0.1 M instructions
            // on Llama 3) and sorted its uncertain tokens (~0.13 M) in its first key start.
            let depth = self.index.trie.max_depth;
            let key =
                a.structure_hash(any, STRUCTURE_HASH_LIMIT, depth).map(|h| h ^ follow[excluded.any.index()].hash128());
            let vocab = &self.index.vocab;
            stack.push(state);
            let ends = match key {
                Some(k) => self.index.body_ends(k, || Ok(BodyEnds::new(self.kernel_in(any, stack)?, vocab))),
                None => self.kernel_in(any, stack).map(|base| Arc::new(BodyEnds::new(base, vocab))),
            };
            stack.pop();
            let ends = ends?;
            write(&self.kernels).entry(any).or_insert_with(|| ends.base.clone());
            // A racing thread's index is built from the same cached `Arc`.
            let _ = self.body_ends.set(ends);
        }
        let ends = self.body_ends.get().expect("set above");
        // `BodyEnds` reads the per-token uncertain list only.
        if ends.base.beyond.is_some() {
            return Ok(None);
        }
        Ok(Some(ends.without(&self.index.vocab, words)))
    }

    /// The states of the rules that match a string body but some words W (those with an
    /// automaton of their own), each with the rests of W after it: the states the words' prefixes
    /// step to from the rule's start, up to a state with a rule edge whose callee may read the
    /// next byte ([`calls_read`]; a key trie's call of its non-ASCII deviation reads no key byte).
    /// The automata step bytes deterministically and no rule edge is passed, so the rest of the
    /// rule from such a state after prefix `p` matches every string body but the rests of W's
    /// words after `p`.
    fn residual_words(&self) -> &HashMap<StateId, Vec<Box<[u8]>>> {
        self.residual_words.get_or_init(|| {
            let (a, mut by_state) = (&self.automata, HashMap::new());
            let Some(excluded) = self.grammar.excluded_words() else { return by_state };
            for (r, words) in &excluded.rules {
                let start = a.rule_start(*r);
                // An inlined rule has no automaton of its own.
                if a.state(start).rule != *r {
                    continue;
                }
                for w in words {
                    let mut s = start;
                    for i in 0..=w.len() {
                        let calls = a.rule_edges(s);
                        // A bounded recursion's callees start elsewhere: not the rule's language.
                        if calls.iter().any(|&(c, _)| a.callee_start(s, c) != a.rule_start(c)) {
                            break;
                        }
                        by_state.entry(s).or_insert_with(Vec::new).push(w[i..].into());
                        let Some(t) = w.get(i).filter(|&&b| !calls_read(a, s, b)).and_then(|&b| a.step(s, b)) else {
                            break;
                        };
                        s = t;
                    }
                }
            }
            by_state
        })
    }

    /// The classification of a literal position ([`literal_byte`] `p`) whose next state `u` is
    /// not final and only calls a run rule ([`lead_run`], a JSON whitespace) and then goes to `v`:
    /// the `,` before `ws "\"key\""` or the `:` before `ws value`. Every token it reads is `p`,
    /// then a run, then what `v` reads, so it is [`classify_after_lead`] of `v` over the nodes
    /// below `p` ([`LeadNodes`] with a prefix, per vocabulary); no kernel of `u` or `v` is needed.
    /// `None` where that does not apply (as for [`Self::lead_kernel`]). Counted as composed.
    ///
    /// PERF: such a position walked the 657 nodes under `,` on Llama 3 (the run's rows for each
    /// whitespace node, then the key from every ` "` node), ~100 k instructions per required
    /// property's `,`, one in each new lead after a value.
    #[doc(hidden)]
    pub fn literal_lead_kernel(&self, state: StateId) -> Result<Option<KernelMask>> {
        let Some(lead) = self.literal_lead(state) else { return Ok(None) };
        let nodes = self.index.lead_nodes(Some(lead.0), &lead.2, lead.3);
        Ok(self.literal_lead_walked(lead, &nodes)?.map(|(km, _)| km))
    }

    /// [`Self::literal_lead_kernel`] of the literal lead `(p, v, class, bound)` over `nodes`
    /// (below `p`), with the bytes `v` reads (recorded in `literal_lead_reads` too).
    fn literal_lead_walked(
        &self,
        (_, v, class, _): (u8, StateId, ByteSet, u32),
        nodes: &LeadNodes,
    ) -> Result<Option<(KernelMask, ByteSet)>> {
        let vocab_size = self.index.vocab.vocab_size();
        // `v` is in `state`'s rule (a byte edge, then a call's return): the same FOLLOW set.
        let walk = |sc: Shortcuts<'_>| classify_after_lead(&self.automata, &self.index.trie, vocab_size, v, sc, nodes);
        let Some((km, _, readable)) = self.with_walk_shortcuts(v, walk)? else { return Ok(None) };
        write(&self.literal_lead_reads).insert(v, (class, readable));
        Ok(Some((km, readable)))
    }

    /// [`Self::literal_lead_kernel`], cached, and shared by literal leads alike: those of equal
    /// [`Self::literal_lead_key`] take the first one's classification (and the bytes its `v`
    /// reads) without a walk. `None` where it does not apply.
    ///
    /// PERF: MaskBench o3626's `not` value is a tree over ~270 literal leads `"{" ws obj_N ws "}"`
    /// whose objects differ only past the 7 bytes of the longest Llama 3 token that begins with
    /// `{`; each walked its own (~22.7 K instructions, 6.1 M of its slowest fill).
    fn literal_lead_kernel_alike(&self, state: StateId) -> Result<Option<Arc<KernelMask>>> {
        let Some(lead) = self.literal_lead(state) else { return Ok(None) };
        let (p, v, class, bound) = lead;
        let nodes = self.index.lead_nodes(Some(p), &class, bound);
        let key = self.literal_lead_key(state, lead, &nodes);
        if let Some(alike) = key.and_then(|k| read(&self.literal_leads_alike).get(&k).cloned()) {
            let Some((km, readable)) = alike else { return Ok(None) };
            self.count(13);
            write(&self.literal_lead_reads).insert(v, (class, readable));
            return Ok(Some(write(&self.kernels).entry(state).or_insert(km).clone()));
        }
        let walked = self.literal_lead_walked(lead, &nodes)?;
        let walked = walked.map(|(km, readable)| (self.cache_kernel(state, Arc::new(km)), readable));
        if let Some(k) = key {
            write(&self.literal_leads_alike).insert(k, walked.clone());
        }
        Ok(walked.map(|(km, _)| km))
    }

    /// The key of a literal lead `(p, v, class, bound)` at `state` (`nodes` below `p`) under which
    /// literal leads alike share their classification: FOLLOW of its rule, `p`, the run, the
    /// bytes `v` reads first and whether it may end the rule with none ([`Automata::first_bytes`]),
    /// and per such byte `b` with exits, `v`'s key within the longest rest below them
    /// ([`Automata::bounded_key`] with `b` first).
    ///
    /// Why it is exact: [`classify_after_lead`] of `v` is refused where `v` may end the rule or
    /// reads a run byte; else it accepts the run tokens and walks each exit's subtree whose byte
    /// `v` reads from `v`'s kernel chart: the tokens of at most that rest's depth, first byte
    /// `b`, read from `v`, as equal keys read alike. `None` past [`LITERAL_LEAD_KEY_ENTRIES`] new
    /// entries of the memo.
    ///
    /// PERF: [`Automata::structure_hash`] within the 7 bytes of the longest Llama 3 token that
    /// begins with `{` reached past 256 states from each of o3626's literal leads (open objects:
    /// their extra keys' string bodies), ~31 K instructions each, 13 M in all; a tree key within
    /// those 7 bytes told their objects' keys apart (`"patt`, `"loca`: 61 kernels walked for 267
    /// literal leads), where the only token `{"...` on Llama 3 is `{"`.
    fn literal_lead_key(
        &self,
        state: StateId,
        (p, v, class, bound): (u8, StateId, ByteSet, u32),
        nodes: &LeadNodes,
    ) -> Option<u128> {
        let a = &self.automata;
        if !a.plain_for_keys() {
            return None;
        }
        let follow = self.follow()[a.state(state).rule.index()];
        let mut memo = self.bounded_keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if memo.len() > BOUNDED_KEYS_MAX {
            memo.clear();
        }
        let mut budget = LITERAL_LEAD_KEY_ENTRIES;
        let (first, ends) = a.first_bytes(v, &mut memo, &mut budget)?;
        let mut key = follow.hash128() ^ first.hash128().rotate_left(32) ^ class.hash128().rotate_left(64);
        key ^= u128::from(p) << 8 | u128::from(ends) | u128::from(bound) << 16;
        for b in first.bytes() {
            let rest = nodes.rest_depths[b as usize];
            if rest > 0 {
                let k = a.bounded_key(v, rest, Some(b), &mut memo, &mut budget)?;
                key = (key ^ k ^ u128::from(b) << 96).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835);
            }
        }
        Some(key)
    }

    /// Where [`Self::literal_lead_kernel`] applies to `state`: its literal byte `p`, the state `v`
    /// after the run, and the run's class and bound.
    fn literal_lead(&self, state: StateId) -> Option<(u8, StateId, ByteSet, u32)> {
        let a = &self.automata;
        let p = literal_byte(a, state).filter(|_| !a.has_lookahead())?;
        let u = a.byte_edges(state)[0].target;
        let &[(r, v)] = a.rule_edges(u) else { return None };
        if !a.byte_edges(u).is_empty() || a.state(u).is_final || v == u {
            return None;
        }
        let (class, bound) = self.lead_run_at(a.callee_start(u, r))?;
        Some((p, v, class, bound))
    }

    /// [`lead_run`] of the rule start `s0`, cached per grammar: every lead and literal lead asks
    /// for the one whitespace rule's start.
    ///
    /// PERF: each ask followed the rule's chain again (65 states for the JSON Schema whitespace,
    /// ~10 k instructions), ~65 M of the session-40 band driver's 3.57 G.
    fn lead_run_at(&self, s0: StateId) -> Option<(ByteSet, u32)> {
        if let Some(&run) = read(&self.lead_runs).get(&s0) {
            return run;
        }
        let run = lead_run(&self.automata, s0);
        write(&self.lead_runs).insert(s0, run);
        run
    }

    /// The classification of a kernel state whose only move is a call of a run rule such as a JSON
    /// whitespace ([`lead_run`]) and then state `t`: the tokens that begin with the run
    /// ([`classify_after_lead`]) joined with `t`'s own kernel (the tokens read with the run empty);
    /// `None` where that does not apply: other states, lookaheads, `t` on the composition stack, or
    /// a `t` that reads a byte of the run or may end the rule before any byte. Counted as composed.
    #[doc(hidden)]
    pub fn lead_kernel(&self, state: StateId) -> Result<Option<KernelMask>> {
        self.lead_kernel_in(state, &mut Vec::new())
    }

    fn lead_kernel_in(&self, state: StateId, stack: &mut Vec<StateId>) -> Result<Option<KernelMask>> {
        let a = &self.automata;
        let &[(r, t)] = a.rule_edges(state) else { return Ok(None) };
        let nested = stack.len() >= MAX_COMPOSE_DEPTH || stack.contains(&t);
        if !a.byte_edges(state).is_empty() || a.has_lookahead() || t == state || nested {
            return Ok(None);
        }
        let Some((class, bound)) = self.lead_run_at(a.callee_start(state, r)) else { return Ok(None) };
        let vocab_size = self.index.vocab.vocab_size();
        let nodes = self.index.lead_nodes(None, &class, bound);
        let follow = self.follow()[a.state(state).rule.index()];
        // A `t` that is a tree of small choices over literal leads (`oneOf` objects) reads the
        // run's tokens as its literal leads do, composed ([`Self::lead_tree_kernel`]).
        if let Some(lt) = self.lead_tree_kernel(t, &nodes, &mut Vec::new())? {
            stack.push(state);
            let after = self.kernel_in(t, stack);
            stack.pop();
            let after = after?;
            if after.beyond.is_none() {
                self.count(9);
                let run = kernel_mask(TokenSet::from_ids(nodes.run_tokens.clone(), vocab_size), Vec::new(), Vec::new());
                return compose_kernel(a, vocab_size, &follow, Some(run), &[lt, after], Vec::new()).map(Some);
            }
        }
        let walk = |sc: Shortcuts<'_>| classify_after_lead(a, &self.index.trie, vocab_size, t, sc, &nodes);
        let Some((own, rows, _)) = self.with_walk_shortcuts(t, walk)? else { return Ok(None) };
        // Where `t`'s own kernel is walked, it goes on from the rows the run's subtrees interned.
        // PERF: the two walks from `t` stepped the same rows apart (the second ~55% of a new
        // "whitespace then t" kernel, ~1,300 of them over 50 us in the 300-schema MaskBench
        // sample, each after `,`, `:` or a value of an object).
        stack.push(state);
        let after = offering_rows(a, t, rows, || self.kernel_in(t, stack));
        stack.pop();
        let after = after?;
        // Composition reads the per-token uncertain lists only.
        if own.beyond.is_some() || after.beyond.is_some() {
            return Ok(None);
        }
        compose_kernel(a, vocab_size, &follow, Some(own), &[after], Vec::new()).map(Some)
    }

    /// The classification, for a lead before `s` ([`Self::lead_kernel`] over `nodes`), of the
    /// tokens `w σ` whose rest `σ` is read from `s` (not the run's own tokens), where `s` is a
    /// literal lead ([`lead_into_literal_lead`]) or a small choice (at most
    /// [`LITERAL_LEAD_CHOICE_MAX`] non-nullable callees, no byte edges) of such trees, composed
    /// from its callees' ([`compose_kernel`]: `w` is read before them, `σ` from them as a token
    /// is); `None` for any other `s`, or a tree that reaches itself (`path`). Cached per state
    /// and run.
    ///
    /// PERF: see [`lead_into_literal_lead`] (MaskBench o3626's `ws not`).
    fn lead_tree_kernel(
        &self,
        s: StateId,
        nodes: &LeadNodes,
        path: &mut Vec<StateId>,
    ) -> Result<Option<Arc<KernelMask>>> {
        let key = (s, nodes.class.hash128(), nodes.bound);
        if let Some(k) = read(&self.lead_trees).get(&key) {
            return Ok(Some(k.clone()));
        }
        let a = &self.automata;
        if a.has_lookahead() || path.len() >= MAX_COMPOSE_DEPTH || path.contains(&s) {
            return Ok(None);
        }
        let vocab_size = self.index.vocab.vocab_size();
        let follow = self.follow()[a.state(s).rule.index()];
        let km = if let Some(lead) = self.literal_lead(s) {
            let ks0 = self.kernel(s)?;
            // Literal leads alike (the same kernel, byte, runs and first bytes after the inner run)
            // share their part where it read nothing from `v`.
            // PERF: o3626's ~290 literal leads are all alike, each ~22 K instructions on Llama 3.
            let (p, _, class2, bound2) = lead;
            let outer = (nodes.class.hash128(), nodes.bound);
            let key = |r: &ByteSet| (Arc::as_ptr(&ks0) as usize, p, class2.hash128(), bound2, r.hash128(), outer);
            let known = |r: &ByteSet| read(&self.lead_leaves).get(&key(r)).map(|(_, k)| k.clone());
            // The bytes `v` reads, as `ks0`'s classification found them with this run.
            let v_reads = read(&self.literal_lead_reads).get(&lead.1).filter(|(c, _)| *c == class2).map(|&(_, r)| r);
            if v_reads.is_some() {
                self.count(10);
            }
            match lead_into_literal_lead(a, &self.index.trie, vocab_size, lead, &ks0, &follow, nodes, v_reads, known)? {
                None => return Ok(None),
                Some(LeadLeaf::Known(km)) => km,
                Some(LeadLeaf::New { km, readable, read_v }) => {
                    if !read_v {
                        // `ks0` is kept with it: its address stays its own.
                        write(&self.lead_leaves).insert(key(&readable), (ks0.clone(), km.clone()));
                    }
                    km
                }
            }
        } else {
            let edges = a.rule_edges(s);
            if !a.byte_edges(s).is_empty() || edges.is_empty() || edges.len() > LITERAL_LEAD_CHOICE_MAX {
                return Ok(None);
            }
            path.push(s);
            let mut parts = Vec::with_capacity(edges.len());
            for &(r, _) in edges {
                let s0 = a.callee_start(s, r);
                let callee =
                    if self.nullable()[s0.0 as usize] { Ok(None) } else { self.lead_tree_kernel(s0, nodes, path) };
                match callee {
                    Ok(Some(k)) if k.beyond.is_none() => parts.push(k),
                    other => {
                        path.pop();
                        return other.map(|_| None);
                    }
                }
            }
            path.pop();
            // Parts without uncertain tokens leave nothing to read after their callee: the choice's
            // part is their union, the one part itself where all are the same.
            // PERF: o3626's ~260 choices over alike literal leads composed ~3.6 K instructions each.
            if parts.iter().all(|k| Arc::ptr_eq(k, &parts[0]) && k.uncertain.is_empty()) {
                parts[0].clone()
            } else {
                let chart =
                    |k: &KernelMask, t| (!k.suffixes.is_empty()).then(|| crate::earley::Chart::with_kernel(a, t));
                let callees = parts.into_iter().zip(edges).map(|(k, &(_, t))| {
                    let c = chart(&k, t);
                    (k, c)
                });
                Arc::new(compose_kernel(a, vocab_size, &follow, None, &[], callees.collect())?)
            }
        };
        write(&self.lead_trees).insert(key, km.clone());
        Ok(Some(km))
    }

    /// The classification of a kernel state that predicts, composed from its callees' rule-start
    /// kernels ([`compose_kernel`]), themselves composed where they can be, with the state after a
    /// nullable callee classified too; `None` where that does not apply: no rule edges, a callee
    /// whose start (or the state after a nullable one) is being composed already (left recursion),
    /// a callee that predicts nothing itself unless it is free text, callee kernels with many
    /// uncertain tokens, lookaheads, or compositions nested [`MAX_COMPOSE_DEPTH`] deep.
    ///
    /// PERF: free text before a triggered tag (`text (tag text)*`) made the first mask at the
    /// start and after each tag walk the whole vocabulary (~10 ms on Llama 3: rows of several
    /// items take no class slice); it now takes the text rule's sliced classification.
    #[doc(hidden)]
    pub fn composed_kernel(&self, state: StateId) -> Result<Option<KernelMask>> {
        self.composed_kernel_in(state, &mut Vec::new())
    }

    fn composed_kernel_in(&self, state: StateId, stack: &mut Vec<StateId>) -> Result<Option<KernelMask>> {
        let a = &self.automata;
        let edges = a.rule_edges(state);
        if edges.is_empty() || a.has_lookahead() || stack.len() >= MAX_COMPOSE_DEPTH {
            return Ok(None);
        }
        // A counted class body calls its class per character: its slice beats composing the
        // callee's kernel (every class-text token uncertain after one character).
        // PERF: a 200-character Unicode class's first position took ~60 ms, most of it there.
        if self.class_body_capacity(state).is_some() {
            return Ok(None);
        }
        let nullable = self.nullable();
        let start = |r: RuleId| a.callee_start(state, r);
        // A callee whose start only reads bytes (a character, a token-like rule) gains nothing
        // from sharing and leaves most tokens uncertain (ended after a few bytes); free text (a
        // start looping on a class with a slice) and a counted class body whose slice is built (a
        // key pattern `[a-zA-Z0-9_]{1,500}`) are the exceptions: their own classification takes
        // the class (body) slice, the caller's walk (several items per row) could not.
        // PERF: the key positions of MaskBench o79409's `subsegments` (`{"` before such a key)
        // walked every class-text node of the trie, ~25 M instructions on Llama 3. A slice not
        // built yet is not built here: that walk of the class text costs about what the caller's
        // walk does where the caller reads few of its tokens (o81601 `totalPrice`: 0.3 -> 1.8 ms).
        let free_text =
            |s0: StateId| ClassSlice::loop_class(a, s0).is_some_and(|c| self.index.cached_class_slice(c).is_some());
        // (A counted string body takes the body slice instead, see `with_shortcuts`: its class
        // slice would be a walk of most of the trie.)
        let class_body = |s0: StateId| self.counted_body(s0).is_none() && self.class_body_built(s0);
        // An excluded-words rule (an open object's other keys) is free text too: its kernel is
        // the string body's less a few words ([`Self::excluded_kernel_in`]), not a walk.
        // Only for many known keys: beside a few, the caller's walk is cheaper than composing.
        let excluded = |s0: StateId| self.residual_words().get(&s0).is_some_and(|w| w.len() >= COMPOSE_EXCLUDED_WORDS);
        // A run callee (`ws`, [`lead_run`]) beside other callees is read as a lead: the tokens
        // that begin with its class are walked from the state after it ([`classify_after_lead`]).
        // PERF: after each value of an object with many optional properties (MaskBench
        // `Github_hard---o30633`, ~90), the start of the rest of the chain (`ws "," ... | rest`)
        // was walked with every later property predicted in each row, 0.3-0.9 ms on Llama 3.
        let lead = |r: RuleId| if edges.len() > 1 { self.lead_run_at(start(r)) } else { None };
        // So is a callee that only reads bytes (a number) before a state `t` whose kernel row is
        // wide (it predicts the rest of such a chain): the walk closes that row again after each
        // token prefix the callee may end on, the composition once per distinct suffix.
        // PERF: the value after `"key":` in o30633 (a number, then the chain) walked ~7 M
        // instructions on Llama 3.
        // The kernel chart of each edge's `t`, built once: counted here, read by the composition.
        let mut charts: Vec<std::cell::OnceCell<crate::earley::Chart>> =
            edges.iter().map(|_| std::cell::OnceCell::new()).collect();
        let chart = |i: usize| charts[i].get_or_init(|| crate::earley::Chart::with_kernel(a, edges[i].1));
        let wide = |i: usize| chart(i).num_items() >= COMPOSE_WIDE_ROW;
        // So is every entry of an any-order object's key-set state that reads no byte itself (its
        // `e0 n0 | e1 n1 | ...` after the separator): each entry's kernel (its key's quote, the key,
        // `:` and the value) is shared by every key-set state that offers it, and leaves uncertain
        // only the tokens that read past a whole entry.
        // PERF: each such state walked the trie below `"` with one item per entry in each row.
        let key_set =
            a.byte_edges(state).is_empty() && self.grammar.own_class().binary_search(&a.state(state).rule).is_ok();
        // So is every callee of a choice of literal leads (`"{" ws obj_N ws "}" | ...`, or one such
        // callee): each literal lead's kernel is a walk of the few nodes below its byte
        // ([`Self::literal_lead_kernel`]), where the choice's walk steps every object's rows.
        // PERF: MaskBench o3626's `not` value (~270 objects under a tree of choices and aliases,
        // one kernel) walked ~180 such choices, ~10 us each on Llama 3.
        // A wide choice stays one walk: its rows step all its objects at once, where each literal
        // lead's own walk costs several times that per object (o3626's `condition`, 268 objects:
        // 0.33 ms walked, 5.5 ms composed).
        let literal_leads =
            edges.len() <= LITERAL_LEAD_CHOICE_MAX && edges.iter().all(|&(r, _)| self.literal_lead(start(r)).is_some());
        // The first bytes of `state`'s own part: a dropped edge ([`SiblingEdges`]) starts only
        // tokens that a callee reads alive too (accepted in its kernel), so it needs no walk.
        // PERF: MaskBench o30633's first key start (`{"`) walked the trie below `a`, through the
        // literal keys and the extra-key call, ~3.7 M instructions on Llama 3.
        let first_cell = std::cell::OnceCell::new();
        let first = || {
            *first_cell.get_or_init(|| {
                self.with_sibling_edges(|edges, with| edges.kept_bytes(a, state, with))
                    .unwrap_or_else(|| state_bytes(a, state))
            })
        };
        // So is a callee that only reads bytes beside own byte edges into literal states (a key
        // `"key_N"` beside the call of pattern keys, [`literal_own_kernel`]): the own part is a
        // few trie nodes, the callee's kernel is shared.
        let literal_own_cell = std::cell::OnceCell::new();
        let literal_own = || {
            literal_own_cell
                .get_or_init(|| literal_own_kernel(a, &self.index.trie, self.index.vocab.vocab_size(), state, &first()))
                .as_ref()
        };
        // Only a callee that begins with a few bytes (a key's `"`): one that reads any text (a
        // string body) is left to the walk, whose slices cover the body through the call
        // ([`crate::slice::branches_beside_calls`], MaskBench o65323's key starts).
        let few_bytes = |s0: StateId| {
            let words = state_bytes(a, s0).words();
            words.iter().map(|w| w.count_ones()).sum::<u32>() <= LITERAL_OWN_CALLEE_BYTES
        };
        let skip = |i: usize, r: RuleId| {
            let s0 = start(r);
            let sliced = |s0| free_text(s0) || class_body(s0) || excluded(s0);
            // The flags first: the slice tests read the callee's body levels and chains.
            // PERF: o3626's ~260 choices of literal leads tested each callee's slices (~1 M
            // instructions of its slowest fill) before finding it a literal lead.
            let bytes_only = a.rule_edges(s0).is_empty()
                && !key_set
                && !literal_leads
                && lead(r).is_none()
                && !sliced(s0)
                && !wide(i)
                && !(few_bytes(s0) && literal_own().is_some());
            s0 == state || stack.contains(&s0) || bytes_only
        };
        // After a nullable callee `(X, t)` the token may also be read from `t` itself (X empty):
        // `t`'s own classification joins, so `t` must not be on the composition stack.
        let empty_after = |r: RuleId, t: StateId| nullable[start(r).0 as usize].then_some(t);
        if edges
            .iter()
            .enumerate()
            .any(|(i, &(r, t))| skip(i, r) || empty_after(r, t).is_some_and(|t| t == state || stack.contains(&t)))
        {
            return Ok(None);
        }
        stack.push(state);
        let mut callees = Vec::with_capacity(edges.len());
        let mut continuations = Vec::new();
        let vocab_size = self.index.vocab.vocab_size();
        for (i, &(r, t)) in edges.iter().enumerate() {
            // A run callee is nullable: `t`'s own kernel joins below, as after any empty callee.
            let read = match lead(r) {
                Some((class, bound)) => {
                    let nodes = self.index.lead_nodes(None, &class, bound);
                    let walk = |sc: Shortcuts<'_>| classify_after_lead(a, &self.index.trie, vocab_size, t, sc, &nodes);
                    match self.with_walk_shortcuts(t, walk) {
                        Ok(Some((own, _, _))) => {
                            continuations.push(Arc::new(own));
                            Ok(())
                        }
                        Ok(None) => {
                            stack.pop();
                            return Ok(None);
                        }
                        Err(e) => Err(e),
                    }
                }
                // `t`'s chart only where something is read after the callee.
                // PERF: o3626's ~260 choices of literal leads built ~520 charts of their ends
                // (~2.5 K instructions each on Llama 3) that no suffix was read from.
                None => self.kernel_in(start(r), stack).map(|km| {
                    let chart = charts[i]
                        .take()
                        .or_else(|| (!km.suffixes.is_empty()).then(|| crate::earley::Chart::with_kernel(a, t)));
                    callees.push((km, chart));
                }),
            };
            let km = read.and_then(|()| empty_after(r, t).map(|t| self.kernel_in(t, stack)).transpose());
            match km {
                Ok(Some(kt)) => continuations.push(kt),
                Ok(None) => {}
                Err(e) => {
                    stack.pop();
                    return Err(e);
                }
            }
        }
        stack.pop();
        // Composition reads the per-token uncertain lists only.
        if callees.iter().map(|(k, _)| k).chain(&continuations).any(|k| k.beyond.is_some()) {
            return Ok(None);
        }
        // Each uncertain suffix is read apart: past these, the walk is cheaper.
        let uncertain: usize = callees.iter().map(|(k, _)| k.uncertain.len()).sum();
        let suffixes: usize = callees.iter().map(|(k, _)| k.suffixes.len()).sum();
        if uncertain > COMPOSE_MAX_UNCERTAIN || suffixes > COMPOSE_MAX_SUFFIXES {
            return Ok(None);
        }
        let first = first();
        let own = if first == ByteSet::default() {
            None
        } else if let Some(own) = literal_own_cell.get().and_then(Option::as_ref) {
            Some(own.clone())
        } else {
            Some(self.with_shortcuts(state, |sc| {
                classify_kernel_from_bytes(a, &self.index.trie, vocab_size, state, sc, &first)
            })?)
        };
        let follow = self.follow()[a.state(state).rule.index()];
        compose_kernel(a, vocab_size, &follow, own, &continuations, callees).map(Some)
    }

    /// The classification of a kernel state without rule edges, shifted from the kernel of the
    /// state most of its bytes step to ([`shift_kernel`]); `None` where that does not apply: rule
    /// edges or lookaheads, a state that a string-body or class slice covers, a reference state
    /// with rule edges, without a loop class of its own
    /// (its kernel would cost a walk as long: a literal's next state), or on the composition
    /// stack, or first bytes that differ over more than 1/[`SHIFT_MAX_SHARE`] of the trie.
    #[doc(hidden)]
    pub fn shifted_kernel(&self, state: StateId) -> Result<Option<KernelMask>> {
        self.shifted_kernel_in(state, &mut Vec::new())
    }

    fn shifted_kernel_in(&self, state: StateId, stack: &mut Vec<StateId>) -> Result<Option<KernelMask>> {
        let a = &self.automata;
        if !a.rule_edges(state).is_empty() || a.has_lookahead() || stack.len() >= MAX_COMPOSE_DEPTH {
            return Ok(None);
        }
        let Some(r) = majority_target(a, state) else { return Ok(None) };
        // The reference reads free text by byte edges, or a character per call of a rule.
        let call_loop = call_loop_start(a, r);
        let plain = a.rule_edges(r).is_empty() && ClassSlice::loop_class(a, r).is_some();
        if !(plain || call_loop.is_some()) || stack.contains(&r) {
            return Ok(None);
        }
        let (mut differ, mut alike) = (ByteSet::default(), 0);
        for b in 0..=255u8 {
            let t = a.step(state, b);
            let same = match call_loop {
                Some(c0) => reads_as_call_loop(a, r, c0, b, t),
                None => t == a.step(r, b),
            };
            match t {
                _ if !same => differ.insert_range(b, b),
                Some(_) => alike += 1,
                None => {}
            }
        }
        // The shift pays when most of what `state` reads is read alike (free text after a partial
        // trigger); a value's first byte (`"`, a digit, `[`) shares little with any one target.
        if alike < SHIFT_MIN_ALIKE {
            return Ok(None);
        }
        // Only the differing bytes `state` reads are walked; the others' tokens are dropped.
        let mut first = state_bytes(a, state);
        first.intersect(&differ);
        let trie = &self.index.trie;
        let walked_nodes: usize = trie
            .root_children
            .iter()
            .filter(|&&c| first.contains(trie.nodes[c as usize].byte))
            .map(|&c| (trie.nodes[c as usize].subtree_end - c) as usize)
            .sum();
        if walked_nodes * SHIFT_MAX_SHARE > trie.nodes.len() {
            return Ok(None);
        }
        // Last, as cover searches cost most: a state that reads a slice itself takes it (the slice
        // accepts its tokens wholesale; the shifted part walks the differing subtrees node by
        // node), e.g. an object key's prefix among known keys.
        let covered = |c: u128| class_covers(a, state, c, &self.cover);
        if BodySlice::covers(a, state, &self.cover).is_some() || ClassSlice::loop_class(a, state).is_some_and(covered) {
            return Ok(None);
        }
        stack.push(state);
        let reference = self.kernel_in(r, stack);
        stack.pop();
        let reference = reference?;
        let vocab_size = self.index.vocab.vocab_size();
        // The differing bytes' subtrees are walked, or only a walked body's frontier in them
        // when `state` covers one from the token start ([`crate::slice::start_run_cover`]).
        let run = (0..0x80u8).filter(|&x| first.contains(x)).fold(0u128, |m, x| m | 1 << x);
        let start_run = crate::slice::start_run_cover(a, state, run, &self.cover)
            .and_then(|(walked, cover)| Some((self.index.walked_body(walked)?, cover)));
        // A class-body slice the compile's thread has not set yet is not built (nor waited for)
        // for the few differing subtrees walked here: they are walked without it (exact either way).
        // PERF: o82696 / o82667 `css_class` (`^[\w\s-]+$`) string start, the differing bytes `\`
        // and five UTF-8 leads: the fill built the 1.5 ms slice when it came before the thread.
        let pending = self.class_body_pending(state);
        if pending {
            self.pending_class_bodies_shifted.fetch_add(1, Ordering::Relaxed);
        }
        let own = match start_run {
            Some((ws, cover)) => self.with_shortcuts_as(state, !pending, |sc| {
                self.count(7);
                classify_kernel_from_bytes_walked(a, trie, vocab_size, state, sc, &first, &ws, cover)
            })?,
            None => self.with_shortcuts_as(state, !pending, |sc| {
                classify_kernel_from_bytes(a, trie, vocab_size, state, sc, &first)
            })?,
        };
        // Shifting reads the per-token uncertain lists only.
        if reference.beyond.is_some() || own.beyond.is_some() {
            return Ok(None);
        }
        if call_loop.is_some() {
            self.count(11);
        }
        Ok(Some(shift_kernel(trie, &reference, &differ, &own)))
    }

    /// The capacity of the counted class body at `state` if it takes that shortcut
    /// ([`Self::class_body`]), for tests.
    #[doc(hidden)]
    pub fn class_body_capacity(&self, state: StateId) -> Option<u32> {
        self.class_body(state).map(|(_, chain)| chain.chars)
    }

    /// The class-text tokens the counted class body at `state` reads inside its rule (its class
    /// slice's tokens that begin at most its capacity's characters), for tests.
    #[doc(hidden)]
    pub fn class_body_tokens(&self, state: StateId) -> Option<Bitset> {
        let (slice, chain) = self.class_body(state)?;
        let mut tokens = Bitset::new(self.index.vocab.vocab_size());
        slice.add_within(chain.chars, &mut tokens);
        Some(tokens)
    }

    /// The exit state of the counted class body at `state` if it takes that shortcut with a chain
    /// that ends in one ([`ClassBodies::chain`]), for tests.
    #[doc(hidden)]
    pub fn class_body_exit(&self, state: StateId) -> Option<StateId> {
        self.class_body(state).and_then(|(_, chain)| chain.exit)
    }

    /// The class slice and capacity of the counted class body at `state` ([`Self::class_body_chain`],
    /// [`ClassBodies::slice`]).
    fn class_body(&self, state: StateId) -> Option<(Arc<ClassBodySlice>, ClassChain)> {
        let chain = self.class_body_chain(state)?;
        self.class_bodies.slice(chain.class, |form| self.index.class_body_slice(form)).map(|sl| (sl, chain))
    }

    /// The chain of the counted class body at `state` ([`ClassBodies::chain`]) if it takes a class
    /// slice: unless the body slice serves it (a string of any character, `json_char*` through
    /// calls: the per-vocabulary body slice is built already, a class slice would cost a trie
    /// walk), or the slice does not pay ([`Self::slice_pays`]).
    /// PERF: the chain first (memoized levels): a cover search on every state that calls rules
    /// (a long `maxLength`'s blocks) cost up to ~20 ms.
    fn class_body_chain(&self, state: StateId) -> Option<ClassChain> {
        let follow = &self.follow()[self.automata.state(state).rule.index()];
        let chain = self.class_bodies.chain(&self.automata, self.index.trie.max_depth, state, follow)?;
        if BodySlice::covers(&self.automata, state, &self.cover).is_some() || !self.slice_pays(state, &chain) {
            return None;
        }
        Some(chain)
    }

    /// Reserves at compile the class-body slices ([`Self::class_body`]) of the grammar's counted
    /// class bodies of wide classes, and builds those the vocabulary has not cached on a thread
    /// of their own, so that neither the compile nor the first fill that reaches one of their
    /// states pays for them (0.7-2 ms each on Llama 3). A fill that finds its slice reserved and
    /// not begun by the thread builds it itself, one the thread is building waits for it at most
    /// 2 ms ([`ClassBodies::slice`]), and composition takes a slice only once it is built
    /// ([`Self::class_body_built`]). Where no thread can be spawned, they are built on first use.
    /// After them the thread builds the call-loop run indexes ([`CallLoopRuns`]) the vocabulary
    /// has not cached and the compile did not set; no fill builds or waits for those. Then it
    /// runs the cover searches of the callees of key starts and then of string value starts
    /// ([`BodySlice::quoted_callees`]) into the grammar's memo; a fill that needs one meanwhile
    /// waits for the search in progress or runs its own.
    /// A state is tried when it is a class level that reads, itself or through its one callee,
    /// at least [`MIN_WIDE_CLASS_BYTES`] distinct bytes, and the states that read the same bytes
    /// ([`class_signature`], the same way: inline or through a call) were tried fewer than [`CLASS_BODY_TRIES`] times
    /// without a slice (a state missed takes its slice in a fill, as before).
    /// PERF: on the 287-schema tail sample (`bench/tail_states.py --limit 300 --seed 1818`) 15
    /// fills built one (o65430 `identifier`, o79409 `name`, o82696 `css_class`), among the
    /// slowest fills of the sample. Tried at every wide state instead, the chain and cover
    /// searches of long `maxLength` string blocks (every state a level of one class that takes no
    /// slice) took up to seconds per compile; at one state per class, o65430's `^[^/]+/[^/]+$`
    /// missed its second loop (the first exits into `/`). Tries counted by class (session 36)
    /// rather than by bytes read, every wide state's class level was found: its character
    /// automaton, 575 M of the six tail schemas' 1,750 M instructions of `CompiledGrammar::new`.
    fn build_class_bodies(&self) {
        let a = &self.automata;
        // By the bytes a state reads ([`class_signature`]) and whether through a call: states
        // tried, or `usize::MAX` once one took its slice.
        let mut tried: FastMap<(ClassSignature, bool), usize> = FastMap::default();
        let mut todo: Vec<(u32, Vec<u32>)> = Vec::new();
        // The classes of chains whose exit reads class characters (`ClassChain::inner`).
        let mut inner_classes: Vec<u32> = Vec::new();
        for s in (0..a.states().len() as u32).map(StateId) {
            let (q, call) = match *a.rule_edges(s) {
                [] => (s, false),
                [(r, _)] => (a.callee_start(s, r), true),
                _ => continue,
            };
            let edges = a.byte_edges(q);
            if edges.iter().map(|e| u32::from(e.hi - e.lo) + 1).sum::<u32>() < MIN_WIDE_CLASS_BYTES {
                continue;
            }
            let n = tried.entry((class_signature(a, q), call)).or_insert(0);
            if *n >= CLASS_BODY_TRIES {
                continue;
            }
            let Some(chain) = self.class_body_chain(s) else {
                *n += 1;
                continue;
            };
            // A string body's state takes the body shortcuts in a fill, never its class body
            // (`with_shortcuts`): its slice (most of the trie) would be built for nothing.
            if self.counted_body(s).is_some() || self.closing_body(s).is_some() {
                *n += 1;
                continue;
            }
            if chain.inner != 0 && !inner_classes.contains(&chain.class) {
                inner_classes.push(chain.class);
            }
            if let Some(form) = self.class_bodies.reserve(chain.class) {
                todo.push((chain.class, form));
                *n = usize::MAX;
            } else if self.class_bodies.taken_or_reserved(chain.class) {
                *n = usize::MAX;
            } else {
                *n += 1;
            }
        }
        // The vocabulary's cached slices are taken now; the others are built on the thread.
        todo.retain(|(class, form)| match self.index.cached_class_body_slice(form) {
            Some(slice) => {
                self.class_bodies.set_built(*class, slice);
                false
            }
            None => true,
        });
        let call_runs_left = self.call_runs.take_cached(&self.index);
        if HOLD_CLASS_BODIES.get() {
            return;
        }
        let QuotedCallees { keys, values, key_states } = BodySlice::quoted_callees(a);
        let excluded = self.grammar.excluded_words_shared();
        // Found on the thread, unless the thread has nothing else to do.
        let mut string_starts = None;
        if todo.is_empty()
            && !call_runs_left
            && keys.is_empty()
            && values.is_empty()
            && inner_classes.is_empty()
            && excluded.is_none()
        {
            let starts = crate::slice::inline_string_starts(a);
            if starts.is_empty() {
                return;
            }
            string_starts = Some(starts);
        }
        // The smaller classes first: their slices are built sooner, so fewer first fills find
        // theirs unbuilt (o79409's key pattern `[a-zA-Z0-9_]`, 0.5 ms, waited behind `name`'s
        // 2 ms class).
        todo.sort_by_key(|(class, _)| self.class_bodies.class_chars(*class));
        let (bodies, index) = (Arc::clone(&self.class_bodies), Arc::clone(&self.index));
        let call_runs = Arc::clone(&self.call_runs);
        let (automata, cover) = (Arc::clone(&self.automata), Arc::clone(&self.cover));
        let sibling_edges = Arc::clone(&self.sibling_edges);
        let spawned = std::thread::Builder::new().name("grammask-class-bodies".into()).spawn(move || {
            for (class, form) in todo {
                if bodies.begin_build(class) {
                    bodies.set_built(class, index.class_body_slice(&form));
                }
            }
            // After the slices (a fill may wait for those, never for these).
            call_runs.build(&index);
            // The rules' dropped sibling edges, nearest the root first (a fill that asks for a
            // rule's first waits for the one in progress or finds its own).
            // PERF: MaskBench clang-format's first fills found those of the object's rules, 4.6 M
            // of t1's 8 M instructions and 3.3 M of t8's 26.5 M.
            let edges =
                excluded.as_deref().and_then(|x| Some((x, sibling_edges_in(&sibling_edges, &automata, Some(x))?)));
            let contains = |l: &[u8]| index.quote_ends().some_token_contains(l);
            let edges = edges.map(|(excluded, edges)| {
                (edges, DropRules { excluded, max_depth: index.trie.max_depth, contains: &contains })
            });
            let order = edges.as_ref().map_or_else(Vec::new, |(edges, _)| edges.rules_from_root(&automata));
            let (near, far) = order.split_at(order.len().min(crate::mask::NEAR_RULES));
            // PERF: in the compile, o65323's took 7% of its instructions.
            // Key starts first, each group on its own budget: their callees, then the rules near
            // the root, then the key starts their callees leave undecided, then the string value
            // starts' callees.
            with_cover_budget(limits::MAX_COMPILE_RUN_CLASS_PAIRS, || {
                BodySlice::search_callees(&automata, &keys, &cover);
            });
            if let Some((edges, with)) = &edges {
                edges.find_rules(&automata, near, with);
            }
            with_cover_budget(limits::MAX_COMPILE_RUN_CLASS_PAIRS, || {
                BodySlice::search_key_starts(&automata, &key_states, &cover);
            });
            with_cover_budget(limits::MAX_COMPILE_RUN_CLASS_PAIRS, || {
                BodySlice::search_callees(&automata, &values, &cover);
            });
            // Then the by-byte lists of the nodes past the chains with inner exits (a fill that
            // comes first walks such a chain's kernel, as without inner exits).
            for class in inner_classes {
                if let Some(slice) = bodies.slice(class, |form| index.class_body_slice(form)) {
                    slice.prepare_past(&index.trie);
                }
            }
            // Last, the other rules' sibling edges (their listings and chain ends, ~60 M
            // instructions more for MaskBench testenvironments' 10.5 k far rules, are left to
            // the fills that ask).
            if let Some((edges, with)) = &edges {
                for &r in far {
                    edges.of_rule(&automata, r, with);
                }
            }
            // Last, the string starts that read their text inline: a fill that comes first
            // searches them itself, as before.
            let starts = string_starts.unwrap_or_else(|| crate::slice::inline_string_starts(&automata));
            let firsts = || index.first_chars();
            crate::slice::search_string_starts(
                &automata,
                &starts,
                &cover,
                limits::MAX_COMPILE_STRING_START_PAIRS,
                |x| firsts().walkable(x),
                |x| !firsts().walkable(x),
            );
        });
        if let Ok(thread) = spawned {
            *self.class_body_thread.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(thread);
        }
    }

    /// Waits for the thread that builds the slices reserved at compile ([`Self::build_class_bodies`])
    /// and the call-loop run indexes to end (tests: then no fill builds a slice, and every
    /// call-loop index the thread could build is set).
    #[doc(hidden)]
    pub fn wait_class_bodies(&self) {
        let thread = self.class_body_thread.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Wide call-loop run indexes ([`CallLoopRuns`]) set with the compile, before any fill: the
    /// vocabulary's, or built on the compiling thread (for tests).
    #[doc(hidden)]
    pub fn call_loop_wide_with_compile(&self) -> usize {
        self.call_runs.wide_with_compile.load(Ordering::Relaxed)
    }

    /// Class-body slices a fill built: not reserved at compile, or not set by the compile's
    /// thread yet ([`ClassBodies::slice`]).
    pub fn class_bodies_built_in_fills(&self) -> usize {
        self.class_bodies.built_in_fills()
    }

    /// Whether `state` is a counted class body ([`Self::class_body`]) whose slice is built, or
    /// pending and cheap to build ([`ClassBodies::pending_cheap`]: a class of body text).
    /// PERF: MaskBench o37613's `familyname` start (a call of `[^,"]{1,255}`, then `"`), composed
    /// with its slice built, was walked while it was pending: ~14 M instructions (2-2.3 ms on
    /// Llama 3) in the fill that came before the compile's thread.
    fn class_body_built(&self, state: StateId) -> bool {
        let Some(chain) = self.class_body_chain(state) else { return false };
        self.class_bodies.has_slice(chain.class, |form| self.index.cached_class_body_slice(form))
            || self.class_bodies.pending_cheap(chain.class)
    }

    /// Whether a class-body slice beats the walk at `state`: a chain that may end inside (a final
    /// loop, `[a-z]*` at a pattern's end) is walked where a run index applies, which reads its
    /// class text wholesale.
    /// PERF: o82667's `url` tail took ~14 M instructions building the slice against 0.8 M walked.
    fn slice_pays(&self, state: StateId, chain: &ClassChain) -> bool {
        chain.ends.is_empty() || self.state_run(state).is_none()
    }

    /// The run index that applies at plain state `s` ([`state_run_index`]), memoized: deciding it
    /// takes a cover search.
    fn state_run(&self, s: StateId) -> Option<Arc<RunIndex>> {
        if let Some(r) = read(&self.state_runs).get(&s) {
            return r.clone();
        }
        let runs = |ascii: u128, utf8: bool| self.index.run_index(ascii, utf8);
        let r = state_run_index(&self.automata, s, &runs, &self.cover);
        write(&self.state_runs).insert(s, r.clone());
        r
    }

    /// How many rules have their dropped sibling edges, callee listing and chain end found
    /// ([`SiblingEdges::found`]); `None` where the grammar has no sibling edges (tests).
    #[doc(hidden)]
    pub fn sibling_edges_found(&self) -> Option<[usize; 3]> {
        self.sibling_edges.get()?.as_ref().map(SiblingEdges::found)
    }

    /// How the kernels were classified so far.
    pub fn kernel_stats(&self) -> KernelStats {
        let n = |i: usize| self.stats[i].load(Ordering::Relaxed);
        KernelStats {
            walked: n(0),
            composed: n(1),
            shifted: n(2),
            shared: n(3),
            excluded: n(4),
            siblings: n(5),
            shared_early: n(6),
            shifted_walked: n(7),
            shared_by_prefix: n(8),
            lead_trees: n(9),
            lead_leaves_read_known: n(10),
            shifted_call_loop: n(11),
            quote_cuts: n(12),
            literal_leads_alike: n(13),
        }
    }

    fn count(&self, i: usize) {
        self.stats[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Classifies kernel `state` with every shortcut, without any cache; `on_budget` as in
    /// [`classify_kernel_budget`].
    pub fn classify(
        &self,
        state: StateId,
        budget: usize,
        on_budget: &mut dyn FnMut() -> bool,
    ) -> Result<Option<KernelMask>> {
        self.classify_asking(state, budget, &mut |_| on_budget())
    }

    /// [`Self::classify`], telling `on_budget` why it is asked ([`BudgetAsk`]).
    fn classify_asking(
        &self,
        state: StateId,
        budget: usize,
        on_budget: &mut dyn FnMut(BudgetAsk) -> bool,
    ) -> Result<Option<KernelMask>> {
        let vocab_size = self.index.vocab.vocab_size();
        let (a, trie) = (&self.automata, &self.index.trie);
        if self.class_body_pending(state) {
            // Its slice not set yet by the compile's thread: the other shortcuts first, within a
            // walk and cover-search budget (a string body that refuses a few ASCII characters
            // takes its walked cover); past it, the slice is built or waited for as before.
            let mut give_up = || true;
            let tried = with_cover_budget(PENDING_COVER_PAIRS, || {
                self.with_shortcuts_as(state, false, |sc| {
                    classify_kernel_budget(a, trie, vocab_size, state, sc, PENDING_VISITS, &mut give_up)
                })
            })?;
            if tried.is_some() {
                self.pending_class_bodies_passed.fetch_add(1, Ordering::Relaxed);
                return Ok(tried);
            }
        }
        self.with_shortcuts(state, |sc| classify_kernel_asking(a, trie, vocab_size, state, sc, budget, on_budget))
    }

    /// Whether `state` is a counted class body ([`Self::class_body_chain`]) whose slice is
    /// reserved for the compile's thread, not set yet, and not cheap to build
    /// ([`ClassBodies::pending_cheap`]: a fill builds such a slice rather than try without it).
    /// PERF: o37613's `familyname` start tried its callee without the slice first, ~3 M of the
    /// fill's ~4.9 M instructions, then built the slice (~1 M).
    fn class_body_pending(&self, state: StateId) -> bool {
        let plain = self.counted_body(state).is_none() && self.closing_body(state).is_none();
        plain
            && self.class_body_chain(state).is_some_and(|chain| {
                self.class_bodies.pending(chain.class) && !self.class_bodies.pending_cheap(chain.class)
            })
    }

    /// Kernels classified without their class-body slice while the compile's thread had not set
    /// it ([`Self::classify`]), for tests.
    #[doc(hidden)]
    pub fn pending_class_bodies_passed(&self) -> usize {
        self.pending_class_bodies_passed.load(Ordering::Relaxed)
    }

    /// Shifted kernels walked without a class-body slice the compile's thread had not set
    /// ([`Self::shifted_kernel_in`]), for tests.
    #[doc(hidden)]
    pub fn pending_class_bodies_shifted(&self) -> usize {
        self.pending_class_bodies_shifted.load(Ordering::Relaxed)
    }

    /// `km`, a classification of `state`, with its [`crate::mask::Beyond`] group listed token by
    /// token ([`KernelMask::with_beyond_listed`] with the rule's FOLLOW set), as a walk lists it.
    #[doc(hidden)]
    pub fn beyond_listed(&self, state: StateId, km: &KernelMask) -> KernelMask {
        let follow = self.follow()[self.automata.state(state).rule.index()];
        km.with_beyond_listed(&self.index.trie, Some(&follow))
    }

    /// [`Self::classify`] without the row memo and run indexes (the reference it is tested against).
    #[doc(hidden)]
    pub fn classify_uninterned(&self, state: StateId) -> Result<KernelMask> {
        let vocab_size = self.index.vocab.vocab_size();
        self.with_shortcuts(state, |sc| {
            classify_kernel_uninterned(&self.automata, &self.index.trie, vocab_size, state, sc)
        })
    }

    /// A walk of the whole trie from `state` with its rule's FOLLOW set and no other shortcut:
    /// the reference the sliced classifications are tested against.
    #[doc(hidden)]
    pub fn classify_plain(&self, state: StateId) -> Result<KernelMask> {
        let vocab_size = self.index.vocab.vocab_size();
        let follow = self.follow()[self.automata.state(state).rule.index()];
        let sc = Shortcuts { follow: Some(&follow), ..Default::default() };
        classify_kernel_uninterned(&self.automata, &self.index.trie, vocab_size, state, sc)
    }

    /// The capacity of the counted string body a kernel walk from `state` takes: at `state`,
    /// through calls, or along a character chain into calls ([`Self::chain_to_calls`]).
    #[doc(hidden)]
    pub fn counted_body(&self, state: StateId) -> Option<Counted> {
        if let Some(&c) = read(&self.capacities).get(&state) {
            return c;
        }
        let max = self.index.trie.max_depth;
        let c = self
            .body_capacity(state)
            .or_else(|| counted_calls(&self.automata, state, max, |r| self.body_capacity(r)))
            .or_else(|| self.chain_to_calls(state));
        write(&self.capacities).insert(state, c);
        c
    }

    /// Whether `state` reads every body text of up to the longest token's length inside its
    /// rule or its callees ([`crate::mask::ReadsBody`]).
    #[doc(hidden)]
    pub fn reads_body(&self, state: StateId) -> bool {
        self.counted_body(state).is_some_and(|c| c.chars >= self.index.trie.max_depth)
    }

    /// A counted string body whose chain of character levels from `state` ends, after `c`
    /// characters (fewer than the longest token), in a final state that reads nothing and is
    /// the chain's only final boundary: a `json_char{1024}` block's last positions. Body text of
    /// at most `c` characters stays inside the rule; longer body text ends the rule after its
    /// `c`-th character and leaves the rest (see the kernel walk). `None` where
    /// [`Self::counted_body`] applies.
    #[doc(hidden)]
    pub fn closing_body(&self, state: StateId) -> Option<u32> {
        let (a, max) = (&self.automata, self.index.trie.max_depth);
        let level = |r: StateId| read(&self.levels).get(&r).copied().unwrap_or_else(|| body_level(a, r));
        let mut r = state;
        for c in 1..max {
            let Some(Level::Next(t)) = level(r) else { return None };
            if t == r {
                return None;
            }
            if a.state(t).is_final {
                let closed = a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty();
                return (closed && level(t) == Some(Level::Zero)).then_some(c);
            }
            r = t;
        }
        None
    }

    fn with_shortcuts<R>(&self, state: StateId, f: impl FnOnce(Shortcuts<'_>) -> R) -> R {
        self.with_shortcuts_as(state, true, f)
    }

    /// [`Self::with_shortcuts`], without the class-body slice unless `class_body`.
    fn with_shortcuts_as<R>(&self, state: StateId, class_body: bool, f: impl FnOnce(Shortcuts<'_>) -> R) -> R {
        let capacity = self.counted_body(state);
        let closing = capacity.is_none().then(|| self.closing_body(state)).flatten();
        // Class slices are built when a grammar needing one is compiled (not for string bodies,
        // which take the body shortcuts first); one missing here (past the per-vocabulary
        // budget) is not built in a mask.
        let plain = capacity.is_none() && closing.is_none();
        let class_body = (plain && class_body).then(|| self.class_body(state)).flatten();
        let class = ClassSlice::loop_class(&self.automata, state).filter(|_| plain);
        let class = class.and_then(|c| self.index.cached_class_slice(c));
        self.with_walk_shortcuts(state, |sc| {
            f(Shortcuts {
                capacity,
                closing,
                class_body: class_body.as_ref().map(|(sl, chain)| (&**sl, chain)),
                class: class.as_deref(),
                ..sc
            })
        })
    }

    /// The shortcuts a walk takes below the kernel state (FOLLOW, run indexes, cover verdicts),
    /// without those of the state itself (a counted or class body, free text from the root).
    fn with_walk_shortcuts<R>(&self, state: StateId, f: impl FnOnce(Shortcuts<'_>) -> R) -> R {
        let follow = self.follow()[self.automata.state(state).rule.index()];
        let runs = |ascii: u128, utf8: bool| self.index.run_index(ascii, utf8);
        let state_runs = |s: StateId| self.state_run(s);
        let built_runs = |class: u128| self.call_runs.get(class);
        let built_wide = |s: StateId| {
            self.call_runs.wide(s).or_else(|| self.index.cached_run_index(*self.utf8_states.get(&s)?, true))
        };
        f(Shortcuts {
            body: Some(self.index.body_slice()),
            follow: Some(&follow),
            class: None,
            capacity: None,
            closing: None,
            class_body: None,
            runs: Some(&runs),
            state_runs: Some(&state_runs),
            built_runs: (!self.call_runs.is_empty()).then_some(&built_runs),
            built_wide: (!self.call_runs.wide.is_empty() || !self.utf8_states.is_empty()).then_some(&built_wide),
            cover: Some(&self.cover),
            walked: Some((&|x: u8| self.index.first_chars().walkable(x), &|w: crate::slice::Walked| {
                self.index.walked_body(w)
            })),
            unwalkable: Some(&|x: u8| self.index.first_chars_built().is_some_and(|f| !f.walkable(x))),
            prepare_walked: Some(&|| self.index.prepare_walked()),
            region: Some(&self.region),
            text: self.index.text_slice(),
        })
    }

    /// The capacity of the counted string body at `state` ([`body_capacity`]), with each state's
    /// [`body_level`] memoized: the positions of `json_char{0,n}` share one chain.
    fn body_capacity(&self, state: StateId) -> Option<Counted> {
        let max = self.index.trie.max_depth;
        // Levels computed by this call are looked up too: a chain through a cycle meets them again.
        let mut fresh: HashMap<StateId, Option<Level>> = HashMap::new();
        let cap = {
            let memo = read(&self.levels);
            body_capacity(
                state,
                max,
                |r| match memo.get(&r).or_else(|| fresh.get(&r)) {
                    Some(&l) => l,
                    None => {
                        let l = body_level(&self.automata, r);
                        fresh.insert(r, l);
                        l
                    }
                },
                |r| self.automata.state(r).is_final,
            )
        };
        if !fresh.is_empty() {
            write(&self.levels).extend(fresh);
        }
        cap
    }

    /// A counted string body whose chain of character levels leads, before the longest token's
    /// length, into a state that only calls counted bodies no token outruns ([`counted_calls`]):
    /// `json_char{50}` then blocks of `json_char{1024}` (a string's `minLength` 50 with a long
    /// `maxLength`). Body text read from `state` stays alive along the chain (plain states,
    /// non-final inside a character) and then inside a callee, so the state covers the body slice
    /// as a calling state does (every frontier node walked, `ends`: the callees may end).
    ///
    /// PERF: each position of the chain was a walk of the whole vocabulary (~7.5 ms on Llama 3,
    /// one per token along the first 50 characters of a PEM key: MaskBench o9871, o9770, o9919).
    fn chain_to_calls(&self, state: StateId) -> Option<Counted> {
        let (a, max) = (&self.automata, self.index.trie.max_depth);
        let level = |r: StateId| read(&self.levels).get(&r).copied().unwrap_or_else(|| body_level(a, r));
        let mut r = state;
        for _ in 0..max {
            // Kept to chains the rule cannot end on (a `minLength`): the walk's slice then only
            // meets rule ends inside the callees, as for a calling state.
            if a.state(r).is_final {
                return None;
            }
            match level(r) {
                Some(Level::Next(t)) if t != r => r = t,
                Some(_) => return None,
                None => {
                    let Some(Level::Next(t)) = body_level_into_calls(a, r) else { return None };
                    let k = counted_calls(a, t, max, |x| self.body_capacity(x))?;
                    return Some(Counted { ends: true, ..k });
                }
            }
        }
        None
    }

    /// Shortest completion lengths of the automata under this vocabulary (token budgets).
    pub fn completion(&self) -> Arc<crate::budget::Completion> {
        self.completion.get_or_init(|| Arc::new(crate::budget::Completion::new(&self.automata, self.vocab()))).clone()
    }

    /// The suffix verdicts memoized for mask fills ([`crate::mask::fill_mask_memo`]).
    #[doc(hidden)]
    pub fn suffix_memo(&self) -> &SuffixMemo {
        &self.suffix_memo
    }

    pub(crate) fn memoized_mask(&self, sig: u128) -> Option<Arc<TokenSet>> {
        read(&self.masks).get(&sig).cloned()
    }

    pub(crate) fn memoize_mask(&self, sig: u128, m: TokenSet) {
        let size = m.memory_size() + 48;
        if self.mask_bytes.load(Ordering::Relaxed) + size > limits::MASK_MEMO_BYTES {
            return;
        }
        if write(&self.masks).insert(sig, Arc::new(m)).is_none() {
            self.mask_bytes.fetch_add(size, Ordering::Relaxed);
        }
    }

    /// Heap bytes of the grammar, automata and the kernel cache so far (the shared token index is
    /// not counted).
    pub fn memory_size(&self) -> usize {
        // Kernels sharing an `Arc` counted once.
        let mut seen = std::collections::HashSet::new();
        let kernels = read(&self.kernels);
        let k: usize = kernels.values().filter(|k| seen.insert(Arc::as_ptr(k))).map(|k| k.memory_size()).sum();
        self.automata.memory_size()
            + k
            + self.mask_bytes.load(Ordering::Relaxed)
            + self.suffix_memo.memory_size()
            + self.cover.memory_size()
            + self.class_bodies.memory_size()
            + self.call_runs.memory_size()
            + self.grammar.exprs().len() * 24
            + self.sibling_edges.get().and_then(Option::as_ref).map_or(0, SiblingEdges::memory_size)
            + read(&self.siblings).keys().map(|k| k.len() * 8 + 24).sum::<usize>()
            + read(&self.capacities).len() * 24
            + read(&self.lead_runs).len() * 48
    }
}

/// The state other than `s` that most of `s`'s bytes step to (ties: the lowest id).
/// The start of the one rule that `r` calls, returning to `r` itself, where `r` is a call loop
/// a shift may take as its reference ([`CompiledGrammar::shifted_kernel`]): the callee's start
/// is not final (a call reads a byte) and has no rule edges, and `r`'s own bytes are not the
/// callee's (each byte is read one way from `r`).
fn call_loop_start(a: &Automata, r: StateId) -> Option<StateId> {
    let &[(c, back)] = a.rule_edges(r) else { return None };
    let c0 = a.callee_start(r, c);
    let disjoint = a.byte_edges(r).iter().all(|e| (e.lo..=e.hi).all(|b| a.step(c0, b).is_none()));
    (back == r && !a.state(c0).is_final && a.rule_edges(c0).is_empty() && disjoint).then_some(c0)
}

/// Calls-and-returns pairs [`reads_as_call_loop`] compares at most for one byte.
const CALL_LOOP_PAIRS: usize = 64;

/// Whether every token whose first byte is `b` reads alike from a state stepping `b` to `t`
/// (without rule edges) and from the call loop `r` (its callee's start `c0`,
/// [`call_loop_start`]), so that a shift may take `r`'s classification of them: `r` reads `b`
/// by its own edge to `t`, or its callee reads `b` and every byte string after it
/// steps `t` and the callee alike ([`returns_alike`]).
fn reads_as_call_loop(a: &Automata, r: StateId, c0: StateId, b: u8, t: Option<StateId>) -> bool {
    match (a.step(r, b), a.step(c0, b), t) {
        (Some(own), None, t) => t == Some(own),
        (None, Some(q), Some(t)) => returns_alike(a, r, t, q),
        (None, None, t) => t.is_none(),
        _ => false,
    }
}

/// Whether `u` (in the kernel's rule, without rule edges) reads every byte string as the
/// callee's state `q` followed by the return to `r` does: a bisimulation where a final `q`
/// without edges (the call returns to `r`) pairs with `u == r` only, and otherwise both are
/// non-final byte-only states stepping the same bytes to alike pairs. Pairs met again are
/// taken as alike (a cycle of alike steps); past [`CALL_LOOP_PAIRS`] pairs, not alike.
/// Exact: along every byte string both charts hold the one item pair, so both refuse, and
/// neither ends the kernel's rule, at the same bytes until both stand at `r`.
fn returns_alike(a: &Automata, r: StateId, u: StateId, q: StateId) -> bool {
    let mut seen: Vec<(StateId, StateId)> = Vec::new();
    let mut todo = vec![(u, q)];
    while let Some((u, q)) = todo.pop() {
        if seen.contains(&(u, q)) {
            continue;
        }
        if seen.len() >= CALL_LOOP_PAIRS {
            return false;
        }
        seen.push((u, q));
        let returned = a.state(q).is_final;
        if returned {
            if u != r || !a.byte_edges(q).is_empty() || !a.rule_edges(q).is_empty() {
                return false;
            }
            continue;
        }
        if u == r || a.state(u).is_final || !a.rule_edges(u).is_empty() || !a.rule_edges(q).is_empty() {
            return false;
        }
        // Each range between two edge bounds of either state steps both alike throughout.
        let mut bounds: Vec<u8> = a.byte_edges(u).iter().chain(a.byte_edges(q)).flat_map(|e| [e.lo, e.hi]).collect();
        bounds.extend([0, 255]);
        bounds.sort_unstable();
        bounds.dedup();
        for x in bounds.windows(2).flat_map(|w| [w[0], w[0].saturating_add(1).min(w[1])]).chain([255]) {
            match (a.step(u, x), a.step(q, x)) {
                (None, None) => {}
                (Some(u2), Some(q2)) => todo.push((u2, q2)),
                _ => return false,
            }
        }
    }
    true
}

fn majority_target(a: &Automata, s: StateId) -> Option<StateId> {
    let mut counts: Vec<(StateId, u32)> = Vec::new();
    for e in a.byte_edges(s).iter().filter(|e| e.target != s) {
        let n = u32::from(e.hi - e.lo) + 1;
        match counts.iter_mut().find(|(t, _)| *t == e.target) {
            Some((_, c)) => *c += n,
            None => counts.push((e.target, n)),
        }
    }
    counts.into_iter().max_by_key(|&(t, c)| (c, std::cmp::Reverse(t.0))).map(|(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`class_signature`] byte by byte, as first written.
    fn class_signature_bytewise(a: &Automata, q: StateId) -> ClassSignature {
        let add = |bits: &mut [u64; 4], lo: u8, hi: u8| {
            for x in lo..=hi {
                bits[usize::from(x >> 6)] |= 1 << (x & 63);
            }
        };
        let (mut bytes, mut after_leads) = ([0u64; 4], [0u64; 4]);
        let mut ascii_by_target: Vec<(StateId, u128)> = Vec::new();
        for e in a.byte_edges(q) {
            add(&mut bytes, e.lo, e.hi);
            if e.lo < 0x80 {
                let m = (u32::from(e.lo)..=u32::from(e.hi.min(0x7F))).fold(0u128, |m, x| m | 1 << x);
                match ascii_by_target.iter_mut().find(|(t, _)| *t == e.target) {
                    Some((_, bits)) => *bits |= m,
                    None => ascii_by_target.push((e.target, m)),
                }
            }
            if e.hi >= 0xC0 {
                for f in a.byte_edges(e.target) {
                    add(&mut after_leads, f.lo, f.hi);
                }
            }
        }
        let widest = ascii_by_target.iter().max_by_key(|(_, m)| m.count_ones()).copied();
        let mut after_sides = [0u64; 4];
        for &(t, _) in ascii_by_target.iter().filter(|&&(t, _)| Some(t) != widest.map(|w| w.0)) {
            for f in a.byte_edges(t) {
                add(&mut after_sides, f.lo, f.hi);
            }
        }
        (bytes, widest.map_or(0, |w| w.1), after_leads, after_sides)
    }

    /// Class signatures of every state equal their byte-by-byte definition, on states whose
    /// ranges cross the words of a byte set (0x3F/0x40, 0x7F/0x80, 0xBF/0xC0), end at 0xFF, read
    /// UTF-8 lead bytes and ASCII ranges into several targets (the widest one picked).
    #[test]
    fn class_signatures_equal_bytewise_definition() {
        let g = crate::ebnf::parse_ebnf(
            r#"root ::= "{" (item ("," item)*)? "}"
item ::= [ -~]+ | [0-9A-Za-z] [\x30-\x50]* "." | [^"\\\x00-\x1f]* "\"" | [^\x00-\x7f]+ | "k" [a-z]{3} | [\x3a-\x45] [\x00-\x7f]"#,
            "root",
        )
        .unwrap();
        let a = Automata::build(&g).unwrap();
        let (mut wide, mut leads, mut split) = (0, 0, 0);
        for q in (0..a.states().len() as u32).map(StateId) {
            let want = class_signature_bytewise(&a, q);
            assert_eq!(class_signature(&a, q), want, "class signature of {q:?}");
            wide += usize::from(want.0.iter().filter(|&&w| w != 0).count() >= 3);
            leads += usize::from(want.2 != [0; 4]);
            let targets: std::collections::HashSet<StateId> =
                a.byte_edges(q).iter().filter(|e| e.lo < 0x80).map(|e| e.target).collect();
            split += usize::from(targets.len() >= 2 && want.1 != 0);
        }
        assert!(wide >= 2 && leads >= 2 && split >= 2, "{wide} wide, {leads} with lead bytes, {split} split");
    }

    /// Kernels whose class-body slice is reserved and not built yet are classified by the other
    /// shortcuts within a budget (`CompiledGrammar::classify`), building no slice: an exact count
    /// of a class of some multi-byte characters (`[a-zA-Z0-9_ \u00e0-\u00ff]{40}`, no class of body
    /// text: its slice is walked) along a document, and masks equal those of the same
    /// grammar with its slice built. Fails when the pending slices are built in `classify`, or
    /// never passed.
    #[test]
    fn pending_class_bodies_take_the_other_shortcuts() {
        use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
        let mut toks: Vec<Vec<u8>> = (b' '..=b'~').map(|b| vec![b]).collect();
        let text = ["Hello", " world", "_9", "abc", "Ab_9 ", "a b", "xyz>", "9>", ">", "<Hi", "b>"];
        toks.extend(text.iter().map(|t| t.as_bytes().to_vec()));
        toks.push(b"</s>".to_vec());
        // Two vocabularies of the same tokens: each its own index, slices and kernel cache.
        let vocab = || {
            let opts = VocabularyOptions { stop_token_ids: Some(vec![toks.len() as u32 - 1]), ..Default::default() };
            Arc::new(Vocabulary::new(toks.clone(), VocabType::Raw, opts).unwrap())
        };
        let g = crate::ebnf::parse_ebnf(r#"root ::= "<" [a-zA-Z0-9_ \u00e0-\u00ff]{40} ">""#, "root").unwrap();
        let built = Arc::new(CompiledGrammar::new(&g, &vocab()).unwrap());
        built.wait_class_bodies();
        hold_class_bodies(true);
        let held = Arc::new(CompiledGrammar::new(&g, &vocab()).unwrap());
        hold_class_bodies(false);
        let doc = format!("<{}>", "Hello world_9 ".repeat(3).get(..40).unwrap());
        let opts = crate::matcher::MatcherOptions::default();
        let mut a = crate::matcher::Matcher::new(built.clone(), opts.clone()).unwrap();
        let mut b = crate::matcher::Matcher::new(held.clone(), opts).unwrap();
        for (i, &x) in doc.as_bytes().iter().enumerate() {
            // Each pending kernel is classified without its slice, none built.
            for it in crate::mask::kernel_items(held.automata(), b.chart()) {
                if held.class_body_pending(it.state) {
                    assert!(held.classify(it.state, usize::MAX, &mut || false).unwrap().is_some());
                    assert_eq!(held.class_bodies_built_in_fills(), 0);
                }
            }
            let want = a.compute_mask().unwrap().clone();
            assert_eq!(b.compute_mask().unwrap(), &want, "after {:?}", &doc[..i]);
            assert!(a.accept_bytes(&[x]).unwrap() && b.accept_bytes(&[x]).unwrap());
        }
        assert!(held.pending_class_bodies_passed() >= 2, "{} kernels passed", held.pending_class_bodies_passed());
        assert!(built.class_bodies_built_in_fills() == 0 && built.pending_class_bodies_passed() == 0);
    }

    /// The class-body thread finds every rule's dropped sibling edges, callee listing and chain
    /// end (`SiblingEdges::find_rules`; a grammar of fewer than `NEAR_RULES` rules): a fill
    /// after it finds none of its own. Fails when `find_rules` leaves one of the three out, or
    /// the thread no longer calls it.
    #[test]
    fn class_body_thread_finds_every_rules_sibling_edges() {
        use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
        let mut toks: Vec<Vec<u8>> = (b' '..=b'~').map(|b| vec![b]).collect();
        toks.extend(["{\"", "name", "\":", " \"", "type", "\"}", "</s>"].iter().map(|t| t.as_bytes().to_vec()));
        let opts = VocabularyOptions { stop_token_ids: Some(vec![toks.len() as u32 - 1]), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        let object = |key: &str| {
            format!(
                r#"{{"type": "object", "properties": {{"name": {{"type": "string"}}, "{key}": {{"type": "integer"}}}}, "required": ["name", "{key}"]}}"#
            )
        };
        let schema = format!(
            r#"{{"type": "array", "items": {{"oneOf": [{}, {}]}}}}"#,
            object("dockerImageKey"),
            object("wslDistributionKey")
        );
        let opts = crate::json_schema::JsonSchemaOptions { strict_mode: false, ..Default::default() };
        let g = crate::json_schema::json_schema_to_grammar(&schema, &opts).unwrap();
        let cg = CompiledGrammar::new(&g, &vocab).unwrap();
        cg.wait_class_bodies();
        let n = cg.automata().num_rules();
        assert!(n < crate::mask::NEAR_RULES);
        assert_eq!(cg.sibling_edges_found(), Some([n, n, n]));
        hold_class_bodies(true);
        let held = CompiledGrammar::new(&g, &vocab).unwrap();
        hold_class_bodies(false);
        // Without the thread, only the compile's first mask found some.
        assert!(held.sibling_edges_found().is_none_or(|f| f[0] < n), "{:?} of {n}", held.sibling_edges_found());
    }

    /// Compiling memoizes the start row's mask, equal to the direct walk's, before any matcher.
    #[test]
    fn start_mask_is_memoized_with_the_grammar() {
        use crate::earley::Chart;
        use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
        let toks: Vec<Vec<u8>> =
            ["a", "ab", "b", "!", "a!", "c", "</s>"].iter().map(|t| t.as_bytes().to_vec()).collect();
        let opts = VocabularyOptions { stop_token_ids: Some(vec![6]), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        let g = crate::ebnf::parse_ebnf(r#"root ::= [ab]* "!""#, "root").unwrap();
        let cg = CompiledGrammar::new(&g, &vocab).unwrap();
        // Before any matcher: the start row's mask is the direct walk's.
        let mut start = Chart::new(cg.automata());
        let memo = cg.memoized_mask(start.last_signature()).expect("start mask memoized at compile time");
        let mut direct = Bitset::new(vocab.vocab_size());
        crate::mask::fill_mask_direct(cg.automata(), &mut start, cg.trie(), &mut direct).unwrap();
        let mut row = vec![0; direct.words().len()];
        memo.write_into(&mut row);
        assert_eq!(row, direct.words());
        assert_eq!(direct.iter_ones().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    }

    /// Literal-chain kernels are classified with a grammar that opens with free text (a tag's
    /// fixed strings after its trigger), and only on first use in one that opens constrained (the
    /// same tag first: only the start row's kernels are classified with it). Fails when the
    /// compile-time pass is dropped or no longer gated.
    #[test]
    fn literal_chains_are_classified_at_compile_only_after_free_text() {
        use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
        let mut toks: Vec<Vec<u8>> = (b' '..=b'~').map(|b| vec![b]).collect();
        toks.extend(["{\"", "name", "\":", " \"", "get", "_time", "\"}", "</s>"].iter().map(|t| t.as_bytes().to_vec()));
        let opts = VocabularyOptions { stop_token_ids: Some(vec![toks.len() as u32 - 1]), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        let tag = r#""{\"name\": \"get_time\", \"parameters\": {}}""#;
        let chains_cached = |root: &str| {
            let cg = CompiledGrammar::new(&crate::ebnf::parse_ebnf(root, "root").unwrap(), &vocab).unwrap();
            let a = cg.automata();
            let chains: Vec<StateId> = (0..a.states().len() as u32)
                .map(StateId)
                .filter(|&s| classify_literal_chain(a, cg.trie(), vocab.vocab_size(), s).is_some())
                .collect();
            let cached = chains.iter().filter(|s| read(&cg.kernels).contains_key(s)).count();
            (cached, chains.len())
        };
        let (cached, chains) = chains_cached(&format!("root ::= [^{{]* ({tag} [^{{]*)*"));
        assert!(chains >= 30 && cached == chains, "free text first: {cached} of {chains} chain kernels at compile");
        let (cached, chains) = chains_cached(&format!("root ::= {tag} [^{{]*"));
        assert!(chains >= 30 && cached <= 1, "constrained first: {cached} of {chains} chain kernels at compile");
    }

    /// An identifier `[a-zA-Z_] [a-zA-Z_0-9]*` then free text `[^\n]*` compiled on printable ASCII
    /// and a few UTF-8 tokens; with the identifier's and the free text's ASCII classes.
    fn ident_then_free_text() -> (CompiledGrammar, u128, u128) {
        use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
        let mut toks: Vec<Vec<u8>> = (b' '..=b'~').map(|b| vec![b]).collect();
        toks.extend(["\n", "ab", "x1", "\u{e9}", "a\u{e9}", "</s>"].iter().map(|t| t.as_bytes().to_vec()));
        let opts = VocabularyOptions { stop_token_ids: Some(vec![toks.len() as u32 - 1]), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        let g = crate::ebnf::parse_ebnf(r#"root ::= [a-zA-Z_] [a-zA-Z_0-9]* ";" [^\n]* "\n""#, "root").unwrap();
        let cg = CompiledGrammar::new(&g, &vocab).unwrap();
        let class = |bytes: &mut dyn Iterator<Item = u8>| bytes.fold(0u128, |c, b| c | 1 << b);
        let ident = class(&mut (b'a'..=b'z').chain(b'A'..=b'Z').chain(b'0'..=b'9').chain([b'_']));
        let text = class(&mut (0..0x80u8).filter(|&b| b != b'\n'));
        (cg, ident, text)
    }

    /// A compile builds a loop class's class slice (and its UTF-8 run index) only where some state
    /// reads every run of it: free text `[^\n]*` gets one, an identifier's `[a-zA-Z_0-9]*` (ASCII
    /// only) does not. Fails when every loop class is built with UTF-8 again.
    #[test]
    fn class_slices_only_for_states_reading_utf8() {
        let (cg, ident, text) = ident_then_free_text();
        assert!(cg.index().cached_class_slice(text).is_some(), "free text has its class slice");
        assert!(cg.index().cached_class_slice(ident).is_none(), "an ASCII-only loop has no class slice");
    }

    /// A compile builds the ASCII-only run index of a loop class only for states that do not read
    /// every run of it with UTF-8 too: free text `[^\n]*` gets its UTF-8 index alone, an
    /// identifier's `[a-zA-Z_0-9]*` its ASCII-only one. Fails when every ASCII loop gets an
    /// ASCII-only index again (the free text's was built beside its UTF-8 one).
    #[test]
    fn ascii_run_index_only_without_a_utf8_one() {
        let (cg, ident, text) = ident_then_free_text();
        // A grammar without string bodies leaves the indexes its first mask does not read to a
        // thread of their own (`TokenIndex::build_later`).
        cg.wait_run_indexes();
        assert!(cg.index().has_run_index(text, true), "free text has its UTF-8 run index");
        assert!(!cg.index().has_run_index(text, false), "and no ASCII-only one");
        assert!(cg.index().has_run_index(ident, false), "an identifier has its ASCII-only run index");
    }
}
