//! Lists of node indexes for many nodes in two flat arrays (offsets and values).
//!
//! PERF: the rule graphs of the compile's whole-grammar plans (`inline.rs`, `tail.rs`,
//! `equal_rules.rs`) were a `Vec` per rule, each built, read and freed once: five to six
//! allocations per rule of a key-set schema (~100k rules on the TTFM band's largest).
//!
//! Invariant: `start` has one entry more than there are lists and never decreases; list `i` is
//! `at[start[i]..start[i + 1]]`.

/// One list of `u32` per node, laid out end to end.
#[derive(Debug, Clone)]
pub(crate) struct Lists {
    start: Vec<u32>,
    at: Vec<u32>,
}

impl Default for Lists {
    fn default() -> Self {
        Lists { start: vec![0], at: Vec::new() }
    }
}

impl Lists {
    /// Room for `lists` lists and `values` values in all.
    pub(crate) fn with_capacity(lists: usize, values: usize) -> Self {
        let mut start = Vec::with_capacity(lists + 1);
        start.push(0);
        Lists { start, at: Vec::with_capacity(values) }
    }

    /// Appends the next node's list.
    pub(crate) fn push(&mut self, list: impl IntoIterator<Item = u32>) {
        self.at.extend(list);
        self.start.push(self.at.len() as u32);
    }

    /// The lists of `len` nodes from `(node, value)` pairs, each list in the pairs' order.
    pub(crate) fn from_pairs(len: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) -> Self {
        let (start, at) = group_by_key(len, pairs);
        Lists { start, at }
    }

    /// The number of lists.
    pub(crate) fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// List `i`.
    pub(crate) fn get(&self, i: usize) -> &[u32] {
        &self.at[self.start[i] as usize..self.start[i + 1] as usize]
    }

    /// Every `(node, value)` pair, nodes in order.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (u32, u32)> + Clone + '_ {
        (0..self.len()).flat_map(move |i| self.get(i).iter().map(move |&v| (i as u32, v)))
    }
}

/// Groups the `(key, value)` pairs (keys below `n`) by key, in order (a counting sort): key `k`'s
/// values are `.1[.0[k]..0[k + 1]]`.
pub(crate) fn group_by_key<T: Copy + Default>(
    n: usize,
    pairs: impl Iterator<Item = (u32, T)> + Clone,
) -> (Vec<u32>, Vec<T>) {
    let mut start = vec![0u32; n + 1];
    for (k, _) in pairs.clone() {
        start[k as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut at = start.clone();
    let mut vals = vec![T::default(); start[n] as usize];
    for (k, v) in pairs {
        let i = &mut at[k as usize];
        vals[*i as usize] = v;
        *i += 1;
    }
    (start, vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_pushed_and_from_pairs_read_back() {
        let mut l = Lists::with_capacity(3, 4);
        l.push([2, 1]);
        l.push([]);
        l.push([0, 0]);
        assert_eq!(l.len(), 3);
        assert_eq!((l.get(0), l.get(1), l.get(2)), (&[2, 1][..], &[][..], &[0, 0][..]));
        // Reversed: node `v`'s list holds the nodes listing `v`, in node order.
        let r = Lists::from_pairs(3, l.pairs().map(|(i, v)| (v, i)));
        assert_eq!((r.get(0), r.get(1), r.get(2)), (&[2, 2][..], &[0][..], &[0][..]));
        assert_eq!(Lists::default().len(), 0);
    }
}
