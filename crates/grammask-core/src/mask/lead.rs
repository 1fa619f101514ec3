//! Kernels behind a leading whitespace call: a state whose only move is a call of a bounded run
//! of one byte class (`ws ::= [ \n\t\r]{0,64}`) followed by a state `t` that reads none of it.
//!
//! Pipeline place: called by [`crate::compiled::CompiledGrammar`] when a kernel is first needed,
//! before composition and the walk (`walk.rs`); the part of the classification that `t` reads
//! from the first byte on is `t`'s own kernel, joined by the caller.
use super::compose::SuffixReader;
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
/// the rule.
///
/// Why it is exact: `t` reads no class byte, so a token `w σ` (`w` its longest prefix of class
/// bytes) is read from `X` only by the call reading all of `w`; with `|w|` past the bound it is
/// refused (nothing ends `X`'s rule on the way: the call is in progress and `t` has not ended
/// it), else `σ` is read from `t`, in `X`'s rule, exactly as from a kernel chart of `t`. So the
/// class tokens within the bound are accepted, and each subtree below a run node whose byte `t`
/// reads is walked from `t`'s kernel chart, with the run's frames standing for `t`'s row (no rule
/// end on them).
///
/// PERF: the call reads each depth of the run into a new Earley row (the bound counts), and the
/// walk of `X` stepped them for every whitespace node of the trie: ~60-80 µs per key position
/// after `,` or `{`, per position before `:` and per value after `:` on Llama 3, one or two new
/// ones in most MaskBench fills between p98 and p99.9.
///
/// With the classification come the walk's interned rows (none if it ran on a plain stack),
/// for `t`'s own kernel walk to go on from ([`super::offering_rows`]), and the bytes `t`'s
/// kernel row reads. What the walk reads of the
/// trie apart from `t` (the run nodes and the nodes one byte past them) is `nodes`, per vocabulary.
pub fn classify_after_lead(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    t: StateId,
    sc: Shortcuts<'_>,
    nodes: &LeadNodes,
) -> Result<Option<(KernelMask, Option<WalkRows>, ByteSet)>> {
    let mut never = |_| false;
    let class = &nodes.class;
    for interned in [true, false] {
        let mut w = KernelWalk::new(a, trie, vocab_size, t, &sc, interned, usize::MAX, &mut never);
        let base = Frame::Rows(w.chart.num_rows());
        let readable = row_bytes(a, w.chart.last_row());
        if frame_ended(a, &w.chart, base) || class.intersects(&readable) {
            return Ok(None);
        }
        for &tok in &nodes.run_tokens {
            w.accepted.set(tok as usize);
        }
        let mut done = true;
        // Every token accepted is a run token or below an exit walked: where they are few, only
        // their bits are read back ([`TokenSet::from_spare_bitset_among`]).
        let among = (vocab_size / AMONG_PER_WORD).max(AMONG_MIN);
        let mut candidates: Vec<&[u32]> = vec![&nodes.run_tokens];
        let mut count = nodes.run_tokens.len();
        // Below the runs, only the nodes whose byte `t` reads are walked (none is a class byte).
        'bytes: for b in readable.bytes() {
            for &(i, at) in nodes.exits(b) {
                if count <= among {
                    let below = trie.subtree_tokens(i);
                    count += below.len();
                    candidates.push(below);
                }
                let n = trie.nodes[i as usize];
                let d = n.depth as usize;
                // The run's frames are `t`'s row, with no rule end on them.
                w.frames.clear();
                w.frames.resize(d - 1, base);
                w.ends.clear();
                w.ends.resize(d - 1, false);
                w.path.clear();
                w.path.extend_from_slice(&nodes.paths[at as usize..at as usize + d - 1]);
                if !w.walk(i as usize, n.subtree_end as usize, base)? {
                    done = false;
                    break 'bytes;
                }
            }
        }
        if done {
            let KernelWalk { uncertain, suffixes, accepted, chart, memo, .. } = w;
            let rows = memo.map(|memo| WalkRows { chart, memo });
            let accepted = if count <= among {
                TokenSet::from_spare_bitset_among(accepted, &candidates)
            } else {
                TokenSet::from_spare_bitset(accepted)
            };
            return Ok(Some((kernel_mask(accepted, uncertain, suffixes), rows, readable)));
        }
    }
    unreachable!("the stack walk has no memo to fill and is never abandoned")
}

/// Bitset bits per candidate token within which reading the candidates' bits back and sorting
/// the ids set beats scanning the bitset's words ([`TokenSet::from_spare_bitset_among`]: ~4
/// instructions a candidate, ~30 an id set, about one a word of 32 bits), and the candidates
/// read back whatever the vocabulary's size.
/// PERF: at 128 bits a candidate (~1,000 on Llama 3), the leads' walks of MaskBench o3626's
/// `{"pattern": ...},` sorted hundreds of ids set (3.0 M instructions of a 15.9 M fill).
const AMONG_PER_WORD: usize = 512;
const AMONG_MIN: usize = 64;

/// The classification of the tokens `w ρ` (`w` a run of `nodes`, `ρ` its exit's rest) read from a
/// literal lead `s0` (`p` then a call of a run rule `class2{0,bound2}`, then `v`,
/// [`crate::compiled::CompiledGrammar::literal_lead_kernel`]), given `s0`'s own classification
/// `ks0` and `follow`, FOLLOW of `s0`'s rule: the part of a lead that a literal lead below it
/// reads, for the lead's composition. `None` where `v` reads a byte of `class2` or has ended the
/// rule, or `p` is in `nodes`' class. `known` answers, from the bytes `v` reads first, with the
/// classification of a literal lead alike ([`LeadLeaf`]) where it has one. `v_reads`: those
/// bytes where already known from `s0`'s own classification (then `v`'s row has not ended the
/// rule nor reads a byte of `class2`, or [`classify_after_lead`] would have refused it), so that
/// `v`'s kernel chart is built only for the rests read from it.
///
/// Why it is exact: `w ρ` is read from `s0`, after `w` outside it, exactly as `ρ` is (nothing of
/// `s0`'s rule is read before `ρ`), so where `ρ` is a token its class is `ks0`'s. Else `ρ` is `p`,
/// a longest run `w2` of `class2`, and a rest `σ2`: as in [`classify_after_lead`], `w2` past the
/// bound is refused, `σ2` empty is read within the call, and `σ2` is otherwise read from a kernel
/// chart of `v` (refused at once where `v` does not read its first byte), with no rule end before
/// it (`v`'s row has not ended the rule).
///
/// PERF: MaskBench o3626's `ws not` (~270 literal leads `"{" ws obj_N ws "}"` under a tree of
/// small choices) walked the 67 Llama 3 tokens `ws+ "{" ...` through `t`'s rows of ~1,500 items
/// (~3.6 M instructions); composed from the literal leads' parts, only the rests that neither are
/// tokens nor die at their first byte after the inner run are read, from one object's rows.
/// Each of those ~270 built `v`'s kernel chart for its first bytes (~2.4 K instructions) that
/// its own classification had found just before (`v_reads`).
#[allow(clippy::too_many_arguments)]
pub fn lead_into_literal_lead(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    (p, v, class2, bound2): (u8, StateId, ByteSet, u32),
    ks0: &KernelMask,
    follow: &ByteSet,
    nodes: &LeadNodes,
    v_reads: Option<ByteSet>,
    known: impl FnOnce(&ByteSet) -> Option<Arc<KernelMask>>,
) -> Result<Option<LeadLeaf>> {
    if ks0.beyond.is_some() || nodes.class.contains(p) {
        return Ok(None);
    }
    let (mut reader, readable) = match v_reads {
        Some(r) => (None, r),
        None => {
            let reader = SuffixReader::new(Chart::with_kernel(a, v));
            let readable = row_bytes(a, reader.base_row());
            if kernel_ended(a, reader.base_row()) || class2.intersects(&readable) {
                return Ok(None);
            }
            (Some(reader), readable)
        }
    };
    if let Some(km) = known(&readable) {
        return Ok(Some(LeadLeaf::Known(km)));
    }
    let mut read_v = false;
    let (mut accepted, mut uncertain, mut suffixes, mut suffix_ids) =
        (Vec::new(), Vec::new(), Vec::new(), SuffixIds::default());
    // `ks0`'s suffix ids in the new list, interned on first use.
    let mut ks0_ids: Vec<Option<u32>> = vec![None; ks0.suffixes.len()];
    // The rest `ρ` of the node visited, and per length the root trie's node of its prefix.
    let (mut rest, mut matched) = (Vec::<u8>::new(), Vec::<Option<usize>>::new());
    for &(e, _) in nodes.exits(p) {
        let top = trie.nodes[e as usize].depth;
        for i in e as usize..trie.nodes[e as usize].subtree_end as usize {
            let n = trie.nodes[i];
            let k = (n.depth - top) as usize;
            rest.truncate(k);
            matched.truncate(k);
            rest.push(n.byte);
            let m = if k == 0 { trie.root_child(p) } else { matched[k - 1].and_then(|q| trie.child(q, n.byte)) };
            matched.push(m);
            let toks = trie.node_tokens(&n);
            if toks.is_empty() {
                continue;
            }
            // `ρ` is a token: classified as `ks0` classifies it.
            if let Some(&r) = m.and_then(|m| trie.node_tokens(&trie.nodes[m]).first()) {
                if ks0.accepted.get(r as usize) {
                    accepted.extend_from_slice(toks);
                    continue;
                }
                let lo = ks0.uncertain.partition_point(|&(x, _)| x < r);
                for &(_, sid) in ks0.uncertain[lo..].iter().take_while(|&&(x, _)| x == r) {
                    let id = *ks0_ids[sid as usize].get_or_insert_with(|| {
                        intern_suffix(&mut suffix_ids, &mut suffixes, &ks0.suffixes[sid as usize])
                    });
                    uncertain.extend(toks.iter().map(|&tok| (tok, id)));
                }
                continue;
            }
            // `ρ` is `p w2 σ2`.
            let j = 1 + rest[1..].iter().take_while(|&&b| class2.contains(b)).count();
            if j - 1 > bound2 as usize || (j < rest.len() && !readable.contains(rest[j])) {
                continue;
            }
            if j == rest.len() {
                accepted.extend_from_slice(toks);
                continue;
            }
            read_v = true;
            let reader = reader.get_or_insert_with(|| SuffixReader::new(Chart::with_kernel(a, v)));
            match reader.read(a, &rest[j..], follow)? {
                None => accepted.extend_from_slice(toks),
                Some(ends) => {
                    for &c in ends {
                        let id = intern_suffix(&mut suffix_ids, &mut suffixes, &rest[j + c..]);
                        uncertain.extend(toks.iter().map(|&tok| (tok, id)));
                    }
                }
            }
        }
    }
    let km = kernel_mask(TokenSet::from_ids(accepted, vocab_size), uncertain, suffixes);
    Ok(Some(LeadLeaf::New { km: Arc::new(km), readable, read_v }))
}

/// What [`lead_into_literal_lead`] found: the classification `known` gave for `v`'s first bytes,
/// or a new one, with those bytes and whether it read any rest from `v` (if not, it is a function
/// of `ks0`, `p`, the runs and `readable` alone, so literal leads alike in these share it).
pub enum LeadLeaf {
    Known(Arc<KernelMask>),
    New { km: Arc<KernelMask>, readable: ByteSet, read_v: bool },
}

/// What [`classify_after_lead`] reads of the trie for a run class `C{0,B}` whatever `t` is: the
/// *run nodes* (every byte on their path in `C`, depth at most `B`) and their tokens, and the
/// *exits*, the children of a run node whose byte is not in `C`, by that byte (the root's are
/// `t`'s own kernel's, read with the run empty).
/// A node of a `C` byte deeper than `B` is neither (the run is refused past the bound).
///
/// PERF: each new lead kernel (after `,`, `{`, `:` in JSON) went through every run node of the
/// trie and every child of one (~75 K instructions on Llama 3, ~270 M of the band driver's
/// 3.9 G), to walk the few children whose byte `t` reads (`"` after `,`); now built once per
/// vocabulary and class ([`crate::token_index::TokenIndex::lead_nodes`]).
///
/// With a `prefix` byte `p`, the same for the tokens that begin with `p` then the run (a literal
/// `,` before `ws`): `p`'s node stands for the root (its tokens are run tokens, its children outside
/// `C` exits with an empty run) and the run's bytes after `p` count against `B`.
#[derive(Debug)]
pub struct LeadNodes {
    pub prefix: Option<u8>,
    pub class: ByteSet,
    /// The bound, at most the longest token (a longer one reads the same).
    pub bound: u32,
    /// By byte, the longest rest `σ` of a token below an exit of that byte (the exit's byte
    /// first; 0: no exit).
    pub rest_depths: Vec<u32>,
    /// The tokens of the run nodes.
    pub run_tokens: Vec<u32>,
    /// `(exit node, start of its run's bytes in paths)`, by the exit's byte (those of byte `b`
    /// are `exits[by_byte[b]..by_byte[b + 1]]`), in trie order within a byte; the run's length
    /// is the exit's depth less one.
    exits: Vec<(u32, u32)>,
    by_byte: Vec<u32>,
    paths: Vec<u8>,
}

impl LeadNodes {
    pub fn new(trie: &TokenTrie, prefix: Option<u8>, class: ByteSet, bound: u32) -> LeadNodes {
        let bound = bound.min(trie.max_depth);
        let (mut run_tokens, mut exits, mut paths) = (Vec::new(), Vec::<(u8, u32, u32)>::new(), Vec::new());
        let mut run: Vec<u8> = Vec::new();
        // The run whose bytes were last copied to `paths` (its exits share them), by its node.
        let mut copied = None;
        let top = |c: &&u32| match prefix {
            Some(p) => trie.nodes[**c as usize].byte == p,
            None => class.contains(trie.nodes[**c as usize].byte),
        };
        // The prefix's node (`None` when the trie's root stands first), and the run's depth offset.
        let head = prefix.and_then(|_| trie.root_children.iter().find(top)).map(|&c| c as usize);
        let offset = u32::from(prefix.is_some());
        for &r in trie.root_children.iter().filter(top) {
            let (mut i, end) = (r as usize, trie.nodes[r as usize].subtree_end as usize);
            while i < end {
                let n = trie.nodes[i];
                run.truncate(n.depth as usize - 1);
                let in_run = class.contains(n.byte) && n.depth - offset <= bound;
                if Some(i) == head || in_run {
                    run.push(n.byte);
                    run_tokens.extend_from_slice(trie.node_tokens(&n));
                    i += 1;
                    continue;
                }
                if !class.contains(n.byte) {
                    if copied != Some(n.parent) {
                        copied = Some(n.parent);
                        paths.extend_from_slice(&run);
                    }
                    exits.push((n.byte, i as u32, (paths.len() - run.len()) as u32));
                }
                i = n.subtree_end as usize;
            }
        }
        let mut rest_depths = vec![0u32; 256];
        for &(b, i, _) in &exits {
            let rest = trie.deepest_below[i as usize] - trie.nodes[i as usize].depth + 1;
            rest_depths[b as usize] = rest_depths[b as usize].max(rest);
        }
        // Stable: trie order within a byte.
        exits.sort_by_key(|e| e.0);
        let mut by_byte = vec![0u32; 257];
        for &(b, _, _) in &exits {
            by_byte[b as usize + 1] += 1;
        }
        for b in 0..256 {
            by_byte[b + 1] += by_byte[b];
        }
        let exits = exits.into_iter().map(|(_, n, at)| (n, at)).collect();
        LeadNodes { prefix, class, bound, rest_depths, run_tokens, exits, by_byte, paths }
    }

    /// The exits of byte `b`.
    pub(super) fn exits(&self, b: u8) -> &[(u32, u32)] {
        &self.exits[self.by_byte[b as usize] as usize..self.by_byte[b as usize + 1] as usize]
    }

    pub fn memory_size(&self) -> usize {
        self.run_tokens.len() * 4
            + self.exits.len() * 8
            + (self.by_byte.len() + self.rest_depths.len()) * 4
            + self.paths.len()
    }
}
