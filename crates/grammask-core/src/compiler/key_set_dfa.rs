//! Key-set rules' DFAs written directly (lazy key-set build, step 3).
//!
//! Pipeline place: called by `build.rs`'s workers before the generic path (NFA, subset
//! construction, `DfaMemo`, minimization) for each rule of the grammar's `own_class` hint (the
//! any-order objects' key-set rules, `json_schema/key_sets.rs`). A body of the shape
//! `key_sets::build` writes, `["" |] sep (e_0 n_0 | e_1 n_1 | ...)` (`sep`: bytes and rule
//! references, `ws "," ws` or one literal, possibly none), whose references are all rule edges
//! (none inlined), gets the automaton the generic path makes of it:
//!
//! - the separator's chain, one state per symbol, from state 0 (final iff `""`);
//! - the choice state `C` (state 0 without a separator), one rule edge per pair `e_i -> M_i`;
//! - one state `M_i` per pair, with one rule edge `n_i -> F`; a pair whose successor is the rule
//!   itself in its tail group (an open object's `extra R(M)`, `compiler/tail.rs`) loops to state
//!   0 instead and has no state;
//! - the final state `F` with no edges, when some pair is not a loop.
//!
//! Numbering: subset construction's, which discovers targets by byte edges, then rule edges by
//! first-use rank (`Nfa::rule_ranks_of`: the body's order, `sep` then `e_0 n_0 e_1 n_1 ...`), so
//! the chain, `C`, the `M_i` in pair order and `F` last. Minimization keeps it: no two states are
//! equivalent when the entries' classes of equal rules are distinct, the successors' are, and
//! neither meets the separator's (checked here, else the generic path builds the rule): the chain
//! and `C` have edges and are not final past state 0, `F` has none, the `M_i` differ by their
//! successor. Rule edges name each rule's class representative and are sorted by (rule, target),
//! as subset construction stores them. The budget is charged what the generic path charges: the
//! NFA's states (as `nfa.rs` makes them for these expressions) and the subset construction's.
//! Equality with the generic path: `json_schema::tests::key_set_direct_automata_equal_generic_ones`.
use super::dfa::{ByteEdgeLocal, Dfa};
use super::tail::NO_GROUP;
use crate::grammar::{Expr, ExprId, Grammar, RuleId};

/// The build's plans a key-set rule's automaton depends on.
pub(super) struct Plans<'a> {
    pub(super) inline: &'a [bool],
    pub(super) rep: &'a [RuleId],
    pub(super) tail_group: &'a [u32],
}

/// Why a key-set rule took the generic path (counted for the figures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Generic {
    /// An inlined entry (small enough to be copied into the key-set rules, `inline.rs`).
    Inlined,
    /// Another shape: no pair (`nothing`), an inlined separator or successor, a tail-group
    /// member other than the rule itself, or classes of equal rules shared by two pairs or by a
    /// pair and the separator.
    Shape,
}

/// One symbol of the separator chain: a byte or a rule edge (by class representative).
#[derive(Clone, Copy)]
enum Sym {
    Byte(u8),
    Rule(RuleId),
}

/// Buffers reused from one rule to the next by a worker.
#[derive(Default)]
pub(super) struct KeySetWriter {
    sep: Vec<Sym>,
    /// (entry, successor) as written, by pair.
    pairs: Vec<(RuleId, RuleId)>,
    /// Per rule: the stamp of the last rule whose body names it (as a class representative),
    /// to check they are distinct. PERF: a sort of them was ~1.5 k instructions a rule (pairs
    /// interleave entries and successors).
    seen: Vec<u32>,
    stamp: u32,
    edges: Vec<(RuleId, u32)>,
}

impl KeySetWriter {
    /// Rule `r`'s minimized DFA and the budget the generic path would charge for it, or why the
    /// generic path builds it.
    pub(super) fn write(&mut self, g: &Grammar, r: RuleId, p: &Plans) -> Result<(Dfa, usize), Generic> {
        self.sep.clear();
        self.pairs.clear();
        if self.seen.len() < g.rules().len() {
            self.seen.resize(g.rules().len(), 0);
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
        let group = p.tail_group.get(r.index()).copied().filter(|&c| c != NO_GROUP);
        let body = g.rule(r).body;
        // The NFA's states: a tail-group member's fragment start and end (`Nfa::build_fragments`).
        let mut nfa = if group.is_some() { 2 } else { 0 };
        let (empty, rest) = match g.expr(body) {
            Expr::Choice(alts) if alts.len() == 2 && is_empty(g, alts[0]) => {
                nfa += 2 + 1;
                (true, alts[1])
            }
            _ if is_empty(g, body) => {
                let mut d = Dfa::with_capacity(1, 0, 0);
                d.end_state(true);
                return Ok((d, nfa + 1 + 1));
            }
            _ => (false, body),
        };
        // `rest` is `sep (e_0 n_0 | ...)`, `(e_0 n_0 | ...)` or `sep e n` (`sep` possibly none).
        let (prefix, choice): (&[ExprId], Option<ExprId>) = match g.expr(rest) {
            Expr::Choice(_) => (&[], Some(rest)),
            Expr::Seq(items) => match items.split_last() {
                Some((&last, prefix)) if matches!(g.expr(last), Expr::Choice(_)) => (prefix, Some(last)),
                _ if items.len() >= 2 => (&items[..items.len() - 2], None),
                _ => return Err(Generic::Shape),
            },
            _ => return Err(Generic::Shape),
        };
        match choice {
            Some(c) => {
                let Expr::Choice(alts) = g.expr(c) else { unreachable!("matched as a choice") };
                nfa += 2;
                for &a in alts {
                    let Expr::Seq(pair) = g.expr(a) else { return Err(Generic::Shape) };
                    let [e, n] = pair[..] else { return Err(Generic::Shape) };
                    self.pairs.push((rule_ref(g, e)?, rule_ref(g, n)?));
                }
            }
            None => {
                let Expr::Seq(items) = g.expr(rest) else { unreachable!("matched as a sequence") };
                let [.., e, n] = items[..] else { unreachable!("two items at least") };
                self.pairs.push((rule_ref(g, e)?, rule_ref(g, n)?));
            }
        }
        for &x in prefix {
            match g.expr(x) {
                Expr::Bytes(b) if !b.is_empty() => {
                    nfa += 1 + b.len();
                    self.sep.extend(b.iter().map(|&c| Sym::Byte(c)));
                }
                Expr::RuleRef(w) if p.inline[w.index()] => return Err(Generic::Shape),
                Expr::RuleRef(w) => {
                    nfa += 2;
                    self.sep.push(Sym::Rule(p.rep[w.index()]));
                }
                _ => return Err(Generic::Shape),
            }
        }
        // Pairs: entries and successors are rule edges; a successor in the rule's tail group
        // must be the rule itself (a loop to the start, `Nfa::tail_fragment`).
        let mut loops = 0;
        for &(e, n) in &self.pairs {
            if p.inline[n.index()] {
                return Err(Generic::Shape);
            }
            if p.inline[e.index()] {
                return Err(Generic::Inlined);
            }
            let in_group = group.is_some() && p.tail_group.get(n.index()).copied() == group;
            if in_group && n != r {
                return Err(Generic::Shape);
            }
            loops += usize::from(in_group);
            // The entry's two states, the successor's two (a loop: one, the fragment's end).
            nfa += if in_group { 3 } else { 4 };
        }
        // Classes distinct: the separator's rule, the entries and the successors that are not
        // loops (so subset construction ranks the entries in pair order, and no two states merge).
        let (seen, stamp) = (&mut self.seen, self.stamp);
        let mut fresh = |x: RuleId| std::mem::replace(&mut seen[x.index()], stamp) != stamp;
        // The separator names its rule twice (`ws "," ws`): once is one class.
        let mut sep_rules = self.sep.iter().filter_map(|s| match *s {
            Sym::Rule(w) => Some(w),
            Sym::Byte(_) => None,
        });
        if let Some(w) = sep_rules.next() {
            fresh(w);
            if sep_rules.any(|x| x != w) {
                return Err(Generic::Shape);
            }
        }
        for &(e, n) in &self.pairs {
            let loops = group.is_some() && n == r;
            if !fresh(p.rep[e.index()]) || !loops && !fresh(p.rep[n.index()]) {
                return Err(Generic::Shape);
            }
        }
        Ok(self.emit(empty, loops, group.map(|_| r), p, nfa))
    }

    /// The automaton of the parsed body (see the module doc), and the budget charged.
    fn emit(&mut self, empty: bool, loops: usize, me: Option<RuleId>, p: &Plans, nfa: usize) -> (Dfa, usize) {
        let chain = self.sep.len() as u32;
        let kept = self.pairs.len() - loops;
        let states = chain as usize + 1 + kept + usize::from(kept > 0);
        let mut d = Dfa::with_capacity(states, self.sep.len(), self.sep.len() + self.pairs.len() + kept);
        for (i, s) in self.sep.iter().enumerate() {
            let target = i as u32 + 1;
            match *s {
                Sym::Byte(c) => d.bytes.push(ByteEdgeLocal { lo: c, hi: c, target }),
                Sym::Rule(w) => d.rules.push((w, target)),
            }
            d.end_state(i == 0 && empty);
        }
        // C: the pairs' entries, to M_i in pair order or back to 0.
        let c = chain;
        let f = c + 1 + kept as u32;
        self.edges.clear();
        let mut m = c;
        for &(e, n) in &self.pairs {
            let target = if me == Some(n) {
                0
            } else {
                m += 1;
                m
            };
            self.edges.push((p.rep[e.index()], target));
        }
        self.edges.sort_unstable();
        d.rules.extend_from_slice(&self.edges);
        d.end_state(chain == 0 && empty);
        for &(_, n) in self.pairs.iter().filter(|&&(_, n)| me != Some(n)) {
            d.rules.push((p.rep[n.index()], f));
            d.end_state(false);
        }
        if kept > 0 {
            d.end_state(true);
        }
        debug_assert_eq!(d.len(), states);
        (d, nfa + states)
    }
}

/// Whether `e` is the empty string.
fn is_empty(g: &Grammar, e: ExprId) -> bool {
    matches!(g.expr(e), Expr::Bytes(b) if b.is_empty())
}

/// The rule `e` references.
fn rule_ref(g: &Grammar, e: ExprId) -> Result<RuleId, Generic> {
    match g.expr(e) {
        Expr::RuleRef(r) => Ok(*r),
        _ => Err(Generic::Shape),
    }
}
