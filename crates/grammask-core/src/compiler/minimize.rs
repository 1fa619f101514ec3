//! DFA minimization: merging equivalent states of one rule's DFA.
//!
//! Pipeline place: takes a [`Dfa`] from subset construction (`determinize.rs`) and returns its
//! quotient by state equivalence. The partition comes from the component-by-component pass
//! ([`scc_partition`], `scc.rs`) or, as a fallback, from worklist refinement of the whole
//! automaton ([`Refiner`], `refine.rs`).
use super::dfa::ByteEdgeLocal;
use super::dfa::Dfa;
use super::refine::Refiner;
use super::scc::push_edges;
use super::scc::{scc_partition, scc_partition_with, SccScratch, SCC_MOORE_MAX_STATES};

/// Rule automata larger than this are merged component by component only (see [`minimize`]).
/// PERF: refining a 1,947-state automaton (a 10-tool structural tag's `tags` rule, its JSON
/// string loops twins of each other) took 12 M instructions; the components alone take a pass.
pub(super) const REFINE_MAX_STATES: usize = 1_000;

/// Rule automata larger than this are not minimized at all (see [`minimize`]).
/// PERF: the component pass on the 10,427 states of a 50-tool structural tag's `tags` rule took
/// 16 M instructions (a tenth of that first compile).
const MINIMIZE_MAX_STATES: usize = 4_000;

/// Appends state `s`'s signature under a partition (`class` of each state): its byte ranges with
/// their target classes (adjacent ranges with the same class merged), a separator, its rule edges
/// with their target classes. States with equal signatures are equivalent under the partition.
pub(super) fn push_signature(dfa: &Dfa, s: usize, class: &[u32], out: &mut Vec<u32>) {
    push_edges(dfa, s, |t| class[t as usize], out);
}

/// Merges the states with the same finality and the same edges (byte ranges, rule references)
/// up to equivalence: component by component ([`scc_partition`]), or, when a cyclic component is
/// large, by partition refinement of the whole automaton with a worklist: after a full first
/// pass, only the predecessors of states that changed block are examined again, and a splitting
/// block keeps its largest part (the others move), so states move O(log n) times each
/// (Hopcroft's argument). A missing edge differs from an edge to a dead state (dead states are
/// pruned later, over all rules). Keeps state 0 as the start.
///
/// Above [`REFINE_MAX_STATES`] states, only the component pass runs, its large components kept
/// apart ([`scc_partition_with`]): linear, and exact for the acyclic parts (tag alternatives,
/// keys), but twin loops and the states of large cyclic components stay unmerged. Above
/// [`MINIMIZE_MAX_STATES`], the automaton is kept as built.
pub(super) fn minimize(dfa: Dfa, sc: &mut SccScratch) -> Dfa {
    let n = dfa.finals.len();
    if n <= 1 || n > MINIMIZE_MAX_STATES {
        return dfa;
    }
    if n > REFINE_MAX_STATES {
        let k = scc_partition_with(&dfa, sc, SCC_MOORE_MAX_STATES, true).expect("large components are kept apart");
        return if k < n { quotient(&dfa, &sc.class, k) } else { dfa };
    }
    match scc_partition(&dfa, sc) {
        // Loops may have twins (`cyclic >= 2`): the worklist finishes on the (smaller) quotient.
        Some(k) if k < n => {
            let q = quotient(&dfa, &sc.class, k);
            if sc.cyclic < 2 {
                q
            } else {
                refined(q)
            }
        }
        Some(_) if sc.cyclic < 2 => dfa,
        _ => refined(dfa),
    }
}

/// `dfa` merged by worklist refinement (kept as it is when already minimal: the quotient would
/// renumber every state to itself).
pub(super) fn refined(dfa: Dfa) -> Dfa {
    let (class, n_classes) = refine_partition(&dfa);
    if n_classes < dfa.len() {
        quotient(&dfa, &class, n_classes)
    } else {
        dfa
    }
}

/// The coarsest partition of `dfa`'s states by worklist refinement: the block of each state,
/// and the number of blocks.
pub(super) fn refine_partition(dfa: &Dfa) -> (Vec<u32>, usize) {
    let mut r = Refiner::new(dfa);
    let mut all: Vec<u32> = Vec::new();
    loop {
        if !r.moved.is_empty() {
            r.propagate();
        } else if let Some(b) = r.queue.pop() {
            let b = b as usize;
            r.queued[b] = false;
            r.stamp += 1;
            all.clear();
            all.extend_from_slice(&r.elems[r.first[b] as usize..r.past[b] as usize]);
            for &s in &all {
                r.mark[s as usize] = r.stamp;
            }
            r.examine(b, &all);
        } else {
            break;
        }
    }
    // The refinement only splits blocks whose members differ; it is also complete (tested
    // against Moore's algorithm in `minimize_matches_moore`).
    debug_assert!(r.is_stable(), "minimize: unstable partition");
    (std::mem::take(&mut r.block_of), r.first.len())
}

/// The quotient of `dfa` by a partition (`class` of each state, `n_classes` classes) that its
/// edges respect. Keeps state 0 as the start.
pub(super) fn quotient(dfa: &Dfa, class: &[u32], n_classes: usize) -> Dfa {
    let n = dfa.len();
    // Renumber so the start state's class is 0, in first-seen order.
    let mut renum: Vec<u32> = vec![u32::MAX; n_classes];
    let mut order: Vec<usize> = Vec::with_capacity(n_classes);
    for (s, &c) in class[..n].iter().enumerate() {
        let c = c as usize;
        if renum[c] == u32::MAX {
            renum[c] = order.len() as u32;
            order.push(s);
        }
    }
    let mut out = Dfa::default();
    for &s in &order {
        let first = out.bytes.len();
        for e in dfa.bytes_of(s) {
            let t = renum[class[e.target as usize] as usize];
            out.push_byte(first, ByteEdgeLocal { lo: e.lo, hi: e.hi, target: t });
        }
        out.rules.extend(dfa.rules_of(s).iter().map(|&(r, t)| (r, renum[class[t as usize] as usize])));
        out.end_state(dfa.finals[s]);
    }
    out
}
