//! Worklist partition refinement of a whole DFA (Hopcroft's argument, signatures instead of
//! splitter sets).
//!
//! Pipeline place: the fallback of [`minimize`](super::minimize::minimize) when a cyclic strongly
//! connected component is large or several cyclic components may hold equivalent states.
use super::determinize::SeqTable;
use super::dfa::Dfa;
use super::minimize::push_signature;

/// Partition refinement for [`minimize`]. Blocks are contiguous ranges of `elems`.
///
/// Invariant between examinations: the members of a block that is neither queued nor touched
/// by a pending move have equal signatures (see [`Refiner::sig`]) under the current partition.
pub(super) struct Refiner<'a> {
    pub(super) dfa: &'a Dfa,
    pub(super) block_of: Vec<u32>,
    pub(super) elems: Vec<u32>,
    loc: Vec<u32>,
    pub(super) first: Vec<u32>,
    pub(super) past: Vec<u32>,
    /// Blocks waiting for a full examination.
    pub(super) queued: Vec<bool>,
    pub(super) queue: Vec<u32>,
    /// Predecessors of each state (compressed rows).
    pred_start: Vec<u32>,
    preds: Vec<u32>,
    /// `mark[s] == stamp`: `s` is touched by the current batch of moves.
    pub(super) mark: Vec<u32>,
    pub(super) stamp: u32,
    /// States moved to new blocks, whose predecessors are not re-examined yet.
    pub(super) moved: Vec<u32>,
    sig_data: Vec<u32>,
    sig_span: Vec<(u32, u32)>,
    sig_hash: Vec<u64>,
    /// Scratch buffers of `examine` and `propagate`.
    pub(super) order: Vec<u32>,
    pub(super) groups: Vec<(usize, usize)>,
    buf: Vec<u32>,
    pairs: Vec<(u32, u32)>,
    touched: Vec<u32>,
}

impl Refiner<'_> {
    /// A state's signature under the current partition ([`push_signature`]), appended to
    /// `sig_data`.
    pub(super) fn sig(&mut self, s: u32) -> (u32, u32) {
        let start = self.sig_data.len() as u32;
        push_signature(self.dfa, s as usize, &self.block_of, &mut self.sig_data);
        (start, self.sig_data.len() as u32)
    }

    fn sig_slice(&self, span: (u32, u32)) -> &[u32] {
        &self.sig_data[span.0 as usize..span.1 as usize]
    }

    /// Moves `states` (members of block `b`) into a new block.
    fn move_out(&mut self, b: usize, states: &[u32]) {
        let z = self.first.len();
        let old_past = self.past[b];
        for &s in states {
            let last = self.past[b] - 1;
            let pos = self.loc[s as usize];
            let other = self.elems[last as usize];
            self.elems[pos as usize] = other;
            self.loc[other as usize] = pos;
            self.elems[last as usize] = s;
            self.loc[s as usize] = last;
            self.past[b] = last;
            self.block_of[s as usize] = z as u32;
        }
        self.first.push(self.past[b]);
        self.past.push(old_past);
        self.queued.push(false);
        self.moved.extend_from_slice(states);
    }

    /// Splits block `b` by signature, given the members `touched` whose signature may differ
    /// from the others' (all members marked with the current stamp; the unmarked ones share one
    /// signature). The largest group keeps the block; the others move out.
    pub(super) fn examine(&mut self, b: usize, touched: &[u32]) {
        let size = (self.past[b] - self.first[b]) as usize;
        if size <= 1 {
            return;
        }
        self.sig_data.clear();
        self.sig_span.clear();
        self.sig_hash.clear();
        for &s in touched {
            let span = self.sig(s);
            self.sig_span.push(span);
            self.sig_hash.push(SeqTable::hash(self.sig_slice(span)));
        }
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(0..touched.len() as u32);
        // By hash, then by the signature itself (only compared on equal hashes).
        order.sort_unstable_by(|&x, &y| {
            let (x, y) = (x as usize, y as usize);
            self.sig_hash[x]
                .cmp(&self.sig_hash[y])
                .then_with(|| self.sig_slice(self.sig_span[x]).cmp(self.sig_slice(self.sig_span[y])))
        });
        // Groups of equal signatures among the touched members, as ranges of `order`.
        let mut groups = std::mem::take(&mut self.groups);
        groups.clear();
        for i in 0..order.len() {
            let (x, y) = (order[i] as usize, order[i.saturating_sub(1)] as usize);
            let same = i > 0
                && self.sig_hash[x] == self.sig_hash[y]
                && self.sig_slice(self.sig_span[x]) == self.sig_slice(self.sig_span[y]);
            match groups.last_mut() {
                Some(g) if same => g.1 = i + 1,
                _ => groups.push((i, i + 1)),
            }
        }
        self.split_groups(b, touched, &order, &groups);
        self.order = order;
        self.groups = groups;
    }

    /// The second half of [`Refiner::examine`]: `groups` (ranges of `order`, indices into
    /// `touched`) have distinct signatures.
    fn split_groups(&mut self, b: usize, touched: &[u32], order: &[u32], groups: &[(usize, usize)]) {
        let size = (self.past[b] - self.first[b]) as usize;
        // The untouched members form one more group; a touched group with their signature
        // joins them.
        let untouched = size - touched.len();
        let mut rest_group: Option<usize> = None;
        if untouched > 0 {
            let range = self.first[b]..self.past[b];
            let rep = range.map(|i| self.elems[i as usize]).find(|&s| self.mark[s as usize] != self.stamp);
            if let Some(rep) = rep {
                let span = self.sig(rep);
                rest_group = groups
                    .iter()
                    .position(|&(a, _)| self.sig_slice(self.sig_span[order[a] as usize]) == self.sig_slice(span));
            }
        }
        let rest_size = untouched + rest_group.map_or(0, |g| groups[g].1 - groups[g].0);
        let n_groups = groups.len() - usize::from(rest_group.is_some()) + usize::from(rest_size > 0);
        if n_groups <= 1 {
            return;
        }
        // The keeper: the largest group (`None`: the untouched one).
        let mut keeper: Option<usize> = None;
        let mut best = rest_size;
        for (g, &(a, z)) in groups.iter().enumerate() {
            if Some(g) != rest_group && z - a > best {
                best = z - a;
                keeper = Some(g);
            }
        }
        let mut buf = std::mem::take(&mut self.buf);
        for (g, &(a, z)) in groups.iter().enumerate() {
            if Some(g) == keeper || Some(g) == rest_group {
                continue;
            }
            buf.clear();
            buf.extend(order[a..z].iter().map(|&i| touched[i as usize]));
            self.move_out(b, &buf);
        }
        if keeper.is_some() && rest_size > 0 {
            buf.clear();
            let stamp = self.stamp;
            buf.extend(
                (self.first[b]..self.past[b])
                    .map(|i| self.elems[i as usize])
                    .filter(|&s| self.mark[s as usize] != stamp),
            );
            if let Some(g) = rest_group {
                let (a, z) = groups[g];
                buf.extend(order[a..z].iter().map(|&i| touched[i as usize]));
            }
            self.move_out(b, &buf);
        }
        self.buf = buf;
    }

    /// Re-examines the blocks of the predecessors of the moved states.
    pub(super) fn propagate(&mut self) {
        let moved = std::mem::take(&mut self.moved);
        self.stamp += 1;
        let mut pairs = std::mem::take(&mut self.pairs);
        pairs.clear();
        for &t in &moved {
            for i in self.pred_start[t as usize]..self.pred_start[t as usize + 1] {
                let p = self.preds[i as usize];
                let b = self.block_of[p as usize];
                if self.mark[p as usize] != self.stamp && !self.queued[b as usize] {
                    self.mark[p as usize] = self.stamp;
                    pairs.push((b, p));
                }
            }
        }
        pairs.sort_unstable();
        let mut i = 0;
        let mut touched = std::mem::take(&mut self.touched);
        while i < pairs.len() {
            let b = pairs[i].0;
            touched.clear();
            while i < pairs.len() && pairs[i].0 == b {
                touched.push(pairs[i].1);
                i += 1;
            }
            self.examine(b as usize, &touched);
        }
        self.touched = touched;
        self.pairs = pairs;
        // Keep the allocation of the batch just processed for the next one.
        let mut moved = moved;
        moved.clear();
        moved.extend_from_slice(&self.moved);
        self.moved = moved;
    }

    /// Every block's members have the same signature.
    pub(super) fn is_stable(&mut self) -> bool {
        for b in 0..self.first.len() {
            self.sig_data.clear();
            let rep = self.elems[self.first[b] as usize];
            let rs = self.sig(rep);
            for i in self.first[b] + 1..self.past[b] {
                let s = self.elems[i as usize];
                let span = self.sig(s);
                if self.sig_slice(span) != self.sig_slice(rs) {
                    return false;
                }
            }
        }
        true
    }
}

impl<'a> Refiner<'a> {
    /// Predecessor rows, and the initial blocks (non-final states, final states) all queued.
    pub(super) fn new(dfa: &'a Dfa) -> Refiner<'a> {
        let n = dfa.len();
        let mut pred_start = vec![0u32; n + 2];
        let targets =
            |s: usize| dfa.bytes_of(s).iter().map(|e| e.target).chain(dfa.rules_of(s).iter().map(|&(_, t)| t));
        for s in 0..n {
            for t in targets(s) {
                pred_start[t as usize + 2] += 1;
            }
        }
        for i in 2..pred_start.len() {
            pred_start[i] += pred_start[i - 1];
        }
        let mut preds = vec![0u32; pred_start[n + 1] as usize];
        for s in 0..n {
            for t in targets(s) {
                let slot = &mut pred_start[t as usize + 1];
                preds[*slot as usize] = s as u32;
                *slot += 1;
            }
        }
        pred_start.pop();
        // Initial blocks: non-final states, then final ones.
        let mut elems: Vec<u32> = (0..n as u32).filter(|&s| !dfa.finals[s as usize]).collect();
        let n_nonfinal = elems.len() as u32;
        elems.extend((0..n as u32).filter(|&s| dfa.finals[s as usize]));
        let mut loc = vec![0u32; n];
        for (i, &s) in elems.iter().enumerate() {
            loc[s as usize] = i as u32;
        }
        let (mut first, mut past) = (Vec::new(), Vec::new());
        let mut block_of = vec![0u32; n];
        for (lo, hi) in [(0, n_nonfinal), (n_nonfinal, n as u32)] {
            if lo < hi {
                for &s in &elems[lo as usize..hi as usize] {
                    block_of[s as usize] = first.len() as u32;
                }
                first.push(lo);
                past.push(hi);
            }
        }
        let n_initial = first.len();
        Refiner {
            dfa,
            block_of,
            elems,
            loc,
            first,
            past,
            queued: vec![true; n_initial],
            queue: (0..n_initial as u32).collect(),
            pred_start,
            preds,
            mark: vec![0; n],
            stamp: 0,
            moved: Vec::new(),
            sig_data: Vec::new(),
            sig_span: Vec::new(),
            sig_hash: Vec::new(),
            order: Vec::new(),
            groups: Vec::new(),
            buf: Vec::new(),
            pairs: Vec::new(),
            touched: Vec::new(),
        }
    }
}
