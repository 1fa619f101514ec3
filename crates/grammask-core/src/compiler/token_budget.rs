//! The `max_tokens` rule option on a rule's DFA (see [`crate::rule_options`]).
//!
//! Pipeline place: in [`Automata::build`](super::Automata::build), after a budgeted rule's DFA
//! is built like a `max_chars` one (every rule it uses inlined, so it has byte edges only, and
//! rule edges to the token rules of the `Token(...)` elements inside it). The rule keeps that DFA
//! (its *open* states) and gets an *exhausted* twin: the same states, each keeping only the edges
//! along a shortest path (in bytes, a token edge weighing one) to a final state, and a final
//! state keeping none. At run time an occurrence whose budget is spent has its items moved from
//! open states to their twins ([`crate::matcher`]), so it ends at its earliest valid end.
//!
//! A recursive `max_tokens` rule keeps its rule edges: see [`RecBudgets`].
//!
//! Invariant: exhausted state `i` of a rule is the twin of open state `i`; its edges are a subset
//! of the open state's, with targets renamed to twins, and every path from it reaches a final
//! state in exactly `dist(i)` bytes.
use super::dfa::Dfa;
use super::StateId;
use crate::fasthash::FastMap;
use crate::grammar::RuleId;

/// `dfa` restricted to shortest paths to a final state (see the module doc); state `i` of the
/// result is the twin of state `i` of `dfa`. `dfa`'s rule edges are token edges (`Token(...)`
/// inside the rule; every other rule it uses is inlined): one token, weighed as one byte (a
/// token has at least one), kept like byte edges when on a shortest path.
pub(super) fn exhausted_dfa(dfa: &Dfa) -> Dfa {
    let dist = dist_to_final(dfa);
    let mut out = Dfa::default();
    for s in 0..dfa.len() {
        let first = out.bytes.len();
        if !dfa.finals[s] && dist[s] != u32::MAX {
            let on_way = |t: u32| dist[t as usize].checked_add(1) == Some(dist[s]);
            for e in dfa.bytes_of(s) {
                if on_way(e.target) {
                    out.push_byte(first, *e);
                }
            }
            out.rules.extend(dfa.rules_of(s).iter().filter(|&&(_, t)| on_way(t)));
        }
        out.end_state(dfa.finals[s]);
    }
    out
}

/// Bytes (a token edge weighing one) from each state to the nearest final state (`u32::MAX`:
/// none), by breadth-first search backwards from the final states.
fn dist_to_final(dfa: &Dfa) -> Vec<u32> {
    let n = dfa.len();
    let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
    for s in 0..n {
        for e in dfa.bytes_of(s) {
            rev[e.target as usize].push(s as u32);
        }
        for &(_, t) in dfa.rules_of(s) {
            rev[t as usize].push(s as u32);
        }
    }
    let mut dist = vec![u32::MAX; n];
    let mut queue: std::collections::VecDeque<u32> = (0..n as u32).filter(|&s| dfa.finals[s as usize]).collect();
    for &s in &queue {
        dist[s as usize] = 0;
    }
    while let Some(s) = queue.pop_front() {
        for &p in &rev[s as usize] {
            if dist[p as usize] == u32::MAX {
                dist[p as usize] = dist[s as usize] + 1;
                queue.push_back(p);
            }
        }
    }
    dist
}

/// Where a budgeted rule's states are: `len` open states from `open`, their twins from
/// `exhausted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleBudget {
    pub max_tokens: u32,
    pub(super) open: u32,
    pub(super) len: u32,
    pub(super) exhausted: u32,
}

/// The rules with a dynamic `max_tokens` budget (`max_tokens=0` needs none: such a rule is
/// built exhausted). Empty when no rule has one.
#[derive(Clone, Debug, Default)]
pub struct TokenBudgets {
    /// Per rule index (empty: no budgeted rule).
    pub(super) of_rule: Vec<Option<RuleBudget>>,
}

impl TokenBudgets {
    pub(super) fn set(&mut self, rule: RuleId, rules: usize, b: RuleBudget) {
        if self.of_rule.is_empty() {
            self.of_rule = vec![None; rules];
        }
        self.of_rule[rule.index()] = Some(b);
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.of_rule.is_empty()
    }

    /// For an open state `s` of a budgeted rule: the budget and the exhausted twin.
    #[inline]
    pub fn open(&self, rule: RuleId, s: StateId) -> Option<(u32, StateId)> {
        let b = (*self.of_rule.get(rule.index())?)?;
        let i = s.0.checked_sub(b.open).filter(|&i| i < b.len)?;
        Some((b.max_tokens, StateId(b.exhausted + i)))
    }

    /// For an exhausted state `s` of a budgeted rule: its open twin.
    #[inline]
    pub fn exhausted(&self, rule: RuleId, s: StateId) -> Option<StateId> {
        let b = (*self.of_rule.get(rule.index())?)?;
        let i = s.0.checked_sub(b.exhausted).filter(|&i| i < b.len)?;
        Some(StateId(b.open + i))
    }
}

/// "None" in the per-state and per-rule tables of [`RecBudgets`].
const NO: u32 = u32::MAX;

/// Exhausted twins for grammars with a recursive `max_tokens` rule (one whose body, with the
/// rules it uses, is not regular, so it keeps its rule edges).
///
/// Every rule reachable from such a rule gets a twin automaton: the same states, each keeping
/// only the edges on a shortest way (in bytes) to a final state, a rule edge weighing its rule's
/// shortest length; rule edges stay rule edges (targets renamed to twins). A twin state predicts
/// the twins of the rules it names, so a spent occurrence's open levels each follow their own
/// rule's shortest ways ([`crate::earley`] carries each item's spend point).
///
/// Invariant: `twin[s]` and `open[t]` are inverse; twin states have the rule and finality of
/// their open states.
#[derive(Clone, Debug, Default)]
pub struct RecBudgets {
    /// Per state: its exhausted twin (`NO`: none, or the state is itself a twin).
    twin: Vec<u32>,
    /// Per state: the open state it is the twin of (`NO`: it is not a twin).
    open: Vec<u32>,
    /// Per rule: the twin of its start state (`NO`: none).
    twin_start: Vec<u32>,
    /// Per rule: its `max_tokens` (`NO`: none).
    bound: Vec<u32>,
    /// Per rule: its group of rules left-recursive through each other (the group's least rule;
    /// `NO`: none; see [`left_groups`]).
    group: Vec<u32>,
    /// Per rule of a group: its index among the group's *openers*, the rules whose ended levels
    /// a chain of the group's levels may wrap (`NO`: not one). A group without marks has one
    /// opener, its entry.
    opener: Vec<u32>,
    /// Per rule (empty: no group carries marks): its group is entered through several rules
    /// inside budgets, so whether an ended opener level completing into a level of the group at
    /// the same row wraps it depends on the chain: the *wrapper mark* of an item's context names
    /// the opener of its chain at its row ([`RecBudgets::mark_of`]).
    marked: Vec<bool>,
    /// Bits of a wrapper mark (opener index + 1; 0: none) in a context's chain bits.
    wrapper_bits: u32,
    /// Per rule of a group of rules left-recursive through each other: the *shadows* of its
    /// left positions (states reached from its start by empty rules only), which hold the chain
    /// of levels a spent level of the group's entry would be wrapped in were it free (see
    /// `Chart::predict_chain`). A shadow has no edges and is not final; its open state is the
    /// position it shadows. Shadows are the states from `shadow_from` on.
    shadows: Vec<Box<[StateId]>>,
    shadow_from: u32,
    /// Per state from `chain_from` on (empty: no such group): for a shadow, the group's rules its
    /// open state calls; for a twin of a left position of an opener, its shadow (`NO`: none).
    chain: Vec<Box<[RuleId]>>,
    shadow_of: Vec<u32>,
    chain_from: u32,
}

impl RecBudgets {
    #[inline]
    pub fn is_twin(&self, s: StateId) -> bool {
        self.open[s.0 as usize] != NO
    }

    /// The twin of `s`, or `s` when it has none.
    #[inline]
    pub fn twin_of(&self, s: StateId) -> StateId {
        match self.twin[s.0 as usize] {
            NO => s,
            t => StateId(t),
        }
    }

    /// The open state of `s`, or `s` when it is not a twin.
    #[inline]
    pub fn open_of(&self, s: StateId) -> StateId {
        match self.open[s.0 as usize] {
            NO => s,
            t => StateId(t),
        }
    }

    /// Where an item predicted by an item in state `parent` starts rule `r`.
    #[inline]
    pub fn start(&self, a: &super::Automata, parent: StateId, r: RuleId) -> StateId {
        match self.twin_start[r.index()] {
            t if t != NO && self.is_twin(parent) => StateId(t),
            _ => a.rule_start(r),
        }
    }

    /// Where an occurrence of rule `r` spent from the start (`max_tokens=0`) starts: its twin.
    #[inline]
    pub fn spent_start(&self, a: &super::Automata, r: RuleId) -> StateId {
        match self.twin_start[r.index()] {
            NO => a.rule_start(r),
            t => StateId(t),
        }
    }

    /// Whether a finished level of `child` that completes into a level of `parent` started at
    /// the same row wraps it in another level of a left-recursive chain: `parent` is `child`
    /// (`e ::= e "+" t`), or `child` opens the chains of `parent`'s group of rules
    /// left-recursive through each other (`a` in `b ::= a "z"`, `a ::= b "x" | "y"`: the chain
    /// goes on to another `a`; [`RecBudgets::chain_wraps`], `wrapper` the mark of `parent`).
    #[inline]
    pub fn wraps(&self, child: RuleId, parent: RuleId, wrapper: u32) -> bool {
        child == parent || (self.group[child.index()] == self.group[parent.index()] && self.chain_wraps(child, wrapper))
    }

    /// Whether an ended level of `rule` completing into a level of its group at the same row
    /// whose wrapper mark is `wrapper` wraps it: `rule` is an opener and, in a group with marks,
    /// its chain's (the entry below in it; or, in a group without budgets, the chain's first
    /// level).
    #[inline]
    pub fn chain_wraps(&self, rule: RuleId, wrapper: u32) -> bool {
        let o = self.opener[rule.index()];
        o != NO && (!self.marked.get(rule.index()).is_some_and(|&m| m) || wrapper == o + 1)
    }

    /// For a level of `child` predicted by a level of `parent`, where `child`'s group carries
    /// marks: whether `parent` is of that group (a left call of the chain when `parent`'s level
    /// started at the same row) and `child`'s own wrapper mark (opener index + 1; 0: not an
    /// opener), which a chain without one takes; `None` elsewhere.
    #[inline]
    pub fn mark_of(&self, parent: RuleId, child: RuleId) -> Option<(bool, u32)> {
        let (g, o) = (self.group[child.index()], self.opener[child.index()]);
        self.marked
            .get(child.index())
            .is_some_and(|&m| m)
            .then(|| (self.group[parent.index()] == g, if o == NO { 0 } else { o + 1 }))
    }

    /// Bits of a wrapper mark in a context's chain bits.
    #[inline]
    pub fn wrapper_bits(&self) -> u32 {
        self.wrapper_bits
    }

    /// Whether some group carries entry marks.
    #[inline]
    pub fn has_marks(&self) -> bool {
        !self.marked.is_empty()
    }

    /// For a shadow `s`: the rules of its group its open state calls.
    #[inline]
    pub fn chain(&self, s: StateId) -> &[RuleId] {
        &self.chain[(s.0 - self.chain_from) as usize]
    }

    /// For a twin `s` of a left position of an opener of its group: that position's shadow.
    #[inline]
    pub fn shadow_of(&self, s: StateId) -> Option<StateId> {
        let i = s.0.checked_sub(self.chain_from)?;
        Some(self.shadow_of[i as usize]).filter(|&x| x != NO).map(StateId)
    }

    /// Whether items in state `s` predict a chain (`Chart::predict_chain`): a shadow, or a twin
    /// of a left position of an opener of its group.
    #[inline]
    pub fn in_chain(&self, s: StateId) -> bool {
        self.is_shadow(s) || self.shadow_of(s).is_some()
    }

    /// Whether `s` is a shadow.
    #[inline]
    pub fn is_shadow(&self, s: StateId) -> bool {
        s.0 >= self.shadow_from
    }

    /// The shadows of rule `r`'s left positions (empty outside groups).
    #[inline]
    pub fn shadows(&self, r: RuleId) -> &[StateId] {
        &self.shadows[r.index()]
    }

    /// Whether the grammar has shadows (a group of rules left-recursive through each other).
    #[inline]
    pub fn has_chains(&self) -> bool {
        self.shadow_from != NO
    }

    /// Rule `r`'s `max_tokens`, if it has one.
    #[inline]
    pub fn bound(&self, r: RuleId) -> Option<u32> {
        Some(self.bound[r.index()]).filter(|&n| n != NO)
    }
}

/// Shortest length in bytes of each rule (`u32::MAX`: none) and from each state to a final state
/// of its rule, over the open states `0..open_end`: a fixpoint, a rule edge weighing its rule's
/// shortest length (a token rule's: 1).
fn shortest(a: &super::Automata, open_end: usize) -> (Vec<u32>, Vec<u32>) {
    let mut dist = vec![u32::MAX; open_end];
    // A token rule (`Token(...)`) reads one token, weighed as one byte (a token has at least one).
    let mut rule_len: Vec<u32> = (0..a.num_rules())
        .map(|r| if a.tokens().set_of_rule(RuleId(r as u32)).is_some() { 1 } else { u32::MAX })
        .collect();
    loop {
        let mut changed = false;
        for s in (0..open_end).rev() {
            let sid = StateId(s as u32);
            let mut d = if a.state(sid).is_final { 0 } else { u32::MAX };
            for e in a.byte_edges(sid) {
                d = d.min(dist[e.target.0 as usize].saturating_add(1));
            }
            for &(r, t) in a.rule_edges(sid) {
                d = d.min(rule_len[r.index()].saturating_add(dist[t.0 as usize]));
            }
            if d < dist[s] {
                dist[s] = d;
                changed = true;
            }
        }
        for r in 0..a.num_rules() {
            let d = dist[a.rule_start(RuleId(r as u32)).0 as usize];
            if d < rule_len[r] {
                rule_len[r] = d;
                changed = true;
            }
        }
        if !changed {
            return (rule_len, dist);
        }
    }
}

/// Adds twins for every rule reachable from the recursive `max_tokens` rules `roots` (see
/// [`RecBudgets`]). `ranges[r]` is rule `r`'s open states; `bounds` the `max_tokens` of every
/// rule with one; `rec` the budgeted rules that keep their rule edges. Rules with a regular
/// budget reuse their twin; a regular rule built exhausted (`max_tokens=0`) is its own twin.
///
/// Left recursion: once spent, an occurrence of a rule left-recursive through itself only
/// (`e ::= e "+" t | t`) that can end is not wrapped in another level of the same rule started
/// at the same row ([`crate::earley`]), so it has a bounded end. Rules left-recursive through
/// each other (`a ::= b "x" | "y"`, `b ::= a "z"`) form a group with one entry, the rule used
/// from outside it ([`left_groups`]); once spent, a finished level of the entry is not wrapped
/// in a level of its group started at the same row. `Unsupported` for groups that are not so.
pub(super) fn add_rec_twins(
    a: &mut super::Automata,
    roots: &[RuleId],
    rec: &[RuleId],
    ranges: &[(u32, u32)],
    bounds: &[(RuleId, u32)],
) -> crate::error::Result<()> {
    let open_end = ranges.iter().map(|r| r.1).max().unwrap_or(0) as usize;
    let (rule_len, dist) = shortest(a, open_end);
    let mut reach = vec![false; a.num_rules()];
    let mut stack: Vec<RuleId> = roots.to_vec();
    while let Some(r) = stack.pop() {
        if std::mem::replace(&mut reach[r.index()], true) {
            continue;
        }
        let (lo, hi) = ranges[r.index()];
        for s in lo..hi {
            stack.extend(a.rule_edges(StateId(s)).iter().map(|e| e.0).filter(|x| !reach[x.index()]));
        }
    }
    let mut bound = vec![NO; a.num_rules()];
    for &(r, b) in bounds {
        bound[r.index()] = b;
    }
    let bounded: Vec<bool> = bound.iter().map(|&b| b != NO).collect();
    // Rules with a level that may be inside a budget not yet spent: reached from a budget above
    // 0 that some level outside every `max_tokens=0` occurrence may have, without entering a
    // `max_tokens=0` rule (inside one, every level is spent from its start).
    let zero = |r: usize| bound[r] == 0;
    let outside_zero = reach_from(a, ranges, &[a.root()], &zero);
    let open_budgets: Vec<RuleId> =
        (0..a.num_rules()).filter(|&r| outside_zero[r] && bounded[r] && !zero(r)).map(|r| RuleId(r as u32)).collect();
    let counted = reach_from(a, ranges, &open_budgets, &zero);
    let groups = left_groups(a, &reach, &rule_len, ranges, &bounded, &counted).map_err(|(r, why)| {
        crate::error::Error::new(
            crate::error::ErrorKind::Unsupported,
            format!(
                "max_tokens on a recursive rule that reaches the rule '{}', left-recursive through other rules, \
                 is not supported where {why}",
                a.rule_name(r)
            ),
        )
    })?;
    let n = a.states.len();
    let mut rb = RecBudgets {
        twin: vec![NO; n],
        open: vec![NO; n],
        twin_start: vec![NO; a.num_rules()],
        bound,
        wrapper_bits: if groups.marked.contains(&true) { groups.wrapper_bits } else { 0 },
        marked: if groups.marked.contains(&true) { groups.marked } else { Vec::new() },
        group: groups.group,
        opener: groups.opener,
        shadows: vec![Box::default(); a.num_rules()],
        shadow_from: NO,
        chain: Vec::new(),
        shadow_of: Vec::new(),
        chain_from: NO,
    };
    for r in (0..a.num_rules()).filter(|&r| reach[r]) {
        let rule = RuleId(r as u32);
        let (lo, hi) = ranges[r];
        if a.tokens().set_of_rule(rule).is_some() {
            continue; // a token edge: its callers' twins keep it or not, it has no way of its own
        }
        if let Some(b) = a.budgets.of_rule.get(r).copied().flatten() {
            // A regular budget's twin, already built.
            for i in 0..b.len {
                rb.twin[(b.open + i) as usize] = b.exhausted + i;
                rb.open[(b.exhausted + i) as usize] = b.open + i;
            }
            rb.twin_start[r] = b.exhausted + (a.rule_start(rule).0 - b.open);
            continue;
        }
        if rb.bound[r] == 0 && !rec.contains(&rule) {
            continue; // a regular rule built exhausted
        }
        let base = a.states.len() as u32;
        for s in lo..hi {
            let sid = StateId(s);
            let d = dist[s as usize];
            let st = a.state(sid).clone();
            let b0 = a.byte_edges.len() as u32;
            let r0 = a.rule_edges.len() as u32;
            if !st.is_final && d != u32::MAX {
                let bytes: Vec<_> = a.byte_edges(sid).to_vec();
                for e in bytes {
                    if dist[e.target.0 as usize].checked_add(1) == Some(d) {
                        a.byte_edges.push(super::ByteEdge { target: StateId(base + e.target.0 - lo), ..e });
                    }
                }
                let rules: Vec<_> = a.rule_edges(sid).to_vec();
                for (rr, t) in rules {
                    if rule_len[rr.index()].checked_add(dist[t.0 as usize]) == Some(d) {
                        a.rule_edges.push((rr, StateId(base + t.0 - lo)));
                    }
                }
            }
            a.states.push(super::State {
                rule: st.rule,
                is_final: st.is_final,
                byte_edges: (b0, a.byte_edges.len() as u32),
                rule_edges: (r0, a.rule_edges.len() as u32),
            });
            rb.twin.push(NO);
            rb.open.push(s);
            rb.twin[s as usize] = base + s - lo;
        }
        rb.twin_start[r] = base + a.rule_start(rule).0 - lo;
    }
    add_chains(a, &mut rb, &reach, &rule_len);
    a.rec = Some(Box::new(rb));
    Ok(())
}

/// Shadows of the left positions of every rule in a group left-recursive through other rules,
/// each shadow's chain, and the shadows of the openers' twins at left positions (none without
/// such groups).
fn add_chains(a: &mut super::Automata, rb: &mut RecBudgets, reach: &[bool], rule_len: &[u32]) {
    let grouped = |r: usize| reach[r] && rb.group[r] != NO;
    if !(0..a.num_rules()).any(grouped) {
        return;
    }
    let first = a.states.len() as u32;
    let mut shadow = FastMap::default();
    for r in (0..a.num_rules()).filter(|&r| grouped(r)) {
        let mut shadows = Vec::new();
        for s in left_states(a, rule_len, r) {
            let (at, rules) = (a.byte_edges.len() as u32, a.rule_edges.len() as u32);
            shadow.insert(s.0, a.states.len() as u32);
            shadows.push(StateId(a.states.len() as u32));
            a.states.push(super::State {
                rule: RuleId(r as u32),
                is_final: false,
                byte_edges: (at, at),
                rule_edges: (rules, rules),
            });
            rb.twin.push(NO);
            rb.open.push(s.0);
        }
        rb.shadows[r] = shadows.into();
    }
    // Twins come before the shadows: the chain tables start at the first twin.
    let from = (0..first).find(|&x| rb.open[x as usize] != NO).unwrap_or(first);
    let opens = |s: u32| rb.opener[a.state(StateId(s)).rule.index()] != NO;
    for x in from..a.states.len() as u32 {
        let o = rb.open[x as usize];
        let (mut calls, mut sh) = (Vec::new(), NO);
        if x >= first {
            calls = a.rule_edges(StateId(o)).iter().map(|e| e.0).filter(|rr| grouped(rr.index())).collect();
            calls.sort_unstable();
            calls.dedup();
        } else if o != NO && opens(o) {
            sh = shadow.get(&o).copied().unwrap_or(NO);
        }
        rb.chain.push(calls.into());
        rb.shadow_of.push(sh);
    }
    rb.chain_from = from;
    rb.shadow_from = first;
}

/// Rule `r`'s left positions: its states reached from its start by empty rules only.
fn left_states(a: &super::Automata, rule_len: &[u32], r: usize) -> Vec<StateId> {
    let mut seen = vec![a.rule_start(RuleId(r as u32))];
    let mut i = 0;
    while let Some(&s) = seen.get(i) {
        i += 1;
        for &(rr, t) in a.rule_edges(s) {
            if rule_len[rr.index()] == 0 && !seen.contains(&t) {
                seen.push(t);
            }
        }
    }
    seen
}

/// Rules reached from `from` (themselves included) by rule edges of their open states, entering
/// no rule for which `stop` holds (a rule of `from` for which it holds is not counted either).
fn reach_from(a: &super::Automata, ranges: &[(u32, u32)], from: &[RuleId], stop: &dyn Fn(usize) -> bool) -> Vec<bool> {
    let mut seen = vec![false; a.num_rules()];
    let mut stack: Vec<usize> = from.iter().map(|r| r.index()).filter(|&r| !stop(r)).collect();
    while let Some(r) = stack.pop() {
        if std::mem::replace(&mut seen[r], true) {
            continue;
        }
        let (lo, hi) = ranges[r];
        for s in lo..hi {
            stack.extend(a.rule_edges(StateId(s)).iter().map(|e| e.0.index()).filter(|&x| !seen[x] && !stop(x)));
        }
    }
    seen
}

/// What [`left_groups`] finds: per rule, its group (its least rule; `NO`: none), its index
/// among its group's openers (`NO`: not one), and whether its group carries wrapper marks;
/// the bits a wrapper mark takes.
struct LeftGroups {
    group: Vec<u32>,
    opener: Vec<u32>,
    marked: Vec<bool>,
    wrapper_bits: u32,
}

/// Groups of rules left-recursive through each other (`a ::= b "x" | "y"`, `b ::= a "z"`)
/// among `reach`, and the rules that open each group's chains ([`LeftGroups`]). A group's
/// entries are its rules used otherwise than by a left call from the group (from another rule,
/// after a byte, or as the root; the root's own occurrence is outside every budget unless the
/// root has one). Supported groups, each cycle of left calls through two or more of its rules
/// passing through every opener:
/// - entered through one rule, the opener, no other of its rules with a budget;
/// - entered through several rules, one of which, the opener, is its only budgeted rule: only
///   an ended opener level is wrapped in new levels of the group (the others have no budget to
///   hold them), and a completion of it into a level of the group started at the same row wraps
///   it exactly when an opener level is below that level in its chain. When every other entry
///   is used from rules outside every budget only (`root ::= a | b`: an outer level of `b` is
///   never spent) that needs no mark; else (`c[max_tokens=5] ::= a | b`) items carry it;
/// - entered through several rules, none of its rules with a budget (a budget around it): each
///   chain is opened by the entry it starts with, as if the group were entered through that
///   rule only (a copy of the group per entry), so items carry that entry as their mark.
///
/// Items carry marks as [`RecBudgets::mark_of`] says. Else `Err` names a rule of the group and
/// why.
fn left_groups(
    a: &super::Automata,
    reach: &[bool],
    rule_len: &[u32],
    ranges: &[(u32, u32)],
    bounded: &[bool],
    counted: &[bool],
) -> Result<LeftGroups, (RuleId, String)> {
    let n = a.num_rules();
    // left[r]: the rule edges of r's states reached from its start by empty rules only.
    let left_states = |r: usize| left_states(a, rule_len, r);
    let mut left: Vec<Vec<usize>> = vec![Vec::new(); n];
    for r in (0..n).filter(|&r| reach[r]) {
        for s in left_states(r) {
            left[r].extend(a.rule_edges(s).iter().map(|e| e.0.index()));
        }
    }
    // Rules that reach `to` by left calls from `from` (excluding `skip`, and each rule's calls
    // to itself).
    let reaches = |from: usize, to: usize, skip: usize| -> bool {
        let mut seen = vec![false; n];
        let mut stack: Vec<usize> = left[from].iter().copied().filter(|&x| x != from && x != skip).collect();
        while let Some(x) = stack.pop() {
            if x == to {
                return true;
            }
            if !std::mem::replace(&mut seen[x], true) {
                stack.extend(left[x].iter().copied().filter(|&y| y != x && y != skip));
            }
        }
        false
    };
    let mut group = vec![NO; n];
    for r in 0..n {
        if !reach[r] || group[r] != NO || !reaches(r, r, usize::MAX) {
            continue;
        }
        let members: Vec<usize> = (0..n)
            .filter(|&q| q == r || (reach[q] && reaches(r, q, usize::MAX) && reaches(q, r, usize::MAX)))
            .collect();
        for &q in &members {
            group[q] = r as u32;
        }
    }
    // Entries: group rules used otherwise than by a left call from their group; `inner`: those
    // used so from a rule some budgeted occurrence may be around (`reach`).
    let mut entries: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut inner: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut enter = |g: u32, q: usize, inside: bool| {
        for (list, add) in [(&mut entries, true), (&mut inner, inside)] {
            if add && !list[g as usize].contains(&q) {
                list[g as usize].push(q);
            }
        }
    };
    // The root's own occurrence is inside a budget only when the root has one.
    let root = a.root().index();
    if group[root] != NO {
        enter(group[root], root, bounded[root]);
    }
    for x in 0..n {
        let lefts = if group[x] == NO { Vec::new() } else { left_states(x) };
        let (lo, hi) = ranges[x];
        for s in (lo..hi).map(StateId) {
            for &(rr, _) in a.rule_edges(s) {
                let g = group[rr.index()];
                if g != NO && !(group[x] == g && lefts.contains(&s)) {
                    enter(g, rr.index(), reach[x]);
                }
            }
        }
    }
    let mut out = LeftGroups { group: group.clone(), opener: vec![NO; n], marked: vec![false; n], wrapper_bits: 0 };
    for g in (0..n).filter(|&g| group[g] == g as u32) {
        let members: Vec<usize> = (0..n).filter(|&q| group[q] == g as u32).collect();
        if !members.iter().any(|&q| counted[q]) {
            // Each level of it is free or spent from its start (inside a `max_tokens=0`
            // occurrence, twins only): a spent level takes shortest ways, never around a cycle of
            // left calls that reads more, so its chains need no opener.
            for &q in &members {
                out.group[q] = NO;
            }
            continue;
        }
        let budgeted: Vec<usize> = members.iter().copied().filter(|&q| bounded[q]).collect();
        // Its only entry; else its budgeted rule (marks where another entry is used inside a
        // budget: an outer level of it may be spent, and still takes the opener levels it
        // called); else, without budgets, every entry, each opening the chains it starts.
        let (openers, marks) = match (entries[g].as_slice(), budgeted.as_slice()) {
            (&[e], _) => (vec![e], false),
            (many, &[b, ..]) if many.contains(&b) => (vec![b], inner[g].iter().any(|&q| q != b)),
            (many, []) => (many.to_vec(), true),
            _ => {
                let names: Vec<String> =
                    inner[g].iter().map(|&q| format!("'{}'", a.rule_name(RuleId(q as u32)))).collect();
                return Err((
                    RuleId(g as u32),
                    format!("its group of rules is entered through {} inside a budget", names.join(" and ")),
                ));
            }
        };
        for &e in &openers {
            for &q in members.iter().filter(|&&q| q != e) {
                let entry = a.rule_name(RuleId(e as u32));
                let name = a.rule_name(RuleId(q as u32));
                if bounded[q] {
                    return Err((
                        RuleId(q as u32),
                        format!(
                            "it has a budget and is not its group's entry '{entry}' (a level of '{entry}' or '{name}' \
                             wrapped around the other later would hold tokens already read under the looser budget); \
                             keep one budget in the group, on '{entry}', or move the budget of '{name}' to a rule \
                             that calls the group"
                        ),
                    ));
                }
                if let Some(cycle) = left_cycle(&left, q, e) {
                    let names: Vec<String> =
                        cycle.iter().map(|&x| format!("'{}'", a.rule_name(RuleId(x as u32)))).collect();
                    return Err((
                        RuleId(q as u32),
                        format!(
                            "a cycle of left calls through it avoids its group's entry '{entry}' (the cycle {}: \
                             a spent budget could still take any number of its levels, chosen before the budget \
                             ran out); rewrite that left recursion as repetition (`{name} ::= <its other \
                             alternatives> (<what follows the left call>)*`) or move the budget to a rule whose \
                             occurrences do not reach the group",
                            names.join(" -> ")
                        ),
                    ));
                }
            }
        }
        for (i, &e) in openers.iter().enumerate() {
            out.opener[e] = i as u32;
        }
        for &q in &members {
            out.marked[q] = marks;
        }
        if marks {
            out.wrapper_bits = out.wrapper_bits.max(u32::BITS - (openers.len() as u32).leading_zeros());
        }
    }
    Ok(out)
}

/// A cycle of left calls (`left[r]`: the rules `r` calls at a left position) from `q` back to
/// `q` avoiding `skip` and each rule's calls to itself, as its rules from `q` on (`q` again
/// last), or `None`: the shortest one (breadth first).
fn left_cycle(left: &[Vec<usize>], q: usize, skip: usize) -> Option<Vec<usize>> {
    let mut parent: FastMap<usize, usize> = FastMap::default();
    let mut queue = std::collections::VecDeque::from([q]);
    while let Some(x) = queue.pop_front() {
        for &y in left[x].iter().filter(|&&y| y != x && y != skip) {
            if y == q {
                // `x != q` (self-calls are left out) and `q` has no parent: the walk ends at it.
                let mut path = vec![x];
                while let Some(&p) = parent.get(path.last().unwrap()) {
                    path.push(p);
                }
                path.reverse();
                path.push(q);
                return Some(path);
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = parent.entry(y) {
                slot.insert(x);
                queue.push_back(y);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::dfa::ByteEdgeLocal;

    /// `"a"+ | "bb"`: 0 -a-> 1 (final, loops on a), 0 -b-> 2 -b-> 3 (final).
    fn sample() -> Dfa {
        let mut d = Dfa::default();
        d.push_byte(0, ByteEdgeLocal { lo: b'a', hi: b'a', target: 1 });
        d.push_byte(0, ByteEdgeLocal { lo: b'b', hi: b'b', target: 2 });
        d.end_state(false);
        let f = d.bytes.len();
        d.push_byte(f, ByteEdgeLocal { lo: b'a', hi: b'a', target: 1 });
        d.end_state(true);
        let f = d.bytes.len();
        d.push_byte(f, ByteEdgeLocal { lo: b'b', hi: b'b', target: 3 });
        d.end_state(false);
        d.end_state(true);
        d
    }

    #[test]
    fn exhausted_states_keep_only_shortest_paths() {
        let e = exhausted_dfa(&sample());
        assert_eq!(e.len(), 4);
        let edges = |s: usize| e.bytes_of(s).iter().map(|x| (x.lo, x.target)).collect::<Vec<_>>();
        assert_eq!(edges(0), vec![(b'a', 1)], "only the one-byte way out");
        assert!(edges(1).is_empty(), "a final state ends");
        assert_eq!(edges(2), vec![(b'b', 3)]);
        assert_eq!(e.finals, vec![false, true, false, true]);
    }
}
