//! The kernel walk: classifying a kernel state by walking the token trie from a chart seeded
//! with the state alone, with frames (chart rows, or a virtual item in a plain state), rule ends
//! recorded as uncertain suffixes, and the slices' frontier walks.
//!
//! Pipeline place: the general case of kernel classification ([`classify_kernel`]); run indexes
//! (`runs.rs`) and interned rows (`row_memo.rs`) shortcut parts of it.
use super::*;

impl KernelWalk<'_> {
    /// Runs the classification (see [`classify_kernel_budget`]); false if abandoned.
    pub(super) fn classify(&mut self, state: StateId, sc: Shortcuts<'_>) -> Result<bool> {
        let Shortcuts { body, follow, class, capacity, .. } = sc;
        let (a, trie) = (self.a, self.trie);
        let fresh = CoverMemo::default();
        let memo = self.cover.unwrap_or(&fresh);
        let w = self;
        // The kernel row, whatever rows an earlier walk of the state interned (`offering_rows`).
        let base = Frame::Rows(KERNEL_ROW + 1);
        // A chain with inner exits takes its slice once the compile's thread set its lists past
        // the chain (`ClassBodySlice::prepare_past`); until then, the walk below, as without one.
        if let Some((cb, chain)) = sc.class_body.filter(|(cb, chain)| chain.inner == 0 || cb.past_ready()) {
            // A counted class body: its class-text tokens that fit are read inside the rule, every
            // other token is refused without a rule end a context continues on the way, except
            // below the walked frontier nodes (see `crate::slice::ClassBodySlice`), after a chain
            // with an exit state, where `c` characters of class text are followed by a byte the
            // exit reads, where the rule ended after `k` characters and a FOLLOW byte leaves
            // the class (`crate::slice::ends_served`), and where a level after `k` characters
            // reads a side byte. Each (characters, byte) is walked once: a final exit's byte may
            // be in FOLLOW, or a side byte too.
            let c = chain.chars;
            cb.add_within(c, &mut w.accepted);
            let mut leaves: Vec<(u32, u8)> = Vec::new();
            leaves
                .extend(chain.exit.into_iter().flat_map(|r| a.byte_edges(r)).flat_map(|e| e.lo..=e.hi).map(|x| (c, x)));
            if !chain.ends.is_empty() {
                let follow_bytes: Vec<u8> = (0..=255u8).filter(|&x| follow.is_none_or(|fo| fo.contains(x))).collect();
                leaves.extend(chain.ends.iter().flat_map(|&k| follow_bytes.iter().map(move |&x| (k, x))));
            }
            for &(k, side) in &chain.sides {
                leaves.extend((0..0x80u8).filter(|&x| side >> x & 1 == 1).map(|x| (k, x)));
            }
            leaves.sort_unstable();
            leaves.dedup();
            let exits = leaves.iter().flat_map(|&(k, x)| cb.exits_at(k, x));
            // With inner exit bytes, the walked nodes past `c` characters lie below a node walked
            // next or are refused at the exit (no rule end on the way a context continues).
            let walked = cb.walked.iter().zip(&cb.walked_chars).filter(|&(_, &k)| chain.inner == 0 || k <= c);
            for (node, path) in walked.map(|(f, _)| (f.node, &*f.path)).chain(exits) {
                if !w.walk_frontier(node, path, base)? {
                    return Ok(false);
                }
            }
            if chain.inner != 0 && !w.walk_inner_exits(cb, c, chain.inner, base)? {
                return Ok(false);
            }
            return Ok(true);
        }
        // What the body slice's cover search misread, once it failed (for the walked cover), and
        // where it met it.
        let body_misread = std::cell::Cell::new(None);
        let misread_at = std::cell::Cell::new(None);
        // The bounded search from the state, once asked (after the unbounded cover failed); not
        // run where it can answer no shortcut ([`crate::slice::bounded_short`]).
        let bounded_memo = std::cell::Cell::new(None);
        let bounded = || {
            let b = bounded_memo.get().unwrap_or_else(|| {
                let most_nodes = trie.nodes.len() / WITHIN_MAX_SHARE.min(WITHIN_FIRST_SHARE);
                let short = |at| {
                    let past = |k| body.map_or(0, |sl| sl.nodes_past(trie, k));
                    crate::slice::bounded_short(at, trie.max_depth, past, most_nodes)
                };
                match misread_at.get() {
                    Some(at) if body.is_some() && short(at) => None,
                    _ => crate::slice::bounded_search(a, state, trie.max_depth),
                }
            });
            bounded_memo.set(Some(b));
            b
        };
        // A short bound (`Bounded::Within`) with at most `1 / share` of the trie's nodes past it.
        let within = |sl: &BodySlice, share: usize| match bounded() {
            Some(Bounded::Within { chars, cover }) if sl.nodes_past(trie, chars) <= trie.nodes.len() / share => {
                Some((chars, cover))
            }
            _ => None,
        };
        match body {
            Some(sl) if let Some(c) = sc.closing => {
                if !w.walk_closing(sl, c, base)? {
                    return Ok(false);
                }
            }
            Some(sl) if let Some(c) = capacity.filter(|c| !c.ends).map(|c| c.chars) => {
                // A counted string body: its slice tokens that fit are read inside the rule, the
                // others are refused without a rule end on the way (the states are not final), so
                // only the non-dead frontier needs a walk (a replay too long for `c` just fails).
                sl.add_within(c, &mut w.accepted);
                // A frontier node whose first byte the kernel row does not read fails at once, with
                // no rule end on its path to record.
                // PERF: a literal that starts with `"` (a tag's `", "parameters": `) has capacity
                // 0 and replayed every frontier node of the vocabulary (~10-80 us per kernel).
                let readable = row_bytes(a, w.chart.row(KERNEL_ROW));
                let first =
                    |f: &crate::slice::FrontierNode| *f.path.first().unwrap_or(&trie.nodes[f.node as usize].byte);
                for f in sl.frontier.iter().filter(|f| !f.dead && readable.contains(first(f))) {
                    if !w.walk_frontier(f.node, &f.path, base)? {
                        return Ok(false);
                    }
                }
            }
            // A counted body that may end inside a token reads every slice token (none outruns
            // its chain): it covers the slice, ending on the way.
            Some(sl)
                if let Some(cover) = capacity
                    .map(|c| Cover { may_end: true, walk_dead: c.calls })
                    .or_else(|| {
                        let refuted = BodySlice::covers_or_refuted(a, state, memo);
                        refuted.map_err(|r| (body_misread.set(Some(r.misread)), misread_at.set(r.at))).ok()
                    })
                    .or_else(|| match bounded() {
                        Some(Bounded::Cover(cover)) => Some(cover),
                        _ => None,
                    }) =>
            {
                // Every body-text token stays inside the rule; walk only the frontier subtrees, each
                // after replaying its (body-text) parent path exactly as the full walk would.
                w.accepted.or_assign(&sl.slice);
                if !w.walk_body_frontier(&sl.frontier, cover, follow, base)? {
                    return Ok(false);
                }
            }
            // Body text of a few characters, read through nested rules (a counted `pattern`
            // string's last characters after it matched): a closing body.
            Some(sl) if let Some(Bounded::Closing { chars }) = bounded() => {
                crate::slice::note_short_bound(true);
                if !w.walk_closing(sl, chars, base)? {
                    return Ok(false);
                }
            }
            // Every body text of at most `chars` characters stays inside the rule (or ends it at
            // its last byte): those slice tokens are read. Every longer token lies below a
            // boundary node after `chars` characters, walked for real, and every other one below
            // a frontier node before them, walked as for a cover. Before the walked body where
            // few nodes lie past them (its search, when it fails, costs more than their walk).
            Some(sl) if let Some((chars, cover)) = within(sl, WITHIN_FIRST_SHARE) => {
                if !w.walk_within(sl, chars, cover, follow, base)? {
                    return Ok(false);
                }
            }
            // A string body that refuses some text of a few ASCII characters: the body text
            // without them stays inside the rule, and the nodes where they begin are walked.
            Some(_)
                if let Some((ws, cover)) =
                    sc.walked.zip(body_misread.get()).and_then(|((walkable, get), misread)| {
                        if let Some(prepare) = sc.prepare_walked.filter(|_| misread.is_some()) {
                            prepare();
                        }
                        let unwalkable = |x: u8| sc.unwalkable.is_some_and(|u| u(x));
                        let (chars, cover) = crate::slice::walked_cover(a, state, misread, walkable, unwalkable, memo)?;
                        Some((get(chars)?, cover))
                    }) =>
            {
                w.accepted.or_assign(&ws.slice);
                if !w.walk_body_frontier(&ws.frontier, cover, follow, base)? {
                    return Ok(false);
                }
            }
            Some(sl) if let Some((chars, cover)) = within(sl, WITHIN_MAX_SHARE) => {
                if !w.walk_within(sl, chars, cover, follow, base)? {
                    return Ok(false);
                }
            }
            _ if let Some(cs) = class.filter(|cs| class_covers(a, state, cs.ascii, memo)) => {
                // Free text of one class: its runs stay inside the rule; everything else is walked.
                w.accepted.or_assign(&cs.slice);
                for f in &cs.frontier {
                    if !w.walk_frontier(f.node, &f.path, base)? {
                        return Ok(false);
                    }
                }
            }
            _ if let Some((ri, run)) = w.runs_at(base)? => {
                // The kernel state itself reads every run of a class; where the breaks it reads
                // hold a large share of the nodes it reads, the region DFA walks them for less.
                let region = sc.region.filter(|_| w.breaks_outweigh_region(&ri, run));
                match region.and_then(|r| w.walk_region(state, Some(r), sc.text)) {
                    Some(served) => {
                        REGION_BEFORE_RUNS.set(REGION_BEFORE_RUNS.get() + 1);
                        if !served {
                            return Ok(false);
                        }
                    }
                    None => {
                        if !w.walk_run_children(0, trie.nodes.len(), 0, &ri, run, base, None)? {
                            return Ok(false);
                        }
                    }
                }
            }
            // A rule that reads on through short return stacks: a DFA walk of the trie, cheaper
            // per node than chart frames.
            _ if let Some(served) = w.walk_region(state, sc.region, sc.text) => {
                if !served {
                    return Ok(false);
                }
            }
            _ => {
                // Only the root children some item of the kernel row reads: the others fail at
                // once, with no rule end on their path to record.
                // PERF: a literal's state (a tag's `{"name": "...`) stepped every root child,
                // ~20 us per kernel, a dozen kernels per row after a trigger's first bytes.
                let readable = match base {
                    Frame::Rows(n) => row_bytes(a, w.chart.row(n - 1)),
                    Frame::Virtual(it, _) => state_bytes(a, it.state),
                };
                for &c in trie.root_children.iter().filter(|&&c| readable.contains(trie.nodes[c as usize].byte)) {
                    if !w.walk(c as usize, trie.nodes[c as usize].subtree_end as usize, base)? {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }
}

/// A region walk is taken where the state reads at least `1 / REGION_MIN_SHARE` of the trie's
/// nodes (see [`KernelWalk::walk_region`]).
const REGION_MIN_SHARE: usize = 8;

/// A kernel whose run index applies takes the region walk first where the subtrees of the
/// breaks it reads hold at least `1 / REGION_BEFORE_RUNS_SHARE` of the nodes the region walk
/// visits (see [`KernelWalk::breaks_outweigh_region`]).
/// PERF: MaskBench o71827's `^https:\/\/apps\.apple\.com\/.*?app\/...` after `.../us` (the
/// `.` run breaks at every `a`) walked 11.5 K breaks' subtrees with chart frames, 2.7 ms on
/// Llama 3, against 1.6 ms for the region walk of the whole trie: its breaks hold 29-100% of the
/// nodes it reads. The run kernels of the other o71827 states and of the UTF-8 and
/// shifted-string tests (`plain_loop_wide_index_...`, `shifted_string_starts_...`) hold at most
/// 7.4% and walk in 50-280 us.
const REGION_BEFORE_RUNS_SHARE: usize = 8;

/// A break's chart frame in [`KernelWalk::breaks_outweigh_region`]'s estimate, in the region
/// walk's nodes (o71827: ~0.2 us a walked break, ~6 ns a region node, over 8).
const BREAK_NODES: usize = 5;

test_counter! {
    /// How many boundary nodes of a short bound ([`crate::slice::Bounded::Within`]) this thread's
    /// walks reached by stepping below the nodes they share with the one before (see
    /// `KernelWalk::walk_below_path`), for tests.
    pub fn within_paths_kept => PATHS_KEPT
}

test_counter! {
    /// How many boundary nodes of a short bound this thread's walks walked on memo codes
    /// (`KernelWalk::walk_lean`) rather than chart frames, for tests.
    pub fn within_lean_walks => LEAN_WALKS
}

test_counter! {
    /// How many counted class bodies this thread's walks served whose exit reads one-byte class
    /// characters (`KernelWalk::walk_inner_exits`), for tests.
    pub fn class_inner_exits => INNER_EXITS
}

test_counter! {
    /// How many kernels this thread's walks kept on the run index only because the subtrees of
    /// breaks that re-enter the run were not counted ([`KernelWalk::breaks_outweigh_region`]), for tests.
    pub fn runs_reentered_taken => RUNS_REENTERED
}

test_counter! {
    /// How many region walks would cross their kernel walk's budget and asked `on_budget` before
    /// walking (an abandoned walk then skips the region walk), for tests.
    pub fn region_budget_asked_first => REGION_BUDGET_FIRST
}

test_counter! {
    /// How many kernels this thread's walks gave the region walk rather than the run index that
    /// applied ([`REGION_BEFORE_RUNS_SHARE`]), for tests.
    pub fn region_before_runs_taken => REGION_BEFORE_RUNS
}

/// The nodes below the root children whose byte is in `readable`.
fn nodes_below(trie: &TokenTrie, readable: &ByteSet) -> usize {
    trie.root_children
        .iter()
        .map(|&c| c as usize)
        .filter(|&c| readable.contains(trie.nodes[c].byte))
        .map(|c| trie.nodes[c].subtree_end as usize - c)
        .sum()
}

impl KernelWalk<'_> {
    /// Whether the whole-trie walk of run index `ri` (its loop at frame `run`) would cost at least
    /// `1 / REGION_BEFORE_RUNS_SHARE` of the region walk, counted in nodes the region walk visits
    /// (those below the root children the kernel row reads): for each break of lead 0 (the first
    /// break on each path) whose byte the row reads, [`BREAK_NODES`] for its chart frame, plus
    /// its subtree unless the break re-enters the run ([`Self::reenters_run`]), where the run
    /// index serves the subtree again. An estimate of cost only (a deeper break's byte is read
    /// from the run's frame, and a refused one fails at once): both walks are exact.
    /// PERF: english.gbnf's `en-char+ ([ \t\n] en-char+)*` first mask: its ` `, `\t`, `\n`
    /// breaks' subtrees hold 53% of the trie, but each leads back into the run: the runs arm
    /// 5.9 M instructions for the whole cold compile, the region walk 14.2 M (Llama 3).
    fn breaks_outweigh_region(&self, ri: &RunIndex, run: Frame) -> bool {
        let trie = self.trie;
        let readable = row_bytes(self.a, self.chart.row(KERNEL_ROW));
        let loop_state = self.single_state(run);
        let (mut broken, mut reentered) = (0, 0);
        for (byte, nodes) in ri.root_breaks_by_byte().iter().filter(|(byte, _)| readable.contains(*byte)) {
            let subtrees: usize = nodes.iter().map(|&m| (trie.nodes[m as usize].subtree_end - m) as usize).sum();
            broken += nodes.len() * BREAK_NODES;
            if loop_state.is_some_and(|s| self.reenters_run(s, *byte, ri.ascii)) {
                reentered += subtrees;
            } else {
                broken += subtrees;
            }
        }
        let below = nodes_below(trie, &readable);
        let outweigh = broken * REGION_BEFORE_RUNS_SHARE >= below;
        if !outweigh && (broken + reentered) * REGION_BEFORE_RUNS_SHARE >= below {
            RUNS_REENTERED.set(RUNS_REENTERED.get() + 1);
        }
        outweigh
    }

    /// Whether break byte `x` read from loop state `s` (of ASCII class `class`) leads to a state
    /// without rule edges that every class byte leads back to `s` (a separator between runs,
    /// `[a-z]+( [a-z]+)*`'s space).
    fn reenters_run(&self, s: StateId, x: u8, class: u128) -> bool {
        let a = self.a;
        let Some(t) = a.step(s, x) else { return false };
        a.rule_edges(t).is_empty()
            && class != 0
            && (0..0x80u8).filter(|&c| class >> c & 1 == 1).all(|c| a.step(t, c) == Some(s))
    }

    /// Classifies the kernel by the region DFA `region` (see `region.rs`) where it applies:
    /// `Some(true)` when served, `Some(false)` when abandoned (its walk's visits reached the
    /// budget and a shared classification stands in, as for the chart walk), `None` (nothing
    /// recorded) where it does not apply. A cache busy on another thread gives way to a fresh one.
    fn walk_region(
        &mut self,
        state: StateId,
        region: Option<&std::sync::Mutex<RegionDfa>>,
        text: Option<&TextSlice>,
    ) -> Option<bool> {
        let cache = region.filter(|_| RegionDfa::applies(self.a))?;
        let (a, trie, n) = (self.a, self.trie, self.accepted.len());
        // The nodes under the root children the state reads: where they are a small share of the
        // trie, the chart walk is cheaper than the DFA's new transitions (a key's start after
        // `{"`: 66 -> 280 us on Llama 3). They count as the chart walk's visits would, so a long
        // region walk is shared across grammars as a long walk is (`new_kernel_in` keys it).
        let nodes = nodes_below(trie, &row_bytes(a, self.chart.row(KERNEL_ROW)));
        if nodes < trie.nodes.len() / REGION_MIN_SHARE {
            return None;
        }
        // A walk this one crosses its budget in asks `on_budget` first: one it abandons there (a
        // pending class body's bounded try, a kernel another grammar has shared) would drop the
        // region walk's result, so it is not walked. PERF: MaskBench o63939 t6 and o37613 t5,
        // when their fill comes before the compile's thread has built their class-body slice:
        // ~10 M instructions of a region walk past the pending try's 8,192 nodes, then dropped.
        let crosses = self.visits < self.budget && self.visits + nodes >= self.budget;
        if crosses {
            REGION_BUDGET_FIRST.set(REGION_BUDGET_FIRST.get() + 1);
            let abandon = self.spend_as(nodes, BudgetAsk::BeforeRegion);
            if abandon {
                return Some(false);
            }
        }
        let follow = self.follow.as_ref();
        let found = match cache.try_lock() {
            Ok(mut dfa) => region::classify_region(a, trie, n, state, follow, &mut dfa, text),
            Err(std::sync::TryLockError::Poisoned(p)) => {
                region::classify_region(a, trie, n, state, follow, &mut p.into_inner(), text)
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                region::classify_region(a, trie, n, state, follow, &mut RegionDfa::default(), text)
            }
        };
        let Some(m) = found else {
            if crosses {
                // Its visits are the chart walk's to count (`on_budget`, asked, may be asked again).
                self.visits -= nodes;
            }
            return None;
        };
        self.accepted = m.accepted;
        self.uncertain = m.uncertain;
        self.suffix_ids = m.suffix_ids;
        self.suffixes = m.suffixes;
        Some(crosses || !self.spend(nodes))
    }

    /// Walks the tokens of class text past a chain's `c` characters whose next character is a
    /// byte of `inner` (the one-byte class characters its exit reads,
    /// [`crate::slice::ClassChain::inner`]): the nodes right past `c` characters of class text
    /// with such a byte, each below its path replayed. Returns false if abandoned.
    /// PERF: a fixed-shape pattern string (`^....-..-..T..:..:..`, MaskBench o89194 token 471)
    /// took the region walk of every trie node its first four characters read (~200 K nodes,
    /// 5 M instructions on Llama 3); it reads `-` only after them.
    fn walk_inner_exits(&mut self, cb: &ClassBodySlice, c: u32, inner: u128, base: Frame) -> Result<bool> {
        INNER_EXITS.set(INNER_EXITS.get() + 1);
        let trie = self.trie;
        let mut above = PathAbove::default();
        for x in (0..0x80u8).filter(|&x| inner >> x & 1 == 1) {
            for &n in cb.past_reading(c, x) {
                above.move_to(trie, n);
                if !self.walk_frontier(n, &above.bytes, base)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Records as uncertain the tokens below the boundary nodes after `chars` characters (where a
    /// closing body's rule ends) that are not slice tokens: those below the frontier nodes whose
    /// body-text path completes `chars` characters, each with its bytes past that point, as the
    /// walk records the tokens below a failed step; those whose first byte past it is outside
    /// FOLLOW are left out (see [`record_uncertain`]). The slice tokens are the kernel's
    /// [`Beyond`] group. Returns false if abandoned.
    fn record_frontier_past(&mut self, frontier: &[crate::slice::FrontierNode], chars: u32) -> bool {
        let trie = self.trie;
        let mut bytes: Vec<u8> = Vec::new();
        for f in frontier {
            // `at`: the path's byte offset where its `chars`-th character completes.
            let Some(at) = BodySlice::boundary_offset(&f.path, chars) else { continue };
            let node = &trie.nodes[f.node as usize];
            let first = f.path.get(at).copied().unwrap_or(node.byte);
            if self.follow.as_ref().is_some_and(|fo| !fo.contains(first)) {
                continue;
            }
            bytes.clear();
            bytes.extend_from_slice(&f.path[at..]);
            let (keep, top) = (bytes.len(), node.depth as usize);
            let before = self.uncertain.len();
            for n in &trie.nodes[f.node as usize..node.subtree_end as usize] {
                bytes.truncate(keep + n.depth as usize - top);
                bytes.push(n.byte);
                for &t in trie.node_tokens(n) {
                    let sid = intern_suffix(&mut self.suffix_ids, &mut self.suffixes, &bytes);
                    self.uncertain.push((t, sid));
                }
            }
            let recorded = self.uncertain.len() - before;
            if self.spend(1 + recorded * RECORD_COST) {
                return false;
            }
        }
        true
    }

    /// Classifies a counted body closing after exactly `c` characters (see `closing_body` and
    /// [`crate::slice::Bounded::Closing`]): its slice tokens of at most `c` characters are read
    /// inside the rule; every token whose path reads `c` characters of body text and goes on
    /// ends the rule there and leaves the rest (nothing inside the rule reads on), recorded below
    /// each boundary node after `c` characters as the walk records a failed step; the other
    /// frontier nodes are walked, except those that fail with no rule end on the way (a dead
    /// byte inside the chain). Returns false if abandoned.
    fn walk_closing(&mut self, sl: &BodySlice, c: u32, base: Frame) -> Result<bool> {
        let trie = self.trie;
        sl.add_within(c, &mut self.accepted);
        // The slice tokens past the block's end, as one group (see `Beyond`); the other
        // tokens below the boundary nodes lie below frontier nodes, recorded one by one.
        let mut tokens = sl.slice.clone();
        tokens.and_not_assign(&self.accepted);
        self.beyond = Some(Beyond { tokens, chars: c, nodes: sl.boundary_nodes_shared(trie, c) });
        if !self.record_frontier_past(&sl.frontier, c) {
            return Ok(false);
        }
        for f in sl.frontier.iter().filter(|f| !f.dead) {
            let inside = BodySlice::chars_and_state(&f.path).is_some_and(|(k, b)| k < c || (k == c && b != 0));
            if inside && !self.walk_frontier(f.node, &f.path, base)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// For a kernel state reading every body text of at most `chars` characters
    /// ([`crate::slice::Bounded::Within`]): accepts body slice `sl`'s tokens of at most `chars`
    /// characters, then walks, in trie order, the nodes it leaves undecided: each boundary node
    /// after `chars` characters (its subtree: the tokens past them), and the frontier nodes
    /// before it as [`Self::walk_body_frontier`] walks them (those after lie below a boundary
    /// node). Returns false if abandoned.
    fn walk_within(
        &mut self,
        sl: &BodySlice,
        chars: u32,
        cover: Cover,
        follow: Option<&ByteSet>,
        base: Frame,
    ) -> Result<bool> {
        crate::slice::note_short_bound(false);
        sl.add_within(chars, &mut self.accepted);
        let trie = self.trie;
        let walk = frontier_filter(trie, cover, follow);
        let inside = |f: &crate::slice::FrontierNode| {
            BodySlice::chars_and_state(&f.path).is_some_and(|(k, b)| k < chars || (k == chars && b != 0))
        };
        let mut front = sl.frontier.iter().filter(|f| inside(f) && walk(f)).peekable();
        let mut above = PathAbove::default();
        // With the row memo: the lean path (its own, which the frontier walks leave alone), kept
        // from one boundary node to the next.
        let mut lean = self.memo.as_ref().and_then(|m| m.code(base)).map(|c| LeanPath::new(c, trie.max_depth));
        for &n in sl.boundary_nodes(trie, chars) {
            while let Some(f) = front.next_if(|f| f.node < n) {
                if !self.walk_frontier(f.node, &f.path, base)? {
                    return Ok(false);
                }
            }
            if let Some(lp) = &mut lean {
                if !self.walk_below_path(lp, n, base)? {
                    return Ok(false);
                }
                continue;
            }
            above.move_to(trie, n);
            if !self.walk_frontier(n, &above.bytes, base)? {
                return Ok(false);
            }
        }
        for f in front {
            if !self.walk_frontier(f.node, &f.path, base)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// [`Self::walk_frontier`] of trie node `n` below its parent path, with the row memo (whose
    /// rows outlive a path), on lean path `lp`: only the nodes below the deepest node of `n`'s
    /// path that `lp` holds ([`LeanPath::kept`]) are stepped, found by climbing from `n`, then
    /// `n`'s subtree is walked lean ([`Self::walk_lean`]). A frame the memo's tables cannot name
    /// hands the rest to the chart frames. Returns false if abandoned.
    /// PERF: a short bound's 4,238 boundary nodes (MaskBench o10013's string start) each built
    /// their path from the root and replayed it past the bytes it shared with the one before,
    /// ~1.5 K instructions per node.
    fn walk_below_path(&mut self, lp: &mut LeanPath, n: u32, base: Frame) -> Result<bool> {
        let trie = self.trie;
        // Nodes come in trie order: a node of the path before is an ancestor of `n` iff its
        // subtree reaches past `n`.
        let mut kept = lp.kept;
        while kept > 0 && lp.levels[kept].subtree_end <= n {
            kept -= 1;
        }
        if kept > 0 {
            PATHS_KEPT.set(PATHS_KEPT.get() + 1);
        }
        let top = trie.nodes[n as usize].depth as usize - 1;
        let mut p = trie.nodes[n as usize].parent;
        for l in lp.levels[kept + 1..=top].iter_mut().rev() {
            let node = &trie.nodes[p as usize];
            (l.subtree_end, l.byte) = (node.subtree_end, node.byte);
            p = node.parent;
        }
        for d in kept + 1..=top {
            let byte = lp.levels[d].byte;
            match self.lean_step(lp.levels[d - 1].code, byte)? {
                // Slice text the rule reads: a replay that fails ends no path of its own.
                Ok(DEAD) => {
                    lp.kept = d - 1;
                    return Ok(!self.memo_full());
                }
                Ok(c) => {
                    let ended = self.code_ended(c);
                    lp.set(d, byte, c, ended, self.follow.as_ref());
                }
                Err(frame) => {
                    // The chart frames take over from depth `d`.
                    lp.kept = d - 1;
                    self.materialize(lp, d - 1);
                    self.push_frame(frame, byte);
                    for k in d + 1..=top {
                        let (parent, byte) = (*self.frames.last().unwrap_or(&base), lp.levels[k].byte);
                        if self.replay_byte(parent, byte)?.is_none() {
                            return Ok(!self.memo_full());
                        }
                    }
                    let i = n as usize;
                    return self.walk(i, trie.nodes[i].subtree_end as usize, base);
                }
            }
        }
        lp.kept = top;
        LEAN_WALKS.set(LEAN_WALKS.get() + 1);
        let i = n as usize;
        self.walk_lean(lp, i, trie.nodes[i].subtree_end as usize, base)
    }

    /// [`Self::walk`] of nodes `start..end` with the row memo, on lean path `lp` (holding the
    /// codes above `start`): a frame is a [`Code`], read and written in place by depth, where
    /// `walk` keeps chart frames on stacks. A frame the tables cannot name, and a subtree where
    /// a run index applies, are walked by `walk` from the chart frames of `lp`'s path; the wide
    /// nodes' child filter (`children_to_visit`) is left out (a child it skips fails at once).
    /// Returns false if abandoned.
    /// PERF: MaskBench o10013's string start walks ~48 K nodes with the memo's tables knowing
    /// every step; `walk`'s frames, stacks and checks cost ~170 instructions a node.
    fn walk_lean(&mut self, lp: &mut LeanPath, start: usize, end: usize, base: Frame) -> Result<bool> {
        let trie = self.trie;
        let nodes = &trie.nodes;
        let mut i = start;
        while i < end {
            let n = nodes[i];
            let (d, sub) = (n.depth as usize, n.subtree_end as usize);
            let Ok(c) = self.lean_step(lp.levels[d - 1].code, n.byte)? else {
                // `walk` steps `n` again (the memo knows it now, or steps it alike).
                self.materialize(lp, d - 1);
                if !self.walk(i, sub, base)? {
                    return Ok(false);
                }
                i = sub;
                continue;
            };
            if self.spend(1) {
                return Ok(false);
            }
            if c == DEAD {
                if self.memo_full() {
                    return Ok(false);
                }
                // As `walk`: the tokens below are uncertain where the path ended the rule earlier
                // (and a context may go on with the byte after).
                if lp.live_end(d - 1, n.byte, self.follow.as_ref()) {
                    lp.spell(d - 1, n.byte);
                    let out = (&mut self.suffix_ids, &mut self.suffixes, &mut self.uncertain);
                    let recorded = record_uncertain(trie, i, &lp.path, &lp.ends, self.follow.as_ref(), out);
                    if self.spend(recorded * RECORD_COST) {
                        return Ok(false);
                    }
                }
                i = sub;
                continue;
            }
            let ended = self.code_ended(c);
            lp.set(d, n.byte, c, ended, self.follow.as_ref());
            for &t in trie.node_tokens(&n) {
                self.accepted.set(t as usize);
            }
            if sub - i > RUN_MIN_SUBTREE && d < MAX_RUN_DEPTH {
                let frame = self.memo.as_ref().map_or(base, |m| m.frame(c));
                if let Some((ri, run)) = self.runs_at(frame)? {
                    self.materialize(lp, d);
                    if !self.walk_runs(i, &ri, run, base)? {
                        return Ok(false);
                    }
                    i = sub;
                    continue;
                }
            }
            i += 1;
        }
        Ok(true)
    }

    /// Where code `c` leads by `byte`: `Ok` with a code, or [`DEAD`] (nothing reads it, or the
    /// memo is full: see [`Self::memo_full`]); `Err` with a frame the tables cannot name.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn lean_step(&mut self, c: Code, byte: u8) -> Result<std::result::Result<Code, Frame>> {
        let to = self.memo.as_ref().map_or(UNKNOWN, |m| m.next_code(c, byte));
        if to != UNKNOWN {
            return Ok(Ok(to));
        }
        self.lean_step_unknown(c, byte)
    }

    /// [`Self::lean_step`] where the tables do not know the transition.
    fn lean_step_unknown(&mut self, c: Code, byte: u8) -> Result<std::result::Result<Code, Frame>> {
        let Some(m) = &self.memo else { unreachable!("a lean walk has the row memo") };
        let to = self.step_unknown(m.frame(c), byte)?;
        let m = self.memo.as_ref().expect("a lean walk has the row memo");
        Ok(match to {
            None => Ok(DEAD),
            Some(frame) => m.code(frame).ok_or(frame),
        })
    }

    /// Whether the kernel's rule ended at code `c`'s frame.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn code_ended(&mut self, c: Code) -> bool {
        match &mut self.memo {
            Some(m) => m.code_ended(self.a, &self.chart, c),
            None => unreachable!("a lean walk has the row memo"),
        }
    }

    /// Sets the chart frames (`frames`, `ends`, `path`) to lean path `lp`'s first `d` depths.
    fn materialize(&mut self, lp: &LeanPath, d: usize) {
        let Some(m) = &self.memo else { unreachable!("a lean walk has the row memo") };
        let levels = &lp.levels[1..=d];
        self.frames.clear();
        self.frames.extend(levels.iter().map(|l| m.frame(l.code)));
        self.ends.clear();
        self.ends.extend(levels.iter().map(|l| l.ended));
        self.path.clear();
        self.path.extend(levels.iter().map(|l| l.byte));
    }

    /// Pushes `frame`, reached by `byte`, on the chart frames, with whether the rule ended there.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn push_frame(&mut self, frame: Frame, byte: u8) {
        self.frames.push(frame);
        let ended = self.frame_ended(frame);
        self.ends.push(ended);
        self.path.push(byte);
    }

    /// One byte of a replay along slice text from `parent` (see [`Self::walk_frontier`]): the
    /// frame reached, pushed on the chart frames ([`Self::push_frame`]), or `None` where nothing
    /// reads the byte (the caller stops: with the memo full, the walk is abandoned).
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn replay_byte(&mut self, parent: Frame, byte: u8) -> Result<Option<Frame>> {
        let Some(frame) = self.step(parent, byte)? else {
            return Ok(None);
        };
        self.push_frame(frame, byte);
        Ok(Some(frame))
    }

    /// Walks the frontier of a body slice that the kernel state covers (`cover`): every node but
    /// the dead ones no rule end can reach (see [`Cover`]). Returns false if abandoned.
    pub(super) fn walk_body_frontier(
        &mut self,
        frontier: &[crate::slice::FrontierNode],
        cover: Cover,
        follow: Option<&ByteSet>,
        base: Frame,
    ) -> Result<bool> {
        let walk = frontier_filter(self.trie, cover, follow);
        for f in frontier.iter().filter(|f| walk(f)) {
            if !self.walk_frontier(f.node, &f.path, base)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Walks the exits of a quote cut (see [`crate::slice::QuoteCut`]): each subtree after
    /// replaying its parent path, region text the kernel state reads through plain states, so
    /// the replay cannot fail or end the rule. Returns false if abandoned.
    pub(super) fn walk_quote_exits(&mut self, exits: &[crate::slice::FrontierNode]) -> Result<bool> {
        let base = Frame::Rows(KERNEL_ROW + 1);
        for f in exits {
            if !self.walk_frontier(f.node, &f.path, base)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Walks the subtree of trie node `node` after replaying its parent path `path` exactly as
    /// the full walk would (frames and rule ends included). The path is slice text, which the
    /// kernel's rule reads (see `covers`), so the replay cannot fail. Returns false if abandoned.
    fn walk_frontier(&mut self, node: u32, path: &[u8], base: Frame) -> Result<bool> {
        // Interned frames stay valid for the whole walk: the previous frontier node's path (in
        // trie order) is replayed only past the prefix it shares with this one.
        // PERF: free text of a Chinese-heavy vocabulary has thousands of frontier nodes.
        let keep = self.shared_prefix(path);
        self.truncate_path(keep);
        let mut parent = keep.checked_sub(1).map_or(base, |k| self.frames[k]);
        for &b in &path[keep..] {
            let Some(frame) = self.replay_byte(parent, b)? else {
                return Ok(!self.memo_full());
            };
            parent = frame;
        }
        let i = node as usize;
        self.walk(i, self.trie.nodes[i].subtree_end as usize, base)
    }

    /// Walks trie nodes `start..end` (a node and its subtree, or the whole trie), with `frames`,
    /// `ends` and `path` holding the frames above `start`. Returns false if abandoned (see
    /// [`classify_kernel_budget`]).
    pub(super) fn walk(&mut self, start: usize, end: usize, base: Frame) -> Result<bool> {
        let (a, trie) = (self.a, self.trie);
        let nodes = &trie.nodes;
        let mut i = start;
        while i < end {
            if self.spend(1) {
                return Ok(false);
            }
            let n = nodes[i];
            let d = n.depth as usize;
            // The previous sibling's row, when this byte steps every item of the parent alike.
            // PERF: digits after a number, or letters in a key, used to close one identical row
            // per sibling (a row that predicts a chain of optional properties costs ~5 us).
            let reuse = match self.frames.get(d - 1) {
                Some(&Frame::Rows(k)) if self.memo.is_none() && self.chart.row(k - 1).len() >= REUSE_MIN_ROW => {
                    let parent = if d >= 2 { self.frames[d - 2] } else { base };
                    same_steps(a, &self.chart, parent, self.path[d - 1], n.byte).then_some(Frame::Rows(k))
                }
                _ => None,
            };
            self.frames.truncate(d - 1);
            self.ends.truncate(d - 1);
            self.path.truncate(d - 1);
            self.path.push(n.byte);
            let parent = self.frames.last().copied().unwrap_or(base);
            let next = match reuse {
                Some(Frame::Rows(k)) => {
                    self.chart.truncate_rows(k);
                    reuse
                }
                _ => self.step(parent, n.byte)?,
            };
            let Some(frame) = next else {
                if self.memo_full() {
                    return Ok(false);
                }
                // Every token below fails inside the rule; those whose path ended the rule earlier
                // are uncertain with the matching suffixes.
                if self.ends.iter().any(|&e| e) {
                    let out = (&mut self.suffix_ids, &mut self.suffixes, &mut self.uncertain);
                    let recorded = record_uncertain(trie, i, &self.path, &self.ends, self.follow.as_ref(), out);
                    if self.spend(recorded * RECORD_COST) {
                        return Ok(false);
                    }
                }
                i = n.subtree_end as usize;
                continue;
            };
            self.frames.push(frame);
            let ended = self.frame_ended(frame);
            self.ends.push(ended);
            for &t in trie.node_tokens(&n) {
                self.accepted.set(t as usize);
            }
            let sub = n.subtree_end as usize;
            if sub - i > RUN_MIN_SUBTREE && d < MAX_RUN_DEPTH {
                if let Some((ri, run)) = self.runs_at(frame)? {
                    if !self.walk_runs(i, &ri, run, base)? {
                        return Ok(false);
                    }
                    i = sub;
                    continue;
                }
            }
            // Only a node with that many descendants can have that many children.
            if let Some(kids) = (sub - i > WIDE_MIN_CHILDREN).then(|| trie.wide_children(i)).flatten() {
                if let Some(visit) = self.children_to_visit(frame) {
                    for &c in kids {
                        let c = c as usize;
                        if visit.contains(nodes[c].byte) && !self.walk(c, nodes[c].subtree_end as usize, base)? {
                            return Ok(false);
                        }
                    }
                    i = sub;
                    continue;
                }
            }
            i += 1;
        }
        Ok(true)
    }

    /// The child bytes worth visiting below the current path's last node, whose frame is `frame`:
    /// those `frame` can read, plus FOLLOW when the kernel's rule ended right there. A child
    /// outside them fails at once and records nothing (`record_uncertain` keeps no rule end of
    /// its path). `None` when an earlier end on the path could record such a child's tokens.
    fn children_to_visit(&mut self, frame: Frame) -> Option<ByteSet> {
        let d = self.ends.len();
        let follows = |x: u8| self.follow.as_ref().is_none_or(|f| f.contains(x));
        if (0..d.saturating_sub(1)).any(|k| self.ends[k] && follows(self.path[k + 1])) {
            return None;
        }
        let mut visit = match frame {
            Frame::Virtual(it, _) => {
                *self.readable_states.entry(it.state).or_insert_with(|| state_bytes(self.a, it.state))
            }
            Frame::Rows(n) if self.memo.is_some() => match self.readable_rows.get(&n) {
                Some(&r) => r,
                None => {
                    let r = row_bytes(self.a, self.chart.row(n - 1));
                    self.readable_rows.insert(n, r);
                    r
                }
            },
            Frame::Rows(n) => row_bytes(self.a, self.chart.row(n - 1)),
        };
        if self.ends.last() == Some(&true) {
            match &self.follow {
                Some(f) => visit.union(f),
                None => return None,
            };
        }
        Some(visit)
    }
}

/// The path from the root to a node's parent ([`TokenTrie::bytes_above`]), kept from one node to
/// the next in trie order: each climbs only to the ancestor it shares with the one before.
/// PERF: a short bound's 4,238 boundary nodes (MaskBench o10009's string start) each built their
/// path from the root, ~1.3 M instructions.
#[derive(Default)]
struct PathAbove {
    bytes: Vec<u8>,
    /// `nodes[d - 1]`: the path's node at depth `d`.
    nodes: Vec<u32>,
    climbed: Vec<u32>,
}

impl PathAbove {
    fn move_to(&mut self, trie: &TokenTrie, n: u32) {
        self.climbed.clear();
        let mut p = trie.nodes[n as usize].parent;
        while p != u32::MAX && self.nodes.get(trie.nodes[p as usize].depth as usize - 1) != Some(&p) {
            self.climbed.push(p);
            p = trie.nodes[p as usize].parent;
        }
        let keep = if p == u32::MAX { 0 } else { trie.nodes[p as usize].depth as usize };
        self.bytes.truncate(keep);
        self.nodes.truncate(keep);
        for &q in self.climbed.iter().rev() {
            self.bytes.push(trie.nodes[q as usize].byte);
            self.nodes.push(q);
        }
        debug_assert_eq!(self.bytes[..], *trie.bytes_above(n));
    }
}

/// The current path of a lean walk ([`KernelWalk::walk_lean`]), by depth `d` (after `d` bytes;
/// depth 0 is the walk's base frame), written in place as the walk goes down: levels past the
/// current depth are stale.
struct LeanPath {
    levels: Vec<Level>,
    /// The depth down to which `levels` holds the path to a boundary node's parent, with
    /// each level's node's subtree end (see [`KernelWalk::walk_below_path`]).
    kept: usize,
    /// Scratch for [`record_uncertain`]'s path and rule ends.
    path: Vec<u8>,
    ends: Vec<bool>,
}

/// One depth of a [`LeanPath`].
#[derive(Clone, Copy)]
struct Level {
    /// The frame reached.
    code: Code,
    /// The trie node's `subtree_end` (set by `walk_below_path` only, for the levels it keeps).
    subtree_end: u32,
    /// The byte read to it.
    byte: u8,
    /// The kernel's rule ended here.
    ended: bool,
    /// The rule ended at some depth above this one where this path's byte after it may
    /// follow the rule: a failed step below records uncertain tokens ([`record_uncertain`]).
    live_above: bool,
}

impl LeanPath {
    fn new(base: Code, max_depth: u32) -> LeanPath {
        let level = Level { code: DEAD, subtree_end: 0, byte: 0, ended: false, live_above: false };
        let mut levels = vec![level; max_depth as usize + 1];
        levels[0].code = base;
        LeanPath { levels, kept: 0, path: Vec::new(), ends: Vec::new() }
    }

    /// Sets depth `d` (at least 1) to code `c`, reached by `byte` (its subtree end left as it
    /// was), FOLLOW being `follow`.
    #[inline]
    fn set(&mut self, d: usize, byte: u8, c: Code, ended: bool, follow: Option<&ByteSet>) {
        let live_above = self.live_end(d - 1, byte, follow);
        let l = &mut self.levels[d];
        (l.code, l.byte, l.ended, l.live_above) = (c, byte, ended, live_above);
    }

    /// Whether a step by `byte` below depth `d` leaves a live rule end above it: one above `d`,
    /// or at `d` with `byte` in FOLLOW (`follow`).
    #[inline]
    fn live_end(&self, d: usize, byte: u8, follow: Option<&ByteSet>) -> bool {
        let l = &self.levels[d];
        l.live_above || (l.ended && follow.is_none_or(|f| f.contains(byte)))
    }

    /// Fills `path` and `ends` as `KernelWalk::path` and `ends` after depth `d`, with `byte` read
    /// at depth `d + 1`.
    fn spell(&mut self, d: usize, byte: u8) {
        self.path.clear();
        self.path.extend(self.levels[1..=d].iter().map(|l| l.byte));
        self.path.push(byte);
        self.ends.clear();
        self.ends.extend(self.levels[1..=d].iter().map(|l| l.ended));
    }
}

/// Which frontier nodes of a body slice a kernel state that covers it (`cover`) walks: every
/// node but the dead ones no rule end can reach.
fn frontier_filter<'t>(
    trie: &'t TokenTrie,
    cover: Cover,
    follow: Option<&'t ByteSet>,
) -> impl Fn(&crate::slice::FrontierNode) -> bool + 't {
    // A dead subtree matters only through a rule end whose suffix some context can
    // continue: its first byte (a later path byte, or the dead byte) must be in FOLLOW.
    let may_continue = move |f: &crate::slice::FrontierNode| {
        let dead_byte = trie.nodes[f.node as usize].byte;
        follow.is_none_or(|fo| fo.contains(dead_byte) || f.path.iter().skip(1).any(|&b| fo.contains(b)))
    };
    // A dead byte right at the root follows no rule end of a plain kernel state.
    move |f| !f.dead || cover.walk_dead || (cover.may_end && !f.path.is_empty() && may_continue(f))
}

/// A kernel state that reads every body text of a few characters ([`Bounded::Within`]) takes
/// that shortcut when at most this share of the trie's nodes lies past them (`1 / N`); else the
/// other shortcuts (a walked body, a class) or the whole walk serve it.
/// PERF: a `^[^/]+/[^/]+$` value after its first character reads every text of one character
/// but not `//`: the walk below the nodes after one character visited nearly the whole trie
/// (7.7 M instructions, MaskBench o65430 token 16), where the walked body took 1.4 M. At
/// `[0-9a-fA-F]+` with 12 characters left (o10013), 19 K of Llama 3's 275 K nodes lie past 11
/// characters (14.8 M).
const WITHIN_MAX_SHARE: usize = 8;

/// [`WITHIN_MAX_SHARE`] for taking the shortcut before the walked body (whose search runs
/// first otherwise, and may fail).
/// PERF: `[A-z]+` within 3..64 at its start (o23174): the walked body's failed search was 10.9 M
/// of 19 M instructions, the walk past 63 characters (576 nodes) 3.5 M.
const WITHIN_FIRST_SHARE: usize = 32;

/// Work units of one uncertain token recorded ([`record_uncertain`]), against one per trie node
/// stepped, in the count a walk's budget is checked against ([`KernelWalk::spend`]).
/// PERF: a value's trailing whitespace records ~4,400 uncertain tokens (each with a suffix)
/// over fewer than 4,096 nodes, ~1 ms on Llama 3 in every grammar: counted as nodes only, it
/// never reached the cross-grammar cache. Recording costs ~1.3 K instructions (the suffix
/// interned), a node step ~0.1-0.2 K.
const RECORD_COST: usize = 8;

impl KernelWalk<'_> {
    /// Counts `units` of work; true when the walk is to be abandoned: `on_budget` is asked once,
    /// when the count first reaches `budget` (see [`classify_kernel_budget`]).
    fn spend(&mut self, units: usize) -> bool {
        self.spend_as(units, BudgetAsk::Spent)
    }

    /// [`Self::spend`], telling `on_budget` why it is asked.
    fn spend_as(&mut self, units: usize, ask: BudgetAsk) -> bool {
        let before = self.visits;
        self.visits += units;
        before < self.budget && self.visits >= self.budget && (self.on_budget)(ask)
    }

    /// Reads `byte` from `frame`, through the row memo when there is one.
    // Measured: as a plain `#[inline]` it stayed a call (o10013 t63: 10.55 M against 10.04 M).
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(super) fn step(&mut self, frame: Frame, byte: u8) -> Result<Option<Frame>> {
        // A transition the memo knows is a table load, inline.
        // PERF: MaskBench o10013's string start steps ~48 K known transitions; through
        // `RowMemo::step` each cost ~100 instructions.
        if let Some(to) = self.memo.as_ref().and_then(|m| m.known(frame, byte)) {
            return Ok(to);
        }
        self.step_unknown(frame, byte)
    }

    /// [`Self::step`] where the memo's tables do not know the transition.
    fn step_unknown(&mut self, frame: Frame, byte: u8) -> Result<Option<Frame>> {
        match &mut self.memo {
            Some(m) => m.step(self.a, &mut self.chart, frame, byte),
            None => step_frame(self.a, &mut self.chart, frame, byte),
        }
    }

    /// The kernel's rule ended at `frame` ([`frame_ended`]), through the row memo when there is one.
    // Called at every step of a walk; a plain `#[inline]` left it a call.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn frame_ended(&mut self, frame: Frame) -> bool {
        match (frame, &mut self.memo) {
            (Frame::Rows(n), Some(m)) => m.ended(self.a, &self.chart, n - 1),
            _ => frame_ended(self.a, &self.chart, frame),
        }
    }

    pub(super) fn memo_full(&self) -> bool {
        self.memo.as_ref().is_some_and(|m| m.full)
    }
}

/// The bytes `s` has an edge on.
pub fn state_bytes(a: &Automata, s: StateId) -> ByteSet {
    let mut set = ByteSet::default();
    for e in a.byte_edges(s) {
        set.insert_range(e.lo, e.hi);
    }
    set
}

/// The bytes some item of `row` has an edge on (a superset of what the row reads: lookaheads
/// may refuse some).
pub(super) fn row_bytes(a: &Automata, row: &[Item]) -> ByteSet {
    let mut set = ByteSet::default();
    for it in row {
        set.union(&state_bytes(a, it.state));
    }
    set
}

/// Whether `it`, alone in a row, can be read byte by byte without touching the chart: its state
/// has no rule edges, and it is either not final or the kernel item itself (origin 0, whose
/// origin row in a kernel chart is empty, so ending it completes nothing).
///
/// PERF: the kernel item's own final states (a value's trailing whitespace, a key that may end
/// anywhere) used to materialize a chart row per trie node, ~200 ns each.
#[inline]
pub(super) fn is_plain(a: &Automata, it: &Item) -> bool {
    a.rule_edges(it.state).is_empty() && (it.origin == 0 || !a.state(it.state).is_final)
}

/// The kernel's rule ended at `frame` (see [`kernel_ended`]).
#[inline]
pub(super) fn frame_ended(a: &Automata, chart: &Chart, frame: Frame) -> bool {
    match frame {
        Frame::Virtual(it, _) => it.origin == 0 && a.state(it.state).is_final,
        Frame::Rows(n) => kernel_ended(a, chart.row(n - 1)),
    }
}

/// Rows at least this long are reused across siblings (see `KernelWalk::walk`); shorter ones
/// close faster than the check.
const REUSE_MIN_ROW: usize = 12;

/// Whether bytes `x` and `y` step every item of `frame` to the same item (then they lead to the
/// same row).
pub(super) fn same_steps(a: &Automata, chart: &Chart, frame: Frame, x: u8, y: u8) -> bool {
    let same = |it: &Item| a.step(it.state, x) == a.step(it.state, y) && a.la_step(it.la, x) == a.la_step(it.la, y);
    match frame {
        Frame::Virtual(it, _) => same(&it),
        Frame::Rows(n) => chart.row(n - 1).iter().all(same),
    }
}

/// Reads `byte` from `frame`, materializing a chart row only when needed.
fn step_frame(a: &Automata, chart: &mut Chart, frame: Frame, byte: u8) -> Result<Option<Frame>> {
    // Drop rows of a deeper, abandoned path first.
    let single = match frame {
        Frame::Virtual(it, n) => {
            chart.truncate_rows(n);
            Some(it)
        }
        Frame::Rows(n) => {
            chart.truncate_rows(n);
            match chart.last_row() {
                [it] if a.rule_edges(it.state).is_empty() => Some(*it),
                _ => None,
            }
        }
    };
    if let Some(it) = single {
        let Some(t) = a.step(it.state, byte) else {
            return Ok(None);
        };
        let next = Item { state: t, ..it };
        if is_plain(a, &next) {
            return Ok(Some(Frame::Virtual(next, chart.num_rows())));
        }
        return Ok(chart.push_items(a, &[next])?.then(|| Frame::Rows(chart.num_rows())));
    }
    Ok(chart.push_byte(a, byte)?.then(|| Frame::Rows(chart.num_rows())))
}

/// The kernel item (origin 0 in a kernel chart) reached a final state in this row.
#[inline]
pub(super) fn kernel_ended(a: &Automata, row: &[Item]) -> bool {
    row.iter().any(|it| it.origin == 0 && a.state(it.state).is_final)
}

/// Records every token in the subtree of node `i` (whose byte path is `path`) as uncertain for
/// each depth at which the path ended the kernel's rule (`ends[k]`: after `k + 1` bytes).
/// Returns the number of (token, suffix) entries recorded.
#[allow(clippy::type_complexity)] // the walk's three output lists, borrowed together
pub(super) fn record_uncertain(
    trie: &TokenTrie,
    i: usize,
    path: &[u8],
    ends: &[bool],
    follow: Option<&ByteSet>,
    (ids, suffixes, uncertain): (&mut SuffixIds, &mut Vec<Box<[u8]>>, &mut Vec<(u32, u32)>),
) -> usize {
    // An end after k + 1 bytes leaves bytes[k + 1..], whose first byte is on the path; no
    // context continues with a byte outside FOLLOW, so such suffixes are not recorded.
    // PERF: deciding this before visiting the subtree skips whole subtrees (a value's trailing
    // whitespace used to visit every whitespace-led token, ~1 ms).
    let live_at = |k: usize| ends[k] && follow.is_none_or(|f| f.contains(path[k + 1]));
    // PERF: most failed steps below a short bound's boundary nodes (MaskBench o10013) have an
    // end whose next byte is outside FOLLOW only: collecting the empty list cost ~150
    // instructions each.
    if !(0..ends.len()).any(live_at) {
        return 0;
    }
    let live: Vec<usize> = (0..ends.len()).filter(|&k| live_at(k)).collect();
    let before = uncertain.len();
    let end = trie.nodes[i].subtree_end as usize;
    let base_depth = trie.nodes[i].depth as usize;
    let mut bytes: Vec<u8> = path.to_vec();
    for n in &trie.nodes[i..end] {
        let d = n.depth as usize;
        if d > base_depth {
            bytes.truncate(d - 1);
            bytes.push(n.byte);
        }
        for &t in trie.node_tokens(n) {
            for &k in &live {
                let sid = intern_suffix(ids, suffixes, &bytes[k + 1..]);
                uncertain.push((t, sid));
            }
        }
    }
    uncertain.len() - before
}

/// Suffix ids by suffix, while a classification collects them: by a hash of the suffix (the
/// list holds the bytes), with the rare suffix whose hash another one has kept by its bytes.
/// PERF: with std's `SipHash`, interning was a third of a walk that records many rule ends (a
/// value's whitespace: ~4,400 suffixes); keyed by the bytes, every new suffix was allocated twice
/// (a block end of a long string, MaskBench o82710, interns ~44 K).
#[derive(Default)]
pub(super) struct SuffixIds {
    by_hash: FastMap<u64, u32>,
    collided: FastMap<Box<[u8]>, u32>,
}

pub(super) fn intern_suffix(ids: &mut SuffixIds, list: &mut Vec<Box<[u8]>>, s: &[u8]) -> u32 {
    use std::hash::BuildHasher;
    let h = crate::fasthash::FastState.hash_one(s);
    let id = list.len() as u32;
    match ids.by_hash.entry(h) {
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(id);
        }
        std::collections::hash_map::Entry::Occupied(e) if *list[*e.get() as usize] == *s => return *e.get(),
        std::collections::hash_map::Entry::Occupied(_) => {
            if let Some(&id) = ids.collided.get(s) {
                return id;
            }
            ids.collided.insert(s.into(), id);
        }
    }
    list.push(s.into());
    id
}
