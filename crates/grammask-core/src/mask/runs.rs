//! Run indexes inside a kernel walk: at a node whose place reads every run of a class, the run
//! tokens below it are accepted from the index and only its break nodes are walked.
//!
//! Pipeline place: part of the kernel walk (`walk.rs`); the indexes themselves are built per
//! vocabulary ([`crate::slice::RunIndex`]).
use super::*;
use crate::grammar::RuleId;

test_counter! {
    /// How many interned rows the walks on this thread gave the UTF-8 run index of one of their
    /// items' states ([`Shortcuts::built_wide`]: a call loop's class less its refused characters, or
    /// a plain state's class), for tests.
    pub fn call_loop_wide_taken => WIDE_LOOPS
}

test_counter! {
    /// How many interned rows the walks on this thread gave the run index of the call loop they
    /// enter (their class bytes lead to another row, which loops on them), for tests.
    pub fn call_loop_entries_taken => LOOP_ENTRIES
}

test_counter! {
    /// How many interned rows the walks on this thread gave the run index of a call loop's class
    /// (built off the fill path, [`call_loop`]), for tests.
    pub fn call_loop_runs_taken => CALL_LOOP_RUNS
}

impl KernelWalk<'_> {
    /// The run index that applies at `frame`, with the frame every class byte leads to from
    /// there (`frame` itself but for a row that enters a loop): a virtual item whose state reads
    /// every run of its loop class ([`ClassSlice::covers`]), an interned row that every byte of
    /// an ASCII class leads back to, or one whose class bytes all lead to another row that
    /// every one of them leads back to (the first character of a call loop, built off the fill
    /// path only).
    /// The one automaton state `frame` holds: a virtual item's, or a row's only item without
    /// rule edges.
    pub(super) fn single_state(&self, frame: Frame) -> Option<StateId> {
        match frame {
            Frame::Virtual(it, _) => Some(it.state),
            Frame::Rows(n) => match self.chart.row(n - 1) {
                [it] if self.a.rule_edges(it.state).is_empty() => Some(it.state),
                _ => None,
            },
        }
    }

    pub(super) fn runs_at(&mut self, frame: Frame) -> Result<Option<(Arc<RunIndex>, Frame)>> {
        let Some(runs) = self.runs else { return Ok(None) };
        let a = self.a;
        let single = self.single_state(frame);
        match frame {
            _ if let Some(s) = single => {
                let shared = self.shared_state_runs;
                let cover = self.cover;
                // A loop's UTF-8 index less its refused characters (`built_wide`) first: the
                // state's own index is then ASCII only.
                let wide = self.built_wide;
                let ri = self.state_runs.entry(s).or_insert_with(|| {
                    if let Some(ri) = wide.and_then(|w| w(s)) {
                        WIDE_LOOPS.set(WIDE_LOOPS.get() + 1);
                        return Some(ri);
                    }
                    match shared {
                        Some(f) => f(s),
                        None => state_run_index(a, s, runs, cover.unwrap_or(&CoverMemo::default())),
                    }
                });
                Ok(ri.clone().map(|ri| (ri, frame)))
            }
            Frame::Rows(n) if self.memo.is_some() => {
                if let Some(ri) = self.row_runs.get(&n) {
                    return Ok(ri.clone().map(|(ri, m)| (ri, Frame::Rows(m))));
                }
                // A row holding an item that reads every run of a UTF-8 class (a call loop's,
                // less the characters its callee refuses, or a plain state's, `built_wide`) reads
                // them all too; that index is taken where built off the fill path only. Its runs
                // are replayed at breaks (UTF-8), so no row they lead to is assumed.
                if let Some(wide) = self.built_wide {
                    if let Some(ri) = self.chart.row(n - 1).iter().find_map(|it| wide(it.state)) {
                        WIDE_LOOPS.set(WIDE_LOOPS.get() + 1);
                        self.row_runs.insert(n, Some((ri.clone(), n)));
                        return Ok(Some((ri, frame)));
                    }
                }
                // Only bytes some item loops on are tried (a row loops on a byte through an item
                // that does, in practice; missing a rarer loop only forgoes the shortcut): on
                // itself, or through a call per character (a regex class rule) when the run index
                // of all those bytes was built off the fill path (`built_runs`).
                let row = self.chart.row(n - 1);
                let loops = row.iter().fold(0u128, |c, it| c | ascii_loop(a, it.state));
                let calls = match self.built_runs {
                    Some(built) => {
                        let calls = row.iter().fold(0u128, |c, it| c | call_loop(a, it.state)) & !loops;
                        if calls != 0 && built(loops | calls).is_some() {
                            calls
                        } else {
                            0
                        }
                    }
                    None => 0,
                };
                let candidates = loops | calls;
                if candidates.count_ones() < MIN_ROW_RUN_BYTES {
                    self.row_runs.insert(n, None);
                    return Ok(None);
                }
                // Bytes that step every item alike lead to the same row: one step per group.
                let mut groups: Vec<(u8, u128)> = Vec::new();
                for b in (0..0x80u8).filter(|&b| candidates >> b & 1 == 1) {
                    match groups.iter_mut().find(|(r, _)| same_steps(a, &self.chart, frame, *r, b)) {
                        Some((_, bytes)) => *bytes |= 1 << b,
                        None => groups.push((b, 1 << b)),
                    }
                }
                let mut class = 0u128;
                // The candidate bytes that lead to one other row, by row.
                let mut onward: Vec<(usize, u128)> = Vec::new();
                for (r, bytes) in groups {
                    match self.step(frame, r)? {
                        Some(Frame::Rows(m)) if m == n => class |= bytes,
                        Some(Frame::Rows(m)) => match onward.iter_mut().find(|o| o.0 == m) {
                            Some(o) => o.1 |= bytes,
                            None => onward.push((m, bytes)),
                        },
                        None if self.memo_full() => return Ok(None),
                        _ => {}
                    }
                }
                if class.count_ones() < MIN_ROW_RUN_BYTES {
                    if let Some(entry) = self.loop_entry(&onward)? {
                        self.row_runs.insert(n, Some(entry.clone()));
                        return Ok(Some((entry.0, Frame::Rows(entry.1))));
                    }
                    if self.memo_full() {
                        return Ok(None);
                    }
                }
                // A class with call-loop bytes takes only an index built already; the others are
                // built on first use, as before.
                let ri = match self.built_runs {
                    Some(built) if class & !loops != 0 => {
                        let ri = built(class);
                        CALL_LOOP_RUNS.set(CALL_LOOP_RUNS.get() + usize::from(ri.is_some()));
                        ri
                    }
                    _ => (class.count_ones() >= MIN_ROW_RUN_BYTES).then(|| runs(class, false)).flatten(),
                };
                self.row_runs.insert(n, ri.clone().map(|ri| (ri, n)));
                Ok(ri.map(|ri| (ri, frame)))
            }
            _ => Ok(None),
        }
    }

    /// The call loop a row enters (see [`Self::runs_at`]): of the rows `onward` (each with the
    /// candidate bytes that lead there), one that all of its bytes lead back to, with the run
    /// index of those bytes where it was built off the fill path (`built_runs`; never built
    /// here). `None` when there is none, or the row memo filled up.
    /// PERF: the first character of a call loop (a regex key `[^,:&\s]+` read as calls) led to
    /// a row of its own, from which every trie node was stepped down to the loop's row (o68280's
    /// `mkv` start: 125 K steps, ~4 ms).
    fn loop_entry(&mut self, onward: &[(usize, u128)]) -> Result<Option<(Arc<RunIndex>, usize)>> {
        let Some(built) = self.built_runs else { return Ok(None) };
        for &(m, bytes) in onward.iter().filter(|o| o.1.count_ones() >= MIN_ROW_RUN_BYTES) {
            let mut back = 0u128;
            for b in (0..0x80u8).filter(|&b| bytes >> b & 1 == 1) {
                match self.step(Frame::Rows(m), b)? {
                    Some(Frame::Rows(k)) if k == m => back |= 1 << b,
                    None if self.memo_full() => return Ok(None),
                    _ => {}
                }
            }
            if back.count_ones() < MIN_ROW_RUN_BYTES {
                continue;
            }
            if let Some(ri) = built(back) {
                CALL_LOOP_RUNS.set(CALL_LOOP_RUNS.get() + 1);
                LOOP_ENTRIES.set(LOOP_ENTRIES.get() + 1);
                return Ok(Some((ri, m)));
            }
        }
        Ok(None)
    }

    /// Walks the subtree below node `i` (its frame on top of `frames`), whose place reads every
    /// run of `ri`'s class, each class byte leading to `run` (see [`Self::runs_at`]): tokens that
    /// continue with a run are accepted from the index, and only the nodes where such a run stops
    /// are walked, each after replaying its run. Returns false if abandoned.
    pub(super) fn walk_runs(&mut self, i: usize, ri: &RunIndex, run: Frame, base: Frame) -> Result<bool> {
        let n = self.trie.nodes[i];
        self.walk_run_children(i + 1, n.subtree_end as usize, n.depth as usize, ri, run, base, Some(i))
    }

    /// [`Self::walk_runs`] over the children `first..end` of a node at depth `d` (the root
    /// when `d` is 0).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk_run_children(
        &mut self,
        first: usize,
        end: usize,
        d: usize,
        ri: &RunIndex,
        run: Frame,
        base: Frame,
        node: Option<usize>,
    ) -> Result<bool> {
        let trie = self.trie;
        // An ASCII run leads from the frame at depth `d` to `run` (that frame, or the loop it
        // enters) and stays there. A break byte the frame it is read from refuses fails its whole
        // subtree, and records nothing when no rule end on the path leaves a suffix that starts
        // in FOLLOW (see `record_uncertain`): none before the run, none inside it (its bytes are
        // class bytes), and none right before the break byte.
        let here = if d == 0 { base } else { self.frames[d - 1] };
        let ended = frame_ended(self.a, &self.chart, here) || frame_ended(self.a, &self.chart, run);
        let follow = self.follow;
        let follows = move |x: u8| follow.as_ref().is_none_or(|f| f.contains(x));
        let prefix_quiet = (0..d.saturating_sub(1)).all(|k| !(self.ends[k] && follows(self.path[k + 1])));
        let run_quiet = !ended || ri.ascii & follow.map_or(u128::MAX, |f| f.ascii()) == 0;
        let quiet = !ri.utf8 && prefix_quiet && run_quiet;
        let quiet_byte = |x: u8| !ended || !follows(x);
        // Per byte: 0 not known yet, 1 refused, 2 read; at `here` (a break right below the node)
        // and at `run` (a deeper one).
        let mut refused = Refused { here, run, d, known: [[0u8; 256]; 2] };
        // The run tokens below the node, from a precomputed set when there is one (the root's,
        // or a large subtree's); else child by child below.
        let whole = match node {
            None => Some(ri.whole.clone()),
            Some(i) => ri.subtree_runs(trie, i),
        };
        if let Some(w) = &whole {
            self.accepted.or_assign(w);
        }
        if d < LEAD_LISTS {
            let skip = |x: u8| quiet && quiet_byte(x);
            return self.walk_listed_breaks(first, end, d, ri, base, whole.is_none(), &skip, &mut refused);
        }
        let mut c = first;
        while c < end {
            let c_end = trie.nodes[c].subtree_end as usize;
            let byte = trie.nodes[c].byte;
            if quiet && !ri.reads_ascii(byte) && quiet_byte(byte) {
                match self.refuses(c, byte, &mut refused)? {
                    None => return Ok(false),
                    Some(true) => {
                        c = c_end;
                        continue;
                    }
                    Some(false) => {}
                }
            }
            if ri.utf8 && (0x80..=0xBF).contains(&byte) {
                // Inside a UTF-8 sequence, not at a run's boundary: walk as usual.
                self.truncate_path(d);
                if !self.walk(c, c_end, base)? {
                    return Ok(false);
                }
                c = c_end;
                continue;
            }
            if whole.is_none() {
                ri.add_runs(trie, c, d, &mut self.accepted);
            }
            // The breaks whose run starts at or above depth `d`; every other break below `c`
            // lies under one of them, so their subtrees are skipped.
            let mut k = c;
            while let Some((m, lead, byte)) = ri.next_break(trie, k, c_end) {
                if lead > d {
                    k = m + 1;
                    continue;
                }
                if quiet && quiet_byte(byte) {
                    match self.refuses(m, byte, &mut refused)? {
                        None => return Ok(false),
                        // The breaks below it start their runs deeper: skipped one by one.
                        Some(true) => {
                            k = m + 1;
                            continue;
                        }
                        Some(false) => {}
                    }
                }
                if !self.walk_break(m, d, base, (!ri.utf8).then_some(run))? {
                    return Ok(false);
                }
                k = trie.nodes[m].subtree_end as usize;
            }
            c = c_end;
        }
        self.truncate_path(d);
        Ok(true)
    }

    /// [`Self::walk_run_children`] for a run from depth `d < LEAD_LISTS`, by the index's lead
    /// lists: the run tokens of all children at once (`add`: not in a precomputed set), then the
    /// breaks of leads up to `d`. That is every break the child-by-child loop walks: the breaks of
    /// a child it skips as refused are that child itself (refused again here) or start their runs
    /// below it (not listed for `d`), and so do the breaks below a walked break. A UTF-8
    /// continuation byte right below the node is a break of the index (no character starts with
    /// it), walked as usual. `skip(byte)`: a break with that byte is skipped when `here` refuses it
    /// (see `walk_run_children`).
    /// PERF: an identifier's state used to step over ~3,000 breaks and a few thousand children
    /// one by one.
    #[allow(clippy::too_many_arguments)]
    fn walk_listed_breaks(
        &mut self,
        first: usize,
        end: usize,
        d: usize,
        ri: &RunIndex,
        base: Frame,
        add: bool,
        skip: &dyn Fn(u8) -> bool,
        refused: &mut Refused,
    ) -> Result<bool> {
        if add {
            ri.add_runs_range(self.trie, first, end, d, &mut self.accepted);
        }
        // An ASCII run leads to `refused.run` and stays there; a UTF-8 one is replayed.
        let looping = (!ri.utf8).then_some(refused.run);
        if d == 0 && first == 0 && end == self.trie.nodes.len() {
            for (byte, nodes) in ri.root_breaks_by_byte() {
                for &m in nodes {
                    // The byte is read at the root's frame (a root child) or at the run's.
                    if skip(*byte) {
                        match self.refuses(m as usize, *byte, refused)? {
                            None => return Ok(false),
                            Some(true) => continue,
                            Some(false) => {}
                        }
                    }
                    if !self.walk_break(m as usize, d, base, looping)? {
                        return Ok(false);
                    }
                }
            }
        } else {
            for l in 0..=d {
                let (nodes, bytes) = ri.breaks_of_lead(l, first, end);
                for (&m, &byte) in nodes.iter().zip(bytes) {
                    if skip(byte) {
                        match self.refuses(m as usize, byte, refused)? {
                            None => return Ok(false),
                            Some(true) => continue,
                            Some(false) => {}
                        }
                    }
                    if !self.walk_break(m as usize, d, base, looping)? {
                        return Ok(false);
                    }
                }
            }
        }
        self.truncate_path(d);
        Ok(true)
    }

    /// Whether the frame that reads break node `m`'s `byte` refuses it (`at.here` right below
    /// the run's node, else `at.run`), cached per frame and byte (see `walk_run_children`); `None`
    /// if the row memo filled up (the walk is abandoned and redone).
    fn refuses(&mut self, m: usize, byte: u8, at: &mut Refused) -> Result<Option<bool>> {
        let deep = self.trie.nodes[m].depth as usize > at.d + 1;
        let frame = if deep { at.run } else { at.here };
        let known = &mut at.known[usize::from(deep)];
        if known[byte as usize] == 0 {
            let read = self.step(frame, byte)?.is_some();
            if !read && self.memo_full() {
                return Ok(None);
            }
            known[byte as usize] = if read { 2 } else { 1 };
        }
        Ok(Some(known[byte as usize] == 1))
    }

    /// Walks break node `m`'s subtree after replaying its run from depth `d` (frames, rule ends
    /// and path bytes, as the full walk would have them): `looping`, an ASCII run, each of whose
    /// bytes leads to that frame; else the run's bytes are stepped.
    fn walk_break(&mut self, m: usize, d: usize, base: Frame, looping: Option<Frame>) -> Result<bool> {
        let (a, trie) = (self.a, self.trie);
        let node = trie.nodes[m];
        let below = node.depth as usize - 1;
        // The run's bytes, read off the parent chain; interned frames already stepped over the
        // same bytes (by the previous break, in trie order) are kept.
        let known = if self.memo.is_some() { self.frames.len().min(self.path.len()) } else { d };
        let mut keep = known.min(below).max(d);
        self.path.resize(below.max(self.path.len()), 0);
        let mut p = node.parent;
        for k in (d..below).rev() {
            let b = trie.nodes[p as usize].byte;
            if self.path[k] != b {
                keep = keep.min(k);
            }
            self.path[k] = b;
            p = trie.nodes[p as usize].parent;
        }
        let keep = if looping.is_some() { d } else { keep };
        self.frames.truncate(keep);
        self.ends.truncate(keep);
        self.path.truncate(below);
        let first = if d == 0 { base } else { self.frames[d - 1] };
        if let Some(run) = looping {
            // Every byte of an ASCII run leads to the same frame (a refused break byte was
            // skipped by the caller when nothing could be recorded below it).
            let ended = frame_ended(a, &self.chart, run);
            self.frames.resize(below, run);
            self.ends.resize(below, ended);
        } else {
            let mut frame = keep.checked_sub(1).filter(|&k| k >= d).map_or(first, |k| self.frames[k]);
            for k in keep..below {
                // The run is read from this place (see `runs_at`), so the replay cannot fail.
                let Some(next) = self.step(frame, self.path[k])? else { return Ok(!self.memo_full()) };
                frame = next;
                self.frames.push(frame);
                self.ends.push(frame_ended(a, &self.chart, frame));
            }
        }
        self.walk(m, node.subtree_end as usize, base)
    }

    /// How many leading bytes of `path` the current path shares with frames stepped (interned
    /// walks only; frames of a stack walk do not outlive their subtree).
    pub(super) fn shared_prefix(&self, path: &[u8]) -> usize {
        if self.memo.is_none() {
            return 0;
        }
        let n = self.frames.len().min(self.path.len()).min(path.len());
        (0..n).take_while(|&k| self.path[k] == path[k]).count()
    }

    pub(super) fn truncate_path(&mut self, d: usize) {
        self.frames.truncate(d);
        self.ends.truncate(d);
        self.path.truncate(d);
    }
}

/// The frames a break's byte is read from below a run's node at depth `d`, for
/// [`KernelWalk::refuses`]: `here` (the node's) for a break right below it, `run` (where the run's
/// bytes lead) for a deeper one, and per frame and byte whether it was read.
struct Refused {
    here: Frame,
    run: Frame,
    d: usize,
    known: [[u8; 256]; 2],
}

/// The run index that applies at plain state `s` ([`state_run_class`]).
pub fn state_run_index(
    a: &Automata,
    s: StateId,
    runs: &dyn Fn(u128, bool) -> Option<Arc<RunIndex>>,
    memo: &CoverMemo,
) -> Option<Arc<RunIndex>> {
    let (class, utf8) = state_run_class(a, s, memo)?;
    runs(class, utf8)
}

/// The class (ASCII bytes, UTF-8 too) of the run index that applies at plain state `s`: free
/// text (any character but some ASCII ones) that `s` reads every run of, or a loop on ASCII
/// bytes.
pub fn state_run_class(a: &Automata, s: StateId, memo: &CoverMemo) -> Option<(u128, bool)> {
    state_run_class_in(a, s, memo, &Loops::Read(a))
}

/// Each state's [`ascii_loop`] and [`ClassSlice::loop_class`]: read from the automaton, or
/// tabled once for a pass over every state (a compile asks each state, and each of its
/// byte edges' targets, for both).
/// PERF: read per edge target, they were ~7% of a typical MaskBench compile's instructions.
pub enum Loops<'a> {
    Read(&'a Automata),
    Table(Vec<(u128, Option<u128>)>),
}

impl Loops<'_> {
    /// Every state of `a` tabled.
    pub fn table(a: &Automata) -> Loops<'static> {
        let states = (0..a.states().len() as u32).map(StateId);
        Loops::Table(states.map(|s| (ascii_loop(a, s), ClassSlice::loop_class(a, s))).collect())
    }

    pub fn ascii(&self, s: StateId) -> u128 {
        match self {
            Loops::Read(a) => ascii_loop(a, s),
            Loops::Table(t) => t[s.0 as usize].0,
        }
    }

    pub fn class(&self, s: StateId) -> Option<u128> {
        match self {
            Loops::Read(a) => ClassSlice::loop_class(a, s),
            Loops::Table(t) => t[s.0 as usize].1,
        }
    }
}

/// [`state_run_class`] with the states' loops from `loops`.
pub fn state_run_class_in(a: &Automata, s: StateId, memo: &CoverMemo, loops: &Loops) -> Option<(u128, bool)> {
    let covered = |&c: &u128| class_covers(a, s, c, memo);
    match loops.class(s).filter(covered).or_else(|| first_char_class(a, s, memo, loops)) {
        Some(c) => Some((c, true)),
        None => Some(loops.ascii(s)).filter(|c| c.count_ones() >= MIN_ROW_RUN_BYTES).map(|c| (c, false)),
    }
}

/// Every `(class, UTF-8 too)` that [`state_run_class`] may give at `s`, whatever its cover
/// searches find, and the ASCII loop of `s` (`(class, false)`) when it is long enough: each once
/// or more, without a search.
pub fn run_class_candidates(a: &Automata, s: StateId, loops: &Loops, mut f: impl FnMut(u128, bool)) {
    if let Some(c) = loops.class(s) {
        f(c, true);
    }
    for e in a.byte_edges(s) {
        let t = e.target;
        let c = loops.ascii(t);
        if t != s && c.count_ones() >= MIN_ROW_RUN_BYTES && loops.class(t) == Some(c) {
            f(c, true);
        }
    }
    let c = loops.ascii(s);
    if c.count_ones() >= MIN_ROW_RUN_BYTES {
        f(c, false);
    }
}

/// For a state that starts a loop without being its own (`[^ \n|"]+ | "\"" ...` before its
/// first character): the class a state it steps to loops on, when `s` reads every run of it too.
/// PERF: the first character of a free-text value walked every multi-byte character's subtree
/// node by node (40k nodes on Qwen2.5, 1.3 ms).
fn first_char_class(a: &Automata, s: StateId, memo: &CoverMemo, loops: &Loops) -> Option<u128> {
    let mut tried: Vec<StateId> = Vec::new();
    for e in a.byte_edges(s) {
        let t = e.target;
        // The loop test first: it reads only `t`'s edges, and fails on most targets (a key's
        // next character), where `tried` grew to one entry per edge (quadratic in the edges).
        let c = loops.ascii(t);
        if t == s || c.count_ones() < MIN_ROW_RUN_BYTES || tried.contains(&t) {
            continue;
        }
        tried.push(t);
        if loops.class(t) == Some(c) && class_covers(a, s, c, memo) {
            return Some(c);
        }
    }
    None
}

/// [`ClassSlice::covers`], refuted first on the states without rule edges that class ASCII bytes
/// reach from `s` (each must read every class ASCII byte, as the cover search requires).
///
/// PERF: the states of free text before a trigger read every class byte sequence but the
/// trigger; the product search explored them all before failing (~65 us per state, a few per
/// partial trigger), the refutation reads each state's edges once.
pub fn class_covers(a: &Automata, s: StateId, class: u128, memo: &CoverMemo) -> bool {
    !ascii_cover_refuted(a, s, class) && ClassSlice::covers(a, s, class, memo)
}

test_counter! {
    /// How many states the class-cover refutations on this thread have read so far (for tests that
    /// bound a compile's searches).
    pub fn refute_states_read => REFUTE_STATES_READ
}

/// States [`ascii_cover_refuted`] looks at before giving up (undecided).
const MAX_REFUTE_STATES: usize = 256;

/// Whether some state without rule edges that a path of class ASCII bytes from `s` reaches
/// (through states without rule edges) misses a class ASCII byte. The cover search reaches each
/// such state alone in its set, at a character boundary, where every class ASCII byte must be
/// read: then it fails too.
fn ascii_cover_refuted(a: &Automata, s: StateId, class: u128) -> bool {
    if !a.rule_edges(s).is_empty() {
        return false;
    }
    // PERF: `seen` is looked up through a set: a counted key (`^[a-zA-Z0-9_]{1,500}$`) is a
    // chain of 500 states, and a linear look-up cost ~300 K instructions per state the walk
    // met (`Github_hard---o79409` token 5: half of a 3 ms fill).
    // Each state read takes a cover-search pair ([`crate::slice::with_cover_budget`]): a state
    // of a long counted run (`\d{40000}|\w+t`) read 256 states undecided, 40k times in one
    // compile (1.3 s). Out of pairs, the search after it gives up too.
    let mut seen = vec![s];
    let mut known: std::collections::HashSet<StateId, crate::fasthash::FastState> =
        std::collections::HashSet::with_capacity_and_hasher(64, crate::fasthash::FastState);
    known.insert(s);
    let mut i = 0;
    while i < seen.len() && seen.len() <= MAX_REFUTE_STATES {
        if !crate::slice::take_cover_pair() {
            return false;
        }
        REFUTE_STATES_READ.set(REFUTE_STATES_READ.get() + 1);
        let q = seen[i];
        i += 1;
        let mut read = 0u128;
        for e in a.byte_edges(q).iter().filter(|e| e.lo < 0x80) {
            let range = crate::bitset::ascii_range(e.lo, e.hi.min(0x7F));
            read |= range;
            let t = e.target;
            if range & class != 0 && a.rule_edges(t).is_empty() && known.insert(t) {
                seen.push(t);
            }
        }
        if class & !read != 0 {
            return true;
        }
    }
    false
}

/// The ASCII bytes on which `s` loops back to itself through a call per character: those that
/// complete, alone, the callee of a rule edge from `s` back to `s` (its start steps on them to a
/// final state without edges), as a regex class rule in `[^,:]*` does.
pub fn call_loop(a: &Automata, s: StateId) -> u128 {
    let looping = a.rule_edges(s).iter().filter(|&&(_, t)| t == s);
    looping.fold(0u128, |c, &(r, _)| c | callee_ascii(a, s, r))
}

/// The ASCII bytes that the callee of rule edge `r` from `s` reads alone: its start steps on
/// them to a final state without edges.
pub fn callee_ascii(a: &Automata, s: StateId, r: RuleId) -> u128 {
    let mut class = 0u128;
    for e in a.byte_edges(a.callee_start(s, r)).iter().filter(|e| e.lo < 0x80) {
        if callee_ends(a, e.target) {
            class |= crate::bitset::ascii_range(e.lo, e.hi.min(0x7F));
        }
    }
    class
}

/// Whether a callee's state `t` ends it: final, without edges.
fn callee_ends(a: &Automata, t: StateId) -> bool {
    a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty()
}

/// Most multi-byte characters [`call_loop_refused`] lists.
const MAX_REFUSED_CHARS: usize = 32;

/// The multi-byte characters that the callee of a call loop at `s` (a rule edge from `s` back
/// to `s`) does not read alone, when they are few: the callee's start steps every other
/// well-formed character ([`utf8_step`]) through states without rule edges to a final state
/// without edges, as [`call_loop`] requires of its ASCII bytes. Each refused character's
/// proper prefixes are read (at most [`MAX_REFUSED_CHARS`] are refused, fewer than any
/// continuation byte's 64 choices). `None` when no loop's callee qualifies. The first loop edge
/// that does is taken.
pub fn call_loop_refused(a: &Automata, s: StateId) -> Option<Vec<Box<[u8]>>> {
    a.rule_edges(s).iter().filter(|&&(_, t)| t == s).find_map(|&(r, _)| callee_refused(a, s, r))
}

/// The multi-byte characters that the callee of rule edge `r` from `s` does not read alone, when
/// they are few (see [`call_loop_refused`]).
pub fn callee_refused(a: &Automata, s: StateId, r: RuleId) -> Option<Vec<Box<[u8]>>> {
    let mut memo = RefusedMemo::default();
    refused_suffixes(a, a.callee_start(s, r), 0, &|t| callee_ends(a, t), &mut memo).map(|r| r.to_vec())
}

/// The multi-byte characters that plain state `q` (no rule edges) does not read to state `s`
/// through its byte edges, when they are few, as [`call_loop_refused`] lists a callee's: every
/// other well-formed character is read through states without rule edges to `s` (`q == s`: a
/// loop's refused characters). `None` past [`MAX_REFUSED_CHARS`], or where a whole prefix is
/// refused.
pub fn loop_refused(a: &Automata, q: StateId, s: StateId) -> Option<Vec<Box<[u8]>>> {
    let mut memo = RefusedMemo::default();
    refused_suffixes(a, q, 0, &|t| t == s, &mut memo).map(|r| r.to_vec())
}

/// The ASCII bytes that `q` steps to `s`.
pub fn ascii_steps_to(a: &Automata, q: StateId, s: StateId) -> u128 {
    let to = a.byte_edges(q).iter().filter(|e| e.target == s && e.lo < 0x80);
    to.fold(0u128, |c, e| c | crate::bitset::ascii_range(e.lo, e.hi.min(0x7F)))
}

/// The ASCII bytes on which `s` loops back to itself.
pub fn ascii_loop(a: &Automata, s: StateId) -> u128 {
    ascii_steps_to(a, s, s)
}

/// Per `U` state (see [`crate::slice::utf8_step`]): the runs of bytes from 0x80 that step it to
/// one state, (first, last, state), in byte order.
fn utf8_runs() -> &'static [Vec<(u8, u8, u8)>] {
    static RUNS: std::sync::OnceLock<Vec<Vec<(u8, u8, u8)>>> = std::sync::OnceLock::new();
    RUNS.get_or_init(|| {
        (0..=8u8)
            .map(|u| {
                let mut runs: Vec<(u8, u8, u8)> = Vec::new();
                for x in 0x80..=0xFFu8 {
                    let Some(v) = crate::slice::utf8_step(u, x) else { continue };
                    match runs.last_mut() {
                        Some(r) if r.2 == v && r.1 + 1 == x => r.1 = x,
                        _ => runs.push((x, x, v)),
                    }
                }
                runs
            })
            .collect()
    })
}

/// [`refused_suffixes`] by (state, `U` state).
type RefusedMemo = FastMap<(StateId, u8), Option<Arc<[Box<[u8]>]>>>;

/// The byte strings that complete a character from `U`'s state `u` (0: at a boundary, only
/// multi-byte characters) and that `q` does not read to a state `ends` accepts (the same for
/// every call sharing `memo`); `None` past [`MAX_REFUSED_CHARS`], where a state on the way has
/// rule edges, or where a whole prefix is refused.
fn refused_suffixes(
    a: &Automata,
    q: StateId,
    u: u8,
    ends: &dyn Fn(StateId) -> bool,
    memo: &mut RefusedMemo,
) -> Option<Arc<[Box<[u8]>]>> {
    if let Some(r) = memo.get(&(q, u)) {
        return r.clone();
    }
    let found = (|| {
        if !a.rule_edges(q).is_empty() {
            return None;
        }
        // PERF: by runs of bytes that step `U` alike (`utf8_runs`) cut at the edges' bounds (edges
        // are sorted and disjoint), each run's callee searched once: byte by byte, with a scan of
        // the edges and a memo lookup each, these searches were ~3.5% of the compiles of the
        // MaskBench band's median schemas.
        let mut edges = a.byte_edges(q).iter().skip_while(|e| e.hi < 0x80).peekable();
        let mut out: Vec<Box<[u8]>> = Vec::new();
        let empty: Box<[u8]> = Box::default();
        let alone = std::slice::from_ref(&empty);
        // `utf8_step` reads every `U` state from 8 on as 8.
        for &(lo, hi, v) in &utf8_runs()[usize::from(u.min(8))] {
            let mut x = lo;
            loop {
                while edges.next_if(|e| e.hi < x).is_some() {}
                // The bytes from `x` to `end` share a target (or its absence).
                let (target, end) = match edges.peek() {
                    Some(e) if e.lo <= x => (Some(e.target), e.hi.min(hi)),
                    Some(e) if e.lo <= hi => (None, e.lo - 1),
                    _ => (None, hi),
                };
                // The suffixes each byte of the run is refused with.
                let callee;
                let refused: &[Box<[u8]>] = match target {
                    Some(t) if v == 0 => {
                        if ends(t) {
                            &[]
                        } else {
                            alone
                        }
                    }
                    Some(t) => {
                        callee = refused_suffixes(a, t, v, ends, memo)?;
                        &callee
                    }
                    // A refused byte before a character's last one refuses 64 characters or more.
                    None if v == 0 => alone,
                    None => return None,
                };
                if !refused.is_empty() {
                    for y in x..=end {
                        out.extend(refused.iter().map(|suffix| [&[y][..], suffix].concat().into()));
                        if out.len() > MAX_REFUSED_CHARS {
                            return None;
                        }
                    }
                }
                if end == hi {
                    break;
                }
                x = end + 1;
            }
        }
        Some(Arc::from(out))
    })();
    memo.insert((q, u), found.clone());
    found
}

/// Subtrees at least this large are worth a run-index lookup (a row's costs up to 128 steps).
pub(super) const RUN_MIN_SUBTREE: usize = 32;
/// Run indexes record leads up to 255 bytes.
pub(super) const MAX_RUN_DEPTH: usize = 255;
/// Fewest ASCII bytes a row must loop on (the ten digits qualify).
pub const MIN_ROW_RUN_BYTES: u32 = 10;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;

    /// [`refused_suffixes`] byte by byte, as first written.
    fn refused_suffixes_bytewise(
        a: &Automata,
        q: StateId,
        u: u8,
        ends: &dyn Fn(StateId) -> bool,
        memo: &mut RefusedMemo,
    ) -> Option<Arc<[Box<[u8]>]>> {
        if let Some(r) = memo.get(&(q, u)) {
            return r.clone();
        }
        let found = (|| {
            if !a.rule_edges(q).is_empty() {
                return None;
            }
            let edges = a.byte_edges(q);
            let mut out: Vec<Box<[u8]>> = Vec::new();
            for x in 0x80..=0xFFu8 {
                let Some(v) = crate::slice::utf8_step(u, x) else { continue };
                match edges.iter().find(|e| e.lo <= x && x <= e.hi).map(|e| e.target) {
                    Some(t) if v == 0 => {
                        if !ends(t) {
                            out.push([x].into());
                        }
                    }
                    Some(t) => {
                        for suffix in refused_suffixes_bytewise(a, t, v, ends, memo)?.iter() {
                            out.push([&[x][..], suffix].concat().into());
                        }
                    }
                    None if v == 0 => out.push([x].into()),
                    None => return None,
                }
                if out.len() > MAX_REFUSED_CHARS {
                    return None;
                }
            }
            Some(Arc::from(out))
        })();
        memo.insert((q, u), found.clone());
        found
    }

    /// Grammars whose loops refuse no, a few, or too many multi-byte characters: of each length,
    /// at a lead byte, inside a character, across byte ranges that split lead and continuation
    /// runs; loops through a called rule too.
    const GRAMMARS: &[&str] = &[
        "root ::= [^\u{2028}\u{2029}]*",
        "root ::= \"a\" [^é]* \"b\"",
        "root ::= [^\u{80}-\u{7FF}]*",
        "root ::= ([a-z] | \"é\" | \"€\" | \"😀\")*",
        "root ::= [^€😀\u{FFFF}]* \"x\"",
        "root ::= [^\u{10000}-\u{10FFFF}]*",
        "root ::= [^\u{800}-\u{FFF}\u{E000}]*",
        "root ::= [\u{0}-\u{D7FF}\u{E000}-\u{10FFFF}]* [^ß]+",
        "root ::= [\u{1}-\u{7F}\u{100}-\u{3FF}\u{1000}-\u{FFFF}\u{20000}-\u{10FFFF}]*",
        "root ::= (c | \"ab\")* \"z\"\nc ::= [^é€] | \"é€\"",
        // Recursive, so never inlined: its rule edges are searched.
        "root ::= (c | \"ab\")* \"z\"\nc ::= [^é€()] | \"(\" c \")\"",
        "root ::= \"\\\"\" ([^\"\\\\\u{2028}] | \"\\\\\" [\"\\\\nt])* \"\\\"\"",
    ];

    /// Every state's plain loop and every rule edge's callee refuse the characters the bytewise
    /// search finds.
    #[test]
    fn refused_suffixes_by_runs_match_bytewise() {
        let (mut some_refused, mut calls) = (0, 0);
        for src in GRAMMARS {
            let g = parse_ebnf(src, "root").unwrap();
            let a = Automata::build(&g).unwrap();
            for q in (0..a.states().len() as u32).map(StateId) {
                let mut targets: Vec<StateId> = a.byte_edges(q).iter().map(|e| e.target).collect();
                targets.push(q);
                for s in targets {
                    let mut memo = RefusedMemo::default();
                    let want = refused_suffixes_bytewise(&a, q, 0, &|t| t == s, &mut memo).map(|r| r.to_vec());
                    assert_eq!(loop_refused(&a, q, s), want, "{src}: {q:?} to {s:?}");
                    some_refused += usize::from(want.is_some_and(|r| !r.is_empty()));
                }
                for &(r, _) in a.rule_edges(q) {
                    calls += 1;
                    let mut memo = RefusedMemo::default();
                    let ends = |t| callee_ends(&a, t);
                    let want = refused_suffixes_bytewise(&a, a.callee_start(q, r), 0, &ends, &mut memo);
                    assert_eq!(callee_refused(&a, q, r), want.map(|r| r.to_vec()), "{src}: {q:?} calls {r:?}");
                }
            }
        }
        assert!(some_refused > 0 && calls > 0, "{some_refused} loops refuse some, {calls} calls");
    }
}
