//! Compiled grammars and per-sequence matchers.
//!
//! A [`CompiledGrammar`] is immutable apart from its kernel-mask cache, which only grows and is
//! shared (behind a lock) by every [`Matcher`] made from it. A matcher owns one Earley chart and
//! the history needed to roll back: accepting a token appends one row per byte, rollback truncates.

use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::earley::Chart;
use crate::error::{Error, ErrorKind, Result};
use crate::grammar::{Grammar, RuleId};
use crate::mask::{ascii_loop, state_bytes, state_run_index, MIN_ROW_RUN_BYTES, classify_kernel_budget, classify_kernel_from_bytes, classify_kernel_uninterned, compose_kernel, fill_mask, KernelMask, Shortcuts};
use crate::follow::{follow_sets, nullable_states, ByteSet};
use crate::slice::{body_capacity, body_level, BodySlice, ClassSlice, Level, RunIndex};
use crate::trie::TokenTrie;
use crate::vocab::Vocabulary;
use std::collections::{HashMap, HashSet};
use crate::limits;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

/// A vocabulary with its token trie, built once per vocabulary and shared, plus the
/// cross-grammar cache of kernel classifications keyed by [`Automata::structure_hash`]: the
/// inside of a JSON string or number is classified once per vocabulary, not once per grammar.
#[derive(Debug)]
pub struct TokenIndex {
    pub vocab: Arc<Vocabulary>,
    pub trie: TokenTrie,
    kernels: RwLock<HashMap<u128, Arc<KernelMask>>>,
    kernel_bytes: AtomicUsize,
    /// String-body slice, built with the index.
    body: OnceLock<BodySlice>,
    /// Free-text slices by ASCII class, built on first use (at most [`MAX_CLASS_SLICES`]).
    class_slices: RwLock<HashMap<u128, Arc<ClassSlice>>>,
    /// Run indexes by (ASCII class, UTF-8 too), built on first use (at most
    /// [`MAX_RUN_INDEXES`]).
    run_indexes: RwLock<HashMap<(u128, bool), Arc<RunIndex>>>,
    /// Loop classes of the grammars compiled so far (see `CompiledGrammar::new`).
    classes_seen: RwLock<HashSet<(u128, bool)>>,
}

/// Most run indexes kept per vocabulary (each one byte per token, six per break node and up to 65
/// token bitsets: at most ~3 MB on a 128k vocabulary).
const MAX_RUN_INDEXES: usize = 16;

/// Most loop classes remembered per vocabulary as seen.
const MAX_CLASSES_SEEN: usize = 4096;

/// Most free-text class slices kept per vocabulary (each is a token bitset plus its frontier).
const MAX_CLASS_SLICES: usize = 32;

/// Kernels whose reachable automaton is larger than this are not shared across grammars (the
/// structural hash would cost more than it saves).
const STRUCTURE_HASH_LIMIT: usize = 8192;

/// Trie nodes a new kernel's walk visits before the cross-grammar cache is consulted: shorter
/// walks cost less than the cache key's structural hash.
const SHARE_AFTER_VISITS: usize = 4096;
/// Kernels composed into one another at most this deep (bounds the recursion through rule starts;
/// deeper ones are walked).
const MAX_COMPOSE_DEPTH: usize = 8;
/// Callee kernels with more uncertain tokens, or distinct suffixes, than this are not composed.
const COMPOSE_MAX_UNCERTAIN: usize = 4096;
const COMPOSE_MAX_SUFFIXES: usize = 512;

impl TokenIndex {
    pub fn body_slice(&self) -> &BodySlice {
        self.body.get_or_init(|| BodySlice::new(&self.trie, self.vocab.vocab_size()))
    }

    /// The free-text slice of ASCII class `ascii`, built on first use; `None` once the per-vocabulary
    /// budget is spent (the kernel then takes the full walk).
    pub fn class_slice(&self, ascii: u128) -> Option<Arc<ClassSlice>> {
        if let Some(c) = read(&self.class_slices).get(&ascii) {
            return Some(c.clone());
        }
        let mut w = write(&self.class_slices);
        if w.len() >= MAX_CLASS_SLICES {
            return w.get(&ascii).cloned();
        }
        let c = w
            .entry(ascii)
            .or_insert_with(|| Arc::new(ClassSlice::new(&self.trie, self.vocab.vocab_size(), ascii)));
        Some(c.clone())
    }

    /// The run index of a class ([`RunIndex`]), built on first use; `None` once the
    /// per-vocabulary budget is spent.
    pub fn run_index(&self, ascii: u128, utf8: bool) -> Option<Arc<RunIndex>> {
        if let Some(r) = read(&self.run_indexes).get(&(ascii, utf8)) {
            return Some(r.clone());
        }
        let mut w = write(&self.run_indexes);
        if w.len() >= MAX_RUN_INDEXES {
            return w.get(&(ascii, utf8)).cloned();
        }
        let r = w.entry((ascii, utf8)).or_insert_with(|| Arc::new(RunIndex::new(&self.trie, self.vocab.vocab_size(), ascii, utf8)));
        Some(r.clone())
    }

    /// The free-text slice of ASCII class `ascii` if it was built.
    pub fn cached_class_slice(&self, ascii: u128) -> Option<Arc<ClassSlice>> {
        read(&self.class_slices).get(&ascii).cloned()
    }

    /// Whether a grammar with a state looping on `ascii` was compiled before (its slice is then
    /// built, or every such state was a string body).
    fn class_seen(&self, ascii: u128, utf8: bool) -> bool {
        read(&self.classes_seen).contains(&(ascii, utf8))
    }

    fn see_class(&self, ascii: u128, utf8: bool) {
        let mut w = write(&self.classes_seen);
        if w.len() < MAX_CLASSES_SEEN {
            w.insert((ascii, utf8));
        }
    }

    fn shared_kernel(&self, key: u128) -> Option<Arc<KernelMask>> {
        read(&self.kernels).get(&key).cloned()
    }

    fn share_kernel(&self, key: u128, km: &Arc<KernelMask>) {
        let size = km.memory_size();
        let mut w = write(&self.kernels);
        // Bounded: when full, start over (the common kernels are recomputed on next use).
        if self.kernel_bytes.load(Ordering::Relaxed) + size > limits::SHARED_KERNEL_CACHE_BYTES {
            w.clear();
            self.kernel_bytes.store(0, Ordering::Relaxed);
        }
        if w.insert(key, km.clone()).is_none() {
            self.kernel_bytes.fetch_add(size, Ordering::Relaxed);
        }
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

type IndexRegistry = Mutex<Vec<(Weak<Vocabulary>, Weak<TokenIndex>)>>;
static INDEXES: IndexRegistry = Mutex::new(Vec::new());

impl TokenIndex {
    /// The shared index of `vocab`, built on first use.
    pub fn for_vocab(vocab: &Arc<Vocabulary>) -> Arc<TokenIndex> {
        let mut reg = INDEXES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        reg.retain(|(v, i)| v.strong_count() > 0 && i.strong_count() > 0);
        for (v, i) in reg.iter() {
            if v.upgrade().is_some_and(|v| Arc::ptr_eq(&v, vocab)) {
                if let Some(i) = i.upgrade() {
                    return i;
                }
            }
        }
        let idx = Arc::new(TokenIndex {
            vocab: vocab.clone(),
            trie: TokenTrie::new(vocab),
            kernels: RwLock::new(HashMap::new()),
            kernel_bytes: AtomicUsize::new(0),
            body: OnceLock::new(),
            class_slices: RwLock::new(HashMap::new()),
            run_indexes: RwLock::new(HashMap::new()),
            classes_seen: RwLock::new(HashSet::new()),
        });
        // Built with the trie (a few ms on a 128k vocabulary) rather than in some first mask.
        let _ = idx.body_slice();
        reg.push((Arc::downgrade(vocab), Arc::downgrade(&idx)));
        idx
    }
}

/// A grammar compiled against a vocabulary.
#[derive(Debug)]
pub struct CompiledGrammar {
    grammar: Grammar,
    automata: Automata,
    index: Arc<TokenIndex>,
    kernels: RwLock<HashMap<StateId, Arc<KernelMask>>>,
    /// FOLLOW set of each rule, computed on the first kernel classification.
    follow: OnceLock<Vec<ByteSet>>,
    nullable: OnceLock<Vec<bool>>,
    /// Counted string-body levels by state ([`body_level`]).
    levels: RwLock<HashMap<StateId, Option<Level>>>,
    /// Run indexes that apply at plain states ([`state_run_index`]).
    state_runs: RwLock<HashMap<StateId, Option<Arc<RunIndex>>>>,
    /// Full masks by chart signature ([`Chart::last_signature`]), without stop tokens.
    masks: RwLock<HashMap<u128, Arc<Bitset>>>,
    mask_bytes: AtomicUsize,
    /// Shortest completions per state, for token budgets (computed on first use).
    completion: OnceLock<Arc<crate::budget::Completion>>,
}

impl CompiledGrammar {
    pub fn new(grammar: &Grammar, vocab: &Arc<Vocabulary>) -> Result<CompiledGrammar> {
        let automata = Automata::build(grammar)?;
        let index = TokenIndex::for_vocab(vocab);
        // Free-text class slices and run indexes are per vocabulary and take a trie walk each
        // (~2 ms on a 128k vocabulary): they are built with the grammar that first needs one
        // rather than in its first mask. Classes are those states loop on (a row of such a state
        // loops on the class too); string bodies need no class slice (they take the body slice).
        // Each class is looked at once per vocabulary (`classes_seen`).
        // (class, UTF-8 too, some state of the class is not a string body)
        let mut fresh: Vec<(u128, bool, bool)> = Vec::new();
        // Classes met so far that the vocabulary has seen already (one lock per class, not per
        // state).
        let mut seen: Vec<(u128, bool)> = Vec::new();
        let mut note = |c: u128, utf8: bool, s: StateId| {
            if seen.contains(&(c, utf8)) {
                return;
            }
            if index.class_seen(c, utf8) {
                seen.push((c, utf8));
                return;
            }
            let i = match fresh.iter().position(|&(x, u, _)| (x, u) == (c, utf8)) {
                Some(i) => i,
                None => {
                    fresh.push((c, utf8, false));
                    fresh.len() - 1
                }
            };
            if !fresh[i].2 {
                fresh[i].2 = BodySlice::covers(&automata, s).is_none();
            }
        };
        for s in (0..automata.states().len() as u32).map(StateId) {
            if let Some(c) = ClassSlice::loop_class(&automata, s) {
                note(c, true, s);
            }
            let c = ascii_loop(&automata, s);
            if c.count_ones() >= MIN_ROW_RUN_BYTES {
                note(c, false, s);
            }
        }
        for (c, utf8, free_text) in fresh {
            index.see_class(c, utf8);
            // A string body's run index serves walks that enter the body below the root (after
            // an escape, a quote or a key).
            if free_text || utf8 {
                index.run_index(c, utf8);
            }
            if free_text && utf8 {
                index.class_slice(c);
            }
        }
        Ok(CompiledGrammar {
            grammar: grammar.clone(),
            automata,
            index,
            kernels: RwLock::new(HashMap::new()),
            follow: OnceLock::new(),
            nullable: OnceLock::new(),
            levels: RwLock::new(HashMap::new()),
            state_runs: RwLock::new(HashMap::new()),
            masks: RwLock::new(HashMap::new()),
            mask_bytes: AtomicUsize::new(0),
            completion: OnceLock::new(),
        })
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
        if let Some(km) = self.composed_kernel_in(state, stack)? {
            return Ok(write(&self.kernels).entry(state).or_insert(Arc::new(km)).clone());
        }
        let follow = self.follow()[self.automata.state(state).rule.index()];
        // The classification depends on the rule's FOLLOW set too (it filters rule ends). The
        // key is computed only once the walk proves long (see `classify_kernel_budget`).
        let (mut key, mut shared) = (None, None);
        let mut escalate = || {
            key = self
                .automata
                .structure_hash(state, STRUCTURE_HASH_LIMIT, self.index.trie.max_depth)
                .map(|h| h ^ follow.hash128());
            shared = key.and_then(|k| self.index.shared_kernel(k));
            shared.is_some()
        };
        let walked = self.classify(state, SHARE_AFTER_VISITS, &mut escalate)?;
        let km = match (walked, shared) {
            (Some(km), _) => {
                let km = Arc::new(km);
                if let Some(k) = key {
                    self.index.share_kernel(k, &km);
                }
                km
            }
            (None, Some(km)) => km,
            (None, None) => unreachable!("a walk is abandoned only for a shared classification"),
        };
        Ok(write(&self.kernels).entry(state).or_insert(km).clone())
    }

    /// The classification of a kernel state that predicts, composed from its callees' rule-start
    /// kernels ([`compose_kernel`]), themselves composed where they can be; `None` where that does
    /// not apply: no rule edges, a nullable callee, a callee whose start is being composed already
    /// (left recursion) or that predicts nothing itself, callee kernels with many uncertain tokens,
    /// lookaheads, or compositions nested [`MAX_COMPOSE_DEPTH`] deep.
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
        let nullable = self.nullable();
        let start = |r: RuleId| a.rule_start(r);
        // A callee whose start only reads bytes (a character, a token-like rule) gains nothing
        // from sharing and leaves most tokens uncertain (ended after a few bytes).
        let skip = |r: RuleId| {
            let s0 = start(r);
            nullable[s0.0 as usize] || s0 == state || stack.contains(&s0) || a.rule_edges(s0).is_empty()
        };
        if edges.iter().any(|&(r, _)| skip(r)) {
            return Ok(None);
        }
        stack.push(state);
        let mut callees = Vec::with_capacity(edges.len());
        for &(r, t) in edges {
            match self.kernel_in(start(r), stack) {
                Ok(km) => callees.push((km, t)),
                Err(e) => {
                    stack.pop();
                    return Err(e);
                }
            }
        }
        stack.pop();
        // Each uncertain suffix is read apart: past these, the walk is cheaper.
        let uncertain: usize = callees.iter().map(|(k, _)| k.uncertain.len()).sum();
        let suffixes: usize = callees.iter().map(|(k, _)| k.suffixes.len()).sum();
        if uncertain > COMPOSE_MAX_UNCERTAIN || suffixes > COMPOSE_MAX_SUFFIXES {
            return Ok(None);
        }
        let own = match a.byte_edges(state) {
            [] => None,
            _ => {
                let (first, vocab_size) = (state_bytes(a, state), self.index.vocab.vocab_size());
                Some(self.with_shortcuts(state, |sc| {
                    classify_kernel_from_bytes(a, &self.index.trie, vocab_size, state, sc, &first)
                })?)
            }
        };
        let follow = self.follow()[a.state(state).rule.index()];
        compose_kernel(a, self.index.vocab.vocab_size(), &follow, own, &callees).map(Some)
    }

    /// Classifies kernel `state` with every shortcut, without any cache; `on_budget` as in
    /// [`classify_kernel_budget`].
    pub fn classify(&self, state: StateId, budget: usize, on_budget: &mut dyn FnMut() -> bool) -> Result<Option<KernelMask>> {
        let vocab_size = self.index.vocab.vocab_size();
        self.with_shortcuts(state, |sc| {
            classify_kernel_budget(&self.automata, &self.index.trie, vocab_size, state, sc, budget, on_budget)
        })
    }

    /// [`Self::classify`] without the row memo and run indexes (the reference it is tested against).
    #[doc(hidden)]
    pub fn classify_uninterned(&self, state: StateId) -> Result<KernelMask> {
        let vocab_size = self.index.vocab.vocab_size();
        self.with_shortcuts(state, |sc| classify_kernel_uninterned(&self.automata, &self.index.trie, vocab_size, state, sc))
    }

    fn with_shortcuts<R>(&self, state: StateId, f: impl FnOnce(Shortcuts<'_>) -> R) -> R {
        let follow = self.follow()[self.automata.state(state).rule.index()];
        let capacity = self.body_capacity(state);
        // Class slices are built when a grammar needing one is compiled (not for string bodies,
        // which take the body shortcuts first); one missing here (past the per-vocabulary
        // budget) is not built in a mask.
        let class = ClassSlice::loop_class(&self.automata, state).filter(|_| capacity.is_none());
        let class = class.and_then(|c| self.index.cached_class_slice(c));
        let runs = |ascii: u128, utf8: bool| self.index.run_index(ascii, utf8);
        let state_runs = |s: StateId| {
            if let Some(r) = read(&self.state_runs).get(&s) {
                return r.clone();
            }
            let r = state_run_index(&self.automata, s, &runs);
            write(&self.state_runs).insert(s, r.clone());
            r
        };
        f(Shortcuts {
            body: Some(self.index.body_slice()),
            follow: Some(&follow),
            class: class.as_deref(),
            capacity,
            runs: Some(&runs),
            state_runs: Some(&state_runs),
        })
    }

    /// The capacity of the counted string body at `state` ([`body_capacity`]), with each state's
    /// [`body_level`] memoized: the positions of `json_char{0,n}` share one chain.
    fn body_capacity(&self, state: StateId) -> Option<u32> {
        let max = self.index.trie.max_depth;
        let mut fresh: Vec<(StateId, Option<Level>)> = Vec::new();
        let cap = {
            let memo = read(&self.levels);
            body_capacity(state, max, |r| match memo.get(&r) {
                Some(&l) => l,
                None => {
                    let l = body_level(&self.automata, r);
                    fresh.push((r, l));
                    l
                }
            })
        };
        if !fresh.is_empty() {
            write(&self.levels).extend(fresh);
        }
        cap
    }

    /// Shortest completion lengths of the automata under this vocabulary (token budgets).
    pub fn completion(&self) -> Arc<crate::budget::Completion> {
        self.completion.get_or_init(|| Arc::new(crate::budget::Completion::new(&self.automata, self.vocab()))).clone()
    }

    fn memoized_mask(&self, sig: u128) -> Option<Arc<Bitset>> {
        read(&self.masks).get(&sig).cloned()
    }

    fn memoize_mask(&self, sig: u128, mask: &Bitset) {
        let size = mask.memory_size() + 48;
        if self.mask_bytes.load(Ordering::Relaxed) + size > limits::MASK_MEMO_BYTES {
            return;
        }
        if write(&self.masks).insert(sig, Arc::new(mask.clone())).is_none() {
            self.mask_bytes.fetch_add(size, Ordering::Relaxed);
        }
    }

    /// Heap bytes of the grammar, automata and the kernel cache so far (the shared token index is
    /// not counted).
    pub fn memory_size(&self) -> usize {
        let k: usize = read(&self.kernels).values().map(|k| k.memory_size()).sum();
        self.automata.memory_size() + k + self.mask_bytes.load(Ordering::Relaxed) + self.grammar.exprs().len() * 24
    }
}

/// Options of a matcher, mirroring `GrammarMatcher(...)`.
#[derive(Clone, Debug, Default)]
pub struct MatcherOptions {
    /// Replaces the vocabulary's stop tokens when set (must be non-empty).
    pub override_stop_tokens: Option<Vec<u32>>,
    /// The matcher terminates as soon as the grammar is complete, without a stop token.
    pub terminate_without_stop_token: bool,
    /// Token budget: accepted steps (tokens, the stop token included) the output must end within;
    /// masks then allow only tokens that keep a completion within it (see [`crate::budget`]).
    pub max_tokens: Option<usize>,
}

#[derive(Clone, Copy, Debug)]
struct Step {
    rows_before: u32,
    stop: bool,
}

/// The state of one sequence being decoded.
#[derive(Clone, Debug)]
pub struct Matcher {
    compiled: Arc<CompiledGrammar>,
    chart: Chart,
    history: Vec<Step>,
    stop_tokens: Vec<u32>,
    terminate_without_stop_token: bool,
    stopped: bool,
    mask: Bitset,
    /// Token budget (`MatcherOptions::max_tokens`).
    budget: Option<crate::budget::Budget>,
}

impl Matcher {
    pub fn new(compiled: Arc<CompiledGrammar>, options: MatcherOptions) -> Result<Matcher> {
        let vocab = compiled.vocab().clone();
        let stop_tokens = match options.override_stop_tokens {
            Some(v) if v.is_empty() => {
                return Err(Error::invalid_argument("override_stop_tokens must not be empty"));
            }
            Some(v) => {
                if let Some(&bad) = v.iter().find(|&&t| t as usize >= vocab.vocab_size()) {
                    return Err(Error::invalid_argument(format!(
                        "stop token id {bad} is out of range for vocabulary size {}",
                        vocab.vocab_size()
                    )));
                }
                v
            }
            None => vocab.stop_token_ids().to_vec(),
        };
        let chart = Chart::new(compiled.automata());
        // Token budget: refused when shorter than the grammar's shortest completion.
        let budget = match options.max_tokens {
            Some(n) => Some(crate::budget::Budget::new(compiled.automata(), compiled.completion(), &chart, 0, n)?),
            None => None,
        };
        Ok(Matcher {
            budget,
            mask: Bitset::new(vocab.vocab_size()),
            compiled,
            chart,
            history: Vec::new(),
            stop_tokens,
            terminate_without_stop_token: options.terminate_without_stop_token,
            stopped: false,
        })
    }

    pub fn chart(&self) -> &Chart {
        &self.chart
    }

    pub fn compiled(&self) -> &Arc<CompiledGrammar> {
        &self.compiled
    }

    pub fn stop_token_ids(&self) -> &[u32] {
        &self.stop_tokens
    }

    /// The root rule can end at the current position.
    pub fn is_completed(&self) -> bool {
        self.chart.is_complete(self.compiled.automata())
    }

    /// With `terminate_without_stop_token`, this is true as soon as the grammar is complete, but
    /// (as in `XGrammar`) only an accepted stop token blocks further input: text that continues a
    /// complete sentence is still accepted and masks can still be filled.
    pub fn is_terminated(&self) -> bool {
        if self.terminate_without_stop_token {
            self.stopped || self.is_completed()
        } else {
            self.stopped
        }
    }

    /// Accepts one token. Returns false, leaving the state unchanged, if the token is not allowed
    /// (grammar mismatch, out-of-range id, special token, or the matcher has terminated).
    pub fn accept_token(&mut self, token: u32) -> Result<bool> {
        if self.stopped {
            return Ok(false);
        }
        let vocab = self.compiled.vocab().clone();
        if token as usize >= vocab.vocab_size() {
            return Ok(false);
        }
        if self.stop_tokens.contains(&token) {
            if self.terminate_without_stop_token || !self.is_completed() {
                return Ok(false);
            }
            self.history.push(Step { rows_before: self.chart.num_rows() as u32, stop: true });
            self.stopped = true;
            return Ok(true);
        }
        if vocab.is_special(token) {
            return Ok(false);
        }
        self.accept_bytes(vocab.token_bytes(token))
    }

    /// Accepts a byte string as one rollback step; all or nothing.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> Result<bool> {
        if self.stopped {
            return Ok(false);
        }
        let rows = self.chart.num_rows();
        let a = self.compiled.automata();
        for &b in bytes {
            match self.chart.push_byte(a, b) {
                Ok(true) => {}
                Ok(false) => {
                    self.chart.truncate_rows(rows);
                    return Ok(false);
                }
                Err(e) => {
                    self.chart.truncate_rows(rows);
                    return Err(e);
                }
            }
        }
        self.history.push(Step { rows_before: rows as u32, stop: false });
        Ok(true)
    }

    /// Computes the allowed tokens into the internal mask and returns it.
    pub fn compute_mask(&mut self) -> Result<&Bitset> {
        if self.stopped {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the matcher has terminated; call reset() or rollback() before filling another mask",
            ));
        }
        let compiled = self.compiled.clone();
        let sig = self.chart.last_signature();
        if let Some(m) = compiled.memoized_mask(sig) {
            self.mask.copy_from(&m);
        } else {
            let a = compiled.automata();
            let mut get = |s: StateId| compiled.kernel(s);
            fill_mask(a, &mut self.chart, &compiled.index.trie, &mut self.mask, &mut get)?;
            compiled.memoize_mask(sig, &self.mask);
        }
        if self.is_completed() {
            for &t in &self.stop_tokens {
                self.mask.set(t as usize);
            }
        }
        // Token budget: keep only tokens that leave room to finish (see `crate::budget`).
        if let Some(b) = &mut self.budget {
            b.restrict(compiled.automata(), &compiled.index.trie, &mut self.chart, self.history.len(), &mut self.mask, &self.stop_tokens)?;
        }
        Ok(&self.mask)
    }

    /// The mask computed by the last [`Matcher::compute_mask`].
    pub fn last_mask(&self) -> &Bitset {
        &self.mask
    }

    /// Writes the mask into one bitmask row of `words` 32-bit words (bits past the vocabulary are
    /// cleared). Returns true unless every token is allowed.
    pub fn fill_next_token_bitmask(&mut self, row: &mut [u32]) -> Result<bool> {
        let n = self.compiled.vocab().vocab_size().div_ceil(32);
        if row.len() < n {
            return Err(Error::invalid_argument(format!(
                "bitmask row has {} int32 words but the vocabulary of size {} needs {n}",
                row.len(),
                self.compiled.vocab().vocab_size()
            )));
        }
        let mask = self.compute_mask()?;
        row[..n].copy_from_slice(mask.words());
        row[n..].fill(0);
        Ok(!mask.is_full())
    }

    /// Undoes the last `n` accepted tokens or strings.
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.history.len() {
            return Err(Error::invalid_argument(format!(
                "cannot roll back {n} steps: only {} have been accepted",
                self.history.len()
            )));
        }
        for _ in 0..n {
            let s = self.history.pop().unwrap();
            if s.stop {
                self.stopped = false;
            }
            self.chart.truncate_rows(s.rows_before as usize);
        }
        Ok(())
    }

    pub fn num_accepted(&self) -> usize {
        self.history.len()
    }

    pub fn reset(&mut self) {
        self.chart.truncate_rows(1);
        self.history.clear();
        self.stopped = false;
    }

    /// The longest byte string the grammar forces next (stops where there is a choice or the
    /// grammar may end), cut back to whole UTF-8 characters. Does not change the state.
    pub fn find_jump_forward_bytes(&mut self) -> Result<Vec<u8>> {
        if self.stopped {
            return Err(Error::invalid_argument("the matcher has terminated"));
        }
        let a = self.compiled.automata();
        let rows = self.chart.num_rows();
        let mut out = Vec::new();
        loop {
            if self.chart.is_complete(a) {
                break;
            }
            let mut only: Option<u8> = None;
            let mut unique = true;
            'items: for it in self.chart.last_row() {
                for e in a.byte_edges(it.state) {
                    if e.lo != e.hi || only.is_some_and(|b| b != e.lo) {
                        unique = false;
                        break 'items;
                    }
                    only = Some(e.lo);
                }
            }
            match (unique, only) {
                (true, Some(b)) if self.chart.push_byte(a, b)? => out.push(b),
                _ => break,
            }
        }
        self.chart.truncate_rows(rows);
        let valid = match std::str::from_utf8(&out) {
            Ok(_) => out.len(),
            Err(e) => e.valid_up_to(),
        };
        out.truncate(valid);
        Ok(out)
    }
}
