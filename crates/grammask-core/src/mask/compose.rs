//! Composed kernels: a kernel state with rule edges classified from its callees' rule-start
//! kernels instead of a trie walk.
//!
//! Pipeline place: called by [`crate::compiled::CompiledGrammar`] when a kernel is first needed,
//! before falling back to the walk (`walk.rs`).
use super::*;
use crate::token_set::TokenUnion;

/// Composes the classification of kernel state `s` (of rule `R`) from its callees': for each rule
/// edge `(X, t)` of `s`, a non-nullable `X` whose rule-start classification is `callees[i].0`,
/// with `callees[i].1` a kernel chart of `t` (its first row only; `None` allowed where
/// `callees[i].0` has no uncertain suffix, nothing being read after `X` then); `own` classifies the tokens whose first byte `s` reads itself
/// ([`classify_kernel_from_bytes`]; `None` when it reads none). `follow` is FOLLOW(R).
/// `continuations` are the classifications of the `t` after each nullable callee: with `X`
/// empty, the token is read from `t` (in `R`, so their uncertain tokens mean what `own`'s do).
///
/// Why it is exact: a token read from `s` is read inside some callee `X` (the callee's accepted
/// tokens), or ends `X` after a prefix and reads the rest `σ` from `t` in `R`; `X`'s uncertain
/// tokens are exactly those splits (the ones whose `σ` starts outside FOLLOW(X) cannot be read
/// from `t`, nor follow `R` when `t` ends it, since FOLLOW(R) ⊆ FOLLOW(X) then). Each distinct
/// `σ` is read once from the kernel chart of `t` given with `X`'s classification (its first row
/// only; rows read are dropped again): read to its end, the token is accepted; else
/// the places where `R` ended on the way leave the token's uncertain suffixes, as in the walk.
///
/// PERF: the states that begin an expression (after `= `, `(`, `, `, an operator) each walked the
/// whole expression language again (~90 µs on Llama 3); they now share the expression's own
/// classification and read a few dozen suffixes each.
pub fn compose_kernel(
    a: &Automata,
    vocab_size: usize,
    follow: &ByteSet,
    own: Option<KernelMask>,
    continuations: &[Arc<KernelMask>],
    callees: Vec<(Arc<KernelMask>, Option<Chart>)>,
) -> Result<KernelMask> {
    let mut suffix_ids = SuffixIds::default();
    let mut suffixes = Vec::new();
    let mut accepted = TokenUnion::new(vocab_size);
    let mut uncertain = Vec::new();
    if let Some(km) = own {
        let ids: Vec<u32> = km.suffixes.iter().map(|s| intern_suffix(&mut suffix_ids, &mut suffixes, s)).collect();
        accepted.add_set(&km.accepted);
        uncertain.extend(km.uncertain.iter().map(|&(t, i)| (t, ids[i as usize])));
    }
    for km in continuations {
        accepted.add_set(&km.accepted);
        let ids: Vec<u32> = km.suffixes.iter().map(|s| intern_suffix(&mut suffix_ids, &mut suffixes, s)).collect();
        uncertain.extend(km.uncertain.iter().map(|&(t, i)| (t, ids[i as usize])));
    }
    for (km, chart) in callees {
        accepted.add_set(&km.accepted);
        if km.suffixes.is_empty() {
            continue;
        }
        let chart = chart.expect("a chart of `t` for a callee with uncertain suffixes");
        let mut resumed: Vec<Option<Vec<u32>>> = vec![None; km.suffixes.len()];
        let mut reader = SuffixReader::new(chart);
        // In byte order, each suffix goes on from the rows its common prefix with the one before
        // left (a chart's rows are a function of the bytes read).
        let mut order: Vec<usize> = (0..km.suffixes.len()).collect();
        order.sort_unstable_by(|&i, &j| km.suffixes[i].cmp(&km.suffixes[j]));
        for i in order {
            let sfx = &km.suffixes[i];
            resumed[i] = reader
                .read(a, sfx, follow)?
                .map(|ends| ends.iter().map(|&c| intern_suffix(&mut suffix_ids, &mut suffixes, &sfx[c..])).collect());
        }
        for &(tok, sid) in &km.uncertain {
            match &resumed[sid as usize] {
                None => accepted.add(tok),
                Some(ids) => uncertain.extend(ids.iter().map(|&id| (tok, id))),
            }
        }
    }
    Ok(kernel_mask(accepted.into_set(), uncertain, suffixes))
}

test_counter! {
    /// How many own parts of composed kernels this thread read off the trie along literal
    /// states ([`literal_own_kernel`]), for tests.
    pub fn literal_own_parts => LITERAL_OWN_PARTS
}

/// Trie nodes (and child lookups) [`literal_own_kernel`] visits at most before giving up.
const LITERAL_OWN_NODES: usize = 256;

/// The part of [`classify_kernel_from_bytes`] that `state`'s own byte edges on the bytes of
/// `first` read, where they lead into literal states only (non-final, no rule edges, some byte
/// edge), as far as
/// any token reaches: the tokens along those edges, all accepted. `None` where some token reaches
/// a state that is not literal (or past [`LITERAL_OWN_NODES`] lookups). With [`compose_kernel`]'s
/// callees it classifies the tokens of `state` as the walk of `first` does.
///
/// Why it is exact: a token read through an own byte edge stays in one item of `state`'s rule
/// (literal states call nothing, and none is final, so the rule does not end inside it): it is
/// alive, hence accepted, exactly where its bytes follow the edges; tokens read into a callee
/// are the callees' part.
///
/// PERF: a closed object with `patternProperties` (MaskBench Snowplow sp_279-281: `(obj_extra
/// ws "," ws)* "\"" "key_N" ...` for each of ~110 keys, all in the row after the first `,`)
/// walked every key's state from its kernel chart (the `"` subtree, through the pattern keys'
/// callee), ~40 K instructions each; the key's own part is a few trie nodes.
pub fn literal_own_kernel(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    first: &ByteSet,
) -> Option<KernelMask> {
    let literal = |q: StateId| a.rule_edges(q).is_empty() && !a.state(q).is_final && !a.byte_edges(q).is_empty();
    let mut ids = Vec::new();
    let mut lookups = 0usize;
    let mut todo: Vec<(usize, StateId)> = Vec::new();
    let mut step = |node: Option<usize>, q: StateId, todo: &mut Vec<(usize, StateId)>| {
        for e in a.byte_edges(q) {
            for b in e.lo..=e.hi {
                if node.is_none() && !first.contains(b) {
                    continue;
                }
                lookups += 1;
                let child = match node {
                    None => trie.root_child(b),
                    Some(n) => trie.child(n, b),
                };
                if let Some(c) = child {
                    todo.push((c, e.target));
                }
            }
        }
        lookups <= LITERAL_OWN_NODES
    };
    // No own edge on `first` with a token: nothing to read off the trie (left to the walk).
    if !step(None, state, &mut todo) || todo.is_empty() {
        return None;
    }
    // Each node is a token prefix read alive so far, at state `q`.
    while let Some((n, q)) = todo.pop() {
        if !literal(q) {
            return None;
        }
        ids.extend_from_slice(trie.node_tokens(&trie.nodes[n]));
        if !step(Some(n), q, &mut todo) {
            return None;
        }
    }
    LITERAL_OWN_PARTS.set(LITERAL_OWN_PARTS.get() + 1);
    Some(kernel_mask(TokenSet::from_ids(ids, vocab_size), Vec::new(), Vec::new()))
}

/// [`classify_kernel`] restricted to the tokens whose first byte is in `first` (with every
/// shortcut below the first byte): the part of a kernel's classification that its own byte edges
/// start, for [`compose_kernel`].
pub fn classify_kernel_from_bytes(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    first: &ByteSet,
) -> Result<KernelMask> {
    classify_first_bytes(a, trie, vocab_size, state, sc, first, None)
}

/// [`classify_kernel_from_bytes`] for a state that covers walked body `ws` (`cover`, see
/// [`crate::slice::start_run_cover`]): every slice token is read inside the rule (the cover
/// shows it), and below the root children of `first` only `ws`'s frontier nodes are walked.
/// The accepted set holds the whole slice: the tokens outside `first` it adds are read alike
/// from any state they are shifted from ([`shift_kernel`] takes them from its reference).
///
/// PERF: a key that must not match `net_[a-z]+[0-9]+`, after `net_` (MaskBench
/// `Github_medium---o83286`), walked every letter subtree through the run indexes (~1.2 ms on
/// Llama 3 per `key_N.re` state, five per fill).
#[allow(clippy::too_many_arguments)]
pub fn classify_kernel_from_bytes_walked(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    first: &ByteSet,
    ws: &WalkedBody,
    cover: Cover,
) -> Result<KernelMask> {
    classify_first_bytes(a, trie, vocab_size, state, sc, first, Some((ws, cover)))
}

/// The walk of both functions above: each root child in `first`, its whole subtree, or only
/// `walked`'s frontier nodes below it.
fn classify_first_bytes(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    sc: Shortcuts<'_>,
    first: &ByteSet,
    walked: Option<(&WalkedBody, Cover)>,
) -> Result<KernelMask> {
    let mut never = |_| false;
    for interned in [true, false] {
        let mut w = KernelWalk::new(a, trie, vocab_size, state, &sc, interned, usize::MAX, &mut never);
        let base = Frame::Rows(w.chart.num_rows());
        if let Some((ws, _)) = walked {
            w.accepted.or_assign(&ws.slice);
        }
        let mut done = true;
        for &c in trie.root_children.iter().filter(|&&c| first.contains(trie.nodes[c as usize].byte)) {
            let end = trie.nodes[c as usize].subtree_end;
            let read = match walked {
                None => w.walk(c as usize, end as usize, base)?,
                Some((ws, cover)) => {
                    // The frontier is in trie order: the nodes of `c`'s subtree are one range.
                    let lo = ws.frontier.partition_point(|f| f.node < c);
                    let hi = ws.frontier.partition_point(|f| f.node < end);
                    w.walk_body_frontier(&ws.frontier[lo..hi], cover, sc.follow, base)?
                }
            };
            if !read {
                done = false;
                break;
            }
        }
        if done {
            let KernelWalk { uncertain, suffixes, accepted, .. } = w;
            return Ok(kernel_mask(TokenSet::from_spare_bitset(accepted), uncertain, suffixes));
        }
    }
    unreachable!("the stack walk has no memo to fill and is never abandoned")
}

/// Reads suffixes from a kernel chart of some `t`, keeping the rows of the bytes read last: a
/// suffix sharing a prefix with the one before goes on from that prefix's row.
///
/// Invariant: the chart holds `base` rows plus one per byte of `read`, each the row after that
/// prefix of `read`; `ends` holds the positions `c < read.len()` where the rule had ended before
/// `read[c]` and `read[c]` is in `follow` (after a read that died, also `read.len()` itself).
///
/// PERF: a state after a value in an object of many optional properties predicts every later
/// property in its first row (MaskBench `Github_hard---o30633`: ~90); building that row again for
/// each of a number's ~80 suffixes took most of the composition. The suffixes after a key's end
/// (`":`, `": "`, `":{"`, ...) share their first rows, built once each in byte order.
pub(super) struct SuffixReader {
    chart: Chart,
    base: usize,
    read: Vec<u8>,
    ends: Vec<usize>,
}

impl SuffixReader {
    pub(super) fn new(chart: Chart) -> SuffixReader {
        let base = chart.num_rows();
        SuffixReader { chart, base, read: Vec::new(), ends: Vec::new() }
    }

    /// `None` if all of `suffix` is read (the rule may end right at its end), else the byte
    /// counts `c` after which the rule had ended before the chart died, where `suffix[c]` is in
    /// `follow` (the suffixes `record_uncertain` would keep).
    pub(super) fn read(&mut self, a: &Automata, suffix: &[u8], follow: &ByteSet) -> Result<Option<&[usize]>> {
        let keep = self.read.iter().zip(suffix).take_while(|(x, y)| x == y).count();
        self.chart.truncate_rows(self.base + keep);
        self.read.truncate(keep);
        self.ends.truncate(self.ends.partition_point(|&c| c < keep));
        for (c, &b) in suffix.iter().enumerate().skip(keep) {
            if kernel_ended(a, self.chart.last_row()) && follow.contains(b) {
                self.ends.push(c);
            }
            if !self.chart.push_byte(a, b)? {
                // Dead before `b`: `ends` may hold `c` too, dropped by the next read's truncation.
                return Ok(Some(&self.ends));
            }
            self.read.push(b);
        }
        Ok(None)
    }

    /// The last row of the chart before any byte is read.
    pub(super) fn base_row(&self) -> &[Item] {
        self.chart.row(self.base - 1)
    }
}

/// The classification of a kernel state `s` without rule edges from that of a reference state `r`
/// of the same rule, also without rule edges: `reference` is `r`'s classification, `differ` the
/// first bytes on which `s` and `r` step to different states (or one of them to none), and `own`
/// classifies the tokens whose first byte is in `differ` from `s`
/// ([`classify_kernel_from_bytes`]).
///
/// Why it is exact: a kernel chart of a state without rule edges is that one item; after a first
/// byte on which `s` and `r` step to the same state, both walks are in the same chart (same item,
/// same origin, same rows), so every token with that first byte is classified alike, and FOLLOW
/// is the rule's. No token is classified by its first byte alone (a rule end before any byte is
/// the real chart's completion, not a kernel's suffix).
///
/// PERF: free text before a trigger (`{"name":`) is a byte automaton whose states after a partial
/// trigger differ from the text's loop state on one or two bytes; each was a walk of the whole
/// vocabulary (0.5-0.9 ms on Llama 3) and now walks only those bytes' subtrees.
pub fn shift_kernel(trie: &TokenTrie, reference: &KernelMask, differ: &ByteSet, own: &KernelMask) -> KernelMask {
    let len = reference.accepted.len();
    let mut dropped = Bitset::new(len);
    for &c in trie.root_children.iter().filter(|&&c| differ.contains(trie.nodes[c as usize].byte)) {
        match trie.first_byte_tokens(c) {
            Some(set) => dropped.or_assign(set),
            None => trie.subtree_tokens(c).iter().for_each(|&t| dropped.set(t as usize)),
        }
    }
    let mut accepted = reference.accepted.clone().into_bitset();
    accepted.and_not_assign(&dropped);
    own.accepted.or_into(&mut accepted);
    let mut suffix_ids = SuffixIds::default();
    let mut suffixes = Vec::new();
    let ids: Vec<u32> = reference.suffixes.iter().map(|s| intern_suffix(&mut suffix_ids, &mut suffixes, s)).collect();
    let mut uncertain: Vec<(u32, u32)> = reference
        .uncertain
        .iter()
        .filter(|&&(t, _)| !dropped.get(t as usize))
        .map(|&(t, i)| (t, ids[i as usize]))
        .collect();
    let ids: Vec<u32> = own.suffixes.iter().map(|s| intern_suffix(&mut suffix_ids, &mut suffixes, s)).collect();
    uncertain.extend(own.uncertain.iter().map(|&(t, i)| (t, ids[i as usize])));
    kernel_mask(TokenSet::Bits(accepted), uncertain, suffixes)
}
