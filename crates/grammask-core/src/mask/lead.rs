//! Kernels behind a leading whitespace call: a state whose only move is a call of a bounded run
//! of one byte class (`ws ::= [ \n\t\r]{0,64}`) followed by a state `t` that reads none of it.
//!
//! Pipeline place: called by [`crate::compiled::CompiledGrammar`] when a kernel is first needed,
//! before composition and the walk (`walk.rs`); the part of the classification that `t` reads
//! from the first byte on is `t`'s own kernel, joined by the caller.
use super::*;

/// The byte class `C` and bound `B` of a rule whose start `s0` reads exactly the runs `C{0,B}`
/// (`B` is `u32::MAX` for `C*`): every state on the chain is final, has no rule edges and steps
/// every byte of `C`, and nothing else, to the next state (or to itself, for `C*`); the last one
/// has no edges. `None` for any other shape.
pub fn lead_run(a: &Automata, s0: StateId) -> Option<(ByteSet, u32)> {
    let (mut s, mut class, mut n) = (s0, None::<ByteSet>, 0u32);
    loop {
        if !a.rule_edges(s).is_empty() || !a.state(s).is_final {
            return None;
        }
        let edges = a.byte_edges(s);
        let Some(first) = edges.first() else { return class.map(|c| (c, n)) };
        let mut set = ByteSet::default();
        for e in edges {
            if e.target != first.target {
                return None;
            }
            set.insert_range(e.lo, e.hi);
        }
        if class.is_some_and(|c| c != set) {
            return None;
        }
        class = Some(set);
        if first.target == s {
            return Some((set, u32::MAX));
        }
        s = first.target;
        n += 1;
        if n > LEAD_MAX_CHAIN {
            return None;
        }
    }
}

/// Chains longer than this are not followed by [`lead_run`] (a bound past the longest token
/// reads like `C*` anyway; the JSON Schema whitespace is 64).
const LEAD_MAX_CHAIN: u32 = 1024;

/// The classification, for a kernel state `X` whose only move is a call of a rule reading
/// `class{0,bound}` ([`lead_run`]) and then state `t` of `X`'s rule, of the tokens that begin with
/// a byte of `class`; `None` unless `t`'s kernel row reads no byte of `class` and has not ended
/// the rule. With `then = Some(q)` (`q` not in `class`), `t` is instead the state after `X`'s
/// rule reads `q` past the run, and the tokens classified are those `w q σ` (`w` a run within
/// the bound, possibly empty) and the runs: the part of `X`'s classification that `q` begins
/// in `X`'s own rule (an [`entry_choice`]'s own keys); `t`'s row may read class bytes then.
///
/// Why it is exact: `t` reads no class byte, so a token `w σ` (`w` its longest prefix of class
/// bytes) is read from `X` only by the call reading all of `w`; with `|w|` past the bound it is
/// refused (nothing ends `X`'s rule on the way: the call is in progress and `t` has not ended
/// it), else `σ` is read from `t`, in `X`'s rule, exactly as from a kernel chart of `t`. So the
/// class tokens within the bound are accepted, and each subtree below a run node whose byte `t`
/// reads is walked from `t`'s kernel chart, with the run's frames standing for `t`'s row (no rule
/// end on them). With `then`, `q` ends the run as well (it is not a class byte), and after it
/// the token goes on from `t`, not ended either: `w q` is accepted, and each subtree below it
/// that `t` reads is walked alike.
///
/// PERF: the call reads each depth of the run into a new Earley row (the bound counts), and the
/// walk of `X` stepped them for every whitespace node of the trie: ~60-80 µs per key position
/// after `,` or `{`, per position before `:` and per value after `:` on Llama 3, one or two new
/// ones in most MaskBench fills between p98 and p99.9.
#[allow(clippy::too_many_arguments)]
pub fn classify_after_lead(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    t: StateId,
    sc: Shortcuts<'_>,
    class: &ByteSet,
    bound: u32,
    then: Option<u8>,
) -> Result<Option<KernelMask>> {
    if then.is_some_and(|q| class.contains(q)) {
        return Ok(None);
    }
    let mut never = || false;
    for interned in [true, false] {
        let mut w = KernelWalk::new(a, trie, vocab_size, t, &sc, interned, usize::MAX, &mut never);
        let base = Frame::Rows(w.chart.num_rows());
        let readable = row_bytes(a, w.chart.last_row());
        let reads_class = (0..=255u8).any(|b| class.contains(b) && readable.contains(b));
        if frame_ended(a, &w.chart, base) || (then.is_none() && reads_class) {
            return Ok(None);
        }
        let mut done = true;
        // The run nodes (every byte on their path in `class`, within the bound, then `then`) in
        // trie order, with `run` their path; below them, only the children `t` reads are walked.
        let mut run: Vec<u8> = Vec::new();
        let root = |b: u8| class.contains(b) || then == Some(b);
        'roots: for &r in trie.root_children.iter().filter(|&&c| root(trie.nodes[c as usize].byte)) {
            let (mut i, end) = (r as usize, trie.nodes[r as usize].subtree_end as usize);
            // The depth of the `then` node on the current path.
            let mut bridge: Option<u32> = None;
            while i < end {
                let n = trie.nodes[i];
                let d = n.depth as usize;
                run.truncate(d - 1);
                if bridge.is_some_and(|b| n.depth <= b) {
                    bridge = None;
                }
                let in_run = bridge.is_none() && class.contains(n.byte) && n.depth <= bound;
                let bridged = bridge.is_none() && then == Some(n.byte);
                if in_run || bridged {
                    run.push(n.byte);
                    for &tok in trie.node_tokens(&n) {
                        w.accepted.set(tok as usize);
                    }
                    if bridged {
                        bridge = Some(n.depth);
                    }
                    i += 1;
                    continue;
                }
                let below = if then.is_some() { bridge.is_some() } else { !class.contains(n.byte) };
                if below && readable.contains(n.byte) {
                    // The run's frames are `t`'s row, with no rule end on them.
                    w.frames.clear();
                    w.frames.resize(d - 1, base);
                    w.ends.clear();
                    w.ends.resize(d - 1, false);
                    w.path.clear();
                    w.path.extend_from_slice(&run);
                    if !w.walk(i, n.subtree_end as usize, base)? {
                        done = false;
                        break 'roots;
                    }
                }
                i = n.subtree_end as usize;
            }
        }
        if done {
            let KernelWalk { uncertain, suffixes, accepted, .. } = w;
            return Ok(Some(kernel_mask(TokenSet::Bits(accepted), uncertain, suffixes)));
        }
    }
    unreachable!("the stack walk has no memo to fill and is never abandoned")
}

/// The byte `q` when `t` is an *entry choice*: a state, not final, whose moves are rule calls
/// (at least one) and at most one byte edge, on `q`, and whose callees' starts are literal
/// positions ([`literal_byte`]) reading `q`, one of them followed by more than one byte (free
/// text: an open object's extra key). The key position of an open object whose keys come in
/// any order is one: `"` then the keys inlined into its rule, a call per key of its own rule
/// (`"key" ws ":" ws value`), and the call of the extra-key entry. (A closed object's, whose
/// callees are all fixed keys, is walked: composing it was slower on MaskBench.)
///
/// Such a state is classified from its callees' rule-start kernels and the walk below `q` from
/// the state after it ([`compose_kernel`]), and behind a whitespace call from the callees' lead
/// parts (cached per callee start): the callees are the same for every key set, so each key set
/// composes them instead of walking the `"` subtrees again.
///
/// PERF: after each `,` of such an object, the state before the whitespace and the state after
/// it walked the ` "` and `"` subtrees over the remaining keys (~60 µs per key set on Llama 3;
/// ~1/5 of the time of MaskBench fills between 60 µs and 1 ms, `tail_states --seed 1818`).
pub fn entry_choice(a: &Automata, t: StateId) -> Option<u8> {
    let edges = a.rule_edges(t);
    let q = match a.byte_edges(t) {
        [] => literal_byte(a, a.callee_start(t, edges.first()?.0))?,
        [e] if e.lo == e.hi => e.lo,
        _ => return None,
    };
    let start = |r| a.callee_start(t, r);
    let branches_after = |r| a.byte_edges(start(r)).first().is_some_and(|e| literal_byte(a, e.target).is_none());
    let choice = !a.state(t).is_final
        && edges.iter().all(|&(r, _)| literal_byte(a, start(r)) == Some(q))
        && edges.iter().any(|&(r, _)| branches_after(r));
    choice.then_some(q)
}
