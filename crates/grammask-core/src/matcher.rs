//! Per-sequence matchers.
//!
//! Pipeline place: the last stage. A [`Matcher`] is made from a shared
//! [`CompiledGrammar`] and owns one Earley chart
//! ([`crate::earley::Chart`]) and the history needed to roll back: accepting a token appends one
//! row per byte, rollback truncates. Masks come from [`crate::mask`] through the compiled
//! grammar's caches.
use crate::bitset::Bitset;
use crate::earley::Chart;
use crate::error::{Error, ErrorKind, Result};
use crate::limits;
use crate::token_set::TokenSet;
use std::sync::Arc;

/// Moved to [`crate::compiled`] and [`crate::token_index`]; re-exported at their old paths.
pub use crate::compiled::CompiledGrammar;
pub use crate::token_index::TokenIndex;

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
    /// A token accepted with `accept_token` (counted by `max_tokens` rule budgets), not a string.
    token: bool,
    /// A token read by token edges (`crate::token_edges`): its id, and whether its bytes were
    /// read too (else its row holds the edges' completions alone).
    edge: Option<(u32, bool)>,
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
    /// The accepted bytes, kept only when the grammar captures rules (for [`Matcher::captures`]).
    input: Option<Vec<u8>>,
    /// The chart row each token accepted with `accept_token` ended at, in order; kept only when
    /// the grammar has `max_tokens` rules (see [`Matcher::spend_rule_budgets`]).
    token_ends: Vec<u32>,
    /// Predicted nanoseconds of this matcher's next batch fill that misses the mask memo (0: no
    /// miss yet): a decaying maximum of past misses, kept by [`crate::batch`].
    pub(crate) miss_ns: u32,
    /// Recursive `max_tokens` budgets: the last row as it was before a string reopened it, put
    /// back when the string fails (buffer reused).
    saved_row: crate::earley::SavedRow,
}

/// One look-up of the mask memo for a matcher's parser state ([`Matcher::memo_lookup`]): the
/// state's signature and the memoized mask, if any, at the time of the look-up.
#[derive(Clone)]
pub struct MemoLookup {
    sig: u128,
    hit: Option<Arc<TokenSet>>,
}

impl MemoLookup {
    /// Whether the mask was memoized when looked up.
    pub fn is_hit(&self) -> bool {
        self.hit.is_some()
    }
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
            Some(_) if compiled.automata().rec_budgets().is_some() => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    "GrammarMatcher(max_tokens=...) with max_tokens on a recursive rule, or on a rule using another \
                     max_tokens rule, is not supported",
                ));
            }
            Some(_) if compiled.automata().char_budgets().is_some() => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    "GrammarMatcher(max_tokens=...) with max_chars on a recursive rule, or with max_chars or lazy \
                     on a rule using a max_tokens rule, is not supported",
                ));
            }
            Some(n) => Some(crate::budget::Budget::new(compiled.automata(), compiled.completion(), &chart, 0, n)?),
            None => None,
        };
        let captures =
            compiled.grammar().all_rule_options().iter().any(|(_, o)| o.capture.is_some() || o.stop_capture.is_some());
        // Recursive rule budgets rebuild the last row from its last byte.
        let keep_input = captures || compiled.automata().rec_budgets().is_some();
        Ok(Matcher {
            budget,
            input: keep_input.then(Vec::new),
            mask: Bitset::new(vocab.vocab_size()),
            compiled,
            chart,
            history: Vec::new(),
            stop_tokens,
            terminate_without_stop_token: options.terminate_without_stop_token,
            stopped: false,
            token_ends: Vec::new(),
            miss_ns: 0,
            saved_row: crate::earley::SavedRow::default(),
        })
    }

    pub fn chart(&self) -> &Chart {
        &self.chart
    }

    /// Tests: cost every token in budgeted masks, not only those a limit walk cannot place
    /// (see `crate::budget::Budget::restrict`).
    #[doc(hidden)]
    pub fn set_exact_budget_walks(&mut self, on: bool) {
        if let Some(b) = &mut self.budget {
            b.set_exact_walks(on);
        }
    }

    /// Tests: the most tokens a budget's fit walk lists before it gives way to an over walk
    /// (see `crate::budget::FIT_LIST_CAP`; 0: over walks only).
    #[doc(hidden)]
    pub fn set_budget_fit_list_cap(&mut self, cap: usize) {
        if let Some(b) = &mut self.budget {
            b.set_fit_list_cap(cap);
        }
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
    /// Errors: `LimitExceeded` past the Earley work of one call ([`limits::MAX_FILL_WORK`]).
    pub fn accept_token(&mut self, token: u32) -> Result<bool> {
        crate::earley::with_work_budget(limits::MAX_FILL_WORK, || self.accept_token_unbudgeted(token))
    }

    fn accept_token_unbudgeted(&mut self, token: u32) -> Result<bool> {
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
            self.history.push(Step { rows_before: self.chart.num_rows() as u32, stop: true, token: false, edge: None });
            self.stopped = true;
            return Ok(true);
        }
        let special = vocab.is_special(token);
        let a = self.compiled.automata();
        if a.has_token_edges() {
            // A token some token edge of the last row allows: one step both ways.
            let bytes = vocab.token_bytes(token);
            let done =
                crate::token_edges::token_completions(a, &mut self.chart, self.compiled.token_masks(), token, bytes);
            if !done.is_empty() {
                let rows = self.chart.num_rows();
                let text = match crate::token_edges::push_token(a, &mut self.chart, bytes, !special, &done) {
                    Ok(text) => text,
                    Err(e) => {
                        self.chart.truncate_rows(rows);
                        return Err(e);
                    }
                };
                self.history.push(Step {
                    rows_before: rows as u32,
                    stop: false,
                    token: true,
                    edge: Some((token, text)),
                });
                // One input byte per row (a row of completions alone: a stand-in byte).
                if let Some(input) = &mut self.input {
                    input.extend_from_slice(if text { bytes } else { &[0] });
                }
                return self.spend_or_undo(true);
            }
        }
        if special {
            return Ok(false);
        }
        self.accept_step(vocab.token_bytes(token), true)
    }

    /// Accepts a byte string as one rollback step; all or nothing. A string is not a token:
    /// `max_tokens` rule budgets do not count it.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> Result<bool> {
        let blocks = bytes.len().div_ceil(limits::FILL_WORK_INPUT_BYTES).max(1);
        crate::earley::with_work_budget(limits::MAX_FILL_WORK.saturating_mul(blocks), || self.accept_step(bytes, false))
    }

    /// After a step: with `token`, counts a token ended at the last row; then moves the
    /// occurrences of `max_tokens` rules whose budget is spent to their exhausted states.
    /// Invariant: the last row is always spent this way (older rows may have been reopened by a
    /// string read after them, so rollback spends the row it returns to again).
    ///
    /// Rule: an occurrence started at row `o` has used `K - first(o)` tokens when the token after
    /// the `K` accepted ones is read, `first(o)` being the number of tokens that ended at or
    /// before row `o` (a token read across `o` is its first). Once that reaches its rule's
    /// `max_tokens`, it may only read bytes along a shortest way to its end. The count only
    /// changes between tokens, so the last row, fixed here, holds all of it: masks, memoized by
    /// the row's signature, are right without more.
    ///
    /// With a recursive `max_tokens` rule, items carry spend points instead
    /// ([`crate::earley::Item`]): the last row is built again at the new token count.
    fn spend_rule_budgets(&mut self, token: bool) -> Result<()> {
        let a = self.compiled.automata();
        if a.budgets().is_empty() && a.rec_budgets().is_none() {
            return Ok(());
        }
        if token {
            self.token_ends.push(self.chart.last_row_index() as u32);
        }
        if a.rec_budgets().is_some() {
            return self.rebuild_rec_row(false);
        }
        let ends = &self.token_ends;
        let k = ends.len();
        let spent = self.chart.exhaust_last_row(|it| {
            let (n, twin) = a.token_budget(it.state)?;
            let first = ends.partition_point(|&e| e <= it.origin);
            (k - first >= n as usize).then_some(twin)
        });
        // A twin keeps only the token edges (`Token(...)` inside the rule) on its shortest ways.
        if spent && a.has_token_edges() {
            self.chart.drop_unwaited_token_items(a);
        }
        Ok(())
    }

    /// Moves the last row's exhausted items back to their open states: a string is read as if
    /// no budget were spent (`accept_string` ignores `max_tokens`, as in XGrammar).
    fn reopen_rule_budgets(&mut self) -> Result<()> {
        let a = self.compiled.automata();
        if a.rec_budgets().is_some() {
            return self.rebuild_rec_row(true);
        }
        if !a.budgets().is_empty() {
            self.chart.exhaust_last_row(|it| a.budgets().exhausted(a.state(it.state).rule, it.state));
        }
        Ok(())
    }

    /// Recursive `max_tokens` budgets: builds the last row again at the tokens accepted so far
    /// (`free`: a string is being read), from its last byte, or, when a token edge's step made it,
    /// from that token's completions over the row before the token.
    fn rebuild_rec_row(&mut self, free: bool) -> Result<()> {
        let compiled = self.compiled.clone();
        let a = compiled.automata();
        let clock = self.token_ends.len() as u32;
        let rows = self.chart.num_rows() as u32;
        // The step that made the last row: the latest one that added rows.
        let edge =
            self.history.iter().rev().find(|s| s.rows_before < rows).and_then(|s| Some((s.rows_before, s.edge?)));
        if let Some((before, (id, text))) = edge {
            let bytes = compiled.vocab().token_bytes(id);
            let masks = compiled.token_masks();
            return self.chart.set_clock_with(clock, free, |c| {
                let done = crate::token_edges::token_completions_at(a, c, masks, id, bytes, before as usize - 1);
                match bytes.last() {
                    Some(&b) if text => c.push_byte_with(a, b, &done),
                    // A row of completions alone counts the token's characters, as `push_token`'s.
                    _ => c.push_items_reading(a, &done, crate::token_edges::characters(bytes)),
                }
            });
        }
        let last = self.input.as_ref().and_then(|i| i.last().copied());
        self.chart.set_clock(a, clock, free, last)
    }

    fn accept_step(&mut self, bytes: &[u8], token: bool) -> Result<bool> {
        if self.stopped {
            return Ok(false);
        }
        let rows = self.chart.num_rows();
        if !token {
            if self.compiled.automata().rec_budgets().is_some() {
                self.chart.save_last_row(&mut self.saved_row);
            }
            // A failed reopening leaves the row as it was (`Chart::set_clock_with`).
            self.reopen_rule_budgets()?;
        }
        let a = self.compiled.automata();
        for &b in bytes {
            let failed = match self.chart.push_byte(a, b) {
                Ok(true) => continue,
                Ok(false) => Ok(false),
                Err(e) => Err(e),
            };
            self.undo_rows(rows, token);
            return failed;
        }
        self.history.push(Step { rows_before: rows as u32, stop: false, token, edge: None });
        if let Some(input) = &mut self.input {
            input.extend_from_slice(bytes);
        }
        self.spend_or_undo(token)
    }

    /// Spends the rule budgets after the step just pushed on `history`; when that fails (a
    /// recursive budget's row rebuilt past the work budget), undoes the step: an accept that
    /// returns an error leaves the matcher as it was.
    fn spend_or_undo(&mut self, token: bool) -> Result<bool> {
        let Err(e) = self.spend_rule_budgets(token) else { return Ok(true) };
        // `spend_rule_budgets` fails only after counting the token.
        if token {
            self.token_ends.pop();
        }
        let step = self.history.pop().expect("the step just pushed");
        self.undo_rows(step.rows_before as usize, token);
        if let Some(input) = &mut self.input {
            input.truncate(self.chart.num_rows() - 1);
        }
        Err(e)
    }

    /// Drops the rows a failed step added (`rows` remain). A token leaves the row before it as
    /// it was; a string reopened it, so its spent form returns: the saved copy with recursive
    /// budgets (spending again could fail, the work budget being spent), else spent again (in
    /// place; cannot fail).
    fn undo_rows(&mut self, rows: usize, token: bool) {
        self.chart.truncate_rows(rows);
        if token {
            return;
        }
        if self.compiled.automata().rec_budgets().is_some() {
            self.chart.restore_last_row(&self.saved_row);
        } else {
            let spent = self.spend_rule_budgets(false);
            debug_assert!(spent.is_ok(), "spending without recursive budgets builds no row");
        }
    }

    /// Computes the allowed tokens into the internal mask and returns it.
    pub fn compute_mask(&mut self) -> Result<&Bitset> {
        let lookup = self.memo_lookup();
        self.fill_budgeted(|m| m.compute_mask_with(lookup).map(drop))?;
        Ok(&self.mask)
    }

    /// Runs one fill (or look-ahead) under the Earley work budget ([`limits::MAX_FILL_WORK`]);
    /// on an error, removes the rows its walks left on the chart, so the matcher is unchanged.
    fn fill_budgeted<R>(&mut self, f: impl FnOnce(&mut Matcher) -> Result<R>) -> Result<R> {
        let rows = self.chart.num_rows();
        let r = crate::earley::with_work_budget(limits::MAX_FILL_WORK, || f(self));
        if r.is_err() && self.chart.num_rows() > rows {
            self.chart.truncate_rows(rows);
        }
        r
    }

    /// The mask memo looked up for the current parser state. A fill takes one and passes it
    /// down (memoized copy, then computation), so each fill looks the memo up once.
    pub fn memo_lookup(&self) -> MemoLookup {
        let sig = self.chart.last_signature();
        MemoLookup { sig, hit: self.compiled.memoized_mask(sig) }
    }

    /// `lookup` if it was taken in the current parser state, else a fresh one: a stale lookup
    /// never supplies another state's mask (a stale miss only costs a recomputation).
    fn current(&self, lookup: MemoLookup) -> MemoLookup {
        if lookup.sig == self.chart.last_signature() {
            lookup
        } else {
            self.memo_lookup()
        }
    }

    /// [`Matcher::compute_mask`] with the memo looked up in the current state.
    fn compute_mask_with(&mut self, lookup: MemoLookup) -> Result<&Bitset> {
        if self.stopped {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the matcher has terminated; call reset() or rollback() before filling another mask",
            ));
        }
        let compiled = self.compiled.clone();
        debug_assert_eq!(lookup.sig, self.chart.last_signature());
        let MemoLookup { sig, hit } = lookup;
        match hit {
            Some(m) => m.write_into(self.mask.words_mut()),
            None => compiled.compute_text_mask(&mut self.chart, &mut self.mask, sig)?,
        }
        // Token edges (`crate::token_edges`): the text mask above never holds their tokens.
        let text_mask = if compiled.automata().has_token_edges() {
            let text = self.budget.is_some().then(|| self.mask.clone());
            compiled.token_masks().or_into(compiled.automata(), &self.chart, compiled.vocab(), &mut self.mask);
            text
        } else {
            None
        };
        if self.is_completed() {
            set_tokens(self.mask.words_mut(), &self.stop_tokens);
        }
        // Token budget: keep only tokens that leave room to finish (see `crate::budget`).
        if let Some(b) = &mut self.budget {
            b.restrict(
                compiled.automata(),
                compiled.trie(),
                &mut self.chart,
                self.history.len(),
                &mut self.mask,
                &self.stop_tokens,
            )?;
            if let Some(text) = text_mask {
                self.restrict_token_edges(&text);
            }
        }
        Ok(&self.mask)
    }

    /// The token budget for token edges: `restrict` priced tokens by their text parse only, so a
    /// token a token edge reads is allowed again when the completion after that edge fits, and
    /// a token only token edges read is removed when none of them fits. `text` is the mask
    /// before token edges were added.
    fn restrict_token_edges(&mut self, text: &Bitset) {
        let (Some(b), compiled) = (&mut self.budget, &self.compiled) else { return };
        let a = compiled.automata();
        let limit = b.next_token_limit(self.history.len());
        let mut fits: Vec<u32> = Vec::new();
        let mut over: Vec<u32> = Vec::new();
        for it in self.chart.last_row() {
            if let Some(k) = a.tokens().set_of(a, it.state) {
                let c = b.cost_after_rule(a, &self.chart, a.state(it.state).rule);
                if limit.is_some_and(|l| c <= l) {
                    fits.push(k);
                } else {
                    over.push(k);
                }
            }
        }
        let masks = compiled.token_masks();
        for &k in &over {
            for t in masks.mask(k).iter_ones() {
                if !text.get(t) && !fits.iter().any(|&f| masks.mask(f).get(t)) {
                    self.mask.unset(t);
                }
            }
        }
        for &k in &fits {
            self.mask.or_assign(masks.mask(k));
        }
    }

    /// The mask computed by the last [`Matcher::compute_mask`] (not updated by
    /// [`Matcher::fill_next_token_bitmask`], which may copy a memoized mask straight into its row).
    pub fn last_mask(&self) -> &Bitset {
        &self.mask
    }

    /// Writes the mask into one bitmask row of `words` 32-bit words (bits past the vocabulary are
    /// cleared). Returns true unless every token is allowed. Errors: `LimitExceeded` past the
    /// Earley work of one fill ([`limits::MAX_FILL_WORK`]), the matcher unchanged.
    pub fn fill_next_token_bitmask(&mut self, row: &mut [u32]) -> Result<bool> {
        let lookup = self.memo_lookup();
        self.fill_budgeted(|m| m.fill_current(row, lookup))
    }

    /// [`Matcher::fill_next_token_bitmask`] with the memo already looked up (by
    /// [`Matcher::memo_lookup`]; one taken in another state is looked up again).
    pub fn fill_next_token_bitmask_with(&mut self, row: &mut [u32], lookup: MemoLookup) -> Result<bool> {
        let lookup = self.current(lookup);
        self.fill_budgeted(|m| m.fill_current(row, lookup))
    }

    /// [`Matcher::fill_next_token_bitmask`] with a look-up taken in the current state.
    fn fill_current(&mut self, row: &mut [u32], lookup: MemoLookup) -> Result<bool> {
        let n = self.compiled.vocab().vocab_size().div_ceil(32);
        if row.len() < n {
            return Err(Error::invalid_argument(format!(
                "bitmask row has {} int32 words but the vocabulary of size {} needs {n}",
                row.len(),
                self.compiled.vocab().vocab_size()
            )));
        }
        if let Some(not_full) = self.fill_from_lookup(row, &lookup) {
            return Ok(not_full);
        }
        if let Some(not_full) = self.fill_miss_into_row(row, &lookup)? {
            return Ok(not_full);
        }
        let mask = self.compute_mask_with(lookup)?;
        row[..n].copy_from_slice(mask.words());
        row[n..].fill(0);
        Ok(!mask.is_full())
    }

    /// [`Matcher::fill_next_token_bitmask`] when the chart state's mask is memoized and nothing
    /// but stop tokens is added to it (no token edges; a token budget, if any, leaves it as it
    /// is: `crate::budget::Budget::leaves_mask`): the memoized mask is
    /// copied straight into `row`, the stop tokens set there, and whether the row leaves some
    /// token out is returned. `None` (nothing written) otherwise, or when `row` is too short or
    /// the matcher has terminated. [`Matcher::last_mask`] is left as it was.
    ///
    /// PERF: a memoized mask was copied twice (into the matcher's own mask, then into the row),
    /// ~4,008 words each on Llama 3; this path also lets a binding fill without releasing the GIL.
    pub fn fill_memoized(&mut self, row: &mut [u32]) -> Option<bool> {
        let lookup = self.memo_lookup();
        self.fill_from_lookup(row, &lookup)
    }

    /// [`Matcher::fill_memoized`] with the memo already looked up (`None` when `lookup` was
    /// taken in another state).
    pub fn fill_memoized_with(&mut self, row: &mut [u32], lookup: &MemoLookup) -> Option<bool> {
        if lookup.sig != self.chart.last_signature() {
            return None;
        }
        self.fill_from_lookup(row, lookup)
    }

    /// [`Matcher::fill_memoized`] with a look-up taken in the current state.
    fn fill_from_lookup(&mut self, row: &mut [u32], lookup: &MemoLookup) -> Option<bool> {
        if self.stopped || self.compiled.automata().has_token_edges() {
            return None;
        }
        let vocab_size = self.compiled.vocab().vocab_size();
        let n = vocab_size.div_ceil(32);
        if row.len() < n {
            return None;
        }
        let m = lookup.hit.as_ref()?;
        // Last: `leaves_mask` takes the budget memo's lock, so only a budgeted hit pays for it.
        if self.budget.as_ref().is_some_and(|b| !b.leaves_mask(lookup.sig, self.history.len())) {
            return None;
        }
        m.write_into(&mut row[..n]);
        row[n..].fill(0);
        if !self.is_completed() {
            return Some(!m.is_full());
        }
        set_tokens(row, &self.stop_tokens);
        Some(!crate::bitset::words_full(&row[..n], vocab_size))
    }

    /// [`Matcher::fill_next_token_bitmask`] on a memo miss when nothing but stop tokens is added
    /// to the text mask (no token edges, no token budget): the mask is computed straight into
    /// `row` and memoized from it ([`CompiledGrammar::compute_text_mask_into`]). `None` (nothing
    /// written) otherwise; [`Matcher::last_mask`] is left as it was.
    fn fill_miss_into_row(&mut self, row: &mut [u32], lookup: &MemoLookup) -> Result<Option<bool>> {
        let compiled = &self.compiled;
        if self.stopped || self.budget.is_some() || compiled.automata().has_token_edges() || lookup.hit.is_some() {
            return Ok(None);
        }
        let vocab_size = compiled.vocab().vocab_size();
        let n = vocab_size.div_ceil(32);
        if !compiled.compute_text_mask_into(&mut self.chart, &mut row[..n], lookup.sig)? {
            return Ok(None);
        }
        row[n..].fill(0);
        if self.is_completed() {
            set_tokens(row, &self.stop_tokens);
        }
        Ok(Some(!crate::bitset::words_full(&row[..n], vocab_size)))
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
            if s.token && !self.token_ends.is_empty() {
                self.token_ends.pop();
            }
            self.chart.truncate_rows(s.rows_before as usize);
        }
        if let Some(input) = &mut self.input {
            input.truncate(self.chart.num_rows() - 1);
        }
        // The row rolled back to may have been reopened by a string read after it.
        self.spend_rule_budgets(false)?;
        if let Some(b) = &mut self.budget {
            b.rolled_back(self.chart.num_rows());
        }
        Ok(())
    }

    pub fn num_accepted(&self) -> usize {
        self.history.len()
    }

    pub fn reset(&mut self) {
        self.chart.truncate_rows(1);
        self.token_ends.clear();
        if let Some(input) = &mut self.input {
            input.clear();
        }
        // Row 0 is never built again: this cannot fail.
        let _ = self.spend_rule_budgets(false);
        if let Some(b) = &mut self.budget {
            b.rolled_back(1);
        }
        self.history.clear();
        self.stopped = false;
        if let Some(input) = &mut self.input {
            input.clear();
        }
    }

    /// The captured rule occurrences in the accepted text, as (capture name, bytes; the text of a
    /// Lark `stop=` left out of the captures around it), ordered by
    /// end (nested occurrences first); with `deduplicate`, only the longest occurrence per rule
    /// and start (see [`crate::captures`]). Empty when the grammar captures nothing.
    pub fn captures(&self, deduplicate: bool) -> Vec<(String, Vec<u8>)> {
        let Some(input) = &self.input else { return Vec::new() };
        let info = crate::captures::capture_info(self.compiled.grammar());
        crate::captures::captures(self.compiled.automata(), &self.chart, input, &info, deduplicate)
    }

    /// The temperature of the innermost active rule with one (the maximum over ambiguous paths),
    /// and whether the paths disagreed; `None` when no active rule has one (see
    /// [`crate::captures`]).
    pub fn rule_temperature(&self) -> (Option<f32>, bool) {
        let temps = crate::captures::temperatures(self.compiled.grammar());
        let found = crate::captures::active_temperatures(self.compiled.automata(), &self.chart, &temps);
        (found.last().map(|&b| f32::from_bits(b)), found.len() > 1)
    }

    /// The longest byte string the grammar forces next (stops where there is a choice or the
    /// grammar may end), cut back to whole UTF-8 characters. Does not change the state.
    pub fn find_jump_forward_bytes(&mut self) -> Result<Vec<u8>> {
        self.fill_budgeted(Matcher::jump_forward_bytes)
    }

    fn jump_forward_bytes(&mut self) -> Result<Vec<u8>> {
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
                if a.tokens().set_of(a, it.state).is_some() {
                    // A token edge: the next token need not be text.
                    unique = false;
                    break 'items;
                }
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

/// Sets the bits of `tokens` in a mask's 32-bit `words` (the stop tokens a completed matcher
/// allows, in every fill path). Every token is below the vocabulary size (checked by
/// `Vocabulary::new` and [`Matcher::new`]), so no bit past the mask's last token is set.
fn set_tokens(words: &mut [u32], tokens: &[u32]) {
    for &t in tokens {
        words[t as usize / 32] |= 1 << (t % 32);
    }
}
