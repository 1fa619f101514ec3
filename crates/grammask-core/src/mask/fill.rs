//! Filling a mask: the union of the kernels' accepted tokens and the uncertain tokens whose
//! suffix the real context reads.
//!
//! Pipeline place: called by the matcher ([`crate::matcher::Matcher`]) on a chart state whose
//! mask is not memoized; the kernels come from the compiled grammar's cache.
use super::*;

/// The kernel items of the chart's last row: `(state, origin)` pairs, see the module doc.
pub fn kernel_items(a: &Automata, chart: &Chart) -> Vec<Item> {
    let r = chart.last_row_index() as u32;
    let row = chart.last_row();
    if r == 0 {
        let s = a.rule_start(a.root());
        return row.iter().copied().filter(|it| it.state == s && it.origin == 0).collect();
    }
    row.iter().copied().filter(|it| it.origin < r).collect()
}

/// Memory for memoized suffix verdicts per compiled grammar ([`SuffixMemo`]); past it, new
/// verdicts are computed but not stored.
pub const SUFFIX_MEMO_BYTES: usize = 16 << 20;

/// Suffix verdicts by (completion row signature, [`KernelMask::suffix_hash`]).
type VerdictMap = HashMap<(u128, u128), Arc<[bool]>>;

/// Memoized suffix verdicts of a compiled grammar: which of a kernel's uncertain suffixes the
/// context a rule completes into reads, keyed by that completion row's signature and the
/// kernel's [`KernelMask::suffix_hash`].
///
/// PERF: the positions inside one string (an open object's key, a value with a pattern) are new
/// kernel states, each with the same uncertain suffixes (the closing quote and what follows)
/// completing into the same context; each used to walk them all again (~250 suffixes, 0.2-0.5 ms
/// per fill on Llama 3).
#[derive(Debug, Default)]
pub struct SuffixMemo {
    verdicts: std::sync::RwLock<VerdictMap>,
    bytes: std::sync::atomic::AtomicUsize,
}

impl SuffixMemo {
    fn get(&self, key: (u128, u128)) -> Option<Arc<[bool]>> {
        crate::token_index::read(&self.verdicts).get(&key).cloned()
    }

    fn insert(&self, key: (u128, u128), v: &Arc<[bool]>) {
        use std::sync::atomic::Ordering;
        let size = v.len() + 64;
        if self.bytes.load(Ordering::Relaxed) + size > SUFFIX_MEMO_BYTES {
            return;
        }
        if crate::token_index::write(&self.verdicts).insert(key, v.clone()).is_none() {
            self.bytes.fetch_add(size, Ordering::Relaxed);
        }
    }

    /// Verdict lists held.
    pub fn len(&self) -> usize {
        crate::token_index::read(&self.verdicts).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (verdicts and keys, roughly).
    pub fn memory_size(&self) -> usize {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Token ids (counted with repeats) that a fill merges as a list at most, see [`fill_mask_memo`].
const SPARSE_MERGE_MAX: usize = 4 * crate::token_set::IDS_MAX;

/// Slots of the table of kernels merged into a fill's mask ([`fill_mask_memo`]).
const MERGED_SLOTS: usize = 64;

/// Fills `out` with the tokens allowed after the chart's input, using and extending `cache`
/// through `get_kernel`. Stop tokens are not set here.
pub fn fill_mask(
    a: &Automata,
    chart: &mut Chart,
    trie: &TokenTrie,
    out: &mut Bitset,
    get_kernel: &mut dyn FnMut(StateId) -> Result<std::sync::Arc<KernelMask>>,
) -> Result<()> {
    fill_mask_memo(a, chart, trie, out, get_kernel, None, None).map(|_| ())
}

/// [`fill_mask`], with suffix verdicts looked up in and added to `memo`. Returns the mask as a
/// [`TokenSet`] too when every kernel's accepted set is stored as ids (then so is the mask when
/// small enough, without a scan of `out`), else `None`.
pub fn fill_mask_memo(
    a: &Automata,
    chart: &mut Chart,
    trie: &TokenTrie,
    out: &mut Bitset,
    get_kernel: &mut dyn FnMut(StateId) -> Result<std::sync::Arc<KernelMask>>,
    memo: Option<&SuffixMemo>,
    reads_body: Option<ReadsBody<'_>>,
) -> Result<Option<TokenSet>> {
    if !kernels_apply(a) {
        out.clear();
        fill_mask_direct(a, chart, trie, out)?;
        return Ok(None);
    }
    let len = out.len();
    fill_mask_kernels(a, chart, trie, out.words_mut(), len, get_kernel, memo, reads_body)
}

/// Whether a state reads every body text of up to the longest token's length inside its rule
/// (or its callees'): a counted body no token outruns
/// ([`crate::compiled::CompiledGrammar::counted_body`]). A [`Beyond`] group's suffixes are
/// then all read from a row holding it.
pub type ReadsBody<'a> = &'a dyn Fn(StateId) -> bool;

/// Whether [`fill_mask_kernels`] applies to `a`: kernel classifications assume no pending
/// obligations (nor occurrences that end after a number of characters); otherwise the real
/// chart is walked ([`fill_mask_direct`]).
pub fn kernels_apply(a: &Automata) -> bool {
    !(a.has_lookahead() || a.char_budgets().is_some())
}

/// [`fill_mask_memo`] from the kernels' classifications (only where [`kernels_apply`]), into
/// `out`, the words of a bitset of `len` bits: every word is overwritten, so `out` may hold
/// anything before (a caller's bitmask row).
#[allow(clippy::too_many_arguments)]
pub fn fill_mask_kernels(
    a: &Automata,
    chart: &mut Chart,
    trie: &TokenTrie,
    out: &mut [u32],
    len: usize,
    get_kernel: &mut dyn FnMut(StateId) -> Result<std::sync::Arc<KernelMask>>,
    memo: Option<&SuffixMemo>,
    reads_body: Option<ReadsBody<'_>>,
) -> Result<Option<TokenSet>> {
    debug_assert!(kernels_apply(a));
    let kernels = kernel_items(a, chart);
    let mut masks = Vec::with_capacity(kernels.len());
    for it in &kernels {
        masks.push(get_kernel(it.state)?);
    }
    merge_accepted(out, &masks);
    // The mask's tokens (with repeats) while every accepted set is ids, not too many of them:
    // theirs, then the uncertain ones allowed. Past the cap the mask is read back from `out`.
    let sets: Option<Vec<&[u32]>> = masks.iter().map(|km| km.accepted.ids()).collect();
    let mut ids = sets.filter(|s| s.iter().map(|ids| ids.len()).sum::<usize>() <= SPARSE_MERGE_MAX).map(|s| s.concat());
    let rows = chart.num_rows();
    for (it, km) in kernels.iter().zip(&masks) {
        if let Some(b) = km.beyond.as_ref().filter(|b| !b.tokens.is_empty()) {
            // Read back from `out` (the group can be large).
            ids = None;
            if chart.push_completion_of(a, it)? {
                if reads_body.is_some_and(|f| chart.last_row().iter().any(|x| f(x.state))) {
                    for (o, &w) in out.iter_mut().zip(b.tokens.words()) {
                        *o |= w;
                    }
                } else {
                    walk_beyond(a, chart, trie, b, out)?;
                }
                chart.truncate_rows(rows);
            }
        }
        if km.uncertain.is_empty() || km.uncertain.iter().all(|&(t, _)| out[t as usize / 32] >> (t % 32) & 1 == 1) {
            continue;
        }
        let verdict: Arc<[bool]> = if chart.push_completion_of(a, it)? {
            // Equal signatures have the same future: the verdicts depend on the row and the
            // suffixes only.
            let key = (chart.last_signature(), km.suffix_hash);
            let v = match memo.and_then(|m| m.get(key)) {
                Some(v) => v,
                None => {
                    let v: Arc<[bool]> = walk_suffixes(a, chart, km)?.into();
                    if let Some(m) = memo {
                        m.insert(key, &v);
                    }
                    v
                }
            };
            chart.truncate_rows(rows);
            v
        } else {
            vec![false; km.suffixes.len()].into()
        };
        for &(t, s) in &km.uncertain {
            if verdict[s as usize] {
                out[t as usize / 32] |= 1 << (t % 32);
                if let Some(ids) = &mut ids {
                    ids.push(t);
                }
            }
        }
    }
    Ok(ids.map(|ids| TokenSet::from_ids(ids, len)))
}

/// Sets `out` to the union of the kernels' accepted sets (empty without kernels), each `Arc`
/// merged once: the compiled grammar's cache shares one `Arc` among equal classifications.
fn merge_accepted(out: &mut [u32], masks: &[Arc<KernelMask>]) {
    if masks.is_empty() {
        out.fill(0);
    }
    // The kernels already merged, by pointer: a slot per pointer hash; a pointer that lost its
    // slot to another is merged again, which only costs a pass. `masks` holds every `Arc`, so no
    // address is reused meanwhile.
    let mut merged = [std::ptr::null::<KernelMask>(); MERGED_SLOTS];
    for (i, km) in masks.iter().enumerate() {
        let p = Arc::as_ptr(km);
        let slot = &mut merged[(p as usize >> 4 ^ p as usize >> 11) % MERGED_SLOTS];
        if *slot == p {
            continue;
        }
        // The first kernel's set is copied rather than cleared and merged (one pass less).
        match (&km.accepted, i) {
            (set, 0) => set.write_into(out),
            (set, _) => set.or_into_words(out),
        }
        *slot = p;
    }
}

/// Adds to `out` the tokens of group `b` whose bytes past their boundary node the chart
/// (positioned just after the kernel's rule ended) reads: a walk of each node's subtree,
/// skipping every subtree below a byte it refuses.
fn walk_beyond(a: &Automata, chart: &mut Chart, trie: &TokenTrie, b: &Beyond, out: &mut [u32]) -> Result<()> {
    let base = chart.num_rows();
    // A first byte the row has no edge on fails at once (after a string's last block: all but
    // the quote).
    let first = row_bytes(a, chart.last_row());
    for &n in b.nodes.iter() {
        let (top, end) = (trie.nodes[n as usize].depth as usize, trie.nodes[n as usize].subtree_end as usize);
        let mut i = n as usize + 1;
        while i < end {
            let node = trie.nodes[i];
            let below = node.depth as usize - top - 1;
            if below == 0 && !first.contains(node.byte) {
                i = node.subtree_end as usize;
                continue;
            }
            chart.truncate_rows(base + below);
            if !chart.push_byte(a, node.byte)? {
                i = node.subtree_end as usize;
                continue;
            }
            for &t in trie.node_tokens(&node) {
                if b.tokens.get(t as usize) {
                    out[t as usize / 32] |= 1 << (t % 32);
                }
            }
            i += 1;
        }
        chart.truncate_rows(base);
    }
    Ok(())
}

/// Which suffixes the chart (positioned just after the kernel's rule ended) accepts, walking
/// them in trie order and skipping every suffix that extends a rejected prefix.
fn walk_suffixes(a: &Automata, chart: &mut Chart, km: &KernelMask) -> Result<Vec<bool>> {
    if km.suffixes.len() >= INTERNED_SUFFIXES_MIN {
        if let Some(v) = walk_suffixes_interned(a, chart, km)? {
            return Ok(v);
        }
    }
    let base = chart.num_rows();
    let mut verdict = vec![false; km.suffixes.len()];
    // Rows above `base` hold the bytes of the current path; a byte at depth `dead` or less
    // failed, so suffixes sharing more than `dead` bytes with the path fail too.
    let mut dead = usize::MAX;
    let mut depth = 0usize;
    for &(i, lcp) in &km.suffix_walk {
        let lcp = lcp as usize;
        let s = &km.suffixes[i as usize];
        if lcp > dead {
            continue;
        }
        dead = usize::MAX;
        let keep = lcp.min(depth);
        chart.truncate_rows(base + keep);
        depth = keep;
        let mut ok = true;
        for &b in &s[keep..] {
            if !chart.push_byte(a, b)? {
                dead = depth;
                ok = false;
                break;
            }
            depth += 1;
        }
        verdict[i as usize] = ok;
    }
    chart.truncate_rows(base);
    Ok(verdict)
}

/// Suffix lists at least this long are walked on interned rows ([`walk_suffixes_interned`]);
/// shorter ones cost less than the memo's setup.
const INTERNED_SUFFIXES_MIN: usize = 64;

test_counter! {
    /// Suffix walks this thread completed on interned rows ([`walk_suffixes_interned`]), for tests.
    pub fn interned_suffix_walks => INTERNED_WALKS
}

/// [`walk_suffixes`] with the rows above the completion row interned ([`RowMemo`]): a byte read
/// from a row reached before costs one table lookup. `None` when the memo filled up (the plain
/// walk then decides).
///
/// PERF: a block end of a long string (MaskBench o82710, `json_char.block{0,3} json_char.short`)
/// checks ~44 K suffixes of body text, each byte an Earley step on a two-item row (~130 M
/// instructions per fill); the rows at each depth are the same few whatever the bytes read.
fn walk_suffixes_interned(a: &Automata, chart: &mut Chart, km: &KernelMask) -> Result<Option<Vec<bool>>> {
    let base = chart.num_rows();
    let mut memo = RowMemo::new(a, chart);
    let start = Frame::Rows(base);
    let mut verdict = vec![false; km.suffixes.len()];
    // `frames[d]`: where the current path stands after `d + 1` bytes; as in `walk_suffixes`, a
    // byte at depth `dead` failed, so suffixes sharing more than `dead` bytes with it fail too.
    let mut frames: Vec<Frame> = Vec::new();
    let mut dead = usize::MAX;
    let walked = (|| {
        for &(i, lcp) in &km.suffix_walk {
            let lcp = lcp as usize;
            if lcp > dead {
                continue;
            }
            dead = usize::MAX;
            frames.truncate(lcp);
            let mut ok = true;
            for &b in &km.suffixes[i as usize][frames.len()..] {
                let parent = frames.last().copied().unwrap_or(start);
                match memo.step(a, chart, parent, b)? {
                    Some(f) => frames.push(f),
                    None if memo.full => return Ok(false),
                    None => {
                        dead = frames.len();
                        ok = false;
                        break;
                    }
                }
            }
            verdict[i as usize] = ok;
        }
        Ok(true)
    })();
    chart.truncate_rows(base);
    if !walked? {
        return Ok(None);
    }
    INTERNED_WALKS.with(|c| c.set(c.get() + 1));
    Ok(Some(verdict))
}

/// The mask by walking the whole token trie on the real chart (exact for any grammar, slower):
/// used for grammars with lookahead assertions.
pub fn fill_mask_direct(a: &Automata, chart: &mut Chart, trie: &TokenTrie, out: &mut Bitset) -> Result<()> {
    let base = chart.num_rows();
    let nodes = &trie.nodes;
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        chart.truncate_rows(base + n.depth as usize - 1);
        if !chart.push_byte(a, n.byte)? {
            i = n.subtree_end as usize;
            continue;
        }
        for &t in trie.node_tokens(&n) {
            out.set(t as usize);
        }
        i += 1;
    }
    chart.truncate_rows(base);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel masks accepting one token each, all distinct.
    fn one_token_kernels(n: usize, len: usize) -> Vec<Arc<KernelMask>> {
        (0..n)
            .map(|t| {
                let mut b = Bitset::new(len);
                b.set(t % 7 * 31 + t / 7);
                Arc::new(kernel_mask(TokenSet::Bits(b), Vec::new(), Vec::new()))
            })
            .collect()
    }

    /// With more distinct `Arc`s than slots (colliding), repeated ones in between, and the first
    /// repeated later, the merge is the plain union.
    #[test]
    fn merge_accepted_is_the_union() {
        let len = 4096;
        let distinct = one_token_kernels(3 * MERGED_SLOTS, len);
        let mut masks = Vec::new();
        for (i, k) in distinct.iter().enumerate() {
            masks.push(k.clone());
            masks.push(distinct[i / 2].clone());
            masks.push(distinct[0].clone());
        }
        let mut want = Bitset::new(len);
        for k in &masks {
            k.accepted.or_into(&mut want);
        }
        let mut out = Bitset::new(len);
        out.set(len - 1); // stale bits are cleared
        merge_accepted(out.words_mut(), &masks);
        assert_eq!(out, want);
        merge_accepted(out.words_mut(), &[]);
        assert_eq!(out.count_ones(), 0);
    }
}
