//! Byte-region kernels: a kernel state from which only byte edges are reachable (free text of
//! multi-byte classes, e.g. llama.cpp's `japanese.gbnf`) classified by stepping the automaton
//! alone down the trie subtrees it can read, without chart frames, row memo or shortcuts.
//!
//! Pipeline place: tried by [`crate::compiled::CompiledGrammar`] when a kernel is first needed,
//! after literal, composed and shifted kernels and before the full walk.
//!
//! Exactness: in a kernel chart, an item whose state has no rule edges is the whole row (its
//! origin is 0, so ending the rule completes nothing); the full walk then steps it as a virtual
//! item ([`is_plain`]), which is what this walk does: the same steps, the same rule ends (a final
//! state after `k` bytes) and the same uncertain suffixes ([`record_uncertain`]), so the result
//! is the reference walk's ([`classify_kernel_uninterned`]). Subtrees the state cannot read
//! fail at their first byte with no rule end on the path, recording nothing, as in the full walk.
//!
//! PERF: the first mask of `japanese.gbnf` on Llama 3 walked the ~9,000 trie nodes of its CJK
//! lead bytes at ~40 ns each through chart frames (~300 us); a plain automaton step is a few ns.
use super::*;

/// Trie nodes (under the root children the state reads) past which the full walk, with its run
/// indexes and class slices, is left to classify the state.
pub const BYTE_REGION_MAX_NODES: usize = 32 << 10;

/// Automaton states a region may span; larger ones are left to the full walk.
const BYTE_REGION_MAX_STATES: usize = 4096;

/// Whether every state reachable from `s` by byte edges (`s` included) has no rule edges, within
/// [`BYTE_REGION_MAX_STATES`] states.
pub fn is_byte_region(a: &Automata, s: StateId) -> bool {
    let mut seen: std::collections::HashSet<StateId, crate::fasthash::FastState> = std::collections::HashSet::default();
    let mut todo = vec![s];
    seen.insert(s);
    while let Some(x) = todo.pop() {
        if !a.rule_edges(x).is_empty() {
            return false;
        }
        for e in a.byte_edges(x) {
            if seen.insert(e.target) {
                if seen.len() > BYTE_REGION_MAX_STATES {
                    return false;
                }
                todo.push(e.target);
            }
        }
    }
    true
}

/// The classification of kernel `state` when it is a byte region ([`is_byte_region`]) whose
/// readable subtrees hold at most [`BYTE_REGION_MAX_NODES`] nodes; `None` otherwise. `follow` is
/// FOLLOW of the state's rule, as for [`classify_kernel`]. Callers skip grammars with lookaheads
/// (whose masks take no kernels, [`fill_mask_memo`]).
pub fn classify_byte_region(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    follow: Option<&ByteSet>,
) -> Option<KernelMask> {
    let nodes = &trie.nodes;
    let readable = state_bytes(a, state);
    let roots: Vec<usize> =
        trie.root_children.iter().map(|&c| c as usize).filter(|&c| readable.contains(nodes[c].byte)).collect();
    let size: usize = roots.iter().map(|&c| nodes[c].subtree_end as usize - c).sum();
    if size > BYTE_REGION_MAX_NODES || !is_byte_region(a, state) {
        return None;
    }
    let mut w = ByteWalk {
        a,
        trie,
        state,
        follow,
        accepted: Vec::new(),
        ids: SuffixIds::default(),
        suffixes: Vec::new(),
        uncertain: Vec::new(),
    };
    for c in roots {
        w.walk_node(c, state, false, false);
    }
    let ByteWalk { accepted, uncertain, suffixes, .. } = w;
    Some(kernel_mask(TokenSet::from_ids(accepted, vocab_size), uncertain, suffixes))
}

/// A byte-region walk's inputs and outputs.
struct ByteWalk<'a> {
    a: &'a Automata,
    trie: &'a TokenTrie,
    /// The kernel state.
    state: StateId,
    follow: Option<&'a ByteSet>,
    /// The accepted tokens, as met.
    accepted: Vec<u32>,
    ids: SuffixIds,
    suffixes: Vec<Box<[u8]>>,
    uncertain: Vec<(u32, u32)>,
}

impl ByteWalk<'_> {
    /// Steps trie node `i` from `from` (the state after its parent's path) and walks its subtree.
    /// `ended`: `from` is final after at least one byte (the kernel's rule ended right before
    /// `i`'s byte); `live`: an earlier end on the path is followed by a FOLLOW byte (a failure
    /// below records uncertain tokens only then, as [`record_uncertain`] keeps no other end).
    fn walk_node(&mut self, i: usize, from: StateId, ended: bool, live: bool) {
        let n = self.trie.nodes[i];
        let live = live || (ended && self.follow.is_none_or(|f| f.contains(n.byte)));
        let Some(t) = self.a.step(from, n.byte) else {
            if live {
                self.record(i);
            }
            return;
        };
        self.accepted.extend_from_slice(self.trie.node_tokens(&n));
        let ended = self.a.state(t).is_final;
        let mut c = i + 1;
        while c < n.subtree_end as usize {
            self.walk_node(c, t, ended, live);
            c = self.trie.nodes[c].subtree_end as usize;
        }
    }

    /// Records the tokens below failed node `i` as uncertain, rebuilding its path and the rule
    /// ends on it as the full walk holds them.
    fn record(&mut self, i: usize) {
        let (a, nodes) = (self.a, &self.trie.nodes);
        let mut path = Vec::with_capacity(nodes[i].depth as usize);
        let mut k = i as u32;
        while k != u32::MAX {
            path.push(nodes[k as usize].byte);
            k = nodes[k as usize].parent;
        }
        path.reverse();
        let mut s = self.state;
        let mut ends = Vec::with_capacity(path.len() - 1);
        for &b in &path[..path.len() - 1] {
            s = a.step(s, b).expect("the path above a failed node is read");
            ends.push(a.state(s).is_final);
        }
        let out = (&mut self.ids, &mut self.suffixes, &mut self.uncertain);
        record_uncertain(self.trie, i, &path, &ends, self.follow, out);
    }
}
