//! Tail calls: right recursion among rules becomes loops inside one automaton.
//!
//! Pipeline place: after the inline plan (`inline.rs`), before the NFA construction (`nfa.rs`).
//! A reference to rule `R` in *tail position* of rule `P` (nothing of `P` follows it) means
//! "continue with `R`'s body, then `P` ends". When `P` and `R` are in one *tail group* (a strongly
//! connected component of the tail-reference graph), the NFA of `P` takes `R`'s body as a
//! fragment of its own and the reference as an epsilon edge into it, so right-linear rules (the
//! state-per-rule EBNF of a regex DFA, `list ::= item ("," list)?`) become one regular automaton.
//!
//! PERF: without it every lap of such a recursion nests one more Earley item (each `.` of a
//! dotted-name pattern, each element of a right-recursive list), so a chart row's items, its
//! completion cascade and its signature grow with the input, and no mask is ever memoized twice.
//!
//! Invariants:
//! - only rules without options and without a lookahead, not inlined and not token rules, are
//!   group members (their identity is never observed: no capture, temperature, budget or
//!   assertion is attached to them);
//! - a group's bodies add up to at most [`TAIL_GROUP_MAX_STATES`] estimated NFA states, so each
//!   member's automaton (which holds the group's bodies at most once each) stays bounded;
//! - a member whose every reference is a tail reference from its own group needs no automaton of
//!   its own (`needed` is false): nothing names it in a rule edge.
use super::lists::Lists;
use crate::grammar::{Expr, ExprId, Grammar, RuleId};

/// Most estimated NFA states of the bodies of one tail group.
/// PERF: the email format's domain (labels of up to 63 characters, one rule per position) is a
/// group of ~5,200: at 4,096 it stayed rules, each character of a label nested one more chart
/// item, and a token budget's walks read every token of such a row on the chart (~120 ms per
/// mask near the end of a budget, on Llama 3). An unanchored `pattern`'s DFA printed as rules
/// (each "other character" a JSON spelling of ~100 states, copied per state) is a group of
/// ~10-17k (MaskBench o65510, o83286): at 8,192 each character was a call into the next state's
/// rule, and each string position a walk of the whole vocabulary per alive branch (~15 ms).
pub(super) const TAIL_GROUP_MAX_STATES: usize = 32768;

/// "No group".
pub(super) const NO_GROUP: u32 = u32::MAX;

/// Which tail references are merged, and which rules still need an automaton.
pub(super) struct TailPlan {
    /// `group[r]`: the tail group of rule `r`, or [`NO_GROUP`].
    pub(super) group: Vec<u32>,
    /// `needed[r]`: rule `r` keeps an automaton of its own.
    pub(super) needed: Vec<bool>,
}

/// The references to non-inlined rules in `body` (inlined rules expanded), each with whether it
/// is in tail position. `seen` (two slots per expression, stamped with `stamp`) keeps each
/// `(expression, tail)` pair visited once. `stack`: a buffer, empty between calls.
fn refs_of(
    g: &Grammar,
    body: ExprId,
    inline: &[bool],
    seen: &mut [u32],
    stamp: u32,
    stack: &mut Vec<(ExprId, bool)>,
    out: &mut Vec<(RuleId, bool)>,
) {
    stack.push((body, true));
    while let Some((e, tail)) = stack.pop() {
        let slot = &mut seen[e.index() * 2 + usize::from(tail)];
        if *slot == stamp {
            continue;
        }
        *slot = stamp;
        match g.expr(e) {
            Expr::Seq(items) => {
                if let Some((&last, rest)) = items.split_last() {
                    stack.push((last, tail));
                    stack.extend(rest.iter().map(|&x| (x, false)));
                }
            }
            Expr::Choice(items) => stack.extend(items.iter().map(|&x| (x, tail))),
            // `x?` and `x{1}`: the copy's end is the repetition's end (see `Nfa::build`).
            &Expr::Repeat { expr, max, .. } => stack.push((expr, tail && max == Some(1))),
            Expr::RuleRef(r) if inline[r.index()] => stack.push((g.rule(*r).body, tail)),
            Expr::RuleRef(r) => out.push((*r, tail)),
            _ => stack.extend(g.children(e).iter().map(|&x| (x, false))),
        }
    }
}

/// Whether rule `r` may be merged into a caller's automaton.
fn mergeable(g: &Grammar, r: usize, inline: &[bool]) -> bool {
    let rule = &g.rules()[r];
    !inline[r]
        && rule.lookahead.is_none()
        && g.rule_options(RuleId(r as u32)).is_none()
        && !matches!(g.expr(rule.body), Expr::Token(_) | Expr::ExcludeToken(_))
}

/// The tail plan of `g`; `size[r]` estimates rule `r`'s NFA states (inlined rules expanded).
pub(super) fn tail_plan(g: &Grammar, inline: &[bool], size: &[usize]) -> TailPlan {
    let n = g.rules().len();
    let mut seen = vec![0u32; g.exprs().len() * 2];
    // Rule `r`'s references are `all_refs[refs_end[r - 1]..refs_end[r]]` (one buffer, not a
    // vector per rule: allocations were a third of the plan on band schemas).
    let mut all_refs: Vec<(RuleId, bool)> = Vec::new();
    let mut refs_end: Vec<usize> = Vec::with_capacity(n);
    let mut stack = Vec::new();
    for r in 0..n {
        if !inline[r] {
            refs_of(g, g.rules()[r].body, inline, &mut seen, r as u32 + 1, &mut stack, &mut all_refs);
        }
        refs_end.push(all_refs.len());
    }
    let refs = |r: usize| &all_refs[if r == 0 { 0 } else { refs_end[r - 1] }..refs_end[r]];
    let ok: Vec<bool> = (0..n).map(|r| mergeable(g, r, inline)).collect();
    // The tail-reference graph between mergeable rules.
    let mut succ = Lists::with_capacity(n, all_refs.len());
    let mut s: Vec<u32> = Vec::new();
    for r in 0..n {
        s.clear();
        if ok[r] {
            s.extend(refs(r).iter().filter(|&&(x, t)| t && ok[x.index()]).map(|&(x, _)| x.0));
            s.sort_unstable();
            s.dedup();
        }
        succ.push(s.iter().copied());
    }
    let comp = sccs(&succ);
    let comps = comp.iter().max().map_or(0, |&c| c as usize + 1);
    // Each component's members, in rule order.
    let members = Lists::from_pairs(comps, comp.iter().enumerate().map(|(r, &c)| (c, r as u32)));
    let mut group = vec![NO_GROUP; n];
    for c in 0..comps {
        let ms = members.get(c);
        let first = ms[0] as usize;
        let cyclic = ms.len() > 1 || succ.get(first).contains(&ms[0]);
        let total = ms.iter().fold(0usize, |acc, &r| acc.saturating_add(size[r as usize]));
        if cyclic && ok[first] && total <= TAIL_GROUP_MAX_STATES {
            for &r in ms {
                group[r as usize] = c as u32;
            }
        }
    }
    let mut needed: Vec<bool> = (0..n).map(|r| !inline[r] && group[r] == NO_GROUP).collect();
    needed[g.root().index()] = true;
    for p in 0..n {
        for &(x, tail) in refs(p) {
            let merged = tail && group[p] != NO_GROUP && group[p] == group[x.index()];
            if !merged {
                needed[x.index()] = true;
            }
        }
    }
    TailPlan { group, needed }
}

/// Strongly connected components of `succ` (iterative Tarjan): a component id per node.
pub(super) fn sccs(succ: &Lists) -> Vec<u32> {
    let n = succ.len();
    const UNSEEN: u32 = u32::MAX;
    let (mut index, mut low, mut comp) = (vec![UNSEEN; n], vec![0u32; n], vec![UNSEEN; n]);
    let (mut on_stack, mut stack) = (vec![false; n], Vec::new());
    let (mut next_index, mut next_comp) = (0u32, 0u32);
    let mut call: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        call.push((root, 0));
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut i)) = call.last_mut() {
            if let Some(&w) = succ.get(v).get(*i) {
                *i += 1;
                let w = w as usize;
                if index[w] == UNSEEN {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            call.pop();
            if let Some(&(u, _)) = call.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp[w] = next_comp;
                    if w == v {
                        break;
                    }
                }
                next_comp += 1;
            }
        }
    }
    comp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sccs_find_cycles_and_singletons() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 4 -> 4
        let mut succ = Lists::default();
        for list in [&[1][..], &[2], &[0, 3], &[], &[4]] {
            succ.push(list.iter().copied());
        }
        let c = sccs(&succ);
        assert!(c[0] == c[1] && c[1] == c[2]);
        assert!(c[3] != c[0] && c[4] != c[0] && c[3] != c[4]);
    }
}
