//! Component-by-component minimization: the partition of a DFA's states decided one strongly
//! connected component at a time, sinks first.
//!
//! Pipeline place: the first choice of [`minimize`](super::minimize::minimize); most rule
//! automata (chains and trees with whitespace self-loops) are decided in one pass.
use super::determinize::SeqTable;
use super::dfa::Dfa;

/// Marks, in a signature of [`scc_partition`], an edge back into the class being decided (a
/// self-loop).
const SELF: u32 = u32::MAX - 1;

/// Strongly connected components above this size make [`minimize`] fall back to refining the
/// whole automaton (Moore's rounds inside a component take up to one round per state).
pub(super) const SCC_MOORE_MAX_STATES: usize = 128;

/// At most this many looping classes are tried per state as an unrolled self-loop (see
/// [`scc_partition`]).
const MAX_LOOP_CANDIDATES: usize = 8;

/// Buffers of [`scc_partition`], kept from one rule to the next.
#[derive(Default)]
pub(super) struct SccScratch {
    pub(super) index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    pub(super) stack: Vec<u32>,
    pub(super) call: Vec<(u32, u32)>,
    /// Components back to back, each ending at `comp_end`, sinks first.
    comps: Vec<u32>,
    comp_end: Vec<u32>,
    pub(super) class: Vec<u32>,
    /// The number of cyclic components (of more than one state) met by the last partition; at
    /// least 2 also when some state's loop candidates were cut short.
    pub(super) cyclic: usize,
    /// Class of each interned signature.
    class_of_sig: Vec<u32>,
    /// Per class: whether its signature has a `SELF` edge, and then whether it accepts (only
    /// such classes can take in an unrolled self-loop).
    class_loops: Vec<Option<bool>>,
    pub(super) table: SeqTable,
    local_table: SeqTable,
    pub(super) local: Vec<u32>,
    next_local: Vec<u32>,
    pub(super) sig: Vec<u32>,
    pub(super) targets: Vec<u32>,
    /// Per state: its position in the component being refined by Moore's rounds, `u32::MAX`
    /// outside it (all `u32::MAX` between components).
    pos: Vec<u32>,
}

/// Appends the signature of state `s` to `out`: whether it accepts, its byte ranges with the
/// token `token` gives each target (adjacent ranges with one token merged), a separator, and its
/// rule edges with their targets' tokens.
fn push_tokens(dfa: &Dfa, s: usize, token: impl Fn(u32) -> u32, out: &mut Vec<u32>) {
    out.push(u32::from(dfa.finals[s]));
    push_edges(dfa, s, token, out);
}

/// [`push_tokens`] without the finality: the byte ranges with their targets' tokens (adjacent
/// ranges with one token merged), a separator, the rule edges with their targets' tokens.
pub(super) fn push_edges(dfa: &Dfa, s: usize, token: impl Fn(u32) -> u32, out: &mut Vec<u32>) {
    let mut last: Option<(u8, u8, u32)> = None;
    for e in dfa.bytes_of(s) {
        let c = token(e.target);
        match &mut last {
            Some(l) if l.2 == c && u16::from(l.1) + 1 == u16::from(e.lo) => l.1 = e.hi,
            _ => {
                if let Some((lo, hi, c)) = last {
                    out.extend_from_slice(&[u32::from(lo) | u32::from(hi) << 8, c]);
                }
                last = Some((e.lo, e.hi, c));
            }
        }
    }
    if let Some((lo, hi, c)) = last {
        out.extend_from_slice(&[u32::from(lo) | u32::from(hi) << 8, c]);
    }
    out.push(u32::MAX);
    for &(r, t) in dfa.rules_of(s) {
        out.extend_from_slice(&[r.0, token(t)]);
    }
}

/// The strongly connected components of `dfa` (byte and rule edges) into `sc.comps`, sinks
/// first (Tarjan's algorithm, iterative).
fn sccs(dfa: &Dfa, sc: &mut SccScratch) {
    let n = dfa.len();
    let SccScratch { index, low, on_stack, stack, call, comps, comp_end, .. } = sc;
    index.clear();
    index.resize(n, u32::MAX);
    low.clear();
    low.resize(n, 0);
    on_stack.clear();
    on_stack.resize(n, false);
    comps.clear();
    comp_end.clear();
    let succ = |v: usize, i: usize| -> Option<u32> {
        let b = dfa.bytes_of(v);
        match b.get(i) {
            Some(e) => Some(e.target),
            None => dfa.rules_of(v).get(i - b.len()).map(|&(_, t)| t),
        }
    };
    let mut next = 0u32;
    for root in 0..n as u32 {
        if index[root as usize] != u32::MAX {
            continue;
        }
        index[root as usize] = next;
        low[root as usize] = next;
        next += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        call.push((root, 0));
        while let Some(&mut (v, ref mut i)) = call.last_mut() {
            let (v, at) = (v as usize, *i as usize);
            if let Some(w) = succ(v, at) {
                *i += 1;
                let w = w as usize;
                if index[w] == u32::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    call.push((w as u32, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            call.pop();
            if let Some(&(u, _)) = call.last() {
                low[u as usize] = low[u as usize].min(low[v]);
            }
            if low[v] == index[v] {
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w as usize] = false;
                    comps.push(w);
                    if w as usize == v {
                        break;
                    }
                }
                comp_end.push(comps.len() as u32);
            }
        }
    }
}

/// A partition of `dfa`'s states into equivalent ones, into `sc.class`; returns the number of
/// classes, or `None` when a strongly connected component is too large (see
/// [`SCC_MOORE_MAX_STATES`]).
///
/// Components are decided sinks first, so every edge that leaves a component leads to decided
/// classes. A single state (with or without self-loops) joins the class of equal signature, its
/// self-loops written [`SELF`]; it also joins a class `C` it has edges into when its signature
/// with those edges written [`SELF`] is `C`'s own (a self-loop unrolled by the subset
/// construction). A larger component is refined by Moore's rounds inside it, its exits fixed.
/// Every merge is of equivalent states. The partition is the coarsest one except that equivalent
/// states in two different cyclic components stay apart (twins of a loop); `sc.cyclic` counts
/// those components.
/// PERF: most rule automata are chains and trees (keys, key exclusions) with self-loops
/// (whitespace): one pass decides them, where Moore's rounds took one pass per link of the
/// longest chain and the worklist a sort per split.
pub(super) fn scc_partition(dfa: &Dfa, sc: &mut SccScratch) -> Option<usize> {
    scc_partition_with(dfa, sc, SCC_MOORE_MAX_STATES, false)
}

/// [`scc_partition`] with components of more than `moore_max` states either refused (`None`)
/// or, with `keep_large`, kept apart: each of their states a class of its own (never `None`).
/// A state of its own class is equivalent to itself, so every merge is still of equivalent
/// states, and the pass stays linear in the automaton (no rounds).
pub(super) fn scc_partition_with(dfa: &Dfa, sc: &mut SccScratch, moore_max: usize, keep_large: bool) -> Option<usize> {
    sccs(dfa, sc);
    let n = dfa.len();
    let mut comps = std::mem::take(&mut sc.comps);
    let comp_end = std::mem::take(&mut sc.comp_end);
    let mut sizes = comp_end.iter().scan(0u32, |start, &end| Some(end - std::mem::replace(start, end)));
    if !keep_large && sizes.any(|len| len as usize > moore_max) {
        sc.comps = comps;
        sc.comp_end = comp_end;
        return None;
    }
    let SccScratch {
        class, class_of_sig, class_loops, table, local_table, local, next_local, sig, targets, pos, ..
    } = sc;
    class.clear();
    class.resize(n, u32::MAX);
    pos.clear();
    pos.resize(n, u32::MAX);
    class_of_sig.clear();
    class_loops.clear();
    table.reset();
    let mut n_classes = 0u32;
    let mut sc_cyclic = 0usize;
    let mut start = 0usize;
    for &end in &comp_end {
        let comp = &mut comps[start..end as usize];
        start = end as usize;
        if let [s] = *comp {
            let s = s as usize;
            sig.clear();
            push_tokens(dfa, s, |t| if t as usize == s { SELF } else { class[t as usize] }, sig);
            let (id, new) = table.intern(sig);
            if !new && class_of_sig[id as usize] != u32::MAX {
                class[s] = class_of_sig[id as usize];
                continue;
            }
            if new {
                class_of_sig.push(u32::MAX);
            }
            // The looping classes of the same finality `s` has edges into: candidates for an
            // unrolled self-loop.
            targets.clear();
            let others = dfa.bytes_of(s).iter().map(|e| e.target).chain(dfa.rules_of(s).iter().map(|&(_, t)| t));
            let looped = others.clone().any(|t| t as usize == s);
            let fin = dfa.finals[s];
            let looping = |c: u32| c != u32::MAX && class_loops[c as usize] == Some(fin);
            targets.extend(others.map(|t| class[t as usize]).filter(|&c| looping(c)));
            targets.sort_unstable();
            targets.dedup();
            // Bounded: a state with many looping targets tries a few, and the partition may then
            // miss a merge, which the worklist finishes (`sc.cyclic` is raised).
            if targets.len() > MAX_LOOP_CANDIDATES {
                targets.truncate(MAX_LOOP_CANDIDATES);
                sc_cyclic = sc_cyclic.max(2);
            }
            let mut joined = None;
            for &c in targets.iter() {
                sig.clear();
                let token = |x: u32| if x as usize == s || class[x as usize] == c { SELF } else { class[x as usize] };
                push_tokens(dfa, s, token, sig);
                let (id2, new2) = table.intern(sig);
                if new2 {
                    class_of_sig.push(u32::MAX);
                } else if class_of_sig[id2 as usize] == c {
                    joined = Some(c);
                    break;
                }
            }
            let c = joined.unwrap_or_else(|| {
                class_loops.push(looped.then_some(fin));
                n_classes += 1;
                n_classes - 1
            });
            class[s] = c;
            class_of_sig[id as usize] = c;
            continue;
        }
        sc_cyclic = sc_cyclic.saturating_add(1);
        if comp.len() > moore_max {
            // Kept apart (`keep_large`): a class per state, none a loop candidate.
            for &s in comp.iter() {
                class[s as usize] = n_classes;
                class_loops.push(None);
                n_classes += 1;
            }
            continue;
        }
        // Moore's rounds inside the component: members are numbered by their position in it.
        // PERF: a position table, not a binary search of `comp` per edge (o3626: the rounds
        // are most of the component pass).
        comp.sort_unstable();
        for (k, &s) in comp.iter().enumerate() {
            pos[s as usize] = k as u32;
        }
        local.clear();
        local.extend(comp.iter().map(|&s| u32::from(dfa.finals[s as usize])));
        let mut count = 0usize;
        loop {
            local_table.reset();
            next_local.clear();
            for (k, &s) in comp.iter().enumerate() {
                sig.clear();
                sig.push(local[k]);
                let token = |t: u32| match pos[t as usize] {
                    u32::MAX => class[t as usize],
                    p => n as u32 + local[p as usize],
                };
                push_tokens(dfa, s as usize, token, sig);
                next_local.push(local_table.intern(sig).0);
            }
            std::mem::swap(local, next_local);
            let distinct = local_table.len();
            if distinct == count {
                break;
            }
            count = distinct;
        }
        for (k, &s) in comp.iter().enumerate() {
            class[s as usize] = n_classes + local[k];
            pos[s as usize] = u32::MAX;
        }
        // Register each class's signature (edges into itself written `SELF`), so that a state
        // upstream equivalent to it joins it; a component of one class equal to a decided class
        // (a self-loop or loop decided before) joins that class instead.
        let mut joined = None;
        class_loops.resize(n_classes as usize + count, None);
        next_local.clear();
        next_local.resize(count, 0);
        for k in 0..comp.len() {
            let (s, c) = (comp[k] as usize, class[comp[k] as usize]);
            if std::mem::replace(&mut next_local[local[k] as usize], 1) == 1 {
                continue;
            }
            sig.clear();
            push_tokens(dfa, s, |t| if class[t as usize] == c { SELF } else { class[t as usize] }, sig);
            if sig.contains(&SELF) {
                class_loops[c as usize] = Some(dfa.finals[s]);
            }
            let (id, new) = table.intern(sig);
            if new {
                class_of_sig.push(c);
            } else if class_of_sig[id as usize] == u32::MAX {
                class_of_sig[id as usize] = c;
            } else if count == 1 {
                joined = Some(class_of_sig[id as usize]);
            }
        }
        match joined {
            Some(c) => {
                for &s in comp.iter() {
                    class[s as usize] = c;
                }
                class_loops.truncate(n_classes as usize);
            }
            None => n_classes += count as u32,
        }
    }
    sc.comps = comps;
    sc.comp_end = comp_end;
    sc.cyclic = sc_cyclic;
    Some(n_classes as usize)
}
