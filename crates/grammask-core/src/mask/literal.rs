//! Literal kernels: a kernel state inside a fixed byte string (a tag's `{"name": "get_weather"`,
//! a known key) classified by a plain walk of the one trie subtree it can read, before any
//! shortcut is looked up.
//!
//! Pipeline place: tried by [`crate::compiled::CompiledGrammar`] when a kernel is first needed,
//! before composed, shifted and walked kernels.
//!
//! Exactness: the walk is the reference walk ([`classify_kernel_uninterned`]: no row memo, no
//! slices, no run indexes) restricted, as the full walk's last resort is, to the root children
//! the kernel row reads: here the one byte the state reads. It is abandoned (`None`) past
//! [`LITERAL_WALK_VISITS`] trie nodes, so only kernels cheaper than their shortcuts take it.
//!
//! PERF: the first mask at each position of a structural tag's fixed strings cost 15-35 us on
//! Llama 3, most of it in the shortcuts' first look-ups (cover searches, run indexes per state)
//! that a walk of a few dozen nodes does not need.
use super::*;

/// Trie nodes a literal walk visits at most before it gives way to the full classification.
pub const LITERAL_WALK_VISITS: usize = 512;

/// The byte `s` reads when it reads exactly one, has no rule edges and is not final (it is
/// inside a fixed string of its rule).
pub fn literal_byte(a: &Automata, s: StateId) -> Option<u8> {
    match a.byte_edges(s) {
        [e] if e.lo == e.hi && a.rule_edges(s).is_empty() && !a.state(s).is_final => Some(e.lo),
        _ => None,
    }
}

/// The classification of kernel `state` when it is a literal position ([`literal_byte`]) and its
/// walk ends within [`LITERAL_WALK_VISITS`] nodes; `None` otherwise, without a walk when the state
/// reads one fixed byte before a branching state and more nodes than that lie under it. `follow`
/// is FOLLOW of the state's rule, as for [`classify_kernel`]. Callers skip grammars with
/// lookaheads (whose masks take no kernels, [`fill_mask_memo`]).
pub fn classify_literal(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    follow: Option<&ByteSet>,
) -> Result<Option<KernelMask>> {
    let Some(byte) = literal_byte(a, state) else { return Ok(None) };
    let nodes = &trie.nodes;
    // Root children are in byte order; no token starting with `byte`: nothing is read.
    let root = trie.root_child(byte);
    // A one-byte literal (the next state branches) whose subtree has more nodes than the walk may
    // visit: the walk could only be abandoned after paying for them.
    // PERF: a key position's `"` (then the object's keys) walked 512 of the 669 nodes under `"`
    // on Llama 3 and gave up: ~2.3 M of the ~6 M instructions of such a fill (o30213).
    let branches = literal_byte(a, a.byte_edges(state)[0].target).is_none();
    if root.is_some_and(|c| branches && nodes[c].subtree_end as usize - c > LITERAL_WALK_VISITS) {
        return Ok(None);
    }
    let sc = Shortcuts { follow, ..Default::default() };
    let mut abandon = |_| true;
    let mut w = KernelWalk::new(a, trie, vocab_size, state, &sc, false, LITERAL_WALK_VISITS, &mut abandon);
    let base = Frame::Rows(w.chart.num_rows());
    if let Some(c) = root {
        if !w.walk(c, nodes[c].subtree_end as usize, base)? {
            return Ok(None);
        }
    }
    let KernelWalk { uncertain, suffixes, accepted, .. } = w;
    // At most `LITERAL_WALK_VISITS` nodes' tokens: few, worth listing.
    Ok(Some(kernel_mask(TokenSet::from_spare_bitset(accepted), uncertain, suffixes)))
}

/// The classification of literal kernel `state` ([`literal_byte`]) when every token it can read
/// ends inside the chain of literal states starting there (each reads one fixed byte, is not
/// final and has no rule edges, so no rule ends inside the chain): exactly the tokens whose bytes
/// are a prefix of the chain's bytes are accepted, nothing is uncertain. `None` when some token
/// reaches the end of the chain (a state that is not a literal position), or `state` is not one:
/// [`classify_literal`] walks those.
///
/// PERF: a trie descent along the chain, one child looked up per byte, without a chart or walk
/// frames: the first mask at most positions of a structural tag's fixed strings (`{"name":
/// "tool_0_search", "parameters": `) cost a literal walk of ~3 us each on Llama 3.
pub fn classify_literal_chain(a: &Automata, trie: &TokenTrie, vocab_size: usize, state: StateId) -> Option<KernelMask> {
    let nodes = &trie.nodes;
    let mut byte = literal_byte(a, state)?;
    let mut s = state;
    let mut accepted = Vec::new();
    // The children of the current trie node: the root's first.
    let mut child = trie.root_child(byte);
    while let Some(c) = child {
        let n = nodes[c];
        accepted.extend_from_slice(trie.node_tokens(&n));
        s = a.byte_edges(s)[0].target;
        if c + 1 == n.subtree_end as usize {
            break; // no token goes deeper
        }
        byte = literal_byte(a, s)?;
        child = trie.child(c, byte);
    }
    Some(kernel_mask(TokenSet::from_ids(accepted, vocab_size), Vec::new(), Vec::new()))
}
