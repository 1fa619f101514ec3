//! Thompson NFA construction of one rule body.
//!
//! Pipeline place: takes a rule's expression (with the inline plan of `inline.rs`) and produces
//! an [`Nfa`] with epsilon, byte-range and rule-reference edges, the input of subset
//! construction (`determinize.rs`). Character classes become UTF-8 byte-range sequences
//! ([`super::utf8::utf8_byte_seqs`]), `{m,n}` an unrolled chain whose every copy may exit.
use super::determinize::{determinize, Scratch};
use super::dfa::Dfa;
use super::inline::INLINE_MAX_DEPTH;
use super::memo::{DfaMemo, RuleMemo};
use super::minimize::minimize;
use super::scc::SccScratch;
use super::utf8::{utf8_byte_seqs, ByteSeq};
use crate::error::ErrorKind;
use crate::error::{Error, Result};
use crate::fasthash::FastMap;
use crate::grammar::{Expr, ExprId, Grammar, RuleId};
use crate::limits;

/// The UTF-8 byte-range sequences of a character class (see [`utf8_byte_seqs`]).
type Utf8Seqs = std::rc::Rc<[ByteSeq]>;

/// Ranks of rules by first use in a list of rule edges (the order the edges were added): the
/// rule of the first edge gets 0, the next rule not seen before 1, and so on. The ranks are a
/// function of an NFA's structure alone, not of its rules' ids: two NFAs that differ only by a
/// renaming of their rules rank the rules at corresponding edges alike.
/// PERF: a stamped table indexed by rule (no sort), reused across rules.
#[derive(Default)]
pub(super) struct RankTable {
    /// Per rule id: (stamp when ranked, rank).
    at: Vec<(u32, u32)>,
    stamp: u32,
}

impl RankTable {
    /// Forgets every rank.
    pub(super) fn start(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.at.fill((0, 0));
            self.stamp = 1;
        }
    }

    /// Gives `r` rank `k` unless it has one: whether it was new.
    pub(super) fn rank_new(&mut self, r: RuleId, k: u32) -> bool {
        let i = r.index();
        if i >= self.at.len() {
            self.at.resize(i + 1, (0, 0));
        }
        if self.at[i].0 == self.stamp {
            return false;
        }
        self.at[i] = (self.stamp, k);
        true
    }

    /// The rank of `r` (ranked since the last [`Self::start`]).
    pub(super) fn rank(&self, r: RuleId) -> u32 {
        debug_assert_eq!(self.at[r.index()].0, self.stamp, "an unranked rule");
        self.at[r.index()].1
    }
}

/// A Thompson NFA: edges are appended to flat lists while building, then [`Nfa::freeze`] groups
/// them by source state (compressed rows).
/// PERF: one allocation per list instead of three vectors per state; the buffers and the UTF-8
/// sequences of character classes are reused across the rules of a grammar.
#[derive(Default)]
pub(super) struct Nfa<'a> {
    pub(super) n: u32,
    pub(super) eps_edges: Vec<(u32, u32)>,
    pub(super) byte_edges: Vec<(u32, (u8, u8, u32))>,
    pub(super) rule_edges: Vec<(u32, (RuleId, u32))>,
    /// Frozen rows: the edges of state `s` are `x[x_start[s]..x_start[s + 1]]`.
    pub(super) eps_start: Vec<u32>,
    pub(super) eps: Vec<u32>,
    pub(super) bytes_start: Vec<u32>,
    pub(super) bytes: Vec<(u8, u8, u32)>,
    pub(super) rules_start: Vec<u32>,
    pub(super) rules: Vec<(RuleId, u32)>,
    /// Frozen: the first-use rank ([`RankTable`]) of each edge's rule in `rules`.
    pub(super) rule_ranks: Vec<u32>,
    /// Frozen: the first-use rank of each referenced rule.
    pub(super) ranks: RankTable,
    /// UTF-8 byte sequences of the character classes seen so far.
    pub(super) classes: FastMap<ExprId, Utf8Seqs>,
    pub(super) inline: &'a [bool],
    /// The representative of each rule's class of equal rules (`equal_rules.rs`), which rule
    /// edges name (empty: every rule its own).
    pub(super) rep: &'a [RuleId],
    /// Inline every rule (lookahead automata), refusing recursion.
    pub(super) inline_all: bool,
    /// Rules being inlined in `inline_all` mode, innermost last.
    pub(super) inlining: Vec<RuleId>,
    /// In `inline_all` mode for a `lazy` or `max_chars` rule: the error kind and the name of the
    /// option, for the error on recursion (`None`: a lookahead assertion).
    pub(super) regular_for: Option<(ErrorKind, String)>,
    /// In `inline_all` mode for a `lazy`, `max_chars` or `max_tokens` rule: references to token
    /// rules (`Token(...)`) stay rule edges, token edges of the rule's automaton.
    pub(super) keep_token_rules: bool,
    /// The tail group of each rule (`tail.rs`; empty: no merging).
    pub(super) tail_group: &'a [u32],
    /// While building a member of a tail group: that group.
    pub(super) building_group: Option<u32>,
    /// The group members built into this automaton: (rule, fragment start, fragment end).
    pub(super) tail_frags: Vec<(RuleId, u32, u32)>,
    /// Per rule: an inlined rule whose class of equal rules is used in several places, copied
    /// into its callers as its minimized automaton (empty: none).
    pub(super) splice: &'a [bool],
    /// The minimized automaton of each inlined rule (by its class of equal rules), built once
    /// and copied into every automaton that inlines the rule ([`Nfa::splice_inlined`]).
    pub(super) spliced: FastMap<RuleId, std::rc::Rc<Dfa>>,
    /// Buffers for building the automata of `spliced`, and for their [`RuleMemo`] keys.
    pub(super) splice_scratch: Option<Box<(Scratch, SccScratch, DfaMemo)>>,
    /// The NFA of the last spliced rule built, kept for its buffers: the next one reuses its
    /// edge lists and rank table instead of growing fresh ones.
    /// PERF: a fresh rank table zeroed an entry per rule of the grammar at each spliced rule's
    /// `freeze` (~25 k instructions a splice on the four key-set schemas of session 45).
    pub(super) spare: Option<Box<Nfa<'a>>>,
    /// The automata of rules built by earlier compiles of the vocabulary, asked for those of
    /// `spliced` (`None`: built here).
    pub(super) shared: Option<&'a RuleMemo>,
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

    pub(super) fn len(&self) -> usize {
        self.n as usize
    }

    /// Starts a new automaton (keeps the buffers and the class cache).
    pub(super) fn clear(&mut self) {
        self.n = 0;
        self.eps_edges.clear();
        self.byte_edges.clear();
        self.rule_edges.clear();
    }

    /// Groups the edges by source state (stable: each state keeps its edges' order).
    pub(super) fn freeze(&mut self) {
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
        self.ranks.start();
        let mut k = 0;
        for &(_, (r, _)) in &self.rule_edges {
            k += u32::from(self.ranks.rank_new(r, k));
        }
        let ranks = &self.ranks;
        self.rule_ranks.clear();
        self.rule_ranks.extend(self.rules.iter().map(|&(r, _)| ranks.rank(r)));
    }

    /// The first-use ranks of the rules of state `s`'s rule edges (frozen), edge for edge.
    pub(super) fn rule_ranks_of(&self, s: u32) -> &[u32] {
        &self.rule_ranks[self.rules_start[s as usize] as usize..self.rules_start[s as usize + 1] as usize]
    }

    pub(super) fn eps_of(&self, s: u32) -> &[u32] {
        &self.eps[self.eps_start[s as usize] as usize..self.eps_start[s as usize + 1] as usize]
    }

    pub(super) fn bytes_of(&self, s: u32) -> &[(u8, u8, u32)] {
        &self.bytes[self.bytes_start[s as usize] as usize..self.bytes_start[s as usize + 1] as usize]
    }

    pub(super) fn rules_of(&self, s: u32) -> &[(RuleId, u32)] {
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
            let seqs: Utf8Seqs = utf8_byte_seqs(ranges).into();
            self.classes.insert(e, seqs.clone());
            seqs
        };
        // The state reading each suffix of a sequence to `end`, shared by every sequence with
        // that suffix (each reads exactly its suffix: the language is the same).
        // PERF: unshared, the UTF-8 lead bytes of a class of all non-ASCII characters reached 18
        // states where 7 suffixes exist; an automaton too large to minimize (a counted string's
        // positions, MaskBench sp_334) kept them all.
        let mut tails: Vec<(&[(u8, u8)], u32)> = Vec::new();
        for seq in seqs.iter() {
            let seq = seq.as_slice();
            let mut cur = start;
            for (i, &(lo, hi)) in seq.iter().enumerate() {
                if i + 1 == seq.len() {
                    self.byte_edges.push((cur, (lo, hi, end)));
                    break;
                }
                let rest = &seq[i + 1..];
                if let Some(&(_, q)) = tails.iter().find(|t| t.0 == rest) {
                    self.byte_edges.push((cur, (lo, hi, q)));
                    break;
                }
                let q = self.new_state(budget)?;
                tails.push((rest, q));
                self.byte_edges.push((cur, (lo, hi, q)));
                cur = q;
            }
        }
        Ok((start, end))
    }

    /// Builds rule `r`'s automaton. A member of a tail group (`tail.rs`) takes the bodies of the
    /// members it reaches by tail references as fragments, each once, entered by epsilon edges;
    /// every fragment's end is the rule's end.
    pub(super) fn build_rule(&mut self, g: &Grammar, r: RuleId, budget: &mut usize) -> Result<(u32, u32)> {
        let group = self.tail_group.get(r.index()).copied().filter(|&c| c != super::tail::NO_GROUP);
        let Some(c) = group.filter(|_| !self.inline_all) else {
            return self.build(g, g.rule(r).body, budget);
        };
        self.building_group = Some(c);
        self.tail_frags.clear();
        let built = self.build_fragments(g, r, budget);
        self.building_group = None;
        built
    }

    fn build_fragments(&mut self, g: &Grammar, r: RuleId, budget: &mut usize) -> Result<(u32, u32)> {
        let start = self.tail_fragment(r, budget)?;
        let mut i = 0;
        while let Some(&(x, s, _)) = self.tail_frags.get(i) {
            let (bs, be) = self.build_at(g, g.rule(x).body, budget, true)?;
            self.eps_edges.push((s, bs));
            self.tail_frags[i].2 = be;
            i += 1;
        }
        let end = self.new_state(budget)?;
        for k in 0..self.tail_frags.len() {
            self.eps_edges.push((self.tail_frags[k].2, end));
        }
        Ok((start, end))
    }

    /// The start state of member `r`'s fragment, queued for building on first use.
    fn tail_fragment(&mut self, r: RuleId, budget: &mut usize) -> Result<u32> {
        if let Some(f) = self.tail_frags.iter().find(|f| f.0 == r) {
            return Ok(f.1);
        }
        let s = self.new_state(budget)?;
        self.tail_frags.push((r, s, s));
        Ok(s)
    }

    /// A fragment for the inlined rule `r`: a copy of its minimized automaton (built on first
    /// use, with a budget of its own no larger than what is left), whose final states reach the
    /// fragment's end by epsilon edges. Same language as expanding its body in place.
    /// PERF: a rule inlined into many places (a tool's arguments in the tags' dispatch, string
    /// bodies) is determinized once, and the subset construction of its callers walks DFA
    /// states (one NFA state each) instead of the body's epsilon closures.
    fn splice_inlined(&mut self, g: &Grammar, r: RuleId, budget: &mut usize) -> Result<(u32, u32)> {
        let key = self.rep.get(r.index()).copied().unwrap_or(r);
        let dfa = match self.spliced.get(&key) {
            Some(d) => d.clone(),
            None => {
                // A child never splices, so it keeps the defaults of the other fields.
                let mut child = self.spare.take().map_or_else(Self::default, |c| *c);
                child.clear();
                child.inlining.clear();
                child.inline = self.inline;
                child.rep = self.rep;
                // Expanded in place: a copy within a copy would be determinized once per level.
                child.splice = &[];
                child.classes = std::mem::take(&mut self.classes);
                child.spliced = std::mem::take(&mut self.spliced);
                child.splice_scratch = self.splice_scratch.take();
                let mut own = *budget;
                let built = child.build(g, g.rule(r).body, &mut own);
                let mut sc = child.splice_scratch.take().unwrap_or_default();
                let dfa = match built {
                    Ok((s, e)) => Self::splice_dfa(&mut child, s, e, self.shared, &mut own, &mut sc),
                    Err(e) => Err(e),
                };
                let dfa = dfa.map(std::rc::Rc::new);
                self.classes = std::mem::take(&mut child.classes);
                self.spliced = std::mem::take(&mut child.spliced);
                self.splice_scratch = Some(sc);
                self.spare = Some(Box::new(child));
                let dfa = dfa?;
                self.spliced.insert(key, dfa.clone());
                dfa
            }
        };
        let base = self.n;
        for _ in 0..dfa.len() {
            self.new_state(budget)?;
        }
        let end = self.new_state(budget)?;
        for s in 0..dfa.len() {
            let from = base + s as u32;
            self.byte_edges.extend(dfa.bytes_of(s).iter().map(|e| (from, (e.lo, e.hi, base + e.target))));
            self.rule_edges.extend(dfa.rules_of(s).iter().map(|&(x, t)| (from, (x, base + t))));
            if dfa.finals[s] {
                self.eps_edges.push((from, end));
            }
        }
        Ok((base, end))
    }

    /// The minimized subset construction of `child` (an inlined rule's NFA from `start` to
    /// `end`), taken from `shared` when an earlier compile stored it there (its subset
    /// construction's states charged to `budget` as that construction would, limit error
    /// included), else built and stored there.
    /// PERF: ~11 spliced rules per MaskBench p50 compile were determinized and minimized again
    /// in every compile (2% of its instructions).
    pub(super) fn splice_dfa(
        child: &mut Nfa,
        start: u32,
        end: u32,
        shared: Option<&RuleMemo>,
        budget: &mut usize,
        sc: &mut (Scratch, SccScratch, DfaMemo),
    ) -> Result<Dfa> {
        let keys = &mut sc.2;
        let shared = shared.filter(|_| keys.key_of(child, start, end));
        if let Some((dfa, states)) = shared.and_then(|m| m.get(keys.key())) {
            super::build::take_states(budget, states)?;
            return Ok(keys.unranked(&dfa));
        }
        child.freeze();
        let det = determinize(child, start, end, budget, &mut sc.0)?;
        #[cfg(test)]
        super::build::SPLICE_BUILDS.with(|n| n.set(n.get() + 1));
        let states = det.len();
        let dfa = minimize(det, &mut sc.1);
        if let Some(m) = shared {
            m.insert(keys.key(), &dfa, states, |d| keys.ranked(d));
        }
        Ok(dfa)
    }

    pub(super) fn build(&mut self, g: &Grammar, e: ExprId, budget: &mut usize) -> Result<(u32, u32)> {
        self.build_at(g, e, budget, false)
    }

    /// PERF: sequences and inlined rules reuse their parts' start and end states instead of
    /// adding epsilon glue (fragments only ever gain edges out of their end and into their start).
    /// `tail`: nothing of the rule being built follows `e`.
    fn build_at(&mut self, g: &Grammar, e: ExprId, budget: &mut usize, tail: bool) -> Result<(u32, u32)> {
        match g.expr(e) {
            Expr::Bytes(b) => {
                let start = self.new_state(budget)?;
                let mut cur = start;
                for &byte in b {
                    let next = self.new_state(budget)?;
                    self.byte_edges.push((cur, (byte, byte, next)));
                    cur = next;
                }
                Ok((start, cur))
            }
            Expr::CharClass(ranges) => self.build_class(e, ranges, budget),
            // Token rules get their automaton in `build.rs`; a token expression reaches the NFA
            // only through inlining into a lookahead or a bounded rule, which must read text.
            Expr::Token(_) | Expr::ExcludeToken(_) => {
                let inside = self.regular_for.as_ref().map_or("a lookahead assertion", |(_, what)| what.as_str());
                Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("Token(...)/ExcludeToken(...) inside {inside} is not supported"),
                ))
            }
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
                let (start, mut cur) = self.build_at(g, first, budget, tail && rest.is_empty())?;
                for (i, &x) in rest.iter().enumerate() {
                    let (s, t) = self.build_at(g, x, budget, tail && i + 1 == rest.len())?;
                    self.eps_edges.push((cur, s));
                    cur = t;
                }
                Ok((start, cur))
            }
            Expr::Choice(items) => {
                let start = self.new_state(budget)?;
                let end = self.new_state(budget)?;
                for &x in items {
                    let (s, t) = self.build_at(g, x, budget, tail)?;
                    self.eps_edges.push((start, s));
                    self.eps_edges.push((t, end));
                }
                Ok((start, end))
            }
            // A token rule stays a token edge in a bounded rule's automaton (`token_budget.rs`,
            // `bounded.rs`).
            Expr::RuleRef(r)
                if self.inline_all
                    && self.keep_token_rules
                    && matches!(g.expr(g.rule(*r).body), Expr::Token(_) | Expr::ExcludeToken(_)) =>
            {
                let start = self.new_state(budget)?;
                let end = self.new_state(budget)?;
                let r = self.rep.get(r.index()).copied().unwrap_or(*r);
                self.rule_edges.push((start, (r, end)));
                Ok((start, end))
            }
            Expr::RuleRef(r) if self.inline_all => {
                // Its excludes cut its own automaton, which an inlined copy would not be.
                if g.rule_options(*r).is_some_and(|o| !o.excludes.is_empty()) {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "the rule '{}' with excludes inside a rule that must be regular (lazy, max_chars, \
                             stop, a lookahead)",
                            g.rule(*r).name
                        ),
                    ));
                }
                if self.inlining.contains(r) {
                    if let Some((kind, what)) = &self.regular_for {
                        return Err(Error::new(
                            *kind,
                            format!(
                                "{what} uses the recursive rule '{}'; its body must be terminal-like (regular)",
                                g.rule(*r).name
                            ),
                        ));
                    }
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "a lookahead assertion uses the recursive rule '{}'; lookaheads must be regular",
                            g.rule(*r).name
                        ),
                    ));
                }
                if self.inlining.len() >= INLINE_MAX_DEPTH as usize * 8 {
                    return Err(Error::limit(
                        "rule nesting inside a lookahead assertion",
                        INLINE_MAX_DEPTH as usize * 8,
                    ));
                }
                // A lookahead (`regular_for` unset) reads the bytes ahead, not tokens: a
                // `max_tokens` rule in it is its body (its real occurrences keep their budgets).
                if let (Some((_, inside)), true) =
                    (&self.regular_for, g.rule_options(*r).is_some_and(|o| o.max_tokens.is_some()))
                {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "the rule '{}' with max_tokens is used inside {inside}, whose body is inlined; a token \
                             budget needs an occurrence of its own",
                            g.rule(*r).name
                        ),
                    ));
                }
                self.inlining.push(*r);
                let fragment = self.build(g, g.rule(*r).body, budget)?;
                self.inlining.pop();
                Ok(fragment)
            }
            // Inside a tail group the body is expanded: its tail references join the group.
            Expr::RuleRef(r)
                if self.inline[r.index()]
                    && self.building_group.is_none()
                    && self.splice.get(r.index()).copied().unwrap_or(false) =>
            {
                self.splice_inlined(g, *r, budget)
            }
            Expr::RuleRef(r) if self.inline[r.index()] => self.build_at(g, g.rule(*r).body, budget, tail),
            // A tail reference within the group: into the member's fragment; the returned end is
            // a fresh state nothing enters (the fragment ends at the rule's end).
            Expr::RuleRef(r)
                if tail && self.building_group.is_some_and(|c| self.tail_group.get(r.index()) == Some(&c)) =>
            {
                let s = self.tail_fragment(*r, budget)?;
                Ok((s, self.new_state(budget)?))
            }
            Expr::RuleRef(r) => {
                let start = self.new_state(budget)?;
                let end = self.new_state(budget)?;
                let r = self.rep.get(r.index()).copied().unwrap_or(*r);
                self.rule_edges.push((start, (r, end)));
                Ok((start, end))
            }
            &Expr::Repeat { expr, min, max } => {
                // `x?` and `x{1}` build one copy whose end is the repetition's end.
                let tail = tail && max == Some(1);
                let start = self.new_state(budget)?;
                let mut cur = start;
                for _ in 0..min {
                    let (s, t) = self.build_at(g, expr, budget, tail)?;
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
                            let (s, t) = self.build_at(g, expr, budget, tail)?;
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
