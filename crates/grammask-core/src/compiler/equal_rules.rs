//! Equal rules: rules whose bodies are the same expression up to references to equal rules
//! share one automaton.
//!
//! Pipeline place: after the inline and tail plans (`inline.rs`, `tail.rs`), before the NFA
//! construction (`nfa.rs`): a rule edge to any rule of a class names the class's representative
//! (its lowest rule), and only representatives get an automaton of their own.
//!
//! PERF: grammars assembled from parts repeat them: a tool-calling structural tag holds one JSON
//! Schema grammar per tool, each with its own copy of the same argument objects, arrays and
//! free-form JSON values, and every copy was determinized and minimized again.
//!
//! Invariants:
//! - classes are the coarsest partition in which the rules of a class have structurally equal
//!   bodies once each referenced rule is replaced by its class (a bisimulation), so equal rules
//!   derive the same strings and merging them keeps the language and every mask;
//! - a rule whose identity is observed (the root, a rule with options or a lookahead, a tail-group
//!   member, a token rule) is a class of its own, and so is a rule that is inlined differently
//!   from the others of its would-be class (the inline flag is part of the signature).
use super::determinize::SeqTable;
use super::lists::Lists;
use super::tail::{TailPlan, NO_GROUP};
use crate::fasthash::{FastMap, FastState};
use crate::grammar::{Expr, ExprId, Grammar, RuleId};

/// The representative of each rule's class: `rep[r] == r` for a rule that keeps its automaton.
/// Identity when the grammar's expressions are not numbered children first. `deps.get(r)`: the rules
/// `r`'s body references, sorted, each once (from `inline_plan`).
pub(super) fn equal_rules(g: &Grammar, inline: &[bool], deps: &Lists, tail: &TailPlan) -> Vec<RuleId> {
    equal_rules_within(g, inline, deps, tail, MAX_WORK, true)
}

/// [`equal_rules`] with a cap on the refinement's work (expression and rule visits); past it no
/// rule is merged (always correct). `screen`: first look for two candidate bodies of one shape
/// ([`shapes_repeat`]); without one the refinement cannot merge a candidate and is skipped.
fn equal_rules_within(
    g: &Grammar,
    inline: &[bool],
    deps: &Lists,
    tail: &TailPlan,
    max_work: usize,
    screen: bool,
) -> Vec<RuleId> {
    let n = g.rules().len();
    let identity: Vec<RuleId> = (0..n as u32).map(RuleId).collect();
    let exprs = g.exprs();
    let mut hinted = vec![false; n];
    for r in g.own_class() {
        hinted[r.index()] = true;
    }
    let own_class = |r: usize| {
        let rule = &g.rules()[r];
        hinted[r]
            || r == g.root().index()
            || rule.lookahead.is_some()
            || g.rule_options(RuleId(r as u32)).is_some()
            || tail.group[r] != NO_GROUP
            || matches!(g.expr(rule.body), Expr::Token(_) | Expr::ExcludeToken(_))
    };
    let own: Vec<bool> = (0..n).map(own_class).collect();
    // Only a class of two candidates (merging rules with an automaton of their own) is kept
    // (`shared` below). PERF: on MaskBench's typical schemas 28 of 352 grammars have one; the
    // others paid the whole refinement (~0.6 M instructions per schema) to find none.
    let candidates: Vec<usize> = (0..n).filter(|&r| !own[r] && !inline[r]).collect();
    // Only the expressions below merging rules' bodies are ever keyed or signed (own-class rules'
    // bodies are not). PERF: an open object's key-set rules are tail groups (own class) and
    // most of such a grammar's expressions (o44208: 13,774 of 21,002 rules).
    let Some(signed) = signed_exprs(g, &own) else {
        return identity;
    };
    if screen && !shapes_repeat(g, &candidates, &own, &signed) {
        return identity;
    }
    // Expressions without a rule reference below them get one id per distinct expression, once
    // (`canon[e]` even); the others are interned anew whenever a class they name changes (odd).
    // Leaves get even ids, composites odd ones.
    // PERF: keys interned in one arena (`SeqTable`), not a map of vectors (an allocation per
    // distinct key; ~1,000 per band schema).
    let mut fixed_leaves: FastMap<&Expr, u64> = FastMap::default();
    let mut fixed: SeqTable<u64> = SeqTable::default();
    let mut canon = vec![0u64; exprs.len()];
    let mut key = Vec::new();
    for &i in &signed {
        let (i, e) = (i as usize, &exprs[i as usize]);
        let kids = g.children(ExprId(i as u32));
        if matches!(e, Expr::RuleRef(_)) || kids.iter().any(|c| canon[c.index()] & 1 == 1) {
            canon[i] = 1;
            continue;
        }
        let id = if kids.is_empty() && !matches!(e, Expr::Seq(_) | Expr::Choice(_)) {
            let next = fixed_leaves.len() as u64;
            *fixed_leaves.entry(e).or_insert(next) << 1
        } else {
            composite_key(e, kids, &canon, &[], &mut key);
            u64::from(fixed.intern(&key).0) << 1 | 1
        };
        canon[i] = id << 1;
    }
    // The varying expressions' varying parents (`parents`, a parent once per use of the child) and the
    // rule reference expressions naming each rule (`refs_to`), as offset tables; the merging
    // rules whose body is each expression (`body_of`).
    // PERF: keyed per expression, not per rule: hash-consed bodies share sub-expressions, and
    // a round keys only the expressions above a moved rule (Automata::build -4% CPU on 60
    // MaskBench schemas of 20-300 ms).
    // Only the varying expressions in merging rules' bodies are keyed (the bodies of own-class
    // rules are never signed).
    let mut in_merging = vec![false; exprs.len()];
    let mut stack: Vec<ExprId> = (0..n).filter(|&r| !own[r]).map(|r| g.rules()[r].body).collect();
    while let Some(e) = stack.pop() {
        if canon[e.index()] & 1 == 1 && !std::mem::replace(&mut in_merging[e.index()], true) {
            stack.extend_from_slice(g.children(e));
        }
    }
    let varying: Vec<u32> = (0..exprs.len() as u32).filter(|&i| in_merging[i as usize]).collect();
    let mut parents = Csr::default();
    let mut refs_to = Csr::default();
    let mut body_of = Csr::default();
    parents.fill(
        exprs.len(),
        varying
            .iter()
            .flat_map(|&i| g.children(ExprId(i)).iter().filter(|c| in_merging[c.index()]).map(move |c| (c.0, i))),
    );
    refs_to.fill(
        n,
        varying.iter().filter_map(|&i| match exprs[i as usize] {
            Expr::RuleRef(t) => Some((t.0, i)),
            _ => None,
        }),
    );
    body_of.fill(exprs.len(), (0..n as u32).filter(|&r| !own[r as usize]).map(|r| (g.rules()[r as usize].body.0, r)));
    // Partition refinement: every merging rule starts in class 0 (own-class rules alone); a
    // class splits by its members' signatures (body keys under the current classes). Invariant
    // after each round: all members of a class share the signature `class_sig`, and every
    // expression's `canon` is its key under the current classes; a rule's class changes its
    // references' keys, so only their ancestors are keyed again (children first: children have
    // lower ids), and only the rules with one of those as body (`dirty`) need a new signature;
    // a class's other members keep its id. Class ids are never reused, so a changed class
    // changes every key above it and interned keys stay valid.
    //
    // The merging rules start in one class per longest-string length (equal languages have equal
    // lengths, so no merge is lost): a rule chain that counts (a bounded string's automaton as
    // rules) would otherwise split one link per round, each round signing the rest again.
    //
    // Pure rules (`pure_rules`) start in their exact class instead, signed children first before
    // the rounds: rounds then only split what cycles leave open.
    let longest = longest_strings(g, deps, tail);
    let (pure, pure_order) = pure_rules(deps, &own);
    let mut class: Vec<u64> = (0..n).map(|r| if own[r] { r as u64 + 1 } else { 0 }).collect();
    let mut size: Vec<usize> = vec![0; n + 1];
    let mut class_sig: Vec<u64> = vec![u64::MAX; n + 1];
    let mut by_length: FastMap<u64, u64> = FastMap::default();
    for r in (0..n).filter(|&r| !own[r] && !pure[r]) {
        let fresh = if by_length.is_empty() { 0 } else { size.len() as u64 };
        let c = *by_length.entry(longest[r]).or_insert(fresh);
        if c == fresh && fresh != 0 {
            size.push(0);
            class_sig.push(u64::MAX);
        }
        class[r] = c;
        size[c as usize] += 1;
    }
    let mut sig = vec![0u64; n];
    let mut keys: SeqTable<u64> = SeqTable::default();
    // Pure rules, each after the rules it references: its body's varying expressions not keyed
    // yet are keyed (children first), and its signature picks its class.
    // PERF: the rounds split a chain of rules one link per round, keying the links above again
    // each time (o13024's 27 k object rules: 6 rounds keying 3 times the expressions of one).
    let mut keyed = vec![false; exprs.len()];
    let mut by_sig: FastMap<u64, u64> = FastMap::default();
    let (mut below, mut walk) = (Vec::new(), Vec::new());
    let mut work = 0usize;
    for &r in &pure_order {
        let body = g.rules()[r].body;
        walk.push(body);
        while let Some(e) = walk.pop() {
            if in_merging[e.index()] && !std::mem::replace(&mut keyed[e.index()], true) {
                below.push(e.0);
                walk.extend_from_slice(g.children(e));
            }
        }
        below.sort_unstable();
        for &i in &below {
            let i = i as usize;
            composite_key(&exprs[i], g.children(ExprId(i as u32)), &canon, &class, &mut key);
            canon[i] = intern(&mut keys, &key) << 1 | 1;
        }
        work += below.len() + 1;
        below.clear();
        let s = canon[body.index()] << 1 | u64::from(inline[r]);
        let fresh = size.len() as u64;
        let c = *by_sig.entry(s).or_insert(fresh);
        if c == fresh {
            size.push(0);
            class_sig.push(u64::MAX);
        }
        class[r] = c;
        size[c as usize] += 1;
    }
    // The first round keys every varying expression not keyed above and signs every merging
    // rule.
    let mut stale: Vec<u32> = varying.into_iter().filter(|&i| !keyed[i as usize]).collect();
    let mut stale_at = vec![0u32; exprs.len()];
    let mut dirty: Vec<u32> = (0..n as u32).filter(|&r| !own[r as usize]).collect();
    let mut round = 0u32;
    loop {
        round += 1;
        #[cfg(test)]
        ROUNDS.with(|c| c.set(c.get() + 1));
        stale.sort_unstable();
        for &i in &stale {
            let i = i as usize;
            composite_key(&exprs[i], g.children(ExprId(i as u32)), &canon, &class, &mut key);
            canon[i] = intern(&mut keys, &key) << 1 | 1;
            if round > 1 {
                dirty.extend_from_slice(body_of.get(i));
            }
        }
        for &r in &dirty {
            sig[r as usize] = canon[g.rules()[r as usize].body.index()] << 1 | u64::from(inline[r as usize]);
        }
        work += stale.len() + dirty.len();
        if work > max_work {
            return identity;
        }
        if dirty.is_empty() {
            break;
        }
        let mut by_class: Vec<(u64, u64, u32)> =
            dirty.iter().map(|&r| (class[r as usize], sig[r as usize], r)).collect();
        by_class.sort_unstable();
        let mut moved: Vec<u32> = Vec::new();
        for same_class in by_class.chunk_by(|a, b| a.0 == b.0) {
            let c = same_class[0].0 as usize;
            // With no clean member left, the first signature keeps the class.
            if same_class.len() == size[c] {
                class_sig[c] = same_class[0].1;
            }
            for same_sig in same_class.chunk_by(|a, b| a.1 == b.1) {
                let s = same_sig[0].1;
                if s == class_sig[c] {
                    continue;
                }
                let fresh = size.len();
                size.push(same_sig.len());
                class_sig.push(s);
                size[c] -= same_sig.len();
                for &(_, _, r) in same_sig {
                    class[r as usize] = fresh as u64;
                    moved.push(r);
                }
            }
        }
        // The references to moved rules and their ancestors, each once.
        stale.clear();
        dirty.clear();
        for &m in &moved {
            stale.extend(
                refs_to
                    .get(m as usize)
                    .iter()
                    .filter(|&&e| std::mem::replace(&mut stale_at[e as usize], round) != round),
            );
        }
        let mut next = 0;
        while let Some(&e) = stale.get(next) {
            next += 1;
            for &p in parents.get(e as usize) {
                if std::mem::replace(&mut stale_at[p as usize], round) != round {
                    stale.push(p);
                }
            }
        }
    }
    // Only rules with an automaton of their own gain from a shared one.
    let mut seen = vec![false; size.len()];
    let shared =
        (0..n).filter(|&r| !own[r] && !inline[r]).any(|r| std::mem::replace(&mut seen[class[r] as usize], true));
    if !shared {
        return identity;
    }
    let mut first: FastMap<u64, RuleId> = FastMap::default();
    (0..n).map(|r| *first.entry(class[r]).or_insert(RuleId(r as u32))).collect()
}

/// Whether two of the `candidates`' bodies have one shape hash after each of
/// [`SHAPE_PASSES`] passes. Pass 0 hashes an expression with every rule reference as one
/// symbol (leaves by value, composites by kind, bounds and children's shapes); pass `k` hashes a
/// reference by its rule's body shape of pass `k - 1`. Rules of one class have equal body keys
/// and reference rules of one class, so by induction on `k` their bodies' shapes are equal in
/// every pass: two candidates with different shapes in some pass never share a class. False
/// when the expressions are not numbered children first (the refinement then merges nothing).
fn shapes_repeat(g: &Grammar, candidates: &[usize], own: &[bool], signed: &[u32]) -> bool {
    use std::hash::{BuildHasher, Hasher};
    let exprs = g.exprs();
    let mut shape = vec![0u64; exprs.len()];
    // By rule: its body's shape in the previous pass; an own-class rule (its own class, so two
    // rules of one class name the same one) is shaped by its id in every pass.
    let mut body_shape: Vec<u64> =
        own.iter().enumerate().map(|(r, &o)| if o { FastState.hash_one((u64::MAX, r)) } else { 0 }).collect();
    let mut bodies: Vec<u64> = Vec::with_capacity(candidates.len());
    for pass in 0..SHAPE_PASSES {
        for &i in signed {
            let (i, e) = (i as usize, &exprs[i as usize]);
            let kids = g.children(ExprId(i as u32));
            shape[i] = match *e {
                Expr::Seq(_) | Expr::Choice(_) | Expr::Repeat { .. } | Expr::RuleRef(_) => {
                    let mut h = FastState.build_hasher();
                    match *e {
                        Expr::Seq(_) => h.write_u64(0),
                        Expr::Choice(_) => h.write_u64(1),
                        Expr::Repeat { min, max, .. } => {
                            h.write_u64(2);
                            h.write_u64(u64::from(min));
                            h.write_u64(max.map_or(0, |m| u64::from(m) + 1));
                        }
                        Expr::RuleRef(t) => {
                            h.write_u64(3);
                            h.write_u64(body_shape[t.index()]);
                        }
                        _ => unreachable!(),
                    }
                    for c in kids {
                        h.write_u64(shape[c.index()]);
                    }
                    h.finish()
                }
                // Leaves are the same in every pass.
                _ if pass > 0 => shape[i],
                _ => FastState.hash_one(e),
            };
        }
        bodies.clear();
        bodies.extend(candidates.iter().map(|&r| shape[g.rules()[r].body.index()]));
        bodies.sort_unstable();
        if !bodies.windows(2).any(|w| w[0] == w[1]) {
            return false;
        }
        for (r, rule) in g.rules().iter().enumerate().filter(|&(r, _)| !own[r]) {
            body_shape[r] = shape[rule.body.index()];
        }
    }
    true
}

/// The expressions below the bodies of the rules that are not `own` (their own class), in
/// ascending order, or every expression when fewer than a quarter of the rules are own-class
/// (the walk then costs more than it saves: the band's grammars own only their root); `None`
/// when one of them has a child numbered after it (the refinement needs children first and then
/// merges nothing).
fn signed_exprs(g: &Grammar, own: &[bool]) -> Option<Vec<u32>> {
    let len = g.exprs().len() as u32;
    let children_first = |e: u32| g.children(ExprId(e)).iter().all(|c| c.0 < e);
    if own.iter().filter(|&&o| o).count() * 4 < own.len() {
        return (0..len).all(children_first).then(|| (0..len).collect());
    }
    let mut below = vec![false; len as usize];
    let mut stack: Vec<ExprId> =
        g.rules().iter().enumerate().filter(|&(r, _)| !own[r]).map(|(_, rule)| rule.body).collect();
    while let Some(e) = stack.pop() {
        if !std::mem::replace(&mut below[e.index()], true) {
            if !children_first(e.0) {
                return None;
            }
            stack.extend_from_slice(g.children(e));
        }
    }
    Some((0..len).filter(|&e| below[e as usize]).collect())
}

/// Passes of [`shapes_repeat`]: each looks one rule reference deeper.
const SHAPE_PASSES: usize = 3;

/// Per rule: it is pure, i.e. it merges (`!own`), is on no cycle of references among merging
/// rules, and every merging rule it references is pure; and the pure rules, each after the pure
/// rules it references. `deps.get(r)`: the rules `r` references.
///
/// A pure rule is equal to no rule that is not pure (by induction on its height: a merging rule
/// on a cycle, or referencing one that is not pure, would need an equal reference where the pure
/// rule's are pure and lower, or own-class, equal only to themselves), so the classes of pure
/// rules are decided children first, exactly, and rounds are left only to the others.
fn pure_rules(deps: &Lists, own: &[bool]) -> (Vec<bool>, Vec<usize>) {
    let n = deps.len();
    let mut succ = Lists::with_capacity(n, 0);
    for r in 0..n {
        let listed = if own[r] { &[][..] } else { deps.get(r) };
        succ.push(listed.iter().copied().filter(|&d| !own[d as usize]));
    }
    let comp = super::tail::sccs(&succ);
    let mut comp_size = vec![0u32; n];
    for &c in &comp {
        comp_size[c as usize] += 1;
    }
    let cyclic = |r: usize| comp_size[comp[r] as usize] > 1 || succ.get(r).contains(&(r as u32));
    let mut pure = vec![false; n];
    let mut order = Vec::new();
    // 0: not seen, 1: on the walk, 2: done. Rules on no cycle form a DAG: a walk from one never
    // meets itself.
    let mut state = vec![0u8; n];
    let mut walk: Vec<(usize, usize)> = Vec::new();
    for start in (0..n).filter(|&r| !own[r] && !cyclic(r)) {
        if state[start] != 0 {
            continue;
        }
        state[start] = 1;
        walk.push((start, 0));
        while let Some((r, next)) = walk.last_mut() {
            if let Some(&t) = succ.get(*r).get(*next) {
                *next += 1;
                let t = t as usize;
                if state[t] == 0 && !cyclic(t) {
                    state[t] = 1;
                    walk.push((t, 0));
                }
                continue;
            }
            let r = *r;
            walk.pop();
            state[r] = 2;
            if succ.get(r).iter().all(|&t| pure[t as usize]) {
                pure[r] = true;
                order.push(r);
            }
        }
    }
    (pure, order)
}

/// Stands for an unbounded (or unknown) longest string in [`longest_strings`].
const UNBOUNDED: u64 = u64::MAX;

/// Per rule, the byte length of its longest string, or [`UNBOUNDED`] when the rule reaches a
/// cycle of rule references, an unbounded repetition of a non-empty expression or a token.
/// A function of the rule's language up to those approximations, which equal copies share.
/// A tail-group member (`tail.group`) is on a cycle of references, so [`UNBOUNDED`]: it is not
/// walked. Expressions must be numbered children first.
/// PERF: an open object's key-set rules are tail groups and hold most of such a grammar's rule
/// references (o44208: walking them was ~27% of `equal_rules`).
fn longest_strings(g: &Grammar, deps: &Lists, tail: &TailPlan) -> Vec<u64> {
    let n = g.rules().len();
    let mut expr_len: Vec<Option<u64>> = vec![None; g.exprs().len()];
    let mut rule_len = vec![UNBOUNDED; n];
    // 0: not seen, 1: on the walk's stack, 2: done (tail-group members from the start).
    let mut state: Vec<u8> = tail.group.iter().map(|&t| if t == NO_GROUP { 0 } else { 2 }).collect();
    let mut cyclic = vec![false; n];
    let (mut subtree, mut stack): (Vec<ExprId>, Vec<ExprId>) = (Vec::new(), Vec::new());
    // (rule, its next callee in `deps`)
    let mut walk: Vec<(usize, usize)> = Vec::new();
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        state[start] = 1;
        walk.push((start, 0));
        while let Some((r, next)) = walk.last_mut() {
            if let Some(&t) = deps.get(*r).get(*next) {
                *next += 1;
                let t = t as usize;
                match state[t] {
                    0 => {
                        state[t] = 1;
                        walk.push((t, 0));
                    }
                    // `t` is on the stack: `r` is in a cycle of references.
                    1 => cyclic[*r] = true,
                    _ => {}
                }
                continue;
            }
            let r = *r;
            walk.pop();
            state[r] = 2;
            if !cyclic[r] {
                rule_len[r] = body_longest(g, g.rules()[r].body, &rule_len, &mut expr_len, &mut subtree, &mut stack);
            }
        }
    }
    rule_len
}

/// The longest string of expression `body`, every rule it references being done in `rule_len`.
fn body_longest(
    g: &Grammar,
    body: ExprId,
    rule_len: &[u64],
    expr_len: &mut [Option<u64>],
    subtree: &mut Vec<ExprId>,
    stack: &mut Vec<ExprId>,
) -> u64 {
    subtree.clear();
    stack.clear();
    stack.push(body);
    while let Some(e) = stack.pop() {
        if expr_len[e.index()].is_none() {
            subtree.push(e);
            stack.extend_from_slice(g.children(e));
        }
    }
    // Children have lower ids than their parents.
    subtree.sort_unstable();
    for &e in subtree.iter() {
        let kid = |k: &ExprId| expr_len[k.index()].unwrap_or(UNBOUNDED);
        let len = match g.expr(e) {
            Expr::Bytes(b) => b.len() as u64,
            Expr::CharClass(ranges) => {
                ranges.iter().map(|&(_, hi)| char::from_u32(hi).map_or(4, |c| c.len_utf8() as u64)).max().unwrap_or(0)
            }
            Expr::Seq(kids) => kids.iter().map(kid).fold(0, u64::saturating_add),
            Expr::Choice(kids) => kids.iter().map(kid).max().unwrap_or(0),
            Expr::Repeat { expr, max, .. } => match (kid(expr), max) {
                (0, _) => 0,
                (k, Some(m)) => k.saturating_mul(u64::from(*m)),
                (_, None) => UNBOUNDED,
            },
            Expr::RuleRef(t) => rule_len[t.index()],
            // A JSON spelling takes at most 12 bytes per character (a surrogate pair).
            Expr::JsonStringIn(strs) => strs.iter().map(|s| 12 * s.chars().count() as u64).max().unwrap_or(0),
            Expr::JsonStringExcept(_) | Expr::Token(_) | Expr::ExcludeToken(_) => UNBOUNDED,
        };
        expr_len[e.index()] = Some(len);
    }
    expr_len[body.index()].unwrap_or(UNBOUNDED)
}

#[cfg(test)]
thread_local! {
    /// Refinement rounds this thread ran.
    static ROUNDS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The most expression and rule visits the refinement may take; a grammar that needs more keeps
/// every rule apart.
const MAX_WORK: usize = 4_000_000;

/// The key of a composite expression `e` (or a rule reference, by its rule's `class`) whose
/// children's ids are in `canon`, into `key`.
fn composite_key(e: &Expr, kids: &[ExprId], canon: &[u64], class: &[u64], key: &mut Vec<u64>) {
    key.clear();
    match *e {
        Expr::Seq(_) => key.push(0),
        Expr::Choice(_) => key.push(1),
        Expr::Repeat { min, max, .. } => key.extend([2, u64::from(min), max.map_or(0, |m| u64::from(m) + 1)]),
        Expr::RuleRef(r) => key.extend([3, class[r.index()]]),
        _ => unreachable!("leaves are interned as expressions"),
    }
    key.extend(kids.iter().map(|c| canon[c.index()]));
}

/// The id of `key` in `keys`, a new one if absent.
fn intern(keys: &mut SeqTable<u64>, key: &[u64]) -> u64 {
    u64::from(keys.intern(key).0)
}

/// Lists of `u32` per index, in one buffer: `get(i)` is `at[start[i]..start[i + 1]]`.
#[derive(Default)]
struct Csr {
    start: Vec<u32>,
    at: Vec<u32>,
}

impl Csr {
    /// The lists of `len` indexes from `(index, value)` pairs (values in the order given).
    fn fill(&mut self, len: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) {
        (self.start, self.at) = super::lists::group_by_key(len, pairs);
    }

    fn get(&self, i: usize) -> &[u32] {
        &self.at[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::super::{inline::inline_plan, tail::tail_plan};
    use super::*;
    use crate::ebnf::parse_ebnf;
    use crate::matcher::{CompiledGrammar, Matcher, MatcherOptions};
    use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
    use std::fmt::Write;
    use std::sync::Arc;

    /// Two copies of a recursive list rule (with their item rules) are one class; a third whose
    /// item differs by one leaf, and a copy with rule options, are not.
    const LISTS: &str = r#"
root ::= "a" a1 | "b" a2 | "c" b1 | "d" o1
a1 ::= "[" (x1 ("," x1)*)? "]"
x1 ::= [0-9]+ | a1
a2 ::= "[" (x2 ("," x2)*)? "]"
x2 ::= [0-9]+ | a2
b1 ::= "[" (y1 ("," y1)*)? "]"
y1 ::= [0-9]+ | b1 | "x"
o1[capture] ::= "[" (x1 ("," x1)*)? "]"
"#;

    fn reps(src: &str) -> (Grammar, Vec<RuleId>) {
        let g = parse_ebnf(src, "root").unwrap();
        let (inline, size, deps) = inline_plan(&g);
        let tail = tail_plan(&g, &inline, &size);
        let rep = equal_rules(&g, &inline, &deps, &tail);
        (g, rep)
    }

    fn rule(g: &Grammar, name: &str) -> usize {
        g.rules().iter().position(|r| r.name == name).unwrap()
    }

    #[test]
    fn rules_on_no_cycle_are_classed_children_first() {
        // Three chains of 40 rules of unbounded strings (one class per longest length does not
        // tell their links apart): `a` and `c` equal, `b` differing only at the bottom. Rounds
        // alone split one link per round; pure rules are classed before them.
        let depth = 40;
        let mut src = String::from("root ::= a0 | b0 | c0\n");
        for x in ["a", "b", "c"] {
            for i in 0..depth {
                writeln!(src, "{x}{i} ::= \"x\"* {x}{} | \"y\"* | \"v\" {x}{}", i + 1, i + 1).unwrap();
            }
            let bottom = if x == "b" { "w" } else { "z" };
            writeln!(src, "{x}{depth} ::= \"{bottom}\"*").unwrap();
        }
        let before = ROUNDS.with(std::cell::Cell::get);
        let (g, rep) = reps(&src);
        let rounds = ROUNDS.with(std::cell::Cell::get) - before;
        for i in 0..=depth {
            let [a, b, c] = ["a", "b", "c"].map(|x| rule(&g, &format!("{x}{i}")));
            assert_eq!(rep[c].index(), rep[a].index(), "c{i}");
            assert_ne!(rep[b].index(), rep[a].index(), "b{i}");
        }
        // One round signs every rule and splits nothing; the next finds nothing to sign.
        assert_eq!(rounds, 2);
    }

    #[test]
    fn equal_recursive_rules_share_a_class() {
        let (g, rep) = reps(LISTS);
        let rep_of = |name: &str| g.rules()[rep[rule(&g, name)].index()].name.as_str();
        assert_eq!(rep_of("a2"), "a1");
        assert_eq!(rep_of("x2"), "x1");
        assert_eq!(rep_of("b1"), "b1");
        assert_eq!(rep_of("y1"), "y1");
        assert_eq!(rep_of("o1"), "o1");
        assert_eq!(rep_of("root"), "root");
    }

    /// Rules whose bodies name no rule are signed in the first round like the others: two of one
    /// longest-string length stay apart unless their bodies are equal.
    #[test]
    fn rules_without_references_merge_only_when_equal() {
        let src =
            LISTS.replace("| \"d\" o1", "| \"d\" o1 | p | q | p2") + "p ::= \"xy\"\nq ::= \"yx\"\np2 ::= \"xy\"\n";
        let (g, rep) = reps(&src);
        let rep_of = |name: &str| g.rules()[rep[rule(&g, name)].index()].name.as_str();
        assert_eq!(rep_of("a2"), "a1", "the grammar merges some rules");
        assert_eq!(rep_of("p2"), "p");
        assert_eq!(rep_of("q"), "q");
    }

    /// A rule reference inside an expression that two rule bodies share (hash-consed) is keyed
    /// again when the rule it names moves, in both bodies: `u1`/`u2` differ only through `w1`
    /// and `w2`, which split in a later round than the first.
    #[test]
    fn shared_sub_expressions_follow_the_classes_they_name() {
        let src = format!(
            "{}{}",
            LISTS.replace("| \"d\" o1", "| \"d\" o1 | \"e\" u1 | \"f\" u2 | \"g\" u3"),
            "u1 ::= \"<\" (w1 \",\")* \">\"\nu2 ::= \"<\" (w2 \",\")* \">\"\nu3 ::= (\"<\" (w1 \",\")* \">\")\n\
             w1 ::= \"(\" v1 \")\"\nw2 ::= \"(\" v2 \")\"\nv1 ::= [0-9]+ | w1\nv2 ::= [0-9]+ | w2 | \"x\"\n"
        );
        let (g, rep) = reps(&src);
        let rep_of = |name: &str| g.rules()[rep[rule(&g, name)].index()].name.as_str();
        assert_eq!(rep_of("a2"), "a1", "the grammar merges some rules");
        assert_eq!(rep_of("u3"), "u1");
        assert_eq!(rep_of("u2"), "u2");
        assert_eq!(rep_of("w2"), "w2");
        assert_eq!(rep_of("v2"), "v2");
    }

    /// Two copies of a chain of 100,000 distinct nested rules merge pairwise: a chain needs one
    /// round per rule, and each round re-keys only the rules naming a rule that moved (the
    /// rounds of whole-grammar re-keying this replaced took minutes here). Under a small work
    /// cap nothing is merged.
    #[test]
    fn long_rule_chains_merge_pairwise_within_the_work_cap() {
        use std::fmt::Write;
        let n = 100_000;
        let mut src = String::from("root ::= r1 | s1\n");
        for p in ["r", "s"] {
            for i in 1..n {
                writeln!(src, "{p}{i} ::= \"(\" {p}{} \")\"", i + 1).unwrap();
            }
            writeln!(src, "{p}{n} ::= \"a\"").unwrap();
        }
        let (g, rep) = reps(&src);
        assert_eq!(g.rules().len(), 2 * n + 1);
        for i in [1, 2, n / 2, n - 1, n] {
            let (r, s) = (rule(&g, &format!("r{i}")), rule(&g, &format!("s{i}")));
            assert_eq!((rep[r].index(), rep[s].index()), (r, r), "r{i} and s{i}");
            if i > 1 {
                assert_ne!(rep[rule(&g, &format!("r{}", i - 1))].index(), r, "r{i} and its caller");
            }
        }
        let (inline, size, deps) = inline_plan(&g);
        let tail = tail_plan(&g, &inline, &size);
        let capped = equal_rules_within(&g, &inline, &deps, &tail, 100_000, true);
        assert!(capped.iter().enumerate().all(|(r, rep)| rep.index() == r), "no rule is merged");
    }

    /// Counted chains that one large rule names link by link (a bounded string's automaton as
    /// rules): the chains start apart by longest-string length, so refining takes a few rounds
    /// instead of one per link (each re-keying the large rule), and the copies merge within a
    /// small work cap.
    #[test]
    fn counted_chains_named_by_one_rule_merge_within_a_small_cap() {
        use std::fmt::Write;
        let n = 300;
        let mut src = String::from("root ::= big_c | big_d\n");
        for p in ["c", "d"] {
            for i in 1..n {
                writeln!(src, "{p}{i} ::= (\"x\" {p}{})?", i + 1).unwrap();
            }
            writeln!(src, "{p}{n} ::= \"x\"").unwrap();
            let alts: Vec<String> = (1..=n).map(|i| format!("\"{}\" {p}{i}", i % 7)).collect();
            writeln!(src, "big_{p} ::= {}", alts.join(" | ")).unwrap();
        }
        let g = parse_ebnf(&src, "root").unwrap();
        let (inline, size, deps) = inline_plan(&g);
        let tail = tail_plan(&g, &inline, &size);
        let rep = equal_rules_within(&g, &inline, &deps, &tail, 40_000, true);
        assert_eq!(rep[rule(&g, "big_d")].index(), rule(&g, "big_c"));
        for i in 1..=n {
            assert_eq!(rep[rule(&g, &format!("d{i}"))].index(), rule(&g, &format!("c{i}")), "d{i}");
        }
    }

    /// Candidates whose bodies all differ in shape (`a1` and `b1` differ in their bracket)
    /// skip the refinement: no round runs, nothing merges. Two chains that differ only below the
    /// screen's depth (`p5`, `q5`) have shapes that repeat: the rounds run and keep them apart.
    #[test]
    fn distinct_shapes_skip_the_refinement() {
        let lists = "root ::= \"a\" a1 | \"c\" b1\na1 ::= \"[\" (x1 (\",\" x1)*)? \"]\"\nx1 ::= [0-9]+ | a1\n\
                     b1 ::= \"<\" (y1 (\",\" y1)*)? \"]\"\ny1 ::= [0-9]+ | b1 | \"x\"\n";
        let mut chains = String::from("root ::= \"a\" p1 | \"b\" q1\n");
        for x in ["p", "q"] {
            for i in 1..5 {
                writeln!(chains, "{x}{i} ::= \"(\" {x}{} \")\" | \"<\" {x}{i} \">\"", i + 1).unwrap();
            }
            writeln!(chains, "{x}5 ::= \"{x}\"+ | \"<\" {x}5 \">\"").unwrap();
        }
        for (src, rounds) in [(lists.to_string(), false), (chains, true)] {
            let before = ROUNDS.with(std::cell::Cell::get);
            let (_, rep) = reps(&src);
            assert_eq!(ROUNDS.with(std::cell::Cell::get) > before, rounds, "{src}");
            assert!(rep.iter().enumerate().all(|(r, rep)| rep.index() == r));
        }
    }

    /// The shape screen never changes the classes: random grammars over a tiny alphabet (many
    /// equal and many same-shaped rules) get the same representatives with and without it.
    #[test]
    fn shape_screen_keeps_every_class() {
        let mut rng = crate::test_rng::XorShift(0x2545_F491_4F6C_DD1D);
        let mut next = |n: u64| rng.below(n);
        let (mut screened_out, mut merging, mut merging_own_refs) = (0, 0, 0);
        for _ in 0..400 {
            let rules = 2 + next(7) as usize;
            let mut src = String::new();
            let mut bodies: Vec<String> = Vec::new();
            for r in 0..rules {
                let name = if r == 0 { "root".to_string() } else { format!("r{r}") };
                // A third of the rules copy an earlier rule's body: equal rules.
                let body = if r > 1 && next(3) == 0 {
                    bodies[1 + next(r as u64 - 1) as usize].clone()
                } else {
                    let mut body = String::new();
                    for alt in 0..=next(2) {
                        if alt > 0 {
                            body.push_str("| ");
                        }
                        for _ in 0..=next(2) {
                            let atom = match next(5) {
                                0 => "\"a\"".to_string(),
                                1 => "[0-9]".to_string(),
                                2 => format!("(\"a\" r{})*", 1 + next(rules as u64 - 1)),
                                _ => format!("r{}", 1 + next(rules as u64 - 1)),
                            };
                            write!(body, "{atom} ").unwrap();
                        }
                    }
                    body
                };
                // On a cycle of its own: never inlined; a quarter also in a tail group of its own
                // (own class), so candidates name own-class rules.
                let tail_loop = if r > 0 && next(4) == 0 { format!("| \"t\" {name} ") } else { String::new() };
                writeln!(src, "{name} ::= {body}{tail_loop}| \"(\" {name} \")\"").unwrap();
                bodies.push(body);
            }
            let Ok(g) = parse_ebnf(&src, "root") else { continue };
            let (inline, size, deps) = inline_plan(&g);
            let tail = tail_plan(&g, &inline, &size);
            let full = equal_rules_within(&g, &inline, &deps, &tail, MAX_WORK, false);
            let screened = equal_rules_within(&g, &inline, &deps, &tail, MAX_WORK, true);
            assert_eq!(screened, full, "{src}");
            let identity = full.iter().enumerate().all(|(r, rep)| rep.index() == r);
            merging += usize::from(!identity);
            let own: Vec<bool> =
                (0..g.rules().len()).map(|r| r == g.root().index() || tail.group[r] != NO_GROUP).collect();
            for (r, rep) in full.iter().enumerate() {
                assert!(!own[r] || rep.index() == r, "own rule merged: {src}");
                let (a, b) = (g.rules()[r].body, g.rules()[rep.index()].body);
                assert!(same_up_to(&g, &full, a, b), "rule {r} merged into an unequal one: {src}");
                let named_own =
                    |e: ExprId| g.children(e).is_empty() && matches!(g.expr(e), Expr::RuleRef(t) if own[t.index()]);
                merging_own_refs += usize::from(rep.index() != r && subtree(&g, a).into_iter().any(named_own));
            }
            let candidates: Vec<usize> = (0..g.rules().len()).filter(|&r| !own[r] && !inline[r]).collect();
            let signed = signed_exprs(&g, &own).expect("parsed grammars are numbered children first");
            screened_out += usize::from(!shapes_repeat(&g, &candidates, &own, &signed));
        }
        // Every path is exercised, merges naming own-class rules included.
        assert!(merging > 20 && screened_out > 20, "{merging} merging, {screened_out} screened out");
        assert!(merging_own_refs > 5, "{merging_own_refs} merged rules name own-class rules");
    }

    /// Whether expressions `a` and `b` are equal once every referenced rule is replaced by its
    /// representative in `rep`.
    fn same_up_to(g: &Grammar, rep: &[RuleId], a: ExprId, b: ExprId) -> bool {
        match (g.expr(a), g.expr(b)) {
            (Expr::RuleRef(x), Expr::RuleRef(y)) => rep[x.index()] == rep[y.index()],
            (Expr::Seq(_), Expr::Seq(_)) | (Expr::Choice(_), Expr::Choice(_)) => {
                let (ka, kb) = (g.children(a), g.children(b));
                ka.len() == kb.len() && ka.iter().zip(kb).all(|(&x, &y)| same_up_to(g, rep, x, y))
            }
            (Expr::Repeat { min: m1, max: x1, .. }, Expr::Repeat { min: m2, max: x2, .. }) => {
                m1 == m2 && x1 == x2 && same_up_to(g, rep, g.children(a)[0], g.children(b)[0])
            }
            (x, y) => g.children(a).is_empty() && g.children(b).is_empty() && x == y,
        }
    }

    /// The expressions below `e`, itself included.
    fn subtree(g: &Grammar, e: ExprId) -> Vec<ExprId> {
        let (mut out, mut stack) = (Vec::new(), vec![e]);
        while let Some(x) = stack.pop() {
            out.push(x);
            stack.extend_from_slice(g.children(x));
        }
        out
    }

    #[test]
    fn merged_rules_keep_the_language() {
        let toks: Vec<Vec<u8>> = b"abcd[],0123456789x".iter().map(|&c| vec![c]).chain([b"</s>".to_vec()]).collect();
        let stop = (toks.len() - 1) as u32;
        let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        let cg = Arc::new(CompiledGrammar::new(&parse_ebnf(LISTS, "root").unwrap(), &vocab).unwrap());
        let accepts = |s: &str| {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            m.accept_bytes(s.as_bytes()).unwrap() && m.is_completed()
        };
        for ok in ["a[]", "a[1,[2,[]],3]", "b[[[4]]]", "c[x,[x],5]", "d[1,[2]]"] {
            assert!(accepts(ok), "{ok}");
        }
        for bad in ["a[x]", "b[1,[x]]", "d[x]", "a[1,", "c[x"] {
            assert!(!accepts(bad), "{bad}");
        }
    }
}
