//! Token budgets: masks that only allow tokens after which the grammar can still be completed,
//! and the stop token accepted, within the remaining number of tokens.
//!
//! Takes a compiled grammar's automata and vocabulary and a matcher's chart; produces, per chart
//! row, the length of the shortest completion, and filters a mask by a budget.
//!
//! Cost model. A completion is counted in *single-byte tokens*: a byte edge costs 1 when some
//! byte in its range is a (non-special) single-byte token of the vocabulary, and is unusable
//! otherwise. The shortest completion `C(row)` in those units is therefore an upper bound on the
//! tokens needed to finish (longer tokens can only shorten it), and is achievable with
//! single-byte tokens alone.
//!
//! - [`Completion`] (per compiled grammar, computed once): `dist[s]`, the fewest single-byte
//!   tokens that take automaton state `s` to a final state of its rule (sub-rules at their own
//!   shortest lengths), by Knuth's generalization of Dijkstra's algorithm to grammars.
//! - [`RowCosts`] (per matcher, one table per chart row `o`): `U(R, o)`, the fewest tokens that
//!   finish everything above an item of rule `R` started at row `o`, once `R` has ended:
//!   `U(R, o) = min over items p of row o with an edge p.state --R--> m' of dist[m'] + U(rule(p),
//!   p.origin)`, with `U(root, 0) = 0`. Then `C(row) = min over items x of dist[x.state] +
//!   U(rule(x), x.origin)`.
//!
//! Guarantee (documented in `docs/limits.md`). Let `remaining = max_tokens - accepted`. A non-stop
//! token is allowed only if `C(after it) + 1 <= remaining - 1` (finish, then the stop token). If
//! `remaining >= C(now) + 1` holds, the first byte of a shortest completion is a single-byte token
//! with `C(after) <= C(now) - 1`, so some token is always allowed, and by induction the matcher
//! accepts the stop token within `max_tokens`. It holds from the start when
//! `max_tokens >= C(start) + 1`, which [`Completion::shortest`] lets the matcher check. Lookahead
//! assertions are not counted: in grammars with lookahead the bound may be short (JSON Schema and
//! the builtin JSON grammar have none).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::earley::Chart;
use crate::error::Result;
use crate::fasthash::FastMap;
use crate::trie::TokenTrie;
use crate::vocab::Vocabulary;

/// "No completion" (larger than any budget; sums of two stay below `u32::MAX`).
pub const INF: u32 = u32::MAX / 4;

/// Shortest completion lengths of every automaton state. Invariant: `dist[s]` is the least
/// number of single-byte tokens reading a path from `s` to a final state of its rule, where a
/// rule edge costs the shortest length of its rule, or [`INF`] when there is none.
#[derive(Debug)]
pub struct Completion {
    dist: Vec<u32>,
}

impl Completion {
    /// Computes `dist` for the automata `a` under the vocabulary `vocab`.
    pub fn new(a: &Automata, vocab: &Vocabulary) -> Completion {
        let mut byte_ok = [false; 256];
        for t in 0..vocab.vocab_size() as u32 {
            let b = vocab.token_bytes(t);
            if b.len() == 1 && !vocab.is_special(t) && !vocab.is_stop(t) {
                byte_ok[b[0] as usize] = true;
            }
        }
        let n = a.states().len();
        // Reverse edges: (predecessor, rule on the edge or None for a usable byte edge).
        let mut rev: Vec<Vec<(u32, Option<u32>)>> = vec![Vec::new(); n];
        let mut by_rule: Vec<Vec<(u32, u32)>> = vec![Vec::new(); a.num_rules()];
        for s in 0..n {
            let sid = StateId(s as u32);
            for e in a.byte_edges(sid) {
                if (e.lo..=e.hi).any(|b| byte_ok[b as usize]) {
                    rev[e.target.0 as usize].push((s as u32, None));
                }
            }
            for &(r, t) in a.rule_edges(sid) {
                rev[t.0 as usize].push((s as u32, Some(r.index() as u32)));
                by_rule[r.index()].push((s as u32, t.0));
            }
            // A token edge is one token (`crate::token_edges`).
            if let Some(fin) = a.tokens().edge_target(a, sid) {
                rev[fin.0 as usize].push((s as u32, None));
            }
        }
        let mut dist = vec![INF; n];
        let mut done = vec![false; n];
        let mut rule_min = vec![INF; a.num_rules()];
        let mut heap = BinaryHeap::new();
        for (s, st) in a.states().iter().enumerate() {
            if st.is_final {
                dist[s] = 0;
                heap.push(Reverse((0u32, s as u32)));
            }
        }
        let relax = |dist: &mut Vec<u32>, heap: &mut BinaryHeap<Reverse<(u32, u32)>>, p: u32, c: u32| {
            if c < dist[p as usize] {
                dist[p as usize] = c;
                heap.push(Reverse((c, p)));
            }
        };
        while let Some(Reverse((d, s))) = heap.pop() {
            if done[s as usize] || d > dist[s as usize] {
                continue;
            }
            done[s as usize] = true;
            let rule = a.state(StateId(s)).rule;
            if a.rule_start(rule).0 == s && rule_min[rule.index()] == INF {
                rule_min[rule.index()] = d;
                for &(p, t) in &by_rule[rule.index()] {
                    if done[t as usize] {
                        let c = (d + dist[t as usize]).min(INF);
                        relax(&mut dist, &mut heap, p, c);
                    }
                }
            }
            for &(p, r) in &rev[s as usize] {
                let c = match r {
                    None => 1 + d,
                    Some(r) if rule_min[r as usize] < INF => rule_min[r as usize] + d,
                    Some(_) => continue,
                };
                relax(&mut dist, &mut heap, p, c.min(INF));
            }
        }
        Completion { dist }
    }

    #[inline]
    pub fn dist(&self, s: StateId) -> u32 {
        self.dist[s.0 as usize]
    }
}

/// `U(R, o)` tables, one per chart row, kept in step with a chart (see the module doc).
/// Invariant: `tables[o]` is sorted by rule index and holds the finite `U(R, o)` of row `o`.
#[derive(Clone, Debug, Default)]
pub struct RowCosts {
    tables: Vec<Vec<(u32, u32)>>,
}

impl RowCosts {
    fn lookup(&self, o: usize, rule: u32) -> u32 {
        let t = &self.tables[o];
        t.binary_search_by_key(&rule, |e| e.0).map_or(INF, |i| t[i].1)
    }

    /// Brings the tables in step with `chart` (rows dropped by rollback go, new rows come).
    pub fn sync(&mut self, a: &Automata, comp: &Completion, chart: &Chart) {
        self.tables.truncate(chart.num_rows());
        while self.tables.len() < chart.num_rows() {
            self.push(a, comp, chart);
        }
    }

    /// Adds the table of the chart's row number `self.tables.len()`.
    fn push(&mut self, a: &Automata, comp: &Completion, chart: &Chart) {
        let r = self.tables.len();
        let items = chart.row(r);
        let mut u: FastMap<u32, u32> = FastMap::default();
        if r == 0 {
            u.insert(a.root().index() as u32, 0);
        }
        // Items predicted in this row take this row's values: iterate to the fixpoint (values
        // only decrease; a pass without change ends it).
        for _ in 0..=items.len() {
            let mut changed = false;
            for it in items {
                let rule = a.state(it.state).rule.index() as u32;
                let up = if it.origin as usize == r {
                    u.get(&rule).copied().unwrap_or(INF)
                } else {
                    self.lookup(it.origin as usize, rule)
                };
                if up >= INF {
                    continue;
                }
                for &(rr, t) in a.rule_edges(it.state) {
                    let c = (comp.dist(t) + up).min(INF);
                    let e = u.entry(rr.index() as u32).or_insert(INF);
                    if c < *e {
                        *e = c;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let mut t: Vec<(u32, u32)> = u.into_iter().filter(|e| e.1 < INF).collect();
        t.sort_unstable();
        self.tables.push(t);
    }

    fn pop(&mut self) {
        self.tables.pop();
    }

    /// `C(row)` of the chart's last row: the fewest single-byte tokens that complete the input
    /// (0 when it is complete), or [`INF`]. The tables must be in step with `chart`.
    pub fn cost(&self, a: &Automata, comp: &Completion, chart: &Chart) -> u32 {
        let r = chart.last_row_index();
        let mut best = INF;
        for it in chart.row(r) {
            let d = comp.dist(it.state);
            if d >= best {
                continue;
            }
            let rule = a.state(it.state).rule.index() as u32;
            let up = if it.origin as usize == r {
                self.tables[r].binary_search_by_key(&rule, |e| e.0).map_or(INF, |i| self.tables[r][i].1)
            } else {
                self.lookup(it.origin as usize, rule)
            };
            best = best.min((d + up).min(INF));
        }
        best
    }
}

/// Upper bounds on the shortest completion after each allowed token, without parsing: a token
/// whose bytes one item of the last row reads inside its own rule (no rule ends or starts on the
/// way) leaves that item in state `s'`, so `dist[s'] + U(item)` bounds the completion after it.
/// Returns `(cost bound, token)` for tokens bounded at `floor` or more, and marks in `rest` the
/// allowed tokens no item reads whole (those need [`token_costs`]).
///
/// PERF: string contents allow most of the vocabulary; reading tokens through the items' byte
/// automata is an order of magnitude cheaper than pushing Earley rows for them.
#[allow(clippy::too_many_arguments)]
fn bounded_costs(
    a: &Automata,
    comp: &Completion,
    rows: &RowCosts,
    chart: &Chart,
    trie: &TokenTrie,
    mask: &Bitset,
    floor: u32,
    rest: &mut Bitset,
) -> Vec<(u32, u32)> {
    let r = chart.last_row_index();
    // (state, U of the item) of the last row's items with a finite U.
    let mut start: Vec<(StateId, u32)> = Vec::new();
    for it in chart.row(r) {
        let rule = a.state(it.state).rule.index() as u32;
        let up = if it.origin as usize == r {
            rows.tables[r].binary_search_by_key(&rule, |e| e.0).map_or(INF, |i| rows.tables[r][i].1)
        } else {
            rows.lookup(it.origin as usize, rule)
        };
        if up < INF && !start.contains(&(it.state, up)) {
            start.push((it.state, up));
        }
    }
    let mut out = Vec::new();
    // levels[d]: the (state, U) pairs after the first d bytes of the current trie path.
    let mut levels: Vec<Vec<(StateId, u32)>> = vec![start];
    let nodes = &trie.nodes;
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        let d = n.depth as usize;
        levels.truncate(d);
        let mut next = Vec::new();
        for &(s, up) in &levels[d - 1] {
            if let Some(t) = a.step(s, n.byte) {
                if !next.contains(&(t, up)) {
                    next.push((t, up));
                }
            }
        }
        if next.is_empty() {
            // No item reads this prefix inside its rule: the subtree's tokens need a parse.
            for t in trie.subtree_tokens(i) {
                if mask.get(t as usize) {
                    rest.set(t as usize);
                }
            }
            i = n.subtree_end as usize;
            continue;
        }
        let tokens = trie.node_tokens(&n);
        if tokens.iter().any(|&t| mask.get(t as usize)) {
            let c = next.iter().map(|&(s, up)| (comp.dist(s) + up).min(INF)).min().unwrap_or(INF);
            if c >= floor {
                out.extend(tokens.iter().filter(|&&t| mask.get(t as usize)).map(|&t| (c, t)));
            }
        }
        levels.push(next);
        i += 1;
    }
    out
}

/// Shortest completions after each allowed token of a chart state: `(cost, token)` for every
/// token of `mask` (stop tokens excluded) whose cost is at least `floor`, sorted by decreasing cost.
/// Walks the token trie over the chart (pushing and popping rows), so the chart and the tables
/// come back as they were.
pub fn token_costs(
    a: &Automata,
    comp: &Completion,
    rows: &mut RowCosts,
    chart: &mut Chart,
    trie: &TokenTrie,
    mask: &Bitset,
    floor: u32,
) -> Result<Vec<(u32, u32)>> {
    let base = chart.num_rows();
    let mut out = Vec::new();
    let nodes = &trie.nodes;
    // allowed_before[k]: allowed tokens among trie.tokens[..k] (a subtree's tokens are a range).
    let mut allowed_before = Vec::with_capacity(trie.tokens.len() + 1);
    let mut acc = 0u32;
    allowed_before.push(0);
    for &t in &trie.tokens {
        acc += u32::from(mask.get(t as usize));
        allowed_before.push(acc);
    }
    let mut i = 0;
    while i < nodes.len() {
        let n = nodes[i];
        // Rows above the node's parent go.
        while chart.num_rows() > base + n.depth as usize - 1 {
            chart.pop_row();
            rows.pop();
        }
        // Subtrees without an allowed token need no walk.
        let (t0, t1) = (trie.first_token[i] as usize, trie.first_token[n.subtree_end as usize] as usize);
        if allowed_before[t1] == allowed_before[t0] {
            i = n.subtree_end as usize;
            continue;
        }
        if !chart.push_byte(a, n.byte)? {
            i = n.subtree_end as usize;
            continue;
        }
        rows.push(a, comp, chart);
        let tokens = trie.node_tokens(&n);
        if tokens.iter().any(|&t| mask.get(t as usize)) {
            let c = rows.cost(a, comp, chart);
            if c >= floor {
                out.extend(tokens.iter().filter(|&&t| mask.get(t as usize)).map(|&t| (c, t)));
            }
        }
        i += 1;
    }
    while chart.num_rows() > base {
        chart.pop_row();
        rows.pop();
    }
    out.sort_unstable_by(|x, y| y.cmp(x));
    Ok(out)
}

/// Most memoized token-cost lists per matcher; when full the memo starts over.
pub const MAX_MEMO_STATES: usize = 256;

/// A matcher's token budget: the limit, the grammar's [`Completion`], the row tables of the
/// matcher's chart, and token costs memoized by chart signature (equal signatures have equal
/// futures, so equal costs; see `Chart::last_signature`).
#[derive(Clone, Debug)]
pub struct Budget {
    pub max_tokens: usize,
    comp: std::sync::Arc<Completion>,
    rows: RowCosts,
    memo: FastMap<u128, std::sync::Arc<Vec<(u32, u32)>>>,
}

impl Budget {
    /// A budget of `max_tokens` accepted tokens (the stop token included) for a matcher whose
    /// chart is `chart`. Errors when `max_tokens` is below the shortest completion plus the stop
    /// token, naming that length.
    pub fn new(
        a: &Automata,
        comp: std::sync::Arc<Completion>,
        chart: &Chart,
        accepted: usize,
        max_tokens: usize,
    ) -> Result<Budget> {
        let mut b = Budget { max_tokens, comp, rows: RowCosts::default(), memo: FastMap::default() };
        let need = b.shortest(a, chart);
        if need >= INF || accepted + need as usize + 1 > max_tokens {
            let need = if need >= INF {
                "no completion with single-byte tokens".to_string()
            } else {
                format!("{} tokens", need + 1)
            };
            return Err(crate::error::Error::invalid_argument(format!(
                "max_tokens={max_tokens} is below the shortest completion of the grammar ({need}, the stop token included)"
            )));
        }
        Ok(b)
    }

    /// The shortest completion of `chart`'s last row in single-byte tokens (stop token excluded).
    pub fn shortest(&mut self, a: &Automata, chart: &Chart) -> u32 {
        self.rows.sync(a, &self.comp, chart);
        self.rows.cost(a, &self.comp, chart)
    }

    /// Upper bounds (exact for tokens that cross rule boundaries) on the completion after each
    /// token of `mask`, for tokens at `floor` or more, by decreasing cost.
    fn costs(
        &mut self,
        a: &Automata,
        trie: &TokenTrie,
        chart: &mut Chart,
        mask: &Bitset,
        floor: u32,
    ) -> Result<Vec<(u32, u32)>> {
        let mut rest = Bitset::new(mask.len());
        let mut out = bounded_costs(a, &self.comp, &self.rows, chart, trie, mask, floor, &mut rest);
        // A token that some item reads whole but at a high bound may still complete cheaper
        // through another parse: the bound stays (conservative, and exact along the shortest
        // completion, whose first byte an item of the row reads).
        if rest.count_ones() > 0 {
            out.extend(token_costs(a, &self.comp, &mut self.rows, chart, trie, &rest, floor)?);
        }
        out.sort_unstable_by(|x, y| y.cmp(x));
        Ok(out)
    }

    /// Clears from `mask` the tokens after which the grammar cannot be completed and the stop
    /// token accepted within the budget, `accepted` tokens having been accepted. Stop tokens
    /// (`stop`) stay as they are while a token remains.
    #[allow(clippy::too_many_arguments)]
    pub fn restrict(
        &mut self,
        a: &Automata,
        trie: &TokenTrie,
        chart: &mut Chart,
        accepted: usize,
        mask: &mut Bitset,
        stop: &[u32],
    ) -> Result<()> {
        let remaining = self.max_tokens.saturating_sub(accepted);
        if remaining < 2 {
            // Only a stop token fits.
            let keep: Vec<u32> = stop.iter().copied().filter(|&t| remaining == 1 && mask.get(t as usize)).collect();
            mask.clear();
            for t in keep {
                mask.set(t as usize);
            }
            return Ok(());
        }
        let limit = (remaining - 2).min(INF as usize) as u32;
        let now = self.shortest(a, chart);
        // By the invariant `limit + 1 >= now`, tokens costing less than `now` always fit, so only
        // those costing `now` or more are listed (and memoized).
        let floor = now.min(limit + 1);
        let costs = if floor == now {
            let sig = chart.last_signature();
            if let Some(c) = self.memo.get(&sig) {
                c.clone()
            } else {
                let c = std::sync::Arc::new(self.costs(a, trie, chart, mask, floor)?);
                if self.memo.len() >= MAX_MEMO_STATES {
                    self.memo.clear();
                }
                self.memo.insert(sig, c.clone());
                c
            }
        } else {
            std::sync::Arc::new(self.costs(a, trie, chart, mask, floor)?)
        };
        for &(c, t) in costs.iter() {
            if c <= limit {
                break;
            }
            if !stop.contains(&t) {
                mask.unset(t as usize);
            }
        }
        Ok(())
    }
}

impl Budget {
    /// For token edges (`crate::token_edges`): the most a completion may cost after the next
    /// token (`None`: only a stop token fits), with `accepted` tokens accepted.
    pub fn next_token_limit(&self, accepted: usize) -> Option<u32> {
        let remaining = self.max_tokens.saturating_sub(accepted);
        (remaining >= 2).then(|| (remaining - 2).min(INF as usize) as u32)
    }

    /// The shortest completion after the token rule `rule`, predicted in the chart's last row,
    /// reads its token: `U(rule, last row)`.
    pub fn cost_after_rule(&mut self, a: &Automata, chart: &Chart, rule: crate::grammar::RuleId) -> u32 {
        self.rows.sync(a, &self.comp, chart);
        self.rows.lookup(chart.last_row_index(), rule.index() as u32)
    }
}
