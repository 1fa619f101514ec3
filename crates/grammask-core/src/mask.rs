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
//!
//! This file holds the classification's types and entry points; the parts live in `mask/`:
//! `walk.rs` (the kernel walk and its frames), `literal.rs` (literal positions), `byte_region.rs`
//! (states from which only byte edges are reachable), `runs.rs` (run indexes inside a walk),
//! `row_memo.rs` (interned rows), `sibling.rs` (keys of kernels equal up to unreadable literals),
//! `compose.rs` (composed kernels) and `fill.rs` (filling a mask
//! from the kernels).

use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::earley::{Chart, Item};
use crate::error::Result;
use crate::fasthash::FastMap;
use crate::follow::ByteSet;
use crate::slice::{
    BodySlice, Bounded, ClassBodySlice, ClassChain, ClassSlice, Counted, Cover, CoverMemo, RunIndex, TextSlice,
    WalkedBody, LEAD_LISTS,
};
use crate::token_set::TokenSet;
use crate::trie::{TokenTrie, WIDE_MIN_CHILDREN};
use std::collections::HashMap;
use std::sync::Arc;

mod byte_region;
mod compose;
mod excluded;
mod fill;
mod lead;
mod literal;
mod region;
mod row_memo;
mod runs;
mod sibling;
mod walk;

pub use byte_region::{classify_byte_region, is_byte_region, BYTE_REGION_MAX_NODES};
pub use compose::{
    classify_kernel_from_bytes, classify_kernel_from_bytes_walked, compose_kernel, literal_own_kernel,
    literal_own_parts, shift_kernel,
};
pub use excluded::BodyEnds;
pub use fill::{
    fill_mask, fill_mask_direct, fill_mask_kernels, fill_mask_memo, interned_suffix_walks, kernel_items, kernels_apply,
    ReadsBody, SuffixMemo,
};
pub use lead::{classify_after_lead, lead_into_literal_lead, lead_run, LeadLeaf, LeadNodes};
pub use literal::{classify_literal, classify_literal_chain, literal_byte, LITERAL_WALK_VISITS};
pub use region::{
    classify_region_kernel, force_region_digest_term, region_bounded_refusals, region_digest_collisions,
    region_hashed_closures, region_refusal_cuts, region_stack_marks, region_text_cuts, RegionDfa,
    REGION_MAX_DFA_STATES,
};
use row_memo::*;
pub use row_memo::{memo_virtual_items, row_run_steps, spent_row_merges};
use runs::*;
pub use runs::{
    ascii_loop, ascii_steps_to, call_loop, call_loop_entries_taken, call_loop_refused, call_loop_runs_taken,
    call_loop_wide_taken, callee_ascii, callee_refused, class_covers, loop_refused, refute_states_read,
    run_class_candidates, state_run_class, state_run_class_in, state_run_index, Loops, MIN_ROW_RUN_BYTES,
};
pub(crate) use sibling::count_chain_kernel;
pub use sibling::{chain_kernels, sibling_key, DropRules, QuoteEnds, SiblingEdges, NEAR_RULES, SIBLING_KEY_STATES};
use walk::*;
pub use walk::{
    class_inner_exits, region_before_runs_taken, region_budget_asked_first, runs_reentered_taken, state_bytes,
    within_lean_walks, within_paths_kept,
};

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
    pub capacity: Option<Counted>,
    /// The kernel state is a counted string body that closes after exactly this many characters,
    /// fewer than the longest token ([`crate::compiled::CompiledGrammar::closing_body`]); used
    /// with `body`.
    pub closing: Option<u32>,
    /// The kernel state is a counted class body ([`crate::slice::class_capacity`]): the class's
    /// slice and the chain (capacity, exit state, boundaries where the rule may end). A chain
    /// that may end comes with the `follow` its rule's FOLLOW set, which
    /// [`crate::slice::ends_served`] allows.
    pub class_body: Option<(&'a ClassBodySlice, &'a ClassChain)>,
    /// Run indexes by (ASCII class, UTF-8 too), for class runs met anywhere in the walk.
    pub runs: Option<&'a dyn Fn(u128, bool) -> Option<Arc<RunIndex>>>,
    /// The run index that applies at a plain state (see `KernelWalk::runs_at`), memoized by the
    /// compiled grammar: deciding it takes a cover search.
    pub state_runs: Option<&'a dyn Fn(StateId) -> Option<Arc<RunIndex>>>,
    /// Run indexes of call-loop classes ([`call_loop`]) by ASCII class, only where already built
    /// off the fill path: never built or waited for here.
    pub built_runs: Option<&'a dyn Fn(u128) -> Option<Arc<RunIndex>>>,
    /// By state: a UTF-8 run index every run of whose class an item at the state reads, only
    /// where already built off the fill path (never built or waited for here): a call loop's
    /// class less the multi-byte characters its callee refuses ([`call_loop_refused`]), a plain
    /// loop's class less those it refuses ([`loop_refused`]), or the class the compile found the
    /// state to read every run of ([`state_run_class`]).
    pub built_wide: Option<&'a dyn Fn(StateId) -> Option<Arc<RunIndex>>>,
    /// The compiled grammar's cover-search verdicts (`None`: each search starts from scratch).
    pub cover: Option<&'a CoverMemo>,
    /// Where body text first reads each ASCII character, and the body slices with some walked
    /// (`crate::slice::walked_cover`), for string bodies that refuse a few characters; both built
    /// on first use.
    /// The first is [`crate::slice::FirstChars::walkable`].
    pub walked: Option<(&'a dyn Fn(u8) -> bool, &'a WalkedBodies<'a>)>,
    /// ASCII characters known not to be walkable without building anything (`walked`'s first
    /// closure builds [`crate::slice::FirstChars`] when asked): a walked cover search stops at
    /// the first misread of one ([`crate::slice::walked_cover`]).
    pub unwalkable: Option<&'a dyn Fn(u8) -> bool>,
    /// Called before a walked cover search (a body cover misread): starts building what `walked`
    /// reads ([`crate::token_index::TokenIndex::prepare_walked`]).
    pub prepare_walked: Option<&'a dyn Fn()>,
    /// The compiled grammar's region DFA (`region.rs`): where the body covers fail, a kernel
    /// whose rule reads on through short return stacks is classified by it (`None`: never).
    pub region: Option<&'a std::sync::Mutex<RegionDfa>>,
    /// The vocabulary's plain-text slice, where built: a region walk whose start reads every
    /// plain text takes it and walks its frontier only (`region.rs`).
    pub text: Option<&'a TextSlice>,
}

/// The body slice with some ASCII characters or strings walked, by those (built on first use).
pub type WalkedBodies<'a> = dyn Fn(crate::slice::Walked) -> Option<Arc<WalkedBody>> + 'a;

/// Per-state token classification, shared by all matchers of a compiled grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelMask {
    /// Tokens that can be read entirely without ending the state's rule.
    pub accepted: TokenSet,
    /// `(token, suffix index)`: the token ends the rule and leaves `suffixes[i]` to read after it.
    pub uncertain: Vec<(u32, u32)>,
    pub suffixes: Vec<Box<[u8]>>,
    /// Suffix indices in byte order, each with its longest common prefix with the previous one:
    /// the suffixes form a trie walked once per fill, pruning every suffix under a rejected prefix.
    pub suffix_walk: Vec<(u32, u32)>,
    /// A 128-bit hash of `suffixes` (in order): with the signature of the row a kernel's rule
    /// completes into, it keys the suffix verdicts memoized by the compiled grammar
    /// ([`SuffixMemo`]).
    pub suffix_hash: u128,
    /// Tokens uncertain as one group (a counted body's block end), apart from `uncertain`.
    pub beyond: Option<Beyond>,
}

/// Body-text tokens that end a kernel's rule after exactly `chars` characters (a
/// `json_char{256}` block's last positions): each lies strictly below one of `nodes` (the trie
/// nodes after `chars` characters of body text, [`BodySlice::boundary_nodes`]) and leaves its
/// bytes past that node, body text, to read after the rule. A fill decides them together: all
/// allowed where the completed row holds a counted body no token outruns, else by a walk of the
/// nodes' subtrees (see `fill.rs`).
///
/// PERF: a block end listed ~120 K such tokens with ~77 K distinct suffixes (~20 ms to classify
/// on Llama 3) and walked every suffix in each fill (~4 ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beyond {
    /// Disjoint from the kernel's accepted and `uncertain` tokens.
    pub tokens: Bitset,
    pub chars: u32,
    pub nodes: Arc<[u32]>,
}

impl KernelMask {
    /// A hash of the classification, with one in [`crate::token_set::SAMPLED_WORD_STRIDE`] words
    /// of the accepted set: equal kernel masks have equal keys (the suffixes are in
    /// `suffix_hash`); unequal ones may too, so a key is checked by equality.
    pub fn content_key(&self) -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = crate::fasthash::FastState.build_hasher();
        self.accepted.sample_into(&mut h);
        h.write_u64(self.uncertain.len() as u64);
        for &(t, s) in &self.uncertain {
            h.write_u64(u64::from(t) << 32 | u64::from(s));
        }
        h.write_u64(self.suffix_hash as u64 ^ (self.suffix_hash >> 64) as u64);
        if let Some(b) = &self.beyond {
            h.write_u32(b.chars);
            std::hash::Hash::hash(&b.tokens, &mut h);
        }
        h.finish()
    }

    /// This classification with its [`Beyond`] group listed token by token in `uncertain`, as a
    /// walk records them (only those whose first byte past their node is in `follow`), in
    /// canonical form: for comparing with a walk.
    #[doc(hidden)]
    #[must_use]
    pub fn with_beyond_listed(&self, trie: &TokenTrie, follow: Option<&ByteSet>) -> KernelMask {
        let Some(b) = &self.beyond else { return self.clone() };
        let mut ids = SuffixIds::default();
        let mut suffixes = Vec::new();
        let mut uncertain: Vec<(u32, u32)> = Vec::new();
        for &(t, s) in &self.uncertain {
            uncertain.push((t, intern_suffix(&mut ids, &mut suffixes, &self.suffixes[s as usize])));
        }
        let mut bytes = Vec::new();
        for &n in b.nodes.iter() {
            let top = trie.nodes[n as usize].depth as usize;
            for node in &trie.nodes[n as usize + 1..trie.nodes[n as usize].subtree_end as usize] {
                bytes.truncate(node.depth as usize - top - 1);
                bytes.push(node.byte);
                if follow.is_some_and(|f| !f.contains(bytes[0])) {
                    continue;
                }
                for &t in trie.node_tokens(node).iter().filter(|&&t| b.tokens.get(t as usize)) {
                    uncertain.push((t, intern_suffix(&mut ids, &mut suffixes, &bytes)));
                }
            }
        }
        kernel_mask(self.accepted.clone(), uncertain, suffixes)
    }

    pub fn memory_size(&self) -> usize {
        self.accepted.memory_size()
            + self.uncertain.len() * 8
            + self.suffixes.iter().map(|s| s.len() + 16).sum::<usize>()
            + self.beyond.as_ref().map_or(0, |b| b.tokens.memory_size())
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
    let sc = Shortcuts { body, follow, class, ..Default::default() };
    let km = classify_kernel_budget(a, trie, vocab_size, state, sc, usize::MAX, &mut never)?;
    Ok(km.expect("a walk that is never abandoned completes"))
}

/// Why a kernel walk asks its `on_budget` callback (see [`classify_kernel_budget`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BudgetAsk {
    /// The walk's work reached its budget.
    Spent,
    /// A region walk about to start would cross the budget: nothing of it is walked yet (the
    /// budget is reached by the region's node count, not by work done).
    BeforeRegion,
}

/// [`classify_kernel`], calling `on_budget` once the walk has done `budget` units of work (trie
/// nodes visited, uncertain tokens recorded at a few units each), or is about to in one region
/// walk ([`BudgetAsk`]): if it returns true the walk is abandoned and the result is `None` (the
/// caller found the classification elsewhere, e.g. in the cross-grammar cache).
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
    classify_kernel_asking(a, trie, vocab_size, state, sc, budget, &mut |_| on_budget())
}

/// [`classify_kernel_budget`], telling `on_budget` why it is asked ([`BudgetAsk`]).
pub(crate) fn classify_kernel_asking(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    budget: usize,
    on_budget: &mut dyn FnMut(BudgetAsk) -> bool,
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
    let sc = Shortcuts { runs: None, state_runs: None, built_runs: None, built_wide: None, region: None, ..sc };
    let km = classify_walk(a, trie, vocab_size, state, sc, usize::MAX, &mut |_| false, &[false])?;
    Ok(km.expect("a walk that is never abandoned completes"))
}

/// [`classify_kernel`] of a state with a quote cut ([`crate::slice::quote_form`]): the cut's
/// inside tokens, plus a walk of its exits only (the tokens that read past a `"`).
pub fn classify_quote_cut(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    cut: &crate::slice::QuoteCut,
) -> Result<KernelMask> {
    let fresh = CoverMemo::default();
    let sc = Shortcuts { cover: Some(sc.cover.unwrap_or(&fresh)), ..sc };
    let mut never = |_| false;
    // Interned rows first, as `classify_walk` does; a walk whose rows overflow the memo is redone
    // on a plain stack of rows.
    for interned in [true, false] {
        let mut w = KernelWalk::new(a, trie, vocab_size, state, &sc, interned, usize::MAX, &mut never);
        w.accepted.or_assign(&cut.inside);
        if !w.walk_quote_exits(&cut.exits)? {
            debug_assert!(w.memo_full(), "a walk without a budget is abandoned only for a full memo");
            continue;
        }
        let KernelWalk { uncertain, suffixes, accepted, beyond, .. } = w;
        let km = kernel_mask(TokenSet::Bits(accepted), uncertain, suffixes);
        return Ok(KernelMask { beyond, ..km });
    }
    unreachable!("the stack walk has no memo to fill")
}

#[allow(clippy::too_many_arguments)]
fn classify_walk(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    budget: usize,
    on_budget: &mut dyn FnMut(BudgetAsk) -> bool,
    modes: &[bool],
) -> Result<Option<KernelMask>> {
    let fresh = CoverMemo::default();
    let sc = Shortcuts { cover: Some(sc.cover.unwrap_or(&fresh)), ..sc };
    for &interned in modes {
        let mut w = match interned.then(|| offered_rows(a, state)).flatten() {
            Some(rows) => KernelWalk::with_rows(a, trie, vocab_size, rows, &sc, budget, &mut *on_budget),
            None => KernelWalk::new(a, trie, vocab_size, state, &sc, interned, budget, &mut *on_budget),
        };
        // One budget for all the cover searches of the state (see `MAX_STATE_COVER_PAIRS`).
        let classified = crate::slice::with_cover_budget(crate::slice::MAX_STATE_COVER_PAIRS, || w.classify(state, sc));
        match classified? {
            false if w.memo.as_ref().is_some_and(|m| m.full) => {}
            false => return Ok(None),
            true => {
                let KernelWalk { uncertain, suffixes, accepted, beyond, .. } = w;
                // Scanned whole (a walk adds slices, runs, whole subtrees, not a list of ids): a
                // sparse set is kept as ids and its bitset goes back for the next walk.
                // PERF: MaskBench o83841 t30 walked 81 kernels of a few tokens each; each kept its
                // 16 KB bitset (~14 K instructions of `calloc` for the next walk's, then compared
                // whole in `cache_kernel`): 3.4 M + 2.2 M of the fill's 16.1 M.
                let km = kernel_mask(TokenSet::from_spare_bitset(accepted), uncertain, suffixes);
                return Ok(Some(KernelMask { beyond, ..km }));
            }
        }
    }
    unreachable!("the last mode is the stack walk, which has no memo to fill")
}

/// The interned rows of a completed kernel walk: its chart (an arena of distinct rows from the
/// kernel chart of its state on) and their byte transitions. A later walk from the same kernel
/// state may go on from them: a row's transitions depend only on the row (see [`RowMemo`]).
pub struct WalkRows {
    chart: Chart,
    memo: RowMemo,
}

/// The row of a kernel chart ([`Chart::with_kernel`]) that holds the kernel item's closure; the
/// rows a walk interns follow it.
const KERNEL_ROW: usize = 1;

thread_local! {
    /// Rows offered by [`offering_rows`] on this thread, with the (automaton address, state)
    /// whose walk may take them.
    static OFFERED_ROWS: std::cell::RefCell<Option<(usize, StateId, WalkRows)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `rows` (of a walk of `state` in `a`) offered to the first interned kernel walk
/// of `state` in `a` that starts on this thread during `f`; unused ones are dropped after `f`.
/// The offer lives only within `f`, while `a` is borrowed: the address names one automaton.
pub fn offering_rows<R>(a: &Automata, state: StateId, rows: Option<WalkRows>, f: impl FnOnce() -> R) -> R {
    /// Puts the enclosing offer back, also when `f` unwinds (no offer outlives its automaton).
    struct Restore(Option<(usize, StateId, WalkRows)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            // `try_with`: during thread teardown the offer is just dropped.
            let _ = OFFERED_ROWS.try_with(|o| *o.borrow_mut() = outer);
        }
    }
    let offer = rows.map(|r| (std::ptr::from_ref(a) as usize, state, r));
    let _restore = Restore(OFFERED_ROWS.with(|o| std::mem::replace(&mut *o.borrow_mut(), offer)));
    f()
}

/// The rows offered to a walk of `state` in `a`, if any (see [`offering_rows`]).
fn offered_rows(a: &Automata, state: StateId) -> Option<WalkRows> {
    OFFERED_ROWS.with(|o| {
        let mut o = o.borrow_mut();
        match o.take() {
            Some((addr, s, rows)) if addr == std::ptr::from_ref(a) as usize && s == state => Some(rows),
            other => {
                *o = other;
                None
            }
        }
    })
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
        on_budget: &'a mut dyn FnMut(BudgetAsk) -> bool,
    ) -> KernelWalk<'a> {
        let chart = Chart::with_kernel(a, state);
        let memo = interned.then(|| RowMemo::new(a, &chart));
        KernelWalk::on_rows(a, trie, vocab_size, chart, memo, sc, budget, on_budget)
    }

    /// A walk on the interned rows of an earlier walk of the same kernel state (see [`WalkRows`]).
    #[allow(clippy::too_many_arguments)]
    fn with_rows(
        a: &'a Automata,
        trie: &'a TokenTrie,
        vocab_size: usize,
        rows: WalkRows,
        sc: &Shortcuts<'a>,
        budget: usize,
        on_budget: &'a mut dyn FnMut(BudgetAsk) -> bool,
    ) -> KernelWalk<'a> {
        KernelWalk::on_rows(a, trie, vocab_size, rows.chart, Some(rows.memo), sc, budget, on_budget)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_rows(
        a: &'a Automata,
        trie: &'a TokenTrie,
        vocab_size: usize,
        chart: Chart,
        memo: Option<RowMemo>,
        sc: &Shortcuts<'a>,
        budget: usize,
        on_budget: &'a mut dyn FnMut(BudgetAsk) -> bool,
    ) -> KernelWalk<'a> {
        KernelWalk {
            visits: 0,
            budget,
            on_budget,
            a,
            trie,
            follow: sc.follow.copied(),
            chart,
            memo,
            accepted: crate::token_set::zeroed_bitset(vocab_size),
            uncertain: Vec::new(),
            suffix_ids: SuffixIds::default(),
            suffixes: Vec::new(),
            beyond: None,
            frames: Vec::new(),
            ends: Vec::new(),
            path: Vec::new(),
            runs: sc.runs,
            shared_state_runs: sc.state_runs,
            built_runs: sc.built_runs,
            built_wide: sc.built_wide,
            cover: sc.cover,
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
pub(crate) fn kernel_mask(accepted: TokenSet, mut uncertain: Vec<(u32, u32)>, suffixes: Vec<Box<[u8]>>) -> KernelMask {
    // Sorted by their first 8 bytes (zero-padded: where two such keys differ they order as the
    // suffixes do), then by the whole suffix.
    // PERF: a block end of a long string (MaskBench o82710) sorts ~44 K suffixes; comparing them
    // through `memcmp` alone was ~a fifth of that fill.
    let prefix = |s: &[u8]| {
        let mut k = [0u8; 8];
        let n = s.len().min(8);
        k[..n].copy_from_slice(&s[..n]);
        u64::from_be_bytes(k)
    };
    // The keys alone sort as plain integers; only runs of equal keys are then ordered by the
    // whole suffix.
    let mut keyed: Vec<(u64, u32)> = suffixes.iter().enumerate().map(|(i, s)| (prefix(s), i as u32)).collect();
    keyed.sort_unstable();
    let mut at = 0;
    while at < keyed.len() {
        let run = keyed[at..].iter().take_while(|k| k.0 == keyed[at].0).count();
        if run > 1 {
            keyed[at..at + run].sort_unstable_by(|x, y| suffixes[x.1 as usize].cmp(&suffixes[y.1 as usize]));
        }
        at += run;
    }
    let order: Vec<u32> = keyed.into_iter().map(|(_, i)| i).collect();
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
    // Sorted as `t << 32 | s` keys (the same order, compared as integers).
    let mut keys: Vec<u64> = uncertain.iter().map(|&(t, s)| u64::from(t) << 32 | u64::from(s)).collect();
    keys.sort_unstable();
    keys.dedup();
    uncertain.clear();
    uncertain.extend(keys.iter().map(|&k| ((k >> 32) as u32, k as u32)));
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
    let suffix_hash = hash_suffixes(&sorted);
    KernelMask { accepted, uncertain, suffixes: sorted, suffix_walk, suffix_hash, beyond: None }
}

/// The state of one kernel classification walk over the trie.
struct KernelWalk<'a> {
    /// Work so far: trie nodes stepped, and uncertain tokens recorded (`RECORD_COST` each); at
    /// `budget`, `on_budget` decides whether to go on.
    visits: usize,
    budget: usize,
    on_budget: &'a mut dyn FnMut(BudgetAsk) -> bool,
    a: &'a Automata,
    trie: &'a TokenTrie,
    /// Bytes that may follow the kernel's rule in some context (`None`: any).
    follow: Option<ByteSet>,
    chart: Chart,
    /// Interned rows (`None`: the chart is a stack of the current path's rows).
    memo: Option<RowMemo>,
    accepted: Bitset,
    uncertain: Vec<(u32, u32)>,
    suffix_ids: SuffixIds,
    suffixes: Vec<Box<[u8]>>,
    beyond: Option<Beyond>,
    // Per depth d (after d+1 bytes of the current path): the frame reached, and whether the
    // kernel's rule ended there.
    frames: Vec<Frame>,
    ends: Vec<bool>,
    path: Vec<u8>,
    runs: Option<&'a dyn Fn(u128, bool) -> Option<Arc<RunIndex>>>,
    shared_state_runs: Option<&'a dyn Fn(StateId) -> Option<Arc<RunIndex>>>,
    built_runs: Option<&'a dyn Fn(u128) -> Option<Arc<RunIndex>>>,
    built_wide: Option<&'a dyn Fn(StateId) -> Option<Arc<RunIndex>>>,
    /// Cover-search verdicts (see [`Shortcuts::cover`]).
    cover: Option<&'a CoverMemo>,
    /// The run index that applies at a virtual item's state or an interned row, once looked up.
    state_runs: FastMap<StateId, Option<Arc<RunIndex>>>,
    /// By row: its run index, and the row each class byte leads to (see `KernelWalk::runs_at`).
    row_runs: FastMap<usize, Option<(Arc<RunIndex>, usize)>>,
    /// The bytes a state, or an interned row (by frame), has edges on, once looked up.
    readable_states: FastMap<StateId, ByteSet>,
    readable_rows: FastMap<usize, ByteSet>,
}

/// FNV-1a over 128 bits of the suffixes, each followed by its length (so the list, not just
/// the concatenation, is hashed).
fn hash_suffixes(suffixes: &[Box<[u8]>]) -> u128 {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013B;
    let mut h: u128 = 0x6C62_272E_07BB_0142_62B8_2175_6295_C58D;
    for s in suffixes {
        for &b in &**s {
            h = (h ^ u128::from(b)).wrapping_mul(PRIME);
        }
        h = (h ^ (s.len() as u128 | 1 << 100)).wrapping_mul(PRIME);
    }
    h
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
    /// The item, and the number of chart rows below it (with the row memo: the item's id in it
    /// plus one, or 0, see `RowMemo::virtuals`; rows never pop there).
    Virtual(Item, usize),
}
