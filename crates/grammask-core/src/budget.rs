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
//!   shortest lengths), by Knuth's generalization of Dijkstra's algorithm to grammars. An open
//!   state of a `max_tokens` rule takes the edges of its exhausted twin (`compiler/token_budget.rs`):
//!   the occurrence may run out of its own budget on the way, and the twin's paths stay open then.
//! - [`RowCosts`] (per matcher, one table per chart row `o`): `U(R, o)`, the fewest tokens that
//!   finish everything above an item of rule `R` started at row `o`, once `R` has ended:
//!   `U(R, o) = min over items p of row o with an edge p.state --R--> m' of dist[m'] + U(rule(p),
//!   p.origin)`, with `U(root, 0) = 0`. Then `C(row) = min over items x of dist[x.state] +
//!   U(rule(x), x.origin)`.
//! - String bodies ([`BodyCfg`]): where every JSON string-body text takes a walk level's plain
//!   items to the same items per state of the body automaton (`crate::slice::BodySlice`'s), the
//!   limit walks cost the body slice's tokens by the state they end in and walk only the body
//!   frontier's subtrees, each from the items after its parent's path: exact, as the walk.
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
use std::collections::{BinaryHeap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::earley::{Chart, CloseMemo, Item};
use crate::error::Result;
use crate::fasthash::FastMap;
use crate::trie::TokenTrie;
use crate::vocab::Vocabulary;

/// A set of automaton states for [`Completion`]'s searches, emptied in O(1) (a state is in it
/// when its stamp is the current epoch), with a value per state for [`StateSet::index`].
/// PERF: the region, stay and ball searches of a counted string's positions (sp_97) visit
/// hundreds of states each; their hash sets, grown from empty per search, were ~15% of the
/// budgeted fills' instructions (inserts and rehashes).
#[derive(Default)]
struct StateSet {
    stamp: Vec<u32>,
    val: Vec<u32>,
    epoch: u32,
    len: usize,
}

impl StateSet {
    /// Empties the set for states below `n`.
    fn reset(&mut self, n: usize) {
        if self.stamp.len() < n {
            self.stamp.resize(n, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.fill(0);
            self.epoch = 1;
        }
        self.len = 0;
    }

    /// Adds `q`; whether it was not in the set.
    #[inline]
    fn insert(&mut self, q: u32) -> bool {
        let s = &mut self.stamp[q as usize];
        if *s == self.epoch {
            return false;
        }
        *s = self.epoch;
        self.len += 1;
        true
    }

    /// The value of `q`, or `new` stored as its value when `q` is not in the set (then
    /// `Err(new)`).
    #[inline]
    fn index(&mut self, q: u32, new: u32) -> std::result::Result<u32, u32> {
        if self.val.len() < self.stamp.len() {
            self.val.resize(self.stamp.len(), 0);
        }
        if self.insert(q) {
            self.val[q as usize] = new;
            Err(new)
        } else {
            Ok(self.val[q as usize])
        }
    }
}

thread_local! {
    /// Free [`StateSet`]s of this thread (searches may nest: each takes its own).
    static STATE_SETS: std::cell::RefCell<Vec<StateSet>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with an empty [`StateSet`] for the states of `a`.
fn with_state_set<R>(a: &Automata, f: impl FnOnce(&mut StateSet) -> R) -> R {
    let mut set = STATE_SETS.with(|p| p.borrow_mut().pop()).unwrap_or_default();
    set.reset(a.states().len());
    let r = f(&mut set);
    STATE_SETS.with(|p| p.borrow_mut().push(set));
    r
}

/// "No completion" (larger than any budget; sums of two stay below `u32::MAX`).
pub const INF: u32 = u32::MAX / 4;

test_counter! {
    /// How many masks [`Budget::restrict`] left as they are because the limit was at or above
    /// the grammar's [`Completion::ceiling`], for tests.
    pub fn ceiling_skips => CEILING_SKIPS
}

test_counter! {
    /// What the last walk of [`Budget::restrict`] on this thread did, for the replay's census:
    /// `(limit - now) << 8 | walks` (`limit < now`: 0), `walks` the [`WALK_FIT_NEAR`],
    /// [`WALK_FIT_CAPPED`], [`WALK_FIT_LIMIT`] and [`WALK_OVER`] bits.
    pub fn last_walk => LAST_WALK
}
/// [`last_walk`] bits: a fit walk at `now + FIT_SLACK` or below, one of them capped, a fit walk
/// at the limit itself (far from `now`), an over walk at the limit.
#[doc(hidden)]
pub const WALK_FIT_NEAR: usize = 1;
#[doc(hidden)]
pub const WALK_FIT_CAPPED: usize = 2;
#[doc(hidden)]
pub const WALK_FIT_LIMIT: usize = 4;
#[doc(hidden)]
pub const WALK_OVER: usize = 8;

/// The most `C` any chart row of the grammar can cost, or [`INF`] when that is unbounded or not
/// known. An item of a row costs `dist + U`, and `U(R, o)` is the least `dist(t) + U` over the
/// items of row `o` with an edge `R -> t`, so it is at most `up[R]`: the most `dist(t) + up[Q]`
/// over the edges `R -> t` of the states of a rule `Q` that calls `R` (`up[root] = 0`). A row
/// costs at most any of its items, so at most the most `dist[s] + up[rule(s)]`. Finite only when
/// no rule the root reaches calls itself (through others) and each of their states has a finite
/// `dist`; [`INF`] for grammars not [`Completion::mergeable`] (their rows count more than items).
fn cost_ceiling(a: &Automata, dist: &[u32]) -> u32 {
    let rules = a.num_rules();
    let mut states_of: Vec<Vec<u32>> = vec![Vec::new(); rules];
    for (s, st) in a.states().iter().enumerate() {
        states_of[st.rule.index()].push(s as u32);
    }
    // The rules the root reaches, and how many edges of theirs call each.
    let root = a.root().index();
    let mut reached = vec![false; rules];
    let mut callers = vec![0u32; rules];
    let mut stack = vec![root];
    reached[root] = true;
    while let Some(q) = stack.pop() {
        for &s in &states_of[q] {
            for &(r, _) in a.rule_edges(StateId(s)) {
                callers[r.index()] += 1;
                if !std::mem::replace(&mut reached[r.index()], true) {
                    stack.push(r.index());
                }
            }
        }
    }
    if callers[root] > 0 {
        return INF;
    }
    // Rules in an order where every caller comes first (none when some rule is recursive).
    let mut up = vec![0u32; rules];
    let mut ready = vec![root];
    let mut done = 0;
    let mut most = 0u32;
    while let Some(q) = ready.pop() {
        done += 1;
        for &s in &states_of[q] {
            let d = dist[s as usize];
            if d >= INF {
                return INF;
            }
            most = most.max((d + up[q]).min(INF));
            for &(r, t) in a.rule_edges(StateId(s)) {
                let r = r.index();
                up[r] = up[r].max((dist[t.0 as usize] + up[q]).min(INF));
                callers[r] -= 1;
                if callers[r] == 0 {
                    ready.push(r);
                }
            }
        }
    }
    if done < reached.iter().filter(|&&x| x).count() {
        return INF;
    }
    most
}

/// Shortest completion lengths of every automaton state. Invariant: `dist[s]` is the least
/// number of single-byte tokens reading a path from `s` to a final state of its rule, where a
/// rule edge costs the shortest length of its rule, or [`INF`] when there is none.
#[derive(Debug)]
pub struct Completion {
    dist: Vec<u32>,
    /// The largest finite `dist` of a leaf state (-1: none). A [`Region`] reads its threshold
    /// `t` only through which leaf states have `dist <= t`, so `t` clamped to `[-1, top]` is an
    /// exact key ([`Completion::threshold`]).
    top: i64,
    /// This `Completion`'s number, unique in the process (never 0): [`RegionSlot`]s of one
    /// thread hold regions of every grammar it walks.
    id: u64,
    /// `leaf[s]`: `s` has no rule edges (it may be final). Walks read rows of such items on the
    /// automaton alone, leaving for the chart on the bytes their completions read ([`Follow`]).
    leaf: Vec<bool>,
    /// `edge_classes[s]`: the byte classes of `s`'s byte edges (the home exits of a state off
    /// the fit side, final states' completions aside: see [`Walk::item_home`]).
    edge_classes: Vec<u64>,
    /// The grammar has lookahead assertions: every row takes the chart walk.
    lookahead: bool,
    /// Every byte is a single-byte token, and no state takes its exhausted twin's edges (no
    /// `max_tokens` rules) nor has lookahead: then reading a byte lowers `C` by at most 1
    /// (the byte and a shortest completion after it complete the row before), so a token of
    /// `k` more bytes after a row costs at least `C(row) - k`. Over walks skip the subtrees
    /// this bound places above their limit.
    descent: bool,
    vocab: Arc<Vocabulary>,
    /// [`Region`]s by `(state, side, threshold, depth, full)`, computed on first use.
    regions: Mutex<FastMap<RegionKey, Region>>,
    /// Token costs by row signature, shared by every matcher of the grammar (equal signatures
    /// have equal futures, so equal costs).
    memo: Mutex<Memo>,
    /// [`RowInfo`]s by row signature (rows past the first), shared likewise.
    row_infos: Mutex<FastMap<u128, Arc<RowInfo>>>,
    /// Rows may be costed by [`Completion::merged_signature`] (no lookahead, token edges,
    /// `max_tokens` or `max_chars` rules: a row's future is then its items' byte paths).
    mergeable: bool,
    /// [`Completion::char_stay`]s by `(state, home threshold, threshold)`, both clamped.
    char_stays: Mutex<FastMap<(u32, i64, i64), Stay>>,
    /// [`Completion::stay`]s by `(state, depth)`: regions of one state at other thresholds (and
    /// sides, `full`) share it.
    stays: Mutex<FastMap<(u32, u32), Stay>>,
    /// [`Completion::ball`] hashes by `(state, depth, cap)`.
    balls: Mutex<FastMap<(u32, u32, u32), u128>>,
    /// [`Completion::rise`]s by `(y, x, depth)`.
    rises: Mutex<FastMap<(u32, u32, u32), Option<i64>>>,
    /// By [`Budget::cover_key`] of a row of one leaf item: the states of such rows a walk costed,
    /// with their entries' bounds (at most [`MAX_COVERS`], the latest last).
    covered: Mutex<FastMap<u128, Vec<(u32, u32)>>>,
    /// [`Completion::covers`] by `(y, x, depth)`.
    covers: Mutex<FastMap<(u32, u32, u32), bool>>,
    /// [`BodyShape`]s by [`Walk::body_cfg`]'s shape key (`None`: the shortcut does not hold).
    body_shapes: Mutex<FastMap<u128, Option<Arc<BodyShape>>>>,
    /// [`Walk::follow`]'s bytes and their classes by `(rule, origin row signature)`, shared by
    /// every walk of the grammar (equal signatures have equal completions). Only for grammars
    /// without `max_chars` or recursive `max_tokens` budgets (their rows count more than items).
    follows: Mutex<FastMap<(u32, u128), (Follow, u64)>>,
    /// The vocabulary's [`SubtreeClasses`] (shared by every grammar of the vocabulary).
    classes: OnceLock<Arc<SubtreeClasses>>,
    /// By [`Budget::near_cap_key`] of a row: the largest `limit - now` at which a fit walk
    /// near `now` from such a row listed more than its cap (then so does one at any lower
    /// limit: it lists a superset). A prediction only: it picks the walk, not the costs.
    near_caps: Mutex<FastMap<u64, u32>>,
    /// By [`Budget::near_rule_key`] of a row: the largest `limit - now` at which a fit walk near
    /// `now` from such a row was capped, or `None` once one from such a row was not (at any
    /// limit). A prediction only, as [`Completion::near_caps`]: rows of one object's key starts
    /// differ in state (the keys read so far) but not in rule.
    near_rules: Mutex<FastMap<u64, Option<u32>>>,
    /// What limit walks did, counted for tests ([`Completion::walk_stats`]).
    stats: WalkStats<AtomicUsize>,
    /// The most any row of the grammar costs ([`cost_ceiling`]): at a limit this high no token
    /// is over it, and [`Budget::restrict`] leaves the mask as it is without a walk.
    ceiling: u32,
}

/// What limit walks did, counted for tests: `WalkStats<AtomicUsize>` counts, and
/// [`Completion::walk_stats`] reads a `WalkStats` snapshot of it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WalkStats<T = usize> {
    /// Masks that looked up a merged memo key ([`Completion::merged_signature`]) after their
    /// row signature missed, and those of them that found an entry they used.
    pub merged_lookups: T,
    pub merged_hits: T,
    /// Masks left as they are, without a walk, by a row that covers theirs
    /// ([`Completion::covers`]).
    pub cover_hits: T,
    /// Fit walks near `now` skipped because a row of equal [`Budget::near_cap_key`] had one
    /// capped at that limit or above (see [`FIT_LIST_CAP`]).
    pub near_cap_skips: T,
    /// Fit walks near `now` skipped on [`Budget::near_rule_key`] alone.
    pub near_rule_skips: T,
    /// Fit walks capped on the tokens of their deferred subtrees, before reading them (see
    /// [`Walk::deferred`]).
    pub deferred_caps: T,
    /// Body-slice shortcuts taken (see [`BodyCfg`]).
    pub body_shortcuts: T,
    /// Chart exits listed from [`Walk::exit_memo`], and frontier subtrees from
    /// [`Walk::front_memo`].
    pub exit_listings: T,
    pub front_listings: T,
    /// Chart exits of plain levels below the root listed from [`Walk::plain_exits`] without
    /// the plain items' row, and the rows of plain items walks pushed to read a byte on the chart.
    pub plain_exit_listings: T,
    pub item_rows: T,
    /// Trie nodes read on the chart that took a [`Walk::exit_levels`] entry instead of a row.
    pub exit_level_skips: T,
    /// Levels of chart rows taken from [`Walk::row_levels`] (the row met before in the walk).
    pub row_level_hits: T,
    /// Earley rows limit walks pushed for the bytes of trie nodes (their main cost).
    pub walk_rows: T,
    /// Rows limit walks copied from their [`Walk::closed`] memo instead of closing them.
    pub closed_row_hits: T,
    /// Masks restricted to an entry's unordered `under` list at a limit below the one its
    /// over walk was made at.
    pub under_listings: T,
    /// Trie nodes of plain levels whose items' stay classes together ([`Exits::stay`]) left one
    /// of the subtree's classes out, so that no item's [`Stay`] was tried.
    pub stay_union_misses: T,
    /// Masks that walked a chart state the memo held no entry for, and those that walked a
    /// state whose entry did not answer their limit.
    pub fresh_walks: T,
    pub stale_walks: T,
}

impl WalkStats<AtomicUsize> {
    fn snapshot(&self) -> WalkStats {
        let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
        WalkStats {
            merged_lookups: n(&self.merged_lookups),
            merged_hits: n(&self.merged_hits),
            cover_hits: n(&self.cover_hits),
            near_cap_skips: n(&self.near_cap_skips),
            near_rule_skips: n(&self.near_rule_skips),
            deferred_caps: n(&self.deferred_caps),
            body_shortcuts: n(&self.body_shortcuts),
            exit_listings: n(&self.exit_listings),
            front_listings: n(&self.front_listings),
            plain_exit_listings: n(&self.plain_exit_listings),
            item_rows: n(&self.item_rows),
            exit_level_skips: n(&self.exit_level_skips),
            row_level_hits: n(&self.row_level_hits),
            walk_rows: n(&self.walk_rows),
            closed_row_hits: n(&self.closed_row_hits),
            under_listings: n(&self.under_listings),
            stay_union_misses: n(&self.stay_union_misses),
            fresh_walks: n(&self.fresh_walks),
            stale_walks: n(&self.stale_walks),
        }
    }
}

/// Counts one event of a [`WalkStats`] counter.
#[inline]
fn bump(c: &AtomicUsize) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A [`Region`]'s memo key: `(state, side, threshold, depth, full)` (see [`Completion::region`]).
type RegionKey = (u32, Side, i64, u32, bool);

/// Which side of a limit a walk proves tokens to be on without reading them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Side {
    /// Costs at most the limit (tokens that fit).
    Fit,
    /// Costs above the limit (tokens that do not).
    Over,
}

/// What leaf state `s` can reach within the longest token through leaf states (its *region*),
/// against a threshold `t` on their `dist` (`Fit`: `dist <= t` is on the side, `Over`:
/// `dist > t`): the exits, and whether the region holds a final state (whose completion may read
/// further bytes).
///
/// The *home* of `s`: the states it reaches through leaf states on the side costing at most
/// `dist[s]` (in string contents, the contents state itself: escapes and UTF-8 continuations
/// cost more). Invariant: a byte outside `exits.home` read from a home state is on no edge
/// leaving the home, so it keeps the item in the home (or ends it); `has_final` covers home
/// states too (the home is part of the region).
///
/// The home holds no final state but `s` itself (an edge into another final state leaves it):
/// a final state's completion reads its bytes from the final state only, so they are home exits
/// only when `s` is final (`home_final`).
///
/// `stay` (fit walks, `s` on the fit side): see [`Stay`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Region {
    exits: Exits,
    has_final: bool,
    home_final: bool,
    stay: Stay,
}

impl Region {
    /// A placeholder for empty cache slots.
    const EMPTY: Region =
        Region { exits: Exits::ALL, has_final: true, home_final: true, stay: Stay { far: 0, near: 0, depth: 0 } };
}

/// What keeps a fit-side item alive on the fit side, whatever the row's other items do (fit
/// walks skip a subtree whose tokens keep one item so: they fit).
///
/// The *stay home* of leaf state `s`: the leaf states it reaches through leaf states costing at
/// most `dist[s]`, final states included when `s` is final (so the positions of `c{0,1023}` are
/// one stay home: all cost 0), not otherwise (then it is `s`'s home: past a string's closing
/// quote, where its contents have no edge, every contents class would leave one byte away). Per
/// byte class `k`, let
/// `leave[k]` be the fewest bytes from `s` to a stay-home state from which a byte of `k` leaves
/// the stay home or has no edge. A token of `n` more bytes none of whose classes has
/// `leave[k] < n` keeps the item in its stay home (its first leaving byte, the `j`-th, would be
/// read from a state at most `j - 1` bytes away), so after it the item costs at most `dist[s] +
/// U`: the token fits. (Items of several rules do not pool their classes: a token may end each
/// of them with a byte the others take.)
///
/// Invariant: `far` holds the classes with `leave` at least the longest token (any token of
/// them fits), `near` (a superset) those with `leave` at least `depth`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Stay {
    far: u64,
    near: u64,
    depth: u32,
}

impl Stay {
    /// Whether every token whose remaining bytes (at most `len` of them) are in the classes
    /// `below` keeps the item in its stay home.
    #[inline]
    fn keeps(&self, below: u64, len: u32) -> bool {
        below & !self.far == 0 || below & !self.near == 0 && len <= self.depth
    }

    /// The stay of an item one byte further inside its stay home (after a byte that keeps it in
    /// its home: see [`Region`]): one byte nearer the way out.
    #[inline]
    fn stepped(self) -> Stay {
        Stay { depth: self.depth.saturating_sub(1), ..self }
    }
}

/// Byte classes ([`byte_class`]) that may take a plain walk's items off the side of the limit
/// their regions place them on: `hard`, anywhere in a token (edges leaving leaf states, bytes
/// of completions or of row items with rule edges, ASCII bytes into region states off the side);
/// `soft`, as a token's last byte (non-ASCII bytes into region states off the side: a token may
/// pass through the middle of a UTF-8 character, but not end there).
///
/// `home`: the classes of the edges leaving the items' *homes* (see [`Region`]), with those of
/// completions and row items with rule edges. A token none of whose bytes is in `home` keeps
/// every item in its home, on the side: a second way to skip a subtree, which string contents
/// need (their regions hold the states of `\u` escapes, whose hex digits share the letters'
/// classes, so `hard` holds most letters).
///
/// A level's exits are the union of its items' (every item must stay on the side); a fit walk
/// also skips by one item's [`Stay`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Exits {
    hard: u64,
    soft: u64,
    home: u64,
    /// The classes of the items' [`Stay`]s (`far | near`): a token with a byte of another class
    /// keeps no item in its stay home (regions leave it 0; items set it, levels take the union).
    stay: u64,
}

impl Exits {
    const ALL: Exits = Exits { hard: u64::MAX, soft: u64::MAX, home: u64::MAX, stay: u64::MAX };

    fn hard(hard: u64) -> Exits {
        Exits { hard, soft: 0, home: hard, stay: 0 }
    }

    /// Whether every byte class is a hard, soft and home exit (`stay` aside).
    fn all(&self) -> bool {
        self.hard & self.soft & self.home == u64::MAX
    }

    /// These exits with `stay` set to `st`'s classes.
    fn with_stay(self, st: Stay) -> Exits {
        Exits { stay: st.far | st.near, ..self }
    }
}

impl std::ops::BitOr for Exits {
    type Output = Exits;
    fn bitor(self, o: Exits) -> Exits {
        Exits { hard: self.hard | o.hard, soft: self.soft | o.soft, home: self.home | o.home, stay: self.stay | o.stay }
    }
}

impl std::ops::BitOrAssign for Exits {
    fn bitor_assign(&mut self, o: Exits) {
        *self = *self | o;
    }
}

#[derive(Debug, Default)]
struct Memo {
    entries: FastMap<u128, Arc<Entry>>,
    /// Token-cost list entries held, for the size bound.
    held: usize,
}

/// The memoized token costs of one chart state, from a walk at some limit. `bound` is at least
/// the cost after every token the state allows; `costs` lists allowed tokens by decreasing cost:
/// `over` holds every token costing more than `limit` (and no token costing `now` or less) when
/// `limit >= over_from`; `under` every token costing at most `limit` (and none costing more than
/// `under_to`) when `limit <= under_to` (the tokens a walk skipped are on the other side).
/// `near_capped`: a fit walk near `now` listed more than its cap (later walks of the state skip
/// it).
#[derive(Debug)]
struct Entry {
    now: u32,
    bound: u32,
    costs: Exact,
    over_from: u32,
    under_to: Option<u32>,
    near_capped: bool,
}

#[derive(Debug, Default)]
struct Exact {
    over: Vec<(u32, u32)>,
    under: Vec<(u32, u32)>,
}

impl Exact {
    /// `over` the costs above `split`, by decreasing cost, and `under` the others, in the
    /// walk's order ([`Budget::restrict`] filters the whole of `under` by cost).
    /// PERF: over walks list the tokens that fit (up to the vocabulary); sorting them was ~2%
    /// of the budgeted instructions of the replay's 0.2-0.4 ms band.
    fn new(out: Vec<(u32, u32)>, split: u32) -> Exact {
        let (over, under): (Vec<_>, Vec<_>) = out.into_iter().partition(|e| e.0 > split);
        Exact { over: by_decreasing_cost(over), under }
    }
}

/// `costs` ordered by decreasing cost (equal costs in their given order): a counting sort, the
/// costs being small integers above a split (and [`INF`]); a comparison sort when the finite
/// costs span more than a few times the list's length.
/// PERF: the comparison sort of fit walks' lists was ~1% of the band's budgeted instructions.
fn by_decreasing_cost(costs: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    let (lo, hi) = costs.iter().filter(|e| e.0 < INF).fold((INF, 0), |(lo, hi), e| (lo.min(e.0), hi.max(e.0)));
    if lo > hi {
        return costs;
    }
    let span = (hi - lo) as usize + 1;
    if costs.len() < 2 || span > 4 * costs.len() + 64 {
        let mut costs = costs;
        costs.sort_by_key(|e| std::cmp::Reverse(e.0));
        return costs;
    }
    // Bucket 0: `INF`; bucket `1 + hi - c`: finite cost `c`.
    let bucket = |c: u32| if c >= INF { 0 } else { 1 + (hi - c) as usize };
    let mut start = vec![0u32; span + 2];
    for e in &costs {
        start[bucket(e.0) + 1] += 1;
    }
    for k in 1..start.len() {
        start[k] += start[k - 1];
    }
    let mut sorted = vec![(0, 0); costs.len()];
    for &e in &costs {
        let k = &mut start[bucket(e.0)];
        sorted[*k as usize] = e;
        *k += 1;
    }
    sorted
}

/// Most memoized token-cost list entries per grammar; when exceeded the memo starts over.
pub const MAX_MEMO_ENTRIES: usize = 1 << 20;
/// Most memoized chart states per grammar; when exceeded the memo starts over.
pub const MAX_MEMO_STATES: usize = 1 << 16;
/// Most states one [`Region`] search visits; beyond it every byte is an exit.
const MAX_REGION_STATES: usize = 1 << 14;
/// How far above `now` fit walks set their limit: regions then take in the rest of a UTF-8
/// character or an escape (whose states cost a few more), and one walk answers every lower
/// limit down to it.
const FIT_SLACK: u32 = 6;
/// Most tokens a fit walk at a limit within [`FIT_SLACK`] of `now` lists above it before it
/// gives way, at a limit within `FIT_SLACK` of `now`, to an over walk at the limit (which
/// lists the tokens that fit instead), and at a limit farther above, to a fit walk at the limit
/// itself.
/// PERF: in an object key near the end of the budget (`{"queryStrin`, limit `now`), nearly
/// every token leads to an unknown key and costs more: a fit walk read and listed the whole
/// vocabulary (~25 ms on Llama 3), which an over walk skips. Far from the limit, where a key of
/// an open object with required keys left starts (`{"`), every token but the required keys'
/// raises `C` by the rest of an unknown member (its `":0,`, more than `FIT_SLACK`): a fit walk
/// near `now` read and listed the whole vocabulary (~50-100 ms), one at the limit reads the
/// subtrees that may close the key.
pub const FIT_LIST_CAP: usize = 4096;
/// A fit walk whose first pass defers more than its cap over this many tokens (see
/// [`Walk::deferred`]) gives way as one past its cap: most tokens then cost more than the limit
/// by descent, which the over walk that follows skips unread.
/// PERF: on the replay traces (Llama 3, 384 tokens), fit walks that ended under the cap deferred
/// at most ~300 tokens, those capped ~3.5k, most of them counted before the cap; capped at a
/// quarter of the cap they stop earlier (budgeted fill p99 -6-9%, same-run pairs).
const DEFERRED_CAP_DIVISOR: usize = 4;
/// Most [`Completion::ball`] hashes per grammar; when exceeded the table starts over.
const MAX_BALLS: usize = 1 << 16;
/// Walked rows kept per [`Budget::cover_key`] (see [`Completion::covered`]).
const MAX_COVERS: usize = 4;
/// Most memoized [`Region`]s per grammar; when exceeded the table starts over.
const MAX_REGIONS: usize = 1 << 16;
/// The value of `key` in `memo`, computed by `fresh` (outside the lock) on a miss; the map is
/// emptied when it holds [`MAX_REGIONS`] entries.
fn bounded_memo<K: std::hash::Hash + Eq, V: Copy>(memo: &Mutex<FastMap<K, V>>, key: K, fresh: impl FnOnce() -> V) -> V {
    if let Some(&v) = memo.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
        return v;
    }
    let v = fresh();
    let mut m = memo.lock().unwrap_or_else(PoisonError::into_inner);
    if m.len() >= MAX_REGIONS {
        m.clear();
    }
    m.insert(key, v);
    v
}

/// Slots of a walk's direct-mapped [`Region`] cache (a power of two).
const REGION_SLOTS: usize = 4096;
/// A [`Walk::region_slots`] entry: the region of `(state, side, t, depth, full)` of
/// [`Completion`] `grammar` (its `id`; 0: empty), `t` clamped ([`Completion::threshold`]).
/// Invariant: a region is a function of these alone, so a slot holds across walks.
#[derive(Clone, Copy, Debug)]
struct RegionSlot {
    grammar: u64,
    side: Side,
    state: u32,
    t: i64,
    depth: u32,
    full: bool,
    region: Region,
}

impl RegionSlot {
    const EMPTY: RegionSlot =
        RegionSlot { grammar: 0, side: Side::Fit, state: u32::MAX, t: 0, depth: 0, full: false, region: Region::EMPTY };
}

/// The [`Walk::region_slots`] slot of `(s, t)`: items of one state at other thresholds (their
/// `U`s differ) take other slots.
#[inline]
fn region_slot(s: StateId, t: i64) -> usize {
    (s.0 ^ (t as u32).wrapping_mul(0x9E37_79B9)) as usize % REGION_SLOTS
}

/// Most states of a stay home ([`Stay`]) searched; beyond it the item keeps to no class.
const MAX_STAY_HOME: usize = 1024;

/// 64 byte classes, for per-trie-node summaries of the bytes below a node: the bytes JSON and
/// most grammars treat specially get a class each, letters share a few.
/// PERF: a table lookup; the walk takes a class per plain trie node it visits.
#[inline]
fn byte_class(b: u8) -> u32 {
    u32::from(BYTE_CLASSES[usize::from(b)])
}

/// [`byte_class`] of every byte.
static BYTE_CLASSES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = class_of(b as u8) as u8;
        b += 1;
    }
    t
};

const fn class_of(b: u8) -> u32 {
    match b {
        b'\t' => 1,
        b'\n' => 2,
        b'\r' => 3,
        0x00..=0x1f => 0,
        0x20..=0x3f => 4 + (b - 0x20) as u32,
        b'@' => 36,
        b'A'..=b'Z' => 37 + (b - b'A') as u32 / 7,
        b'[' => 41,
        b'\\' => 42,
        b']' => 43,
        b'^' => 44,
        b'_' => 45,
        b'`' => 46,
        b'a'..=b'z' => 47 + (b - b'a') as u32 / 3,
        b'{' => 56,
        b'|' => 57,
        b'}' => 58,
        b'~' => 59,
        0x7f => 60,
        0x80..=0xbf => 61,
        0xc0..=0xdf => 62,
        0xe0..=0xff => 63,
    }
}

/// The set bits of a class mask, lowest first.
struct BitIter(u64);

impl Iterator for BitIter {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        (self.0 != 0).then(|| {
            let k = self.0.trailing_zeros() as usize;
            self.0 &= self.0 - 1;
            k
        })
    }
}

fn class_bits(lo: u8, hi: u8) -> u64 {
    // Classes rise with the byte from 0x20 on: the part above is a run of classes.
    let low = (lo..=hi.min(0x1f)).fold(0u64, |m, b| m | (1u64 << byte_class(b)));
    if hi < 0x20 {
        return low;
    }
    let (a, b) = (byte_class(lo.max(0x20)), byte_class(hi));
    low | (u64::MAX >> (63 - b)) & (u64::MAX << a)
}

/// [`SubtreeClasses::body_state`] of a node off the body slice.
const NOT_BODY: u8 = u8::MAX;

/// The char class of a multi-byte UTF-8 character in [`SubtreeClasses::chars`] and char stays
/// ([`Completion::char_stay`]), where ASCII bytes keep their [`byte_class`] (0 to 60).
const MULTIBYTE: u32 = 61;
/// The char class of a token's last character when the token ends inside it (a proper prefix
/// of a multi-byte character: byte-level vocabularies hold many such tokens).
const PARTIAL: u32 = 62;

/// A UTF-8 decoder's state between bytes (RFC 3629: no overlong forms, surrogates or code
/// points above U+10FFFF): [`UTF8_START`] at a character boundary, otherwise inside a
/// multi-byte character.
type Utf8State = u8;
const UTF8_START: Utf8State = 0;

/// The bytes a multi-byte character may go on with from state `u`, as `(lo, hi, next state)`
/// ranges (from [`UTF8_START`], its lead bytes only).
fn utf8_ranges(u: Utf8State) -> &'static [(u8, u8, Utf8State)] {
    match u {
        UTF8_START => &[
            (0xc2, 0xdf, 1),
            (0xe0, 0xe0, 4),
            (0xe1, 0xec, 2),
            (0xed, 0xed, 5),
            (0xee, 0xef, 2),
            (0xf0, 0xf0, 6),
            (0xf1, 0xf3, 3),
            (0xf4, 0xf4, 7),
        ],
        1 => &[(0x80, 0xbf, UTF8_START)],
        2 => &[(0x80, 0xbf, 1)],
        3 => &[(0x80, 0xbf, 2)],
        4 => &[(0xa0, 0xbf, 1)],
        5 => &[(0x80, 0x9f, 1)],
        6 => &[(0x90, 0xbf, 2)],
        _ => &[(0x80, 0x8f, 2)],
    }
}

/// The decoder's state after byte `b` from `u`, or `None` when `b` makes the text invalid.
fn utf8_next(u: Utf8State, b: u8) -> Option<Utf8State> {
    if u == UTF8_START && b < 0x80 {
        return Some(UTF8_START);
    }
    utf8_ranges(u).iter().find(|r| r.0 <= b && b <= r.1).map(|r| r.2)
}

/// Per token-trie node, the byte classes on the node and below it (`below`), and those of the
/// last bytes of its tokens and those below (`ends`): a walk whose exits miss them can skip the
/// subtree. One per vocabulary (the trie is a function of the vocabulary).
#[derive(Debug)]
struct SubtreeClasses {
    /// Per node, its [`NodeClasses`].
    /// PERF: one record per node (a walk reads several of its fields at every node it visits,
    /// mostly far from the last in the trie): five arrays were five cache misses.
    hot: Vec<NodeClasses>,
    /// The JSON string-body slice (`crate::slice::BodySlice`'s body automaton, states `0..9`):
    /// `body_ends[b]`, `(node, token)` in trie order for the tokens whose bytes the body
    /// automaton reads from state 0 to state `b` (`b >= 1`; state 0's are not kept: walks take
    /// them whole, see [`BodyCfg`]).
    body_ends: Vec<Vec<(u32, u32)>>,
    /// Per node, the body state after its path, or [`NOT_BODY`] when the body automaton does
    /// not read it.
    body_state: Vec<u8>,
    /// The body frontier in trie order: `(node, body state after its parent's path, its byte,
    /// dead)`, each node whose parent's path the body automaton reads from state 0 and whose
    /// own byte it does not (`dead`: a byte never in a JSON string there, rather than `"` or
    /// `\u`, `\/`). Every token is a slice token or at or below one of these.
    body_frontier: Vec<(u32, u8, u8, bool)>,
    /// Per entry of `body_frontier`, its subtree's *shape*: entries of equal shape have subtrees
    /// of equal paths below the frontier node (its byte included) with equal token counts per
    /// node, so their tokens in trie order correspond one to one, and a walk from equal items
    /// costs them alike (see [`Walk::front_memo`]).
    frontier_shape: Vec<u32>,
}

/// The classes of one trie node's subtree (see [`SubtreeClasses`]).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(32))]
struct NodeClasses {
    below: u64,
    ends: u64,
    /// The char classes of the tokens at or below the node (their ASCII bytes' classes,
    /// [`MULTIBYTE`] for a multi-byte character, [`PARTIAL`] for a cut last one), meaningful
    /// where `utf8` holds.
    chars: u64,
    /// The depth of the deepest token at or below the node (0: none).
    reach: u32,
    /// Whether every token at or below the node is valid UTF-8, but for its last character,
    /// which may be cut (a proper prefix of a multi-byte character).
    utf8: bool,
}

impl SubtreeClasses {
    fn new(trie: &TokenTrie) -> SubtreeClasses {
        let mut below: Vec<u64> = trie.nodes.iter().map(|n| 1u64 << byte_class(n.byte)).collect();
        let mut ends: Vec<u64> =
            trie.nodes.iter().map(|n| if n.tok_end > n.tok_start { 1u64 << byte_class(n.byte) } else { 0 }).collect();
        let mut reach: Vec<u32> =
            trie.nodes.iter().map(|n| if n.tok_end > n.tok_start { n.depth } else { 0 }).collect();
        // The decoder's state after each node's path (`None`: invalid) and the classes of its
        // complete characters, in preorder (a parent before its children); a token at a node
        // ends inside a character unless the decoder is at a boundary.
        let mut state: Vec<Option<Utf8State>> = vec![None; trie.nodes.len()];
        let mut path: Vec<u64> = vec![0; trie.nodes.len()];
        for (i, n) in trie.nodes.iter().enumerate() {
            let (u, c) = match n.parent {
                u32::MAX => (Some(UTF8_START), 0),
                p => (state[p as usize], path[p as usize]),
            };
            state[i] = u.and_then(|u| utf8_next(u, n.byte));
            path[i] = c | match n.byte {
                b if b < 0x80 => 1u64 << byte_class(b),
                _ if state[i] == Some(UTF8_START) => 1u64 << MULTIBYTE,
                _ => 0,
            };
        }
        let has_token = |n: &crate::trie::Node| n.tok_end > n.tok_start;
        let mut utf8: Vec<bool> = trie.nodes.iter().zip(&state).map(|(n, u)| !has_token(n) || u.is_some()).collect();
        let mut chars: Vec<u64> = (0..trie.nodes.len())
            .map(|i| match state[i] {
                _ if !has_token(&trie.nodes[i]) => 0,
                Some(UTF8_START) => path[i],
                _ => path[i] | 1u64 << PARTIAL,
            })
            .collect();
        // Preorder: children come after their parent, so a reverse pass sees them first.
        for i in (0..trie.nodes.len()).rev() {
            let p = trie.nodes[i].parent;
            if p != u32::MAX {
                below[p as usize] |= below[i];
                ends[p as usize] |= ends[i];
                reach[p as usize] = reach[p as usize].max(reach[i]);
                utf8[p as usize] &= utf8[i];
                chars[p as usize] |= chars[i];
            }
        }
        let (body_ends, body_frontier, body_state) = Self::body(trie);
        let frontier_shape = Self::shapes(trie, &body_frontier);
        let hot = (0..trie.nodes.len())
            .map(|i| NodeClasses { below: below[i], ends: ends[i], chars: chars[i], reach: reach[i], utf8: utf8[i] })
            .collect();
        SubtreeClasses { hot, body_ends, body_state, body_frontier, frontier_shape }
    }

    /// [`SubtreeClasses::frontier_shape`]: shapes numbered by first appearance, a shape being
    /// the preorder list of `(depth below the frontier node, byte, tokens)` of its subtree.
    fn shapes(trie: &TokenTrie, frontier: &[(u32, u8, u8, bool)]) -> Vec<u32> {
        let mut ids: FastMap<Vec<(u32, u8, u32)>, u32> = FastMap::default();
        frontier
            .iter()
            .map(|&(f, ..)| {
                let f = f as usize;
                let top = trie.nodes[f].depth;
                let shape: Vec<(u32, u8, u32)> = trie.nodes[f..trie.nodes[f].subtree_end as usize]
                    .iter()
                    .map(|n| (n.depth - top, n.byte, n.tok_end - n.tok_start))
                    .collect();
                let next = ids.len() as u32;
                *ids.entry(shape).or_insert(next)
            })
            .collect()
    }

    /// [`SubtreeClasses::body_ends`], [`SubtreeClasses::body_frontier`] and
    /// [`SubtreeClasses::body_state`] of `trie`.
    #[allow(clippy::type_complexity)]
    fn body(trie: &TokenTrie) -> (Vec<Vec<(u32, u32)>>, Vec<(u32, u8, u8, bool)>, Vec<u8>) {
        use crate::slice::Body;
        let (table, _) = crate::slice::body_table();
        let mut ends: Vec<Vec<(u32, u32)>> = vec![Vec::new(); 9];
        let mut frontier = Vec::new();
        let mut state = vec![NOT_BODY; trie.nodes.len()];
        // at[d]: the body state after the path's first `d` bytes.
        let mut at = vec![0u8; trie.max_depth as usize + 1];
        let mut i = 0;
        while i < trie.nodes.len() {
            let n = trie.nodes[i];
            let d = n.depth as usize;
            let b = at[d - 1];
            match table[usize::from(b)][usize::from(n.byte)] {
                Body::To(next) => {
                    at[d] = next;
                    state[i] = next;
                    if next != 0 {
                        ends[usize::from(next)].extend(trie.node_tokens(&n).iter().map(|&t| (i as u32, t)));
                    }
                    i += 1;
                }
                out => {
                    frontier.push((i as u32, b, n.byte, out == Body::Dead));
                    i = n.subtree_end as usize;
                }
            }
        }
        (ends, frontier, state)
    }

    /// The summary of `vocab`'s trie `trie`, built once per vocabulary. The cache holds the
    /// vocabulary weakly: a live `Weak` keeps its address from being reused.
    fn of(vocab: &Arc<Vocabulary>, trie: &TokenTrie) -> Arc<SubtreeClasses> {
        type Cache = Mutex<Vec<(Weak<Vocabulary>, Arc<SubtreeClasses>)>>;
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let cache = CACHE.get_or_init(Cache::default);
        let mut c = cache.lock().unwrap_or_else(PoisonError::into_inner);
        c.retain(|(w, _)| w.strong_count() > 0);
        if let Some((_, s)) = c.iter().find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(vocab))) {
            if s.hot.len() == trie.nodes.len() {
                return s.clone();
            }
        }
        let s = Arc::new(SubtreeClasses::new(trie));
        c.push((Arc::downgrade(vocab), s.clone()));
        s
    }
}

impl Completion {
    /// Computes `dist` for the automata `a` under the vocabulary `vocab`.
    pub fn new(a: &Automata, vocab: &Arc<Vocabulary>) -> Completion {
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
            // An open state of a `max_tokens` rule costs what its exhausted twin does (its edges,
            // renamed back to open states): the occurrence may run out of budget on the way.
            let twin = a.token_budget(sid).map(|(_, t)| t);
            for e in a.byte_edges(twin.unwrap_or(sid)) {
                if (e.lo..=e.hi).any(|b| byte_ok[b as usize]) {
                    let t = match twin {
                        Some(_) => a.budgets().exhausted(a.state(sid).rule, e.target).unwrap_or(e.target),
                        None => e.target,
                    };
                    rev[t.0 as usize].push((s as u32, None));
                }
            }
            for &(r, t) in a.rule_edges(twin.unwrap_or(sid)) {
                let t = match twin {
                    Some(_) => a.budgets().exhausted(a.state(sid).rule, t).unwrap_or(t),
                    None => t,
                };
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
        let leaf: Vec<bool> = (0..n).map(|s| a.rule_edges(StateId(s as u32)).is_empty()).collect();
        let top = (0..n).filter(|&s| leaf[s] && dist[s] < INF).map(|s| i64::from(dist[s])).max().unwrap_or(-1);
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let edge_classes: Vec<u64> =
            (0..n).map(|s| a.byte_edges(StateId(s as u32)).iter().fold(0, |m, e| m | class_bits(e.lo, e.hi))).collect();
        let descent = byte_ok.iter().all(|&ok| ok) && a.budgets().is_empty() && !a.has_lookahead();
        let mergeable = a.budgets().is_empty()
            && !a.has_lookahead()
            && !a.has_token_edges()
            && a.char_budgets().is_none_or(crate::compiler::CharBudgets::is_empty);
        let ceiling = if mergeable { cost_ceiling(a, &dist) } else { INF };
        Completion {
            dist,
            top,
            id: IDS.fetch_add(1, Ordering::Relaxed),
            leaf,
            edge_classes,
            lookahead: a.has_lookahead(),
            descent,
            vocab: vocab.clone(),
            regions: Mutex::default(),
            memo: Mutex::default(),
            row_infos: Mutex::default(),
            mergeable,
            char_stays: Mutex::default(),
            stays: Mutex::default(),
            balls: Mutex::default(),
            rises: Mutex::default(),
            covered: Mutex::default(),
            covers: Mutex::default(),
            body_shapes: Mutex::default(),
            follows: Mutex::default(),
            classes: OnceLock::new(),
            near_caps: Mutex::default(),
            near_rules: Mutex::default(),
            stats: WalkStats::default(),
            ceiling,
        }
    }

    /// The most any chart row of the grammar costs, or [`INF`] (see [`cost_ceiling`]).
    pub fn ceiling(&self) -> u32 {
        self.ceiling
    }

    /// A hash of what leaf state `s` reads within `depth` bytes: the states it reaches by
    /// that many bytes through states without rule edges, numbered in breadth-first order, each
    /// with its `dist` capped at `cap`, whether it is final, its rule and, below `depth`, its
    /// byte edges (to a state's number, or to a state with rule edges by its own number). A
    /// path of `k <= depth` bytes from `s` reads its `i`-th byte from a state at most `i - 1`
    /// bytes away: equal hashes give equal byte paths of up to `depth` bytes, ending in states
    /// of equal rules, finality and `dist` (or both `dist >= cap`). Positions of a counted
    /// repetition far from its bounds (`json_char{1024}`) hash alike.
    fn ball(&self, a: &Automata, s: StateId, depth: u32, cap: u32) -> u128 {
        let key = (s.0, depth, cap);
        if let Some(&h) = self.balls.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return h;
        }
        let h = with_state_set(a, |index| self.ball_hash(a, s, depth, cap, index));
        let mut m = self.balls.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() >= MAX_BALLS {
            m.clear();
        }
        m.insert(key, h);
        h
    }

    /// [`Completion::ball`]'s hash, with the empty set `index` (a state's place in `order`).
    fn ball_hash(&self, a: &Automata, s: StateId, depth: u32, cap: u32, index: &mut StateSet) -> u128 {
        use crate::earley::mix128;
        let mut order: Vec<(StateId, u32)> = vec![(s, 0)];
        let _ = index.index(s.0, 0);
        let mut h: u128 = 0;
        let mut i = 0;
        while i < order.len() {
            let (p, d) = order[i];
            i += 1;
            let st = a.state(p);
            let own = u128::from(self.dist(p).min(cap))
                | u128::from(st.is_final) << 32
                | (st.rule.index() as u128) << 40
                | 1 << 100;
            h = mix128(h ^ own);
            if d >= depth {
                continue;
            }
            for e in a.byte_edges(p) {
                let q = e.target;
                let to = if self.leaf[q.0 as usize] {
                    let j = index.index(q.0, order.len() as u32).unwrap_or_else(|n| {
                        order.push((q, d + 1));
                        n
                    });
                    u128::from(j)
                } else {
                    u128::from(q.0) | 1 << 101
                };
                h = mix128(h ^ (u128::from(e.lo) << 8 | u128::from(e.hi)) << 64 ^ to);
            }
        }
        h
    }

    /// Whether leaf item `y` (cost `dist + uy`) may be left out of a row that holds leaf item
    /// `x` (cost `dist + ux`) for tokens of up to `depth` bytes: every byte path of `y` through
    /// leaf states is one of `x`'s, `y` meets no final state nor state with rule edges on it
    /// (so it adds no completion and no chart item), and `x` costs no more than `y` after every
    /// prefix. Then after any token `x` survives where `y` does, at no more cost: `y` changes
    /// neither the allowed tokens nor their costs. (In `"\"" (block{0,8} short) "\""` far
    /// from the short part's bound, `block`'s position, which must read the rest of its
    /// 1,024 characters, under `short`'s.)
    fn dominated(&self, a: &Automata, y: StateId, x: StateId, uy: u32, ux: u32, depth: u32) -> bool {
        let key = (y.0, x.0, depth);
        let known = self.rises.lock().unwrap_or_else(PoisonError::into_inner).get(&key).copied();
        let rise = match known {
            Some(r) => r,
            None => {
                let r = self.rise(a, y, x, depth);
                let mut m = self.rises.lock().unwrap_or_else(PoisonError::into_inner);
                if m.len() >= MAX_BALLS {
                    m.clear();
                }
                m.insert(key, r);
                r
            }
        };
        rise.is_some_and(|r| r + i64::from(ux) <= i64::from(uy))
    }

    /// For [`Completion::dominated`]: the most `dist(x') - dist(y')` over the state pairs the
    /// same path of up to `depth` bytes takes `y` and `x` to, or `None` when some path of `y`
    /// is not `x`'s or meets a final state or a state with rule edges.
    fn rise(&self, a: &Automata, y: StateId, x: StateId, depth: u32) -> Option<i64> {
        let mut seen: std::collections::HashSet<(u32, u32), crate::fasthash::FastState> =
            std::collections::HashSet::default();
        let mut queue = vec![(y, x, 0u32)];
        seen.insert((y.0, x.0));
        let mut rise = i64::MIN;
        let mut i = 0;
        while i < queue.len() {
            let (p, q, d) = queue[i];
            i += 1;
            if a.state(p).is_final || self.dist(q) >= INF || queue.len() > MAX_REGION_STATES {
                return None;
            }
            rise = rise.max(i64::from(self.dist(q)) - i64::from(self.dist(p)));
            if d >= depth {
                continue;
            }
            let xe = a.byte_edges(q);
            for e in a.byte_edges(p) {
                let f = xe.iter().find(|f| f.lo <= e.lo && e.hi <= f.hi)?;
                if !self.leaf[e.target.0 as usize] || !self.leaf[f.target.0 as usize] {
                    return None;
                }
                if seen.insert((e.target.0, f.target.0)) {
                    queue.push((e.target, f.target, d + 1));
                }
            }
        }
        Some(rise)
    }

    /// Whether every token allowed from a row whose one item is leaf `y` costs at most what some
    /// token allowed from a row whose one item is leaf `x` costs (same rule, origin row and
    /// lookahead, so the same `U`), tokens of up to `depth` bytes: every byte path of `y` is one
    /// of `x`'s, and each pair of states the same path takes them to is either one state (the
    /// rows are then equal from there on) or two states without rule edges, neither final (no
    /// completion adds an item to either row), `dist(y') <= dist(x') < INF`. A token then ends
    /// at rows `{y'}` and `{x'}` costing `dist + U`, or at equal rows. So the bound of `x`'s
    /// entry bounds `y`'s tokens: a position of a counted string (`"[a-z]{0,100}"`, within the
    /// longest token of its end) under an earlier one, which has more room.
    fn covers(&self, a: &Automata, y: StateId, x: StateId, depth: u32) -> bool {
        let key = (y.0, x.0, depth);
        if let Some(&c) = self.covers.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return c;
        }
        let c = self.cover_search(a, y, x, depth);
        let mut m = self.covers.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() >= MAX_BALLS {
            m.clear();
        }
        m.insert(key, c);
        c
    }

    /// [`Completion::covers`]' search over the state pairs of equal byte paths.
    fn cover_search(&self, a: &Automata, y: StateId, x: StateId, depth: u32) -> bool {
        let mut seen: std::collections::HashSet<(u32, u32), crate::fasthash::FastState> =
            std::collections::HashSet::default();
        let mut queue = vec![(y, x, 0u32)];
        seen.insert((y.0, x.0));
        let mut i = 0;
        while i < queue.len() {
            let (p, q, d) = queue[i];
            i += 1;
            if p == q {
                continue;
            }
            let (sp, sq) = (a.state(p), a.state(q));
            if !self.leaf[p.0 as usize]
                || !self.leaf[q.0 as usize]
                || sp.is_final
                || sq.is_final
                || self.dist(q) >= INF
                || self.dist(p) > self.dist(q)
                || queue.len() > MAX_REGION_STATES
            {
                return false;
            }
            if d >= depth {
                continue;
            }
            let xe = a.byte_edges(q);
            let mut j = 0;
            for e in a.byte_edges(p) {
                // Edges are sorted and disjoint; a range of `p` split across `q`'s edges fails.
                while j < xe.len() && xe[j].hi < e.lo {
                    j += 1;
                }
                let f = match xe.get(j) {
                    Some(f) if f.lo <= e.lo && e.hi <= f.hi => f,
                    _ => match xe.iter().find(|f| f.lo <= e.lo && e.hi <= f.hi) {
                        Some(f) => f,
                        None => return false,
                    },
                };
                if seen.insert((e.target.0, f.target.0)) {
                    queue.push((e.target, f.target, d + 1));
                }
            }
        }
        true
    }

    /// The states [`Completion::covered`] holds for `key`, with their bounds.
    fn covered(&self, key: u128) -> Vec<(u32, u32)> {
        self.covered.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned().unwrap_or_default()
    }

    /// Notes a walked row of one leaf item `s` whose tokens cost at most `bound`.
    fn put_covered(&self, key: u128, s: u32, bound: u32) {
        let mut m = self.covered.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() >= MAX_MEMO_STATES {
            m.clear();
        }
        let v = m.entry(key).or_default();
        v.retain(|e| e.0 != s);
        if v.len() >= MAX_COVERS {
            v.remove(0);
        }
        v.push((s, bound));
    }

    /// A memo key for the chart's last row that holds for limits below `cap`: its signature
    /// with each item without rule edges known by its [`Completion::ball`] within `depth` (the
    /// longest token) instead of its state, and those [`Completion::dominated`] by another
    /// (kept) one left out. Rows of equal keys allow the same tokens (a token reads at most
    /// `depth` bytes), and each token costs the same after both, or at least `cap` after both
    /// (an item's cost is `dist + U`, `U` a function of its rule and origin row): every limit
    /// below `cap` places it alike. `u[i]` is the `U` of the row's `i`-th item. `None` when
    /// the grammar has no such key.
    fn merged_signature(&self, a: &Automata, chart: &Chart, u: &[u32], cap: u32, depth: u32) -> Option<u128> {
        const SELF_ORIGIN: u128 = 0x2545_F491_4F6C_DD1D_9E37_79B9_7F4A_7C15;
        use crate::earley::mix128;
        if !self.mergeable {
            return None;
        }
        let r = chart.last_row_index();
        let items = chart.row(r);
        let leaf = |it: &Item| self.leaf[it.state.0 as usize];
        if !items.iter().any(leaf) {
            return None;
        }
        // Cheaper items first: an item's dominator costs no more than it (the rise at its own
        // state bounds `dist(x) + ux <= dist(y) + uy`), so it is met, and kept, first. (The
        // sum below does not depend on the order.)
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by_key(|&i| (self.dist(items[i].state).saturating_add(u[i]), i));
        let mut kept: Vec<usize> = Vec::new();
        let mut acc: u128 = 0;
        for i in order {
            let it = &items[i];
            let st = if leaf(it) {
                let by = |&j: &usize| {
                    let x: &Item = &items[j];
                    leaf(x)
                        && x.la == it.la
                        && x.la_origin == it.la_origin
                        && self.dominated(a, it.state, x.state, u[i], u[j], depth)
                };
                if kept.iter().any(by) {
                    continue;
                }
                self.ball(a, it.state, depth, cap)
            } else {
                mix128(u128::from(it.state.0) | 1 << 101)
            };
            kept.push(i);
            let o = it.origin as usize;
            let ctx = if o == r { SELF_ORIGIN } else { chart.row_signature(o) };
            let la = u128::from(it.la_origin) << 32 | u128::from(it.la);
            acc = acc.wrapping_add(mix128(st ^ (la << 64) ^ ctx.rotate_left(17)));
        }
        acc ^= (kept.len() as u128).wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ u128::from(cap) << 64;
        Some(mix128(acc ^ 1 << 127))
    }

    /// The [`Region`] of leaf state `s` against threshold `t` on `side`, within `depth` bytes
    /// (breadth-first, so each state is met at its least depth). Not `full`: its home and stay
    /// only (each found by a search of its own), its hard and soft exits all classes and
    /// `has_final` set, as when the region search gives up.
    /// PERF: an item stepped to inside its region takes the region's hard and soft exits from
    /// the item it came from, and needs only its home and stay: in a counted repetition
    /// (`json_char{0,128}`) the region search also met every escape and UTF-8 state of the
    /// later positions.
    fn region(&self, a: &Automata, s: StateId, side: Side, t: i64, depth: u32, full: bool) -> Region {
        debug_assert!(self.leaf[s.0 as usize], "regions are of leaf states (`threshold`)");
        let t = self.threshold(t);
        bounded_memo(&self.regions, (s.0, side, t, depth, full), || self.region_fresh(a, s, side, t, depth, full))
    }

    /// [`Completion::region`] searched afresh, at threshold `t` as given.
    fn region_fresh(&self, a: &Automata, s: StateId, side: Side, t: i64, depth: u32, full: bool) -> Region {
        let on_side = |q: StateId| {
            let d = i64::from(self.dist(q));
            if side == Side::Fit {
                d <= t
            } else {
                d > t
            }
        };
        let r = Region {
            exits: Exits::default(),
            has_final: a.state(s).is_final,
            home_final: a.state(s).is_final,
            stay: Stay::default(),
        };
        with_state_set(a, |seen| {
            with_state_set(a, |home| self.region_search(a, s, (side, depth, full), on_side, r, seen, home))
        })
    }

    /// Threshold `t` clamped to `[-1, top]`: every leaf state is on the same side of it as of
    /// `t` (`dist` is at least 0, or above `top` only when `INF`).
    #[inline]
    fn threshold(&self, t: i64) -> i64 {
        t.clamp(-1, self.top)
    }

    /// [`Completion::region`]'s searches from `r` (the region's flags at `s`), with the empty
    /// sets `seen` and `home`.
    #[allow(clippy::too_many_arguments)]
    fn region_search(
        &self,
        a: &Automata,
        s: StateId,
        (side, depth, full): (Side, u32, bool),
        on_side: impl Fn(StateId) -> bool,
        mut r: Region,
        seen: &mut StateSet,
        home: &mut StateSet,
    ) -> Region {
        let mut queue = VecDeque::new();
        // The home, by the same breadth-first search restricted to its states.
        let top = self.dist(s);
        home.insert(s.0);
        let mut home_queue = VecDeque::from([(s, 0u32)]);
        while let Some((p, d)) = home_queue.pop_front() {
            if d >= depth {
                continue;
            }
            for e in a.byte_edges(p) {
                let q = e.target;
                if !self.leaf[q.0 as usize] || !on_side(q) || self.dist(q) > top || q != s && a.state(q).is_final {
                    r.exits.home |= class_bits(e.lo, e.hi);
                } else if home.insert(q.0) {
                    home_queue.push_back((q, d + 1));
                }
            }
            if home.len > MAX_REGION_STATES {
                r.exits.home = u64::MAX;
                break;
            }
        }
        if side == Side::Fit && on_side(s) {
            r.stay = self.stay(a, s, depth);
        }
        if full {
            seen.insert(s.0);
            queue.push_back((s, 0u32));
        } else {
            r.exits.hard = u64::MAX;
            r.exits.soft = u64::MAX;
            r.has_final = true;
        }
        while let Some((p, d)) = queue.pop_front() {
            if d >= depth {
                continue;
            }
            for e in a.byte_edges(p) {
                let q = e.target;
                if !self.leaf[q.0 as usize] {
                    r.exits.hard |= class_bits(e.lo, e.hi);
                    continue;
                }
                if !on_side(q) {
                    // Into the middle of a UTF-8 character: soft; by an ASCII byte (an escape,
                    // a longer detour), hard.
                    if e.lo < 0x80 {
                        r.exits.hard |= class_bits(e.lo, e.hi.min(0x7f));
                    }
                    if e.hi >= 0x80 {
                        r.exits.soft |= class_bits(e.lo.max(0x80), e.hi);
                    }
                }
                if seen.insert(q.0) {
                    r.has_final |= a.state(q).is_final;
                    queue.push_back((q, d + 1));
                }
            }
            if seen.len > MAX_REGION_STATES {
                r = Region { exits: Exits::ALL, has_final: true, home_final: true, stay: Stay::default() };
                break;
            }
        }
        r
    }

    /// The [`Stay`] of leaf state `s` (on the fit side), for tokens of up to `depth` bytes: a
    /// breadth-first search of its stay home, each state's leaving classes taken at its least
    /// depth.
    fn stay(&self, a: &Automata, s: StateId, depth: u32) -> Stay {
        bounded_memo(&self.stays, (s.0, depth), || self.stay_fresh(a, s, depth))
    }

    /// [`Completion::stay`] searched afresh.
    fn stay_fresh(&self, a: &Automata, s: StateId, depth: u32) -> Stay {
        let top = self.dist(s);
        let finals = a.state(s).is_final;
        let inside = |q: StateId| self.leaf[q.0 as usize] && self.dist(q) <= top && (finals || !a.state(q).is_final);
        // `leave[k]`: the least depth at which a byte of class `k` leaves (`depth`: none within).
        let mut leave = [depth; 64];
        with_state_set(a, |seen| Self::stay_search(a, s, depth, inside, &mut leave, seen))
    }

    /// [`Completion::stay`]'s search with the empty set `seen`.
    fn stay_search(
        a: &Automata,
        s: StateId,
        depth: u32,
        inside: impl Fn(StateId) -> bool,
        leave: &mut [u32; 64],
        seen: &mut StateSet,
    ) -> Stay {
        seen.insert(s.0);
        let mut queue = VecDeque::from([(s, 0u32)]);
        while let Some((p, d)) = queue.pop_front() {
            if d >= depth {
                continue;
            }
            // Bytes without an edge leave too: the gaps between the sorted edges.
            let mut out = 0u64;
            let mut next = 0u16;
            for e in a.byte_edges(p) {
                if u16::from(e.lo) > next {
                    out |= class_bits(next as u8, e.lo - 1);
                }
                next = u16::from(e.hi) + 1;
                if !inside(e.target) {
                    out |= class_bits(e.lo, e.hi);
                } else if seen.insert(e.target.0) {
                    queue.push_back((e.target, d + 1));
                }
            }
            if next <= 255 {
                out |= class_bits(next as u8, 255);
            }
            for k in BitIter(out) {
                leave[k] = leave[k].min(d);
            }
            if seen.len > MAX_STAY_HOME {
                return Stay::default();
            }
        }
        let classes = |at_least: u32| (0..64).filter(|&k| leave[k] >= at_least).fold(0u64, |m, k| m | 1 << k);
        // `near`: from the nearest positive leave (a counted repetition's end) on.
        let near_depth = leave.iter().copied().filter(|&l| l > 0).min().unwrap_or(0);
        Stay { far: classes(depth), near: classes(near_depth.max(1)), depth: near_depth }
    }

    /// The *char stay* of leaf state `s` under thresholds `home <= t` on `dist`, for tokens of up
    /// to `depth` bytes that are valid UTF-8 (but for a cut last character): a [`Stay`] over
    /// characters instead of bytes, whose classes are char classes ([`SubtreeClasses::chars`]).
    /// Its home: the leaf states with `dist <= home` reached by whole characters (final states
    /// only when `s` is final); the states inside a multi-byte character may cost more. A
    /// multi-byte character leaves a home state unless every valid one the state reads ends in
    /// the home through leaf states (none dies). A token of `n` bytes reads at most `n`
    /// characters, so the byte-stay argument holds: a whole token none of whose char classes has
    /// `leave[k] < n` keeps the item in the home, and after it the item costs at most
    /// `home + U <= t + U`. A token cut inside its last character has the class [`PARTIAL`],
    /// which leaves a home state unless every proper prefix of a valid character read from it
    /// ends in a leaf state with `dist <= t`: the token costs at most `t + U` too. (Fit walks take
    /// `t = limit - U`, and `home` either `t` or `dist[s]`: a home of the states costing no more
    /// than `s` leaves out those of escapes, from which letters leave one byte away.)
    fn char_stay(&self, a: &Automata, s: StateId, home: i64, t: i64, depth: u32) -> Stay {
        let (home, t) = (self.threshold(home), self.threshold(t));
        bounded_memo(&self.char_stays, (s.0, home, t), || self.char_stay_fresh(a, s, home, t, depth))
    }

    /// [`Completion::char_stay`] searched afresh, at thresholds `home` and `t` as given (both
    /// read only through leaf states' `dist`: [`Completion::multibyte_steps`] gives leaf states).
    fn char_stay_fresh(&self, a: &Automata, s: StateId, home: i64, t: i64, depth: u32) -> Stay {
        let finals = a.state(s).is_final;
        let inside =
            |q: StateId| self.leaf[q.0 as usize] && i64::from(self.dist(q)) <= home && (finals || !a.state(q).is_final);
        let mut leave = [depth; 64];
        // The last byte class is no char class: it never keeps.
        for l in &mut leave[PARTIAL as usize + 1..] {
            *l = 0;
        }
        with_state_set(a, |seen| {
            seen.insert(s.0);
            let mut queue = VecDeque::from([(s, 0u32)]);
            let mut stay = Stay::default();
            'search: {
                while let Some((p, d)) = queue.pop_front() {
                    if d >= depth {
                        continue;
                    }
                    let mut out = 0u64;
                    let mut next = 0u16;
                    for e in a.byte_edges(p).iter().filter(|e| e.lo < 0x80) {
                        let hi = e.hi.min(0x7f);
                        if u16::from(e.lo) > next {
                            out |= class_bits(next as u8, e.lo - 1);
                        }
                        next = u16::from(hi) + 1;
                        if !inside(e.target) {
                            out |= class_bits(e.lo, hi);
                        } else if seen.insert(e.target.0) {
                            queue.push_back((e.target, d + 1));
                        }
                    }
                    if next <= 0x7f {
                        out |= class_bits(next as u8, 0x7f);
                    }
                    match self.multibyte_steps(a, p) {
                        Some((ends, cuts)) => {
                            if cuts.iter().any(|&q| i64::from(self.dist(q)) > t) {
                                out |= 1 << PARTIAL;
                            }
                            for q in ends {
                                if !inside(q) {
                                    out |= 1 << MULTIBYTE;
                                } else if seen.insert(q.0) {
                                    queue.push_back((q, d + 1));
                                }
                            }
                        }
                        None => out |= 1 << MULTIBYTE | 1 << PARTIAL,
                    }
                    for k in BitIter(out) {
                        leave[k] = leave[k].min(d);
                    }
                    if seen.len > MAX_STAY_HOME {
                        break 'search;
                    }
                }
                let classes = |at_least: u32| (0..64).filter(|&k| leave[k] >= at_least).fold(0u64, |m, k| m | 1 << k);
                let near_depth = leave.iter().copied().filter(|&l| l > 0).min().unwrap_or(0);
                stay = Stay { far: classes(depth), near: classes(near_depth.max(1)), depth: near_depth };
            }
            stay
        })
    }

    /// The states every valid multi-byte UTF-8 character read from state `p` ends in, and those
    /// its proper prefixes end in (cut characters), through leaf states; `None` when one dies or
    /// passes a state with rule edges (or the search grows past [`MAX_STAY_HOME`] pairs).
    fn multibyte_steps(&self, a: &Automata, p: StateId) -> Option<(Vec<StateId>, Vec<StateId>)> {
        let (mut ends, mut cuts) = (Vec::new(), Vec::new());
        let mut seen = std::collections::HashSet::<(u32, Utf8State), crate::fasthash::FastState>::default();
        let mut stack = vec![(p, UTF8_START)];
        while let Some((q, u)) = stack.pop() {
            for &(lo, hi, v) in utf8_ranges(u) {
                // Every byte of `lo..=hi` must have an edge (edges are sorted and disjoint).
                let mut next = u16::from(lo);
                for e in a.byte_edges(q).iter().filter(|e| e.hi >= lo && e.lo <= hi) {
                    if u16::from(e.lo) > next || !self.leaf[e.target.0 as usize] {
                        return None;
                    }
                    next = u16::from(e.hi) + 1;
                    if v == UTF8_START {
                        ends.push(e.target);
                    } else if seen.insert((e.target.0, v)) {
                        cuts.push(e.target);
                        stack.push((e.target, v));
                    }
                }
                if next <= u16::from(hi) || seen.len() > MAX_STAY_HOME {
                    return None;
                }
            }
        }
        Some((ends, cuts))
    }

    fn follow_bytes(&self, key: (u32, u128)) -> Option<(Follow, u64)> {
        self.follows.lock().unwrap_or_else(PoisonError::into_inner).get(&key).copied()
    }

    fn put_follow_bytes(&self, key: (u32, u128), f: (Follow, u64)) {
        let mut m = self.follows.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() >= MAX_MEMO_STATES {
            m.clear();
        }
        m.insert(key, f);
    }

    fn row_info(&self, sig: u128) -> Option<Arc<RowInfo>> {
        self.row_infos.lock().unwrap_or_else(PoisonError::into_inner).get(&sig).cloned()
    }

    fn put_row_info(&self, sig: u128, info: Arc<RowInfo>) {
        let mut m = self.row_infos.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() >= MAX_ROW_INFOS {
            m.clear();
        }
        m.insert(sig, info);
    }

    fn near_cap(&self, key: u64) -> Option<u32> {
        self.near_caps.lock().unwrap_or_else(PoisonError::into_inner).get(&key).copied()
    }

    fn put_near_cap(&self, key: u64, slack: u32) {
        let mut m = self.near_caps.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() >= MAX_MEMO_STATES {
            m.clear();
        }
        let s = m.entry(key).or_insert(0);
        *s = (*s).max(slack);
    }

    /// Whether fit walks near `now` from rows of rule key `key` were capped at `slack` or above
    /// and never ended under the cap.
    fn near_rule_capped(&self, key: u64, slack: u32) -> bool {
        self.near_rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .is_some_and(|s| s.is_some_and(|s| slack <= s))
    }

    fn put_near_rule(&self, key: u64, slack: u32, capped: bool) {
        let mut m = self.near_rules.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() >= MAX_MEMO_STATES {
            m.clear();
        }
        let e = m.entry(key).or_insert(Some(0));
        *e = if capped { e.map(|s| s.max(slack)) } else { None };
    }

    fn memo_get(&self, sig: u128) -> Option<Arc<Entry>> {
        self.memo.lock().unwrap_or_else(PoisonError::into_inner).entries.get(&sig).cloned()
    }

    /// The `bound` of chart state `sig`'s memoized entry: no token its mask allows costs more.
    fn memo_bound(&self, sig: u128) -> Option<u32> {
        self.memo.lock().unwrap_or_else(PoisonError::into_inner).entries.get(&sig).map(|e| e.bound)
    }

    fn memo_put(&self, sig: u128, e: Entry) -> Arc<Entry> {
        self.memo_put_arc(sig, Arc::new(e))
    }

    fn memo_put_arc(&self, sig: u128, e: Arc<Entry>) -> Arc<Entry> {
        let size = e.costs.over.len() + e.costs.under.len();
        let mut m = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        if m.entries.len() >= MAX_MEMO_STATES || m.held + size > MAX_MEMO_ENTRIES {
            m.entries.clear();
            m.held = 0;
        }
        m.held += size;
        m.entries.insert(sig, e.clone());
        e
    }

    /// What limit walks of this grammar did so far (for tests).
    #[doc(hidden)]
    pub fn walk_stats(&self) -> WalkStats {
        self.stats.snapshot()
    }

    #[inline]
    pub fn dist(&self, s: StateId) -> u32 {
        self.dist[s.0 as usize]
    }
}

/// A chart row's `U(R, row)` table, sorted by rule index, holding the finite values, and its
/// `C(row)`: both functions of the row's signature (equal signatures have equal futures).
#[derive(Debug)]
struct RowInfo {
    table: Box<[(u32, u32)]>,
    cost: u32,
}

/// A row's `U(R, row)` values by rule index while [`RowCosts::row_info`] computes them.
/// Invariant: `value[rule]` is below [`INF`] if and only if `rule` is in `touched`.
/// PERF: a hash map per new row (~80k on the nine band schemas) was most of a row info's cost.
/// Its size is the largest rule count of the grammars costed on its thread (4 bytes a rule).
#[derive(Default)]
struct RuleTable {
    value: Vec<u32>,
    touched: Vec<u32>,
}

impl RuleTable {
    /// Empties the table and makes room for `rules` rules.
    fn reset(&mut self, rules: usize) {
        for &rule in &self.touched {
            self.value[rule as usize] = INF;
        }
        self.touched.clear();
        if self.value.len() < rules {
            self.value.resize(rules, INF);
        }
    }

    #[inline]
    fn get(&self, rule: u32) -> u32 {
        self.value[rule as usize]
    }

    /// Lowers `rule`'s value to `c`; whether it changed.
    #[inline]
    fn lower(&mut self, rule: u32, c: u32) -> bool {
        let v = &mut self.value[rule as usize];
        if c >= *v {
            return false;
        }
        if *v >= INF {
            self.touched.push(rule);
        }
        *v = c;
        true
    }
}

thread_local! {
    /// This thread's [`RuleTable`] for [`RowCosts::row_info`].
    static ROW_U: std::cell::RefCell<RuleTable> = std::cell::RefCell::new(RuleTable::default());
}

/// Most memoized [`RowInfo`]s per grammar; when exceeded the table starts over.
const MAX_ROW_INFOS: usize = 1 << 16;

/// `U(R, o)` tables, one per chart row, kept in step with a chart (see the module doc).
/// Invariant: `tables[o]` is the [`RowInfo`] of row `o`.
///
/// PERF: the infos are memoized per grammar by row signature: a step to a row seen before (by
/// any matcher, or a walk) costs a lookup instead of a fixpoint over the row's items.
#[derive(Clone, Debug, Default)]
pub struct RowCosts {
    tables: Vec<Arc<RowInfo>>,
}

impl RowCosts {
    fn lookup(&self, o: usize, rule: u32) -> u32 {
        let t = &self.tables[o].table;
        t.binary_search_by_key(&rule, |e| e.0).map_or(INF, |i| t[i].1)
    }

    /// Drops the tables of rows `n..` (the chart was rolled back to `n` rows): a later row with
    /// the same number may hold other items.
    pub fn truncate(&mut self, n: usize) {
        self.tables.truncate(n);
    }

    /// Brings the tables in step with `chart` (rows dropped by rollback go, new rows come).
    pub fn sync(&mut self, a: &Automata, comp: &Completion, chart: &Chart) {
        self.tables.truncate(chart.num_rows());
        while self.tables.len() < chart.num_rows() {
            self.push(a, comp, chart);
        }
    }

    /// Adds the info of the chart's row number `self.tables.len()`.
    fn push(&mut self, a: &Automata, comp: &Completion, chart: &Chart) {
        let r = self.tables.len();
        // Row 0 seeds the root: its info is not a function of its items alone.
        let sig = (r > 0).then(|| chart.row_signature(r));
        if let Some(info) = sig.and_then(|s| comp.row_info(s)) {
            self.tables.push(info);
            return;
        }
        let info = Arc::new(self.row_info(a, comp, chart.row(r), r));
        if let Some(s) = sig {
            comp.put_row_info(s, info.clone());
        }
        self.tables.push(info);
    }

    /// The [`RowInfo`] of row `r`, holding `items` (the tables must reach row `r - 1`).
    fn row_info(&self, a: &Automata, comp: &Completion, items: &[Item], r: usize) -> RowInfo {
        ROW_U.with_borrow_mut(|u| {
            u.reset(a.num_rules());
            let info = self.row_info_in(a, comp, items, r, u);
            u.reset(0);
            info
        })
    }

    /// [`RowCosts::row_info`] with the row's `U` values in `u` (empty).
    fn row_info_in(&self, a: &Automata, comp: &Completion, items: &[Item], r: usize, u: &mut RuleTable) -> RowInfo {
        if r == 0 {
            u.lower(a.root().index() as u32, 0);
        }
        // Items predicted in this row take this row's values: iterate to the fixpoint (values
        // only decrease; a pass without change ends it).
        for _ in 0..=items.len() {
            let mut changed = false;
            for it in items {
                let rule = a.state(it.state).rule.index() as u32;
                let up = if it.origin as usize == r { u.get(rule) } else { self.lookup(it.origin as usize, rule) };
                if up >= INF {
                    continue;
                }
                for &(rr, t) in a.rule_edges(it.state) {
                    changed |= u.lower(rr.index() as u32, (comp.dist(t) + up).min(INF));
                }
            }
            if !changed {
                break;
            }
        }
        // `C(row)`: the least `dist + U` over the row's items.
        let mut cost = INF;
        for it in items {
            let d = comp.dist(it.state);
            if d >= cost {
                continue;
            }
            let rule = a.state(it.state).rule.index() as u32;
            let up = if it.origin as usize == r { u.get(rule) } else { self.lookup(it.origin as usize, rule) };
            cost = cost.min((d + up).min(INF));
        }
        let mut t: Vec<(u32, u32)> = u.touched.iter().map(|&rule| (rule, u.value[rule as usize])).collect();
        t.sort_unstable();
        RowInfo { table: t.into_boxed_slice(), cost }
    }

    fn pop(&mut self) {
        self.tables.pop();
    }

    /// `U(rule(it), it.origin)` of an item of row `r` (the tables must reach row `r`).
    fn item_u(&self, a: &Automata, r: usize, it: &Item) -> u32 {
        debug_assert!(it.origin as usize <= r);
        self.lookup(it.origin as usize, a.state(it.state).rule.index() as u32)
    }

    /// `C(row)` of the chart's last row: the fewest single-byte tokens that complete the input
    /// (0 when it is complete), or [`INF`]. The tables must be in step with `chart`.
    pub fn cost(&self, chart: &Chart) -> u32 {
        self.tables[chart.last_row_index()].cost
    }
}

/// Where a token-trie walk stands after the bytes of a trie path.
#[derive(Clone, Copy, Debug)]
enum Level {
    /// The chart's last row (the chart has `rows` rows).
    Chart { rows: usize },
    /// Plain items `items[lo..hi]` with their `U`, on top of a chart of `rows` rows; `exits`:
    /// the byte classes that can lead out of plain states from where this plain stretch began;
    /// `at_row`: the chart's last row is the items' closure (exact mode: the items are the
    /// row's items without rule edges, and `others` indexes the bytes the rest read).
    Plain { lo: usize, hi: usize, rows: usize, exits: Exits, at_row: bool, others: u32 },
}

/// One level of a walk's trie path (index `depth - 1`): where the walk stands after the path's
/// bytes, its `C` (the row's, or the least `dist + U` of its plain items) and, in over walks, its
/// [`OverLevel`].
/// PERF: kept as three stacks, each truncated at every trie node visited (~11 M visits on the
/// nine band schemas), their truncations and bounds checks were ~4% of the walks' instructions.
#[derive(Clone, Copy)]
struct Frame {
    level: Level,
    cost: u32,
    over: OverLevel,
}

/// What a walk computes: every cost, or the costs of the tokens that may be on `side` of `limit`
/// (a plain subtree that cannot leave its items' [`Region`]s on the other side is skipped).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Exact,
    Limit { limit: u32, side: Side },
}

/// The bytes read after completing a rule started at some row (by the items that completion
/// adds to a row, and their closure), as a 256-bit set.
type Follow = [u64; 4];

/// A [`Follow`] not looked up yet (or none).
const NO_FOLLOW: u32 = u32::MAX;

/// Adds the bytes state `s` reads to `bits`; returns their byte classes.
/// PERF: bit ranges and class runs, not byte by byte (a row of string contents reads ~220
/// bytes, and every row a walk pushes has its bytes collected).
fn add_bytes(bits: &mut Follow, a: &Automata, s: StateId) -> u64 {
    let mut classes = 0;
    for e in a.byte_edges(s) {
        let (lo, hi) = (usize::from(e.lo), usize::from(e.hi));
        for (w, word) in bits.iter_mut().enumerate().take((hi >> 6) + 1).skip(lo >> 6) {
            let from = if w == lo >> 6 { lo & 63 } else { 0 };
            let to = if w == hi >> 6 { hi & 63 } else { 63 };
            *word |= (u64::MAX >> (63 - to)) & (u64::MAX << from);
        }
        classes |= class_bits(e.lo, e.hi);
    }
    classes
}

#[inline]
fn has_byte(bits: &Follow, b: u8) -> bool {
    bits[usize::from(b >> 6)] >> (b & 63) & 1 != 0
}

/// An item of a plain level, with its `U`, the index of its rule's [`Follow`] in `follows` (or
/// [`NO_FOLLOW`]) and, in limit walks, the exits of its region and (fit walks) its [`Stay`],
/// both those of the state its region was found at, the stay's depth counted from this item.
#[derive(Clone, Copy, Debug)]
struct PlainItem {
    item: Item,
    u: u32,
    follow: u32,
    exits: Exits,
    stay: Stay,
}

/// What a walk found: the `(cost, token)` list, whether it is a fit walk that stopped at its cap
/// (the list then holds those it met first), and the subtrees it deferred (see
/// [`Walk::deferred`]; a capped walk did not read them).
struct Walked {
    out: Vec<(u32, u32)>,
    capped: bool,
    deferred: Vec<Deferred>,
}

/// A subtree a fit walk's first pass deferred (see [`Walk::deferred`]): its trie node, the least
/// cost of its tokens by descent (above the walk's limit) and how many the mask allows.
#[derive(Clone, Copy, Debug)]
struct Deferred {
    node: u32,
    least: u32,
    tokens: u32,
}

/// The body-slice shortcut of a limit walk's root level ([`Walk::body_cfg`]). Invariant: for
/// every body automaton state `b` (`crate::slice::BodySlice`'s, `0..9`), every nonempty text
/// the body automaton reads from state 0 to `b` takes the root level's plain items to exactly
/// `items[b]` (each with its `U` and, when final, its follow index), none with rule edges, and
/// no byte of it is read by the row's items with rule edges (first byte) or by the completion of
/// a final item before it: the plain levels after it hold those items, and every token of such
/// text costs `cost[b]`.
struct BodyCfg {
    items: Vec<Vec<(Item, u32, u32)>>,
    cost: [u32; 9],
    /// Per body state `b`, the bytes some item of `items[b]` reads, or the completion of a final
    /// one ([`Walk::body_reads`]).
    /// PERF: stepping each item per dead frontier node was ~3% of the heavy key walks.
    reads: [Follow; 9],
}

/// The chart-independent part of a [`BodyCfg`], shared by every walk of the grammar: for every
/// body state `b`, the `(state, group)` pairs of `BodyCfg::items[b]`, sorted, where `group` is
/// the index of the first root item with the item's origin, lookahead and `U` (stepping an item
/// keeps them), and the bytes the body automaton reads from `b`. Invariant: a function of the
/// root items' `(state, group)` sequence alone (the automaton's steps and `Completion::leaf`);
/// the follow bytes of final items are the chart's, checked per walk.
#[derive(Debug)]
struct BodyShape {
    items: Vec<Vec<(StateId, u32)>>,
    reads: [Follow; 9],
}

/// Most configurations one [`Walk::over_exits`] search meets: it keeps the layers done by then.
const MAX_OVER_CONFIGS: usize = 1 << 9;

/// Most bytes [`Walk::over_exits`] looks ahead (longer tokens are read).
const OVER_DEPTH: u32 = 16;

/// A level's place in an [`Walk::over_exits`] search: the search (`set`, an index in
/// `Walk::over_sets`, `u32::MAX` for none), the bytes read since its row (`m`) and their classes.
#[derive(Clone, Copy, Debug)]
struct OverLevel {
    set: u32,
    m: u32,
    path: u64,
}

impl OverLevel {
    const NONE: OverLevel = OverLevel { set: u32::MAX, m: 0, path: 0 };
}

/// Most [`BodyShape`]s kept per grammar; when exceeded the table starts over.
const MAX_BODY_SHAPES: usize = 1 << 14;

/// A walk's [`BodyCfg`] shortcut under way: from the level `levels[k]` (items up to `hi`, on a
/// chart of `rows` rows) of the trie root (`k == 0`) or of a node of body text whose level
/// holds the chart's row, to the node `end`; `frontier` is the next entry of
/// [`SubtreeClasses::body_frontier`], `frontier_end` the end of the subtree being read.
struct ActiveBody {
    cfg: std::rc::Rc<BodyCfg>,
    k: usize,
    hi: usize,
    rows: usize,
    end: usize,
    frontier: usize,
    frontier_end: usize,
}

/// A body-frontier subtree a walk reads for [`Walk::front_memo`]: its memo key, the end of the
/// subtree, the index of its first token in the trie's token order, where its list starts in
/// [`Walk::front_lists`] (the `(token index - base, cost)` of its tokens that [`Walk::record`]
/// keeps, allowed by the mask or not, are appended from there), and how many subtrees the walk
/// had deferred when it began.
struct FrontBuild {
    key: FrontKey,
    end: usize,
    base: u32,
    start: u32,
    deferred: usize,
}

/// A [`Walk::front_memo`] key: the [`BodyCfg`]'s address, the body state after the frontier
/// node's parent path ([`START_LEVEL`] when the parent is the shortcut's start node, whose level
/// the node is read from) and the subtree's shape ([`SubtreeClasses::frontier_shape`]).
type FrontKey = (usize, u8, u32);

/// A [`Walk::front_memo`] list: the range of [`Walk::front_lists`] holding `(token index - the
/// subtree's first, cost)` of its kept tokens.
type FrontList = (u32, u32);

/// A [`Walk::exit_memo`] key (see [`Walk::exit_key`]).
type ExitKey = (usize, u128, u128);

/// A [`Walk::plain_exits`] key: the chart's rows below a plain level (not the root's), its last
/// row's signature, a hash of the level's plain items in order ([`seq_hash`]) and the byte.
type PlainExitKey = (usize, u128, u128, u8);

/// Rows a walk reads on the chart before it keys them in [`Walk::exit_levels`]. PERF: keying
/// every row (a row signature, a hash of the plain items, an entry) cost the ~100-row walks that
/// make the budgeted p99 ~10%; the walks that gain (a counted string's block end) read 20k+.
const EXIT_LEVELS_AFTER_ROWS: u32 = 128;

thread_local! {
    /// [`EXIT_LEVELS_AFTER_ROWS`] for the walks on this thread ([`with_exit_levels_after`]).
    static EXIT_LEVELS_AFTER: std::cell::Cell<u32> = const { std::cell::Cell::new(EXIT_LEVELS_AFTER_ROWS) };
}

/// Runs `f` with walks that key [`Walk::exit_levels`] after `rows` rows read on the chart (for
/// tests whose walks are short).
#[doc(hidden)]
pub fn with_exit_levels_after<R>(rows: u32, f: impl FnOnce() -> R) -> R {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            EXIT_LEVELS_AFTER.set(self.0);
        }
    }
    let _restore = Restore(EXIT_LEVELS_AFTER.replace(rows));
    f()
}

/// A [`Walk`]'s maps, kept on the thread between walks (emptied, their capacity kept).
/// PERF: grown from empty at every walk, their rehashes and allocations were ~5% of the heavy
/// walks' instructions (o41193: 86 M of 2,428 M in rehashes alone).
#[derive(Default)]
struct WalkMaps {
    regions: FastMap<(u32, i64, u32, bool), Region>,
    region_slots: Vec<RegionSlot>,
    follow_of: FastMap<(u32, u128), u32>,
    over_memo: FastMap<(usize, u128, u32), u32>,
    body_memo: FastMap<BodyKey, Option<std::rc::Rc<BodyCfg>>>,
    front_memo: FastMap<FrontKey, FrontList>,
    front_lists: Vec<(u32, u32)>,
    exit_memo: FastMap<ExitKey, (u32, Option<std::rc::Rc<BodyCfg>>)>,
    plain_exits: FastMap<PlainExitKey, ExitKey>,
    exit_levels: FastMap<ExitLevelKey, Option<ExitLevel>>,
    exit_stays: Vec<Stay>,
    row_levels: FastMap<RowLevelKey, RowLevel>,
    row_level_items: Vec<PlainItem>,
    closed: CloseMemo,
    /// The walk's stacks and per-level tables, kept likewise.
    /// PERF: grown from empty at every walk (`follows` by a row per level), their reallocations
    /// were ~2% of o41193's budgeted instructions.
    items: Vec<PlainItem>,
    follows: Vec<Follow>,
    follow_classes: Vec<u64>,
    frames: Vec<Frame>,
}

/// Most entries (capacities) of the [`WalkMaps`] kept after a walk: a larger set is dropped.
const MAX_KEPT_WALK_ENTRIES: usize = 1 << 16;

impl WalkMaps {
    /// Empties every map (a walk's keys hold its own `BodyCfg` addresses) but the region slots,
    /// which are kept (each names its grammar and side).
    fn clear(&mut self) {
        self.regions.clear();
        if self.region_slots.len() != REGION_SLOTS {
            self.region_slots.clear();
            self.region_slots.resize(REGION_SLOTS, RegionSlot::EMPTY);
        }
        self.follow_of.clear();
        self.over_memo.clear();
        self.body_memo.clear();
        self.front_memo.clear();
        self.front_lists.clear();
        self.exit_memo.clear();
        self.plain_exits.clear();
        self.exit_levels.clear();
        self.exit_stays.clear();
        self.row_levels.clear();
        self.row_level_items.clear();
        self.items.clear();
        self.follows.clear();
        self.follow_classes.clear();
        self.frames.clear();
    }

    /// The maps' capacities summed.
    fn entries(&self) -> usize {
        self.regions.capacity()
            + self.follow_of.capacity()
            + self.over_memo.capacity()
            + self.body_memo.capacity()
            + self.front_memo.capacity()
            + self.front_lists.capacity()
            + self.exit_memo.capacity()
            + self.plain_exits.capacity()
            + self.exit_levels.capacity()
            + self.exit_stays.capacity()
            + self.row_levels.capacity()
            + self.row_level_items.capacity()
            + self.closed.entries()
            + self.items.capacity()
            + self.follows.capacity()
            + self.follow_classes.capacity()
            + self.frames.capacity()
    }
}

thread_local! {
    /// This thread's [`WalkMaps`] between walks.
    static WALK_MAPS: std::cell::Cell<Option<WalkMaps>> = const { std::cell::Cell::new(None) };
}

/// A [`Walk::exit_levels`] key: the chart's rows below the level a byte leaves, its last row's
/// signature, a hash of the level's plain items when they are not that row's (else 0), the byte
/// and the region depth of the level after it ([`Walk::depth_below`]).
type ExitLevelKey = (usize, u128, u128, u8, u32);

/// A [`Walk::row_levels`] key: the chart's rows, its last row's signature and the region depth
/// [`Walk::level_of_row`] was given.
type RowLevelKey = (usize, u128, u32);

/// A [`Walk::row_levels`] entry: the plain level's items (`row_level_items[lo..hi]`), its exits
/// and the `follows` index of the bytes of the row's items with rule edges.
#[derive(Clone, Copy)]
struct RowLevel {
    lo: u32,
    hi: u32,
    exits: Exits,
    others: u32,
}

/// Most [`Walk::row_level_items`] a walk keeps (a longer walk computes its levels afresh).
const MAX_ROW_LEVEL_ITEMS: usize = 1 << 15;

/// What [`Walk::children_skip`] needs of the level a byte read on the chart reaches: its `C`,
/// and when it is plain, its exits and the range of [`Walk::exit_stays`] holding its items'
/// [`Stay`]s (empty when the exits keep no stay).
#[derive(Clone, Copy)]
struct ExitLevel {
    cost: u32,
    plain: Option<(Exits, u32, u32)>,
    over: OverLevel,
}

/// [`FrontKey`]'s body state of a frontier node read from the shortcut's start level.
const START_LEVEL: u8 = u8::MAX;

/// A walk's [`BodyCfg`] memo key: the chart's rows, its last row's signature and a hash of the
/// level's plain items with their `U`, in order ([`seq_hash`]).
/// PERF: the items were collected into the key at every shortcut start (one per chart exit
/// of a key's first byte).
type BodyKey = (usize, u128, u128);

/// An order-dependent 128-bit hash of `words` (memo keys stand for their items as the chart's
/// 128-bit row signatures do: a collision would break exactness).
fn seq_hash(words: impl Iterator<Item = u128>) -> u128 {
    words.fold(0x243F_6A88_85A3_08D3_1319_8A2E_0370_7344, |acc, w| crate::earley::mix128(acc.rotate_left(7) ^ w))
}

/// Per body state, the bytes the body automaton reads from it (a constant of
/// [`crate::slice::body_table`], built once).
/// PERF: rebuilt per [`body_shape`] call it was ~14 M of o41193's 2,039 M budgeted instructions.
fn body_reads_table() -> &'static [Follow; 9] {
    use crate::slice::Body;
    static READS: std::sync::OnceLock<[Follow; 9]> = std::sync::OnceLock::new();
    READS.get_or_init(|| {
        let (table, _) = crate::slice::body_table();
        let mut reads: [Follow; 9] = [[0; 4]; 9];
        for (r, row) in reads.iter_mut().zip(table.iter()) {
            for x in 0..=255u8 {
                if let Body::To(_) = row[usize::from(x)] {
                    r[usize::from(x >> 6)] |= 1 << (x & 63);
                }
            }
        }
        reads
    })
}

/// The [`BodyShape`] of root items `roots` (`(state, group)`, see there), or `None` when some
/// body text takes them to no item or to a state with rule edges, or two texts reaching the
/// same body state to different items. From the root (body state 0's bytes, the root items)
/// every body state reached is expanded once.
fn body_shape(a: &Automata, comp: &Completion, roots: &[(StateId, u32)]) -> Option<BodyShape> {
    use crate::slice::Body;
    let (table, _) = crate::slice::body_table();
    let reads = *body_reads_table();
    let mut items: Vec<Vec<(StateId, u32)>> = vec![Vec::new(); 9];
    let mut known = [false; 9];
    // `None`: the root level (its first byte), then the body states met.
    let mut queue: Vec<Option<usize>> = vec![None];
    let mut next: Vec<(StateId, u32)> = Vec::new();
    while let Some(from) = queue.pop() {
        let b = from.unwrap_or(0);
        let have = if from.is_some() { items[b].clone() } else { roots.to_vec() };
        for x in 0..=255u8 {
            let Body::To(to) = table[b][usize::from(x)] else { continue };
            next.clear();
            for &(s, g) in &have {
                if let Some(q) = a.step(s, x) {
                    if !comp.leaf[q.0 as usize] {
                        return None;
                    }
                    next.push((q, g));
                }
            }
            next.sort_unstable();
            next.dedup();
            let to = usize::from(to);
            if next.is_empty() {
                return None;
            }
            if !known[to] {
                known[to] = true;
                items[to].clone_from(&next);
                queue.push(Some(to));
            } else if items[to] != next {
                return None;
            }
        }
    }
    known.iter().all(|&k| k).then_some(BodyShape { items, reads })
}

/// `it` as one word of [`seq_hash`] (its four fields side by side).
fn item_word(it: &Item) -> u128 {
    u128::from(it.state.0) | u128::from(it.origin) << 32 | u128::from(it.la_origin) << 64 | u128::from(it.la) << 96
}

/// A walk of the token trie from the chart's last row, computing the shortest completion after
/// each allowed token: on the chart (an Earley row per byte, `RowCosts` in step) where the row
/// has rule edges, and on the automaton alone ("plain" levels: `dist + U` per item) for the
/// row's items without rule edges. Every allowed token is read by one of the two, and each is
/// exact: a plain row's only derivations are its items' byte paths and, for final items of rule
/// `R` started at row `o`, the completion of `(R, o)`. A byte some completion reads ([`Follow`])
/// leaves for the chart; no other byte is read by the completion, and the completion's items
/// cost at least `U(R, o)`, the final item's own cost, so `min(dist + U)` over the items is still
/// `C(row)`.
///
/// Limit walks skip a plain subtree whose bytes miss the level's hard exits and whose tokens'
/// last bytes miss its soft ones ([`Exits`]): every token there reads no byte of a completion or
/// of a row item with rule edges, so its derivations are the surviving items' paths, and each
/// ends in a state on the limit's side (the byte into a state off it would be an exit), so the
/// least cost over them is on that side too. Likewise a subtree whose bytes miss the level's
/// `home` exits: every surviving item stays in its home (on the side, and no byte of a
/// completion or of a row item with rule edges is read). Fit walks also skip a subtree whose
/// tokens keep one item of the level in its [`Stay`] home: the item's own path bounds the cost
/// after them, whatever the completions and the other items add.
struct Walk<'a> {
    a: &'a Automata,
    comp: &'a Completion,
    trie: &'a TokenTrie,
    mask: &'a Bitset,
    classes: &'a SubtreeClasses,
    mode: Mode,
    now: u32,
    /// Plain items of the open plain levels.
    items: Vec<PlainItem>,
    follows: Vec<Follow>,
    /// The byte classes of each of `follows`.
    follow_classes: Vec<u64>,
    /// This walk's [`Region`]s by `(state, threshold, depth, full)`.
    regions: FastMap<(u32, i64, u32, bool), Region>,
    /// A direct-mapped front of `regions`, slot [`region_slot`] of the state and clamped
    /// threshold, kept across walks (a slot names its grammar and side).
    /// PERF: plain levels look a region up per new item of a byte that may leave its home
    /// (string contents: most bytes); the hash lookup was most of `item_exits`.
    region_slots: Vec<RegionSlot>,
    /// `follows` indices by `(rule, origin row signature)`.
    follow_of: FastMap<(u32, u128), u32>,
    /// The levels of the trie path being read, one per byte.
    frames: Vec<Frame>,
    /// [`Walk::over_exits`]' searches: `over_sets[k][n]`, the byte classes outside which every
    /// token of at most `n` bytes after the search's row costs more than the limit.
    over_sets: Vec<Vec<u64>>,
    /// [`Walk::over_exits`] by `(rows, last row signature, depth)`.
    over_memo: FastMap<(usize, u128, u32), u32>,
    /// Scratch: a row's items without rule edges.
    seeds: Vec<Item>,
    /// `(cost, token)` of the walked allowed tokens that the entry lists (see [`Walk::record`]).
    out: Vec<(u32, u32)>,
    /// Fit walks: most tokens `out` may hold; beyond it the walk stops with `capped` set.
    cap: usize,
    capped: bool,
    /// Fit walks with descent: the trie nodes whose every token costs more than the limit by
    /// descent, in preorder, none below another: the first pass skips their subtrees, counting
    /// their allowed tokens in `deferred_tokens` (the walk is capped when `out` and those pass
    /// `cap`, or those alone pass `cap / DEFERRED_CAP_DIVISOR`), and a second pass walks only them
    /// (see [`Walk::run`]).
    deferred: Vec<Deferred>,
    deferred_tokens: usize,
    /// Fit walks: the char stays ([`Completion::char_stay`]) of the chart row's items without
    /// rule edges that keep some char class. A subtree of UTF-8 tokens (cut last characters
    /// allowed) one of them keeps is skipped at any level: the item's own path bounds the cost after each token.
    root_chars: Vec<Stay>,
    /// [`BodyCfg`]s of the levels met (`None`: none holds).
    body_memo: FastMap<BodyKey, Option<std::rc::Rc<BodyCfg>>>,
    /// The kept `(token index - base, cost)` lists of body-frontier subtrees, by [`FrontKey`]:
    /// a subtree is read from its parent's level, which the key fixes (the start level of the
    /// [`BodyCfg`]'s key, or its `items[b]` on the chart of the key's rows), so subtrees of equal
    /// shape cost their corresponding tokens alike. Kept only for subtrees read whole, nothing
    /// deferred (skipped subtrees hold no kept token). Within one walk (one mode and limit).
    /// PERF: in an unknown key, each first byte's subtree held its own frontier subtrees (`a"`,
    /// `b",`...), each read with a chart row of its own for the closing quote.
    front_memo: FastMap<FrontKey, FrontList>,
    /// The lists of `front_memo` (and the one `front_build` is making, at the end), one arena
    /// per walk (emptied at the next, its capacity kept).
    /// PERF: a `Vec` per list, grown from empty, and an `Rc` for each were ~2% of the band's
    /// budgeted instructions (session 48).
    front_lists: Vec<(u32, u32)>,
    /// The frontier subtree being read for `front_memo`.
    front_build: Option<FrontBuild>,
    /// By [`Walk::exit_key`] of a byte read from a chart row where a [`BodyCfg`] shortcut may
    /// start: `C` of the row it reaches and the shortcut started there (`None`: none held).
    /// PERF: in an unknown key of an open object, every first byte (~95) and many second ones
    /// left for the chart, each with its own Earley row, row table and level, to reach a few
    /// distinct rows; a byte reaching a known row now lists its subtree from the shortcut's
    /// lists and `front_memo`.
    exit_memo: FastMap<ExitKey, (u32, Option<std::rc::Rc<BodyCfg>>)>,
    /// Scratch for [`Walk::list_exit`]: the frontier subtrees' nodes and lists.
    exit_lists: Vec<(usize, FrontList)>,
    /// By [`PlainExitKey`] of a byte leaving a plain level below the root for the chart: the
    /// [`ExitKey`] the byte had from the row of the level's items. Invariant: that row is a
    /// function of the rows below and the items (its closure and signature are), so equal keys
    /// reach equal rows and the entry's `exit_memo` listing holds without pushing the row.
    /// PERF: in an open object's key near the end of the budget (o41193), ~226k of ~274k such
    /// rows were pushed (a chart closure, a signature, a row table each) only to find their
    /// byte's `exit_memo` entry.
    plain_exits: FastMap<PlainExitKey, ExitKey>,
    /// Limit walks: by [`ExitLevelKey`], the level a byte read on the chart reached (`None`: the
    /// byte is dead there). A node whose byte reaches a known level, and all of whose children
    /// that level skips ([`Walk::children_skip`]), is listed and skipped without an Earley row.
    /// PERF: in a string of a counted repetition (`json_char.block{0,8}`), every trie node at the
    /// byte that crosses a block's bound pushed two rows (~30k per walk), to reach the same few
    /// levels, whose stay homes skip everything below.
    exit_levels: FastMap<ExitLevelKey, Option<ExitLevel>>,
    /// The stays of `exit_levels`' plain levels, one arena per walk (as `front_lists`).
    exit_stays: Vec<Stay>,
    /// By [`RowLevelKey`], the plain levels [`Walk::level_of_row`] made (items in
    /// `row_level_items`). Invariant: an entry stands for a row only when the row's items
    /// without rule edges are, in order, the entry's items: each item's `U` (its origin row's
    /// table), region, stay and completion bytes (by its origin's signature) are then the
    /// same, and so are the bytes of the row's other items (the signature's row holds them);
    /// `follows` indices hold for the whole walk (it is never truncated within one).
    /// PERF: a walk reached the same rows again by other trie paths (o41193: 74k of 123k
    /// levels), each time searching the items' regions and completions again.
    row_levels: FastMap<RowLevelKey, RowLevel>,
    row_level_items: Vec<PlainItem>,
    /// Limit walks: the rows pushed for trie nodes and plain items, closed once per kernel on
    /// top of one row and copied when met again ([`CloseMemo`]: the rows below the walk's first
    /// stay put, and every row the walk pushes rows on goes through it; `follow`'s completion
    /// rows are popped at once).
    /// PERF: o41193's key-start walks closed ~127k rows (`Chart::finish_row`, ~2,000
    /// instructions each, 312 M of 2,168 M budgeted); now 109k of 153k rows are copied
    /// (2,039 M in all).
    closed: CloseMemo,
    /// Scratch for [`Walk::children_skip`]: the deferrals it would make.
    pending: Vec<Deferred>,
    /// Rows this walk pushed for trie nodes read on the chart; [`Walk::exit_levels`] is keyed and
    /// kept only past [`EXIT_LEVELS_AFTER_ROWS`].
    rows_read: u32,
    /// [`WalkStats::stay_union_misses`] of this walk.
    stay_misses: usize,
    /// [`EXIT_LEVELS_AFTER_ROWS`], or a test's ([`with_exit_levels_after`]).
    levels_after: u32,
}

impl Walk<'_> {
    /// Pushes the row reached by `byte` from the chart's last row; limit walks through their
    /// [`Walk::closed`] memo (exact walks, the tests' reference, close every row).
    #[inline]
    fn push_byte(&mut self, chart: &mut Chart, byte: u8) -> Result<bool> {
        if self.mode == Mode::Exact {
            chart.push_byte(self.a, byte)
        } else {
            chart.push_byte_memo(self.a, byte, &mut self.closed)
        }
    }

    fn pop_to(rows: &mut RowCosts, chart: &mut Chart, n: usize) {
        while chart.num_rows() > n {
            chart.pop_row();
            rows.pop();
        }
    }

    /// The depth of the regions looked up for the items after trie node `node`'s bytes: the most
    /// bytes a token at or below it reads after them, rounded up to a power of two (a region
    /// within more bytes holds one within fewer, so it stands for every token below; rounding
    /// keeps the keys few).
    /// PERF: a region within the longest token of a counted repetition's position
    /// (`json_char{0,128}`) holds every later position's states (~5k): each new position met
    /// below a trie node a few bytes from its leaves searched all of them.
    #[inline]
    fn depth_below(&self, node: usize) -> u32 {
        let rest = self.classes.hot[node].reach.saturating_sub(self.trie.nodes[node].depth);
        rest.next_power_of_two().min(self.trie.max_depth)
    }

    /// The [`Region`] of state `s` against threshold `t` within `depth` bytes (`full`: see
    /// [`Completion::region`]), or one within more bytes, through the walk's caches.
    /// PERF: the cache slot answers for every smaller depth (a region within more bytes stands
    /// for one within fewer): string contents look up the same states below nodes of many depths.
    fn region_of(&mut self, s: StateId, t: i64, side: Side, depth: u32, full: bool) -> Region {
        let t = self.comp.threshold(t);
        let slot = region_slot(s, t);
        match self.region_slots[slot] {
            RegionSlot { grammar, side: qs, state, t: qt, depth: qd, full: qf, region: g }
                if grammar == self.comp.id && qs == side && state == s.0 && qt == t && qd >= depth && qf == full =>
            {
                g
            }
            _ => {
                let key = (s.0, t, depth, full);
                let g = match self.regions.get(&key) {
                    Some(&g) => g,
                    None => {
                        let g = self.comp.region(self.a, s, side, t, depth, full);
                        self.regions.insert(key, g);
                        g
                    }
                };
                self.region_slots[slot] =
                    RegionSlot { grammar: self.comp.id, side, state: s.0, t, depth, full, region: g };
                g
            }
        }
    }

    /// Walks with descent (see [`Completion::descent`]): the least cost of a token at or below
    /// trie node `i` (at depth `d`), each of its bytes past the level above lowering `C` by at
    /// most 1; `None` when no token is at or below it. (A node is a prefix of the tokens below
    /// it, so `reach >= d` when there is one.)
    #[inline]
    fn descent_least(&self, i: usize, d: usize) -> Option<u32> {
        let reach = self.classes.hot[i].reach;
        (reach != 0).then(|| self.frames[d - 1].cost.saturating_sub(reach + 1 - d as u32))
    }

    /// Whether state `s` may be in a plain level.
    #[inline]
    fn plain(&self, s: StateId) -> bool {
        self.comp.leaf[s.0 as usize]
    }

    /// The index in `follows` of the bytes read after completing `rule` started at row `origin`
    /// (a row below the chart's last), found by pushing (and popping) the completion's row once
    /// per origin row signature (equal signatures have equal completions).
    /// PERF: rows the walk pushed (a key's "other" characters) used to push a completion per
    /// trie node, and their items skipped nothing for it.
    /// PERF: the grammar's [`Completion::follows`] keeps them across walks: o41193's key starts
    /// pushed ~12 completion rows per walk (115 M of its 2,355 M budgeted instructions).
    fn follow(&mut self, chart: &mut Chart, rule: u32, origin: u32) -> u32 {
        let key = (rule, chart.row_signature(origin as usize));
        if let Some(&i) = self.follow_of.get(&key) {
            return i;
        }
        let a = self.a;
        let shared = a.char_budgets().is_none() && a.rec_budgets().is_none();
        let known = if shared { self.comp.follow_bytes(key) } else { None };
        let (bits, classes) = match known {
            Some(f) => f,
            None => {
                let mut bits: Follow = [0; 4];
                let mut classes = 0;
                match chart.push_completion(a, origin as usize, crate::grammar::RuleId(rule)) {
                    Ok(pushed) => {
                        if pushed {
                            for it in chart.row(chart.last_row_index()) {
                                classes |= add_bytes(&mut bits, a, it.state);
                            }
                            chart.pop_row();
                        }
                        if shared {
                            self.comp.put_follow_bytes(key, (bits, classes));
                        }
                    }
                    // The chart path meets the error (or not) itself.
                    Err(_) => (bits, classes) = ([u64::MAX; 4], u64::MAX),
                }
                (bits, classes)
            }
        };
        self.follows.push(bits);
        self.follow_classes.push(classes);
        let i = (self.follows.len() - 1) as u32;
        self.follow_of.insert(key, i);
        i
    }

    /// The level of the chart's last row: plain for its items without rule edges (unless the
    /// grammar has lookahead), whose bytes, and in limit walks those leaving the items'
    /// regions, are the level's exits.
    fn level_of_row(&mut self, rows: &RowCosts, chart: &mut Chart, depth: u32) -> Level {
        if self.comp.lookahead {
            return Level::Chart { rows: chart.num_rows() };
        }
        let r = chart.last_row_index();
        let key: RowLevelKey = (chart.num_rows(), chart.row_signature(r), depth);
        if let Some(&RowLevel { lo: s, hi: e, exits, others }) = self.row_levels.get(&key) {
            let leaf = &self.comp.leaf;
            let kept = &self.row_level_items[s as usize..e as usize];
            if chart.row(r).iter().filter(|it| leaf[it.state.0 as usize]).eq(kept.iter().map(|p| &p.item)) {
                bump(&self.comp.stats.row_level_hits);
                let lo = self.items.len();
                self.items.extend_from_slice(kept);
                return Level::Plain { lo, hi: self.items.len(), rows: chart.num_rows(), exits, at_row: true, others };
            }
        }
        // The row's items with rule edges are left to the chart: the bytes they read leave the
        // level.
        let mut seeds = std::mem::take(&mut self.seeds);
        seeds.clear();
        let mut bits: Follow = [0; 4];
        let mut classes = 0;
        for it in chart.row(r) {
            if self.comp.leaf[it.state.0 as usize] {
                seeds.push(*it);
            } else {
                classes |= add_bytes(&mut bits, self.a, it.state);
            }
        }
        if seeds.is_empty() {
            self.seeds = seeds;
            return Level::Chart { rows: chart.num_rows() };
        }
        let mut exits = Exits::hard(classes);
        self.follows.push(bits);
        self.follow_classes.push(exits.hard);
        let others = (self.follows.len() - 1) as u32;
        let lo = self.items.len();
        for &it in &seeds {
            let u = rows.item_u(self.a, r, &it);
            let (follow, e, stay) = self.item_exits(chart, it, u, NO_FOLLOW, depth);
            let e = e.with_stay(stay);
            exits |= e;
            self.items.push(PlainItem { item: it, u, follow, exits: e, stay });
        }
        self.seeds = seeds;
        let hi = self.items.len();
        if self.row_level_items.len() + (hi - lo) <= MAX_ROW_LEVEL_ITEMS {
            let s = self.row_level_items.len() as u32;
            self.row_level_items.extend_from_slice(&self.items[lo..hi]);
            let e = self.row_level_items.len() as u32;
            self.row_levels.insert(key, RowLevel { lo: s, hi: e, exits, others });
        }
        Level::Plain { lo, hi, rows: chart.num_rows(), exits, at_row: true, others }
    }

    /// The [`BodyCfg`] of the root level `root`, when it holds and the slice tokens ending at a
    /// character boundary (`cost[0]`) are on the side the walk does not list (fit walks: they
    /// fit; over walks: they do not), so that only the tokens ending inside a character or an
    /// escape, and the body frontier's subtrees, need the walk. `None` otherwise (the plain walk).
    /// PERF: inside a string at the limit, the plain walk read every body-text prefix of the
    /// tokens that may close the string or hold a newline (~3k trie nodes per walk on Llama 3,
    /// mostly cache misses), to find at each the same items.
    fn body_cfg(&mut self, chart: &mut Chart, root: Level) -> Option<BodyCfg> {
        let Mode::Limit { limit, side } = self.mode else { return None };
        let Level::Plain { lo, hi, others, .. } = root else { return None };
        let (a, comp) = (self.a, self.comp);
        let root_items: Vec<(Item, u32)> = self.items[lo..hi].iter().map(|e| (e.item, e.u)).collect();
        // Each root item's group: the first root item of equal origin, lookahead and `U`.
        let meta = |(it, u): &(Item, u32)| (it.origin, it.la_origin, it.la, *u);
        let roots: Vec<(StateId, u32)> = root_items
            .iter()
            .map(|x| (x.0.state, root_items.iter().position(|y| meta(y) == meta(x)).unwrap() as u32))
            .collect();
        let key = seq_hash(
            roots.iter().map(|&(s, g)| u128::from(s.0) | u128::from(g) << 32).chain([roots.len() as u128 | 1 << 100]),
        );
        let known = comp.body_shapes.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned();
        let shape = match known {
            Some(sh) => sh,
            None => {
                let sh = body_shape(a, comp, &roots).map(Arc::new);
                let mut m = comp.body_shapes.lock().unwrap_or_else(PoisonError::into_inner);
                if m.len() >= MAX_BODY_SHAPES {
                    m.clear();
                }
                m.insert(key, sh.clone());
                sh
            }
        }?;
        // The root's bytes must miss the completions its items with rule edges leave to
        // `others`, and each body state's those of its final items.
        if others != NO_FOLLOW && shape.reads[0].iter().zip(&self.follows[others as usize]).any(|(r, f)| r & f != 0) {
            return None;
        }
        let mut items: Vec<Vec<(Item, u32, u32)>> = Vec::with_capacity(9);
        let mut reads: [Follow; 9] = [[0; 4]; 9];
        for (b, pairs) in shape.items.iter().enumerate() {
            let mut v: Vec<(Item, u32, u32)> = pairs
                .iter()
                .map(|&(s, g)| {
                    let (it, u) = root_items[g as usize];
                    (Item { state: s, ..it }, u, NO_FOLLOW)
                })
                .collect();
            v.sort_unstable();
            let mut follows: Follow = [0; 4];
            for e in &mut v {
                if a.state(e.0.state).is_final {
                    e.2 = self.follow(chart, a.state(e.0.state).rule.index() as u32, e.0.origin);
                    for (w, f) in follows.iter_mut().zip(&self.follows[e.2 as usize]) {
                        *w |= f;
                    }
                }
            }
            if shape.reads[b].iter().zip(&follows).any(|(r, f)| r & f != 0) {
                return None;
            }
            reads[b] = follows;
            for e in &v {
                add_bytes(&mut reads[b], a, e.0.state);
            }
            items.push(v);
        }
        let mut cost = [INF; 9];
        for (c, its) in cost.iter_mut().zip(&items) {
            *c = its.iter().map(|&(it, u, _)| (comp.dist(it.state) + u).min(INF)).min().unwrap_or(INF);
        }
        let listed = |c: u32| if side == Side::Fit { c > limit } else { c <= limit };
        (!listed(cost[0])).then_some(BodyCfg { items, cost, reads })
    }

    /// Starts the [`BodyCfg`] shortcut at level `l`, that of the trie root (`node` `None`) or of
    /// trie node `node` (whose path is body text ending at a character boundary, and whose level
    /// holds the chart's row): lists the slice tokens below by their body state's cost, and
    /// returns the shortcut, or `None` when it does not hold (the walk reads on as before).
    fn body_start(&mut self, chart: &mut Chart, l: Level, node: Option<usize>) -> Option<ActiveBody> {
        let Level::Plain { lo, hi, rows, .. } = l else { return None };
        let nodes = &self.trie.nodes;
        let (first, end, k) = match node {
            None => (0, nodes.len(), 0),
            Some(i) => (i + 1, nodes[i].subtree_end as usize, nodes[i].depth as usize),
        };
        if first >= end {
            return None;
        }
        let words = self.items[lo..hi].iter().flat_map(|e| [item_word(&e.item), u128::from(e.u)]);
        let key: BodyKey = (rows, chart.row_signature(rows - 1), seq_hash(words));
        let cfg = match self.body_memo.get(&key) {
            Some(c) => c.clone(),
            None => {
                let c = self.body_cfg(chart, l).map(std::rc::Rc::new);
                self.body_memo.insert(key, c.clone());
                c
            }
        }?;
        bump(&self.comp.stats.body_shortcuts);
        self.list_slice(&cfg, first, end);
        let classes = self.classes;
        let frontier = classes.body_frontier.partition_point(|e| (e.0 as usize) < first);
        Some(ActiveBody { cfg, k, hi, rows, end, frontier, frontier_end: first })
    }

    /// Whether some item of `cfg.items[b]` reads byte `x`, or the completion of a final one.
    #[inline]
    fn body_reads(cfg: &BodyCfg, b: u8, x: u8) -> bool {
        has_byte(&cfg.reads[usize::from(b)], x)
    }

    /// Limit walks: the exits of plain item `it`'s region within `depth` bytes (on top of the
    /// chart's last row), with the bytes of its completion where the region holds a final state,
    /// and its follow index (`follow`, or found then). Exact walks: no exits.
    fn item_exits(&mut self, chart: &mut Chart, it: Item, u: u32, follow: u32, depth: u32) -> (u32, Exits, Stay) {
        let Mode::Limit { limit, side } = self.mode else { return (follow, Exits::default(), Stay::default()) };
        let g = self.region_of(it.state, i64::from(limit) - i64::from(u), side, depth, true);
        if !g.has_final || g.exits.all() {
            return (follow, g.exits, g.stay);
        }
        let f = match follow {
            NO_FOLLOW => self.follow(chart, self.a.state(it.state).rule.index() as u32, it.origin),
            f => f,
        };
        // The completion's bytes leave the home only from `it.state` itself (see `Region`).
        let fc = self.follow_classes[f as usize];
        (f, g.exits | Exits { hard: fc, soft: 0, home: if g.home_final { fc } else { 0 }, stay: 0 }, g.stay)
    }

    /// The follow index and the home exits and [`Stay`] of plain item `it` (`u` its `U`, `follow`
    /// its follow index or [`NO_FOLLOW`]) stepped to from an item whose region holds it (so the
    /// hard and soft exits of that region stand for it).
    ///
    /// In fit walks an item with `u > limit` is off the fit side in every state (`dist >= 0`):
    /// every edge of its state leaves its home (the region search's home is the state alone), and
    /// so do its completion's bytes when it is final; it keeps to no stay home.
    /// PERF: such items (an open object's unknown key near the limit) took a region lookup per
    /// byte read in their self-loops (~20 M of the 38 M in the walk over the 8 heaviest schemas of
    /// the replay trace).
    fn item_home(&mut self, chart: &mut Chart, it: Item, u: u32, follow: u32, depth: u32) -> (u32, u64, Stay) {
        let Mode::Limit { limit, side } = self.mode else { return (follow, 0, Stay::default()) };
        if !(side == Side::Fit && u > limit) {
            let g = self.region_of(it.state, i64::from(limit) - i64::from(u), side, depth, false);
            if !g.home_final {
                return (follow, g.exits.home, g.stay);
            }
            // The completion's bytes leave the home from `it.state` itself (see `Region`).
            let f = match follow {
                NO_FOLLOW => self.follow(chart, self.a.state(it.state).rule.index() as u32, it.origin),
                f => f,
            };
            return (f, g.exits.home | self.follow_classes[f as usize], g.stay);
        }
        let home = self.comp.edge_classes[it.state.0 as usize];
        let st = self.a.state(it.state);
        if !st.is_final {
            return (follow, home, Stay::default());
        }
        let f = match follow {
            NO_FOLLOW => self.follow(chart, st.rule.index() as u32, it.origin),
            f => f,
        };
        (f, home | self.follow_classes[f as usize], Stay::default())
    }

    /// Lists the allowed tokens of trie node `node` at `cost`, when their entry can use it: fit
    /// walks keep the costs above their limit ([`Entry`]'s `over`: the entry answers that limit
    /// and those above it), over walks those at most their limit (`under`), exact walks all but
    /// `now`.
    /// PERF: the costs above `now` of a key's "other" characters are most of the vocabulary,
    /// which over walks used to list and sort.
    fn record(&mut self, node: usize, cost: u32) {
        if self.keeps(cost) {
            let n = self.trie.nodes[node];
            if let Some(fb) = &self.front_build {
                if node < fb.end {
                    self.front_lists.extend((n.tok_start..n.tok_end).map(|t| (t - fb.base, cost)));
                }
            }
            for &t in self.trie.node_tokens(&n) {
                if self.mask.get(t as usize) {
                    self.out.push((cost, t));
                }
            }
            self.capped |= self.out.len() > self.cap;
        }
    }

    /// Ends the frontier subtree read for `front_memo`, keeping its list when nothing in it was
    /// deferred.
    fn finish_front(&mut self) {
        if let Some(fb) = self.front_build.take() {
            if self.deferred.len() == fb.deferred {
                self.front_memo.insert(fb.key, (fb.start, self.front_lists.len() as u32));
            } else {
                self.front_lists.truncate(fb.start as usize);
            }
        }
    }

    /// Lists the allowed tokens of the frontier subtree at `f` from a `front_memo` list.
    fn list_front(&mut self, f: usize, (lo, hi): FrontList) {
        bump(&self.comp.stats.front_listings);
        let base = self.trie.first_token[f] as usize;
        for &(k, c) in &self.front_lists[lo as usize..hi as usize] {
            let t = self.trie.tokens[base + k as usize];
            if self.mask.get(t as usize) {
                self.out.push((c, t));
            }
        }
        self.capped |= self.out.len() > self.cap;
    }

    /// The key of the row the chart reaches reading `byte` from its last row (of `rows` rows):
    /// the rows, the last row's signature and a hash of the row's kernel (its items that read
    /// the byte, stepped, in order; the closure and signature are functions of it and of the
    /// rows below), with whether the byte leads a character (rows count characters). `None`
    /// with `max_chars` or recursive `max_tokens` budgets (their steps read more than the item).
    fn exit_key(&self, chart: &Chart, rows: usize, byte: u8) -> Option<ExitKey> {
        let a = self.a;
        if a.char_budgets().is_some() || a.rec_budgets().is_some() {
            return None;
        }
        let lead = u128::from((0x80..=0xBF).contains(&byte));
        let stepped = chart.row(rows - 1).iter().filter_map(|it| {
            let t = a.step(it.state, byte)?;
            let la = a.la_step(it.la, byte)?;
            Some(item_word(&Item { state: t, la, ..*it }))
        });
        Some((rows, chart.row_signature(rows - 1), seq_hash(std::iter::once(lead).chain(stepped))))
    }

    /// [`Walk::exit_key`] for the byte of trie node `i` read from the chart's last row (of
    /// `rows` rows) where a [`BodyCfg`] shortcut may start there (first passes, none under way,
    /// the node's path body text at a character boundary); `None` otherwise.
    fn exit_start(&self, chart: &Chart, rows: usize, i: usize, busy: bool) -> Option<ExitKey> {
        if busy || self.classes.body_state[i] != 0 || self.mode == Mode::Exact {
            return None;
        }
        self.exit_key(chart, rows, self.trie.nodes[i].byte)
    }

    /// [`Walk::exit_start`]'s key for node `i` read from the chart's last row (of `rows` rows),
    /// and whether its subtree was listed from the [`Walk::exit_memo`] entry of that key (the
    /// byte reaches a row met before; see [`Walk::list_exit`]).
    fn list_from_exit_memo(
        &mut self,
        chart: &Chart,
        rows: usize,
        i: usize,
        busy: bool,
        has_token: bool,
    ) -> (Option<ExitKey>, bool) {
        let Some(ek) = self.exit_start(chart, rows, i, busy) else { return (None, false) };
        let listed = match self.exit_memo.get(&ek).cloned() {
            Some((c, Some(cfg))) => self.list_exit(i, c, &cfg, has_token),
            _ => false,
        };
        (Some(ek), listed)
    }

    /// Lists the subtree of trie node `i` (a token of body text, read from the chart's last row
    /// to a row of [`Walk::exit_memo`] entry `(cost, cfg)`) as the [`BodyCfg`] shortcut started
    /// there would: the node's own tokens at `cost`, the slice tokens below by their body
    /// state's cost and the frontier subtrees below from `front_memo`. Returns false (listing
    /// nothing) when some frontier subtree below is not in `front_memo`.
    fn list_exit(&mut self, i: usize, cost: u32, cfg: &std::rc::Rc<BodyCfg>, has_token: bool) -> bool {
        let (nodes, classes) = (&self.trie.nodes, self.classes);
        let (first, end, k) = (i + 1, nodes[i].subtree_end as usize, nodes[i].depth as usize);
        let ptr = std::rc::Rc::as_ptr(cfg) as usize;
        let mut lists = std::mem::take(&mut self.exit_lists);
        lists.clear();
        let from = classes.body_frontier.partition_point(|e| (e.0 as usize) < first);
        for (j, &(f, b, x, dead)) in classes.body_frontier[from..].iter().enumerate() {
            let f = f as usize;
            if f >= end {
                break;
            }
            let d = nodes[f].depth as usize;
            if !dead || d == k + 1 || Self::body_reads(cfg, b, x) {
                let key = (ptr, if d > k + 1 { b } else { START_LEVEL }, classes.frontier_shape[from + j]);
                match self.front_memo.get(&key) {
                    Some(&l) => lists.push((f, l)),
                    None => {
                        self.exit_lists = lists;
                        return false;
                    }
                }
            }
        }
        if has_token {
            self.record(i, cost);
        }
        bump(&self.comp.stats.body_shortcuts);
        bump(&self.comp.stats.exit_listings);
        self.list_slice(cfg, first, end);
        for &(f, l) in &lists {
            self.list_front(f, l);
        }
        self.exit_lists = lists;
        true
    }

    /// Lists the allowed slice tokens of nodes `first..end` by their body state's cost in `cfg`.
    fn list_slice(&mut self, cfg: &BodyCfg, first: usize, end: usize) {
        let classes = self.classes;
        for (b, toks) in classes.body_ends.iter().enumerate().skip(1) {
            let c = cfg.cost[b];
            if self.keeps(c) {
                let from = toks.partition_point(|e| (e.0 as usize) < first);
                for &(_, t) in toks[from..].iter().take_while(|e| (e.0 as usize) < end) {
                    if self.mask.get(t as usize) {
                        self.out.push((c, t));
                    }
                }
                self.capped |= self.out.len() > self.cap;
            }
        }
    }

    /// Whether [`Walk::record`] lists tokens of cost `cost`.
    #[inline]
    fn keeps(&self, cost: u32) -> bool {
        match self.mode {
            Mode::Exact => cost != self.now,
            Mode::Limit { limit, side: Side::Fit } => cost > limit,
            Mode::Limit { limit, side: Side::Over } => cost <= limit,
        }
    }

    /// Over walks, from the chart's last row when it costs more than the limit: the byte classes
    /// outside which every token of at most `depth` bytes costs more than the limit too
    /// (`u64::MAX` when unknown). Found by a search over *configurations* `(state, U, return)`
    /// standing for every item a byte string may lead to, each costing `dist + U`: the row's
    /// items (`U` from the row tables, returning to their origin rows), their byte steps, and
    /// the closure of those (a final state returns to the items of its origin row that predict
    /// its rule, or to the predicting configuration; a rule edge predicts with a return).
    /// Predicting and completing never cost less (`dist` holds over rule edges, and `U` is the
    /// least over the predicting items), so only a byte step can reach the limit: the classes of
    /// those steps are the exits, and a token with none of them leads only to items above the
    /// limit. Configurations met after fewer bytes stand for later ones (more bytes left).
    /// PERF: a bounded `.*` in a pattern is a chain of rules (`(str.re_1 str.re_k)?`) whose items
    /// have rule edges, so over walks one below `C(now)` read every token on the chart (~260k
    /// trie nodes, ~120k Earley rows per fill on Llama 3): only a quote lowers `C` there.
    fn over_exits(&mut self, rows: &RowCosts, chart: &Chart, depth: u32) -> OverLevel {
        let Mode::Limit { limit, side: Side::Over } = self.mode else { return OverLevel::NONE };
        let (a, comp) = (self.a, self.comp);
        if !comp.mergeable || a.rec_budgets().is_some() || rows.cost(chart) <= limit {
            return OverLevel::NONE;
        }
        let depth = depth.min(OVER_DEPTH);
        let key = (chart.num_rows(), chart.last_signature(), depth);
        if let Some(&set) = self.over_memo.get(&key) {
            return OverLevel { set, m: 0, path: 0 };
        }
        // A configuration's return: a chart row's index, or `FRAME | i` for `frames[i]`.
        const FRAME: u32 = 1 << 31;
        let cost = |s: StateId, u: u32| comp.dist(s).saturating_add(u).min(INF);
        let r = chart.last_row_index();
        let mut seen: std::collections::HashSet<(u32, u32, u32), crate::fasthash::FastState> =
            std::collections::HashSet::default();
        let mut frames: Vec<(StateId, u32, u32)> = Vec::new();
        let mut frame_of: FastMap<(u32, u32, u32), u32> = FastMap::default();
        let mut layer: Vec<(StateId, u32, u32)> = Vec::new();
        for it in chart.row(r) {
            let c = (it.state, rows.item_u(a, r, it), it.origin);
            if seen.insert((c.0 .0, c.1, c.2)) {
                layer.push(c);
            }
        }
        // `cum[n]`: the exits of tokens of at most `n` bytes.
        let mut cum: Vec<u64> = vec![0];
        let mut exits = 0u64;
        let mut next: Vec<(StateId, u32, u32)> = Vec::new();
        for j in 1..=depth {
            // With descent, a configuration more than the bytes left above the limit stays above.
            let reach = |c: (StateId, u32, u32)| !comp.descent || cost(c.0, c.1) <= limit.saturating_add(depth - j);
            next.clear();
            for &(s, u, ret) in &layer {
                for e in a.byte_edges(s) {
                    let bits = class_bits(e.lo, e.hi);
                    if cost(e.target, u) <= limit {
                        exits |= bits;
                    } else if bits & !exits != 0 && reach((e.target, u, ret)) && seen.insert((e.target.0, u, ret)) {
                        next.push((e.target, u, ret));
                    }
                }
            }
            // The closure of the configurations the bytes reached. `None`: a configuration at
            // most the limit without a byte (none is: see above), or too many.
            let closed = 'closure: {
                let mut w = 0;
                while w < next.len() {
                    let (s, u, ret) = next[w];
                    w += 1;
                    if seen.len() > MAX_OVER_CONFIGS {
                        break 'closure false;
                    }
                    let st = a.state(s);
                    let mut add = |c: (StateId, u32, u32), next: &mut Vec<(StateId, u32, u32)>| {
                        if cost(c.0, c.1) <= limit {
                            return false;
                        }
                        if reach(c) && seen.insert((c.0 .0, c.1, c.2)) {
                            next.push(c);
                        }
                        true
                    };
                    if st.is_final {
                        if ret & FRAME != 0 {
                            let f = frames[(ret & !FRAME) as usize];
                            if !add(f, &mut next) {
                                break 'closure false;
                            }
                        } else {
                            let o = ret as usize;
                            for p in chart.row(o) {
                                for &(x, m) in a.rule_edges(p.state) {
                                    if x == st.rule && !add((m, rows.item_u(a, o, p), p.origin), &mut next) {
                                        break 'closure false;
                                    }
                                }
                            }
                        }
                    }
                    for &(x, m) in a.rule_edges(s) {
                        let n = frames.len() as u32;
                        let f = *frame_of.entry((m.0, u, ret)).or_insert(n);
                        if f == n {
                            frames.push((m, u, ret));
                        }
                        let c = (a.rule_start(x), comp.dist(m).saturating_add(u).min(INF), FRAME | f);
                        if !add(c, &mut next) {
                            break 'closure false;
                        }
                    }
                }
                true
            };
            if !closed {
                break;
            }
            cum.push(exits);
            if next.is_empty() {
                // Every longer token ends in dead paths or off the search: the same exits.
                cum.resize(depth as usize + 1, exits);
                break;
            }
            if exits == u64::MAX {
                break;
            }
            std::mem::swap(&mut layer, &mut next);
        }
        let set = if cum.len() > 1 {
            self.over_sets.push(cum);
            (self.over_sets.len() - 1) as u32
        } else {
            u32::MAX
        };
        self.over_memo.insert(key, set);
        OverLevel { set, m: 0, path: 0 }
    }

    /// Whether level `o` places every token below a node of `below` classes (at most `n` bytes
    /// after `o`'s row, the path to the node included) above the limit.
    #[inline]
    fn over_skips(&self, o: OverLevel, below: u64, n: u32) -> bool {
        o.set != u32::MAX && self.over_sets[o.set as usize].get(n as usize).is_some_and(|&x| (below | o.path) & x == 0)
    }

    /// The [`ExitLevelKey`] of node `i`'s byte read on the chart from the level `levels[d - 1]`
    /// (plain items `lo..hi` when `plain`, else the chart's last row, of `rows` rows), in limit
    /// walks where the node's subtree may be skipped as a whole (`inside`: outside second passes,
    /// or within a deferred subtree).
    fn exit_level_key(&self, chart: &Chart, rows: usize, plain: Option<(usize, usize)>, i: usize) -> ExitLevelKey {
        let items = plain.map_or(0, |(lo, hi)| seq_hash(self.items[lo..hi].iter().map(|e| item_word(&e.item))));
        (rows, chart.row_signature(rows - 1), items, self.trie.nodes[i].byte, self.depth_below(i))
    }

    /// Whether a token of at most `len` more bytes, in the classes `below`, keeps one of the
    /// plain items `lo..hi` (whose stays' classes are `stay` together) in its stay home.
    /// PERF: most levels' items keep to no stay home (over walks' never do), or not for the
    /// classes below most nodes: trying each item's [`Stay`] at every node the exits did not
    /// skip was ~1.7% of the budgeted instructions of the replay's 0.3-0.6 ms band.
    #[inline]
    fn stays_keep(&mut self, lo: usize, hi: usize, stay: u64, below: u64, len: u32) -> bool {
        if below & !stay != 0 {
            self.stay_misses += 1;
            return false;
        }
        self.items[lo..hi].iter().any(|e| e.stay.keeps(below, len))
    }

    /// Keeps the [`ExitLevel`] of level `l` (the chart's last row's, just pushed) of cost
    /// `cost` under `key`, unless one is kept there.
    fn put_exit_level(&mut self, key: ExitLevelKey, l: Level, cost: u32, over: OverLevel) {
        let std::collections::hash_map::Entry::Vacant(v) = self.exit_levels.entry(key) else { return };
        let start = self.exit_stays.len();
        let plain = match l {
            // No item keeps a token in its stay home when `exits.stay` is empty (a node's
            // `below` holds its own byte's class): no stays kept.
            Level::Plain { exits, .. } if exits.stay == 0 => Some((exits, start as u32, start as u32)),
            Level::Plain { lo, hi, exits, .. } => {
                self.exit_stays.extend(self.items[lo..hi].iter().map(|e| e.stay));
                Some((exits, start as u32, self.exit_stays.len() as u32))
            }
            Level::Chart { .. } => None,
        };
        v.insert(Some(ExitLevel { cost, plain, over }));
    }

    /// Whether the walk, at level `lv` after trie node `i`, would skip (or defer) every child
    /// of `i` by the checks of its node loop (char stays, descent with `descent_limit`, the
    /// plain level's exits and stays), in that order; if so, makes the deferrals those checks
    /// make. Invariant: the subtree's tokens below `i` are then on the side the walk does not
    /// list, or deferred, exactly as the node loop would leave them.
    fn children_skip(&mut self, i: usize, lv: &ExitLevel, descent_limit: Option<u32>) -> bool {
        let (nodes, classes) = (&self.trie.nodes, self.classes);
        let (end, dc) = (nodes[i].subtree_end as usize, nodes[i].depth + 1);
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        let mut c = i + 1;
        let mut all = true;
        while c < end {
            let h = classes.hot[c];
            let next = nodes[c].subtree_end as usize;
            if h.utf8 && self.root_chars.iter().any(|st| st.keeps(h.chars, h.reach))
                || self.over_skips(lv.over, h.below, (h.reach + 1).saturating_sub(dc))
            {
                c = next;
                continue;
            }
            if let Some(limit) = descent_limit {
                let least = (h.reach != 0).then(|| lv.cost.saturating_sub(h.reach + 1 - dc));
                if least.is_none_or(|least| least > limit) {
                    if let (Some(least), Mode::Limit { side: Side::Fit, .. }) = (least, self.mode) {
                        let below =
                            &self.trie.tokens[self.trie.first_token[c] as usize..self.trie.first_token[next] as usize];
                        let allowed = below.iter().filter(|&&t| self.mask.get(t as usize)).count();
                        if allowed > 0 {
                            pending.push(Deferred { node: c as u32, least, tokens: allowed as u32 });
                        }
                    }
                    c = next;
                    continue;
                }
            }
            let skips = lv.plain.is_some_and(|(ex, lo, hi)| {
                let (below, len) = (h.below, h.reach.saturating_sub(dc - 1));
                below & ex.hard == 0 && h.ends & ex.soft == 0
                    || below & ex.home == 0
                    || below & !ex.stay == 0
                        && self.exit_stays[lo as usize..hi as usize].iter().any(|st| st.keeps(below, len))
            });
            if !skips {
                all = false;
                break;
            }
            c = next;
        }
        self.pending = pending;
        all
    }

    /// Makes the deferrals of the last [`Walk::children_skip`] that answered true, as the node
    /// loop does (it stops at the one that caps the walk).
    fn commit_pending(&mut self) {
        for k in 0..self.pending.len() {
            let f = self.pending[k];
            self.deferred.push(f);
            self.deferred_tokens += f.tokens as usize;
            if self.out.len() + self.deferred_tokens > self.cap
                || self.deferred_tokens > self.cap / DEFERRED_CAP_DIVISOR
            {
                bump(&self.comp.stats.deferred_caps);
                self.capped = true;
                return;
            }
        }
    }

    /// Takes node `i` (reading its byte on the chart, with `has_token` its tokens to list) from
    /// the [`Walk::exit_levels`] entry of `key` when there is one and it skips every child of
    /// `i`. Returns whether it did (the caller skips the subtree).
    fn take_exit_level(&mut self, key: ExitLevelKey, i: usize, has_token: bool, descent_limit: Option<u32>) -> bool {
        let Some(&hit) = self.exit_levels.get(&key) else { return false };
        let Some(lv) = hit else { return true };
        if !self.children_skip(i, &lv, descent_limit) {
            return false;
        }
        bump(&self.comp.stats.exit_level_skips);
        if has_token {
            self.record(i, lv.cost);
            if self.capped {
                return true;
            }
        }
        self.commit_pending();
        true
    }

    /// Walks the trie; a fit walk whose first pass deferred subtrees (see [`Walk::deferred`])
    /// and was not capped walks them in a second pass, from the root again.
    /// PERF: near the end of the budget in an object key, nearly every token starts an unknown
    /// key: a fit walk listed ~4k such tokens (~9k trie nodes) before its cap made it give way to
    /// an over walk, which skips them by descent; now it counts them without reading them.
    fn run(&mut self, rows: &mut RowCosts, chart: &mut Chart) -> Result<()> {
        let base = chart.num_rows();
        let mut res = self.walk(rows, chart, false);
        if res.is_ok() && !self.capped && !self.deferred.is_empty() {
            Self::pop_to(rows, chart, base);
            self.frames.clear();
            self.items.clear();
            res = self.walk(rows, chart, true);
        }
        Self::pop_to(rows, chart, base);
        res
    }

    /// One pass of the walk (`second`: the deferred subtrees' pass, which lists only their
    /// tokens and reads only them and the paths to them).
    fn walk(&mut self, rows: &mut RowCosts, chart: &mut Chart, second: bool) -> Result<()> {
        let (a, comp, trie) = (self.a, self.comp, self.trie);
        let root = self.level_of_row(rows, chart, trie.max_depth);
        if let (false, Mode::Limit { limit, side: Side::Fit }, Level::Plain { lo, hi, .. }) = (second, self.mode, root)
        {
            for e in &self.items[lo..hi] {
                let t = i64::from(limit) - i64::from(e.u);
                let own = i64::from(comp.dist(e.item.state));
                if own <= t {
                    for home in [t, own] {
                        let st = comp.char_stay(a, e.item.state, home, t, trie.max_depth);
                        if st.far | st.near != 0 && !self.root_chars.contains(&st) {
                            self.root_chars.push(st);
                        }
                    }
                }
            }
        }
        // PERF: where the root's plain exits leave most classes out, its regions and homes
        // already skip most subtrees: the search would cost more than it saves.
        let wide = match root {
            Level::Plain { exits, .. } => (exits.hard & exits.home).count_ones() >= 48,
            Level::Chart { .. } => true,
        };
        let over = if wide { self.over_exits(rows, chart, trie.max_depth) } else { OverLevel::NONE };
        self.frames.push(Frame { level: root, cost: rows.cost(chart), over });
        // Limit walks, when a byte lowers `C` by at most 1 (see `Completion::descent`): a subtree
        // whose tokens all cost more than the limit by [`Walk::descent_least`] is skipped by over
        // walks (their entries leave it out) and deferred by fit walks' first pass (their
        // second pass lists it).
        let descent_limit = match self.mode {
            Mode::Limit { limit, side } if comp.descent && !(second && side == Side::Fit) => Some(limit),
            _ => None,
        };
        // Second pass: the next deferred subtree, and the end of the one being read.
        let (mut next, mut inside_end) = (0, 0);
        let nodes = &trie.nodes;
        let classes = self.classes;
        // The body-slice shortcut (see `BodyCfg`): the slice tokens are listed by the cost of
        // their body state, and only the body frontier's subtrees are walked, each from the items
        // after its parent's path. It starts at the root or at a node of body text that leaves
        // for the chart (first passes of limit walks only).
        let mut active = if second { None } else { self.body_start(chart, root, None) };
        if self.capped {
            return Ok(());
        }
        let mut i = 0;
        while i < nodes.len() {
            if let Some(ab) = &mut active {
                if i >= ab.frontier_end {
                    self.finish_front();
                    // The next frontier node: a dead byte that no item reads ends every path
                    // (its subtree holds no allowed token).
                    let cfg = ab.cfg.clone();
                    let mut found = None;
                    while let Some(&(f, b, x, dead)) = classes.body_frontier.get(ab.frontier) {
                        if f as usize >= ab.end {
                            break;
                        }
                        ab.frontier += 1;
                        if !dead || nodes[f as usize].depth as usize == ab.k + 1 || Self::body_reads(&cfg, b, x) {
                            found = Some((f as usize, usize::from(b), classes.frontier_shape[ab.frontier - 1]));
                            break;
                        }
                    }
                    let Some((f, b, shape)) = found else {
                        i = ab.end;
                        active = None;
                        continue;
                    };
                    i = f;
                    ab.frontier_end = nodes[f].subtree_end as usize;
                    let d = nodes[f].depth as usize;
                    let from = if d > ab.k + 1 { b as u8 } else { START_LEVEL };
                    let key = (std::rc::Rc::as_ptr(&cfg) as usize, from, shape);
                    if let Some(&list) = self.front_memo.get(&key) {
                        self.list_front(f, list);
                        if self.capped {
                            return Ok(());
                        }
                        i = ab.frontier_end;
                        continue;
                    }
                    self.front_build = Some(FrontBuild {
                        key,
                        end: ab.frontier_end,
                        base: trie.first_token[f],
                        start: self.front_lists.len() as u32,
                        deferred: self.deferred.len(),
                    });
                    if d > ab.k + 1 {
                        // The levels above it: the items after its parent's body text.
                        self.frames.truncate(ab.k + 1);
                        self.items.truncate(ab.hi);
                        let lo = self.items.len();
                        for &(item, u, follow) in &cfg.items[b] {
                            let stay = Stay::default();
                            self.items.push(PlainItem { item, u, follow, exits: Exits::ALL, stay });
                        }
                        let l = Level::Plain {
                            lo,
                            hi: self.items.len(),
                            rows: ab.rows,
                            exits: Exits::ALL,
                            at_row: false,
                            others: NO_FOLLOW,
                        };
                        while self.frames.len() < d {
                            self.frames.push(Frame { level: l, cost: cfg.cost[b], over: OverLevel::NONE });
                        }
                    }
                }
            }
            let n = nodes[i];
            let d = n.depth as usize;
            self.frames.truncate(d);
            let skip = n.subtree_end as usize;
            if second && i >= inside_end {
                let Some(f) = self.deferred.get(next) else { break };
                let f = f.node as usize;
                if i == f {
                    inside_end = skip;
                    next += 1;
                } else if f >= skip {
                    // Read in the first pass, and no deferred subtree below.
                    i = skip;
                    continue;
                }
            }
            // The tokens of nodes above the deferred subtrees were listed in the first pass.
            let lists = !second || i < inside_end;
            let h = self.classes.hot[i];
            if let Level::Plain { lo, hi, exits, .. } = self.frames[d - 1].level {
                // The most bytes a token below reads after the level's.
                let (below, len) = (h.below, h.reach.saturating_sub(n.depth - 1));
                if self.mode != Mode::Exact
                    && (below & exits.hard == 0 && h.ends & exits.soft == 0
                        || below & exits.home == 0
                        || self.stays_keep(lo, hi, exits.stay, below, len))
                {
                    // Every token below stays in its items' regions (or homes), or keeps
                    // one fit-side item in its stay home: on the far side. (Tested first, as the
                    // cheapest skip; descent never defers such a subtree: its allowed tokens
                    // cannot cost more than a fit walk's limit.)
                    i = skip;
                    continue;
                }
            }
            if h.utf8 && {
                let (char_classes, len) = (h.chars, h.reach);
                self.root_chars.iter().any(|st| st.keeps(char_classes, len))
            } {
                // Every token below keeps a row item in its char stay home (or ends inside a
                // character read from it, in a state on the fit side): it fits.
                i = skip;
                continue;
            }
            let o = self.frames[d - 1].over;
            if self.over_skips(o, h.below, o.m + (h.reach + 1).saturating_sub(d as u32)) {
                // Over walks: every token below costs more than the limit.
                i = skip;
                continue;
            }
            if let Some(limit) = descent_limit {
                let least = self.descent_least(i, d);
                if least.is_none_or(|least| least > limit) {
                    if let (Some(least), Mode::Limit { side: Side::Fit, .. }) = (least, self.mode) {
                        let below = &trie.tokens[trie.first_token[i] as usize..trie.first_token[skip] as usize];
                        let allowed = below.iter().filter(|&&t| self.mask.get(t as usize)).count();
                        if allowed > 0 {
                            self.deferred.push(Deferred { node: i as u32, least, tokens: allowed as u32 });
                            self.deferred_tokens += allowed;
                            if self.out.len() + self.deferred_tokens > self.cap
                                || self.deferred_tokens > self.cap / DEFERRED_CAP_DIVISOR
                            {
                                bump(&self.comp.stats.deferred_caps);
                                self.capped = true;
                                return Ok(());
                            }
                        }
                    }
                    i = skip;
                    continue;
                }
            }
            // Whether the node ends a token the mask allows (taken past the skips: most visits
            // skip their subtree).
            // A frontier subtree read for `front_memo` keeps its tokens whatever the mask.
            let has_token = |w: &Self| {
                lists
                    && n.tok_end > n.tok_start
                    && (w.front_build.is_some() || w.trie.node_tokens(&n).iter().any(|&t| w.mask.get(t as usize)))
            };
            match self.frames[d - 1].level {
                Level::Chart { rows: nr } => {
                    let has_token = has_token(self);
                    Self::pop_to(rows, chart, nr);
                    let (ekey, listed) = self.list_from_exit_memo(chart, nr, i, active.is_some() || second, has_token);
                    if listed {
                        if self.capped {
                            return Ok(());
                        }
                        i = skip;
                        continue;
                    }
                    self.items.truncate(
                        self.frames
                            .iter()
                            .rev()
                            .find_map(|f| match f.level {
                                Level::Plain { hi, .. } => Some(hi),
                                Level::Chart { .. } => None,
                            })
                            .unwrap_or(0),
                    );
                    let lkey = (self.mode != Mode::Exact && lists && self.rows_read >= self.levels_after)
                        .then(|| self.exit_level_key(chart, nr, None, i));
                    if let Some(k) = lkey {
                        if self.take_exit_level(k, i, has_token, descent_limit) {
                            if self.capped {
                                return Ok(());
                            }
                            i = skip;
                            continue;
                        }
                    }
                    if !self.push_byte(chart, n.byte)? {
                        if let Some(k) = lkey {
                            self.exit_levels.insert(k, None);
                        }
                        i = skip;
                        continue;
                    }
                    rows.push(a, comp, chart);
                    bump(&comp.stats.walk_rows);
                    self.rows_read += 1;
                    if has_token {
                        let c = rows.cost(chart);
                        self.record(i, c);
                        if self.capped {
                            return Ok(());
                        }
                    }
                    let l = self.level_of_row(rows, chart, self.depth_below(i));
                    let o = self.frames[d - 1].over;
                    let over = OverLevel { m: o.m + 1, path: o.path | 1u64 << byte_class(n.byte), ..o };
                    self.frames.push(Frame { level: l, cost: rows.cost(chart), over });
                    if let Some(k) = lkey {
                        self.put_exit_level(k, l, rows.cost(chart), OverLevel::NONE);
                    }
                    if !second && active.is_none() && classes.body_state[i] == 0 {
                        active = self.body_start(chart, l, Some(i));
                        if self.capped {
                            return Ok(());
                        }
                    }
                    if let Some(ek) = ekey {
                        self.exit_memo.insert(ek, (rows.cost(chart), active.as_ref().map(|ab| ab.cfg.clone())));
                    }
                }
                Level::Plain { lo, hi, rows: nr, exits: _, at_row, others } => {
                    let has_token = has_token(self);
                    Self::pop_to(rows, chart, nr);
                    self.items.truncate(hi);
                    let mut exit = others != NO_FOLLOW && has_byte(&self.follows[others as usize], n.byte);
                    for j in lo..hi {
                        if exit {
                            break;
                        }
                        // PERF: the item's exits and stay are read only for a new item (the whole
                        // copy was ~1.6% of the walks' instructions).
                        let PlainItem { item: it, u, mut follow, .. } = self.items[j];
                        // At the row, its items with rule edges hold the completions.
                        if !at_row && a.state(it.state).is_final && follow == NO_FOLLOW {
                            follow = self.follow(chart, a.state(it.state).rule.index() as u32, it.origin);
                            self.items[j].follow = follow;
                        }
                        if !at_row && a.state(it.state).is_final && has_byte(&self.follows[follow as usize], n.byte) {
                            // The byte may be read after the item's rule ends.
                            exit = true;
                            break;
                        }
                        if let Some(q) = a.step(it.state, n.byte) {
                            if !self.plain(q) {
                                exit = true;
                                break;
                            }
                            let next = Item { state: q, ..it };
                            if !self.items[hi..].iter().any(|e| e.item == next) {
                                // The region of a state of the region is part of it, and so is
                                // the home of a home state (inside the stay home, one byte
                                // nearer its way out); a byte of `ex.home` may leave the home:
                                // `q` takes its own.
                                let (mut ex, mut stay) = (self.items[j].exits, self.items[j].stay.stepped());
                                if self.mode != Mode::Exact && 1u64 << byte_class(n.byte) & ex.home != 0 {
                                    let depth = self.depth_below(i);
                                    let (f, home, st) = self.item_home(chart, next, u, follow, depth);
                                    follow = f;
                                    ex.home = home;
                                    ex = ex.with_stay(st);
                                    stay = st;
                                }
                                self.items.push(PlainItem { item: next, u, follow, exits: ex, stay });
                            }
                        }
                    }
                    if exit {
                        // A path out of plain states: the subtree takes the chart, from a row
                        // holding the plain items (a plain row's exact content).
                        self.items.truncate(hi);
                        let lkey = (self.mode != Mode::Exact && lists && self.rows_read >= self.levels_after)
                            .then(|| self.exit_level_key(chart, nr, (!at_row).then_some((lo, hi)), i));
                        if let Some(k) = lkey {
                            if self.take_exit_level(k, i, has_token, descent_limit) {
                                if self.capped {
                                    return Ok(());
                                }
                                i = skip;
                                continue;
                            }
                        }
                        let busy = active.is_some() || second;
                        // Where `list_from_exit_memo` may list the node, its key from the items.
                        let pkey =
                            (!at_row && !busy && classes.body_state[i] == 0 && self.mode != Mode::Exact).then(|| {
                                let items = seq_hash(self.items[lo..hi].iter().map(|e| item_word(&e.item)));
                                (nr, chart.row_signature(nr - 1), items, n.byte)
                            });
                        if let Some(ek) = pkey.and_then(|k| self.plain_exits.get(&k).copied()) {
                            if let Some((c, Some(cfg))) = self.exit_memo.get(&ek).cloned() {
                                if self.list_exit(i, c, &cfg, has_token) {
                                    bump(&comp.stats.plain_exit_listings);
                                    if self.capped {
                                        return Ok(());
                                    }
                                    i = skip;
                                    continue;
                                }
                            }
                        }
                        if !at_row {
                            let mut row = std::mem::take(&mut self.seeds);
                            row.clear();
                            row.extend(self.items[lo..hi].iter().map(|e| e.item));
                            let pushed = if self.mode == Mode::Exact {
                                chart.push_items(a, &row)
                            } else {
                                chart.push_items_memo(a, &row, &mut self.closed)
                            };
                            self.seeds = row;
                            if !pushed? {
                                i = skip;
                                continue;
                            }
                            rows.push(a, comp, chart);
                            bump(&comp.stats.item_rows);
                        }
                        let (ekey, listed) = self.list_from_exit_memo(chart, chart.num_rows(), i, busy, has_token);
                        if let (Some(pk), Some(ek)) = (pkey, ekey) {
                            self.plain_exits.insert(pk, ek);
                        }
                        if listed {
                            if self.capped {
                                return Ok(());
                            }
                            i = skip;
                            continue;
                        }
                        if !self.push_byte(chart, n.byte)? {
                            if let Some(k) = lkey {
                                self.exit_levels.insert(k, None);
                            }
                            i = skip;
                            continue;
                        }
                        rows.push(a, comp, chart);
                        bump(&comp.stats.walk_rows);
                        self.rows_read += 1;
                        if has_token {
                            let c = rows.cost(chart);
                            self.record(i, c);
                            if self.capped {
                                return Ok(());
                            }
                        }
                        let l = self.level_of_row(rows, chart, self.depth_below(i));
                        let o = self.frames[d - 1].over;
                        let over = OverLevel { m: o.m + 1, path: o.path | 1u64 << byte_class(n.byte), ..o };
                        self.frames.push(Frame { level: l, cost: rows.cost(chart), over });
                        if let Some(k) = lkey {
                            self.put_exit_level(k, l, rows.cost(chart), OverLevel::NONE);
                        }
                        if !second && active.is_none() && classes.body_state[i] == 0 {
                            active = self.body_start(chart, l, Some(i));
                            if self.capped {
                                return Ok(());
                            }
                        }
                        if let Some(ek) = ekey {
                            self.exit_memo.insert(ek, (rows.cost(chart), active.as_ref().map(|ab| ab.cfg.clone())));
                        }
                        i += 1;
                        continue;
                    }
                    if self.items.len() == hi {
                        i = skip;
                        continue;
                    }
                    let c =
                        self.items[hi..].iter().map(|e| (comp.dist(e.item.state) + e.u).min(INF)).min().unwrap_or(INF);
                    if has_token {
                        self.record(i, c);
                        if self.capped {
                            return Ok(());
                        }
                    }
                    // The parent level's search holds, one byte (of the path) further.
                    let o = self.frames[d - 1].over;
                    let over = OverLevel { m: o.m + 1, path: o.path | 1u64 << byte_class(n.byte), ..o };
                    // The surviving items' exits.
                    let exits = self.items[hi..].iter().fold(Exits::default(), |m, e| m | e.exits);
                    let level = Level::Plain {
                        lo: hi,
                        hi: self.items.len(),
                        rows: nr,
                        exits,
                        at_row: false,
                        others: NO_FOLLOW,
                    };
                    self.frames.push(Frame { level, cost: c, over });
                }
            }
            i += 1;
        }
        Ok(())
    }
}

/// A matcher's token budget: the limit, the grammar's [`Completion`] (with the token costs
/// memoized by chart signature, shared by the grammar's matchers) and the row tables of the
/// matcher's chart.
#[derive(Clone, Debug)]
pub struct Budget {
    pub max_tokens: usize,
    comp: Arc<Completion>,
    rows: RowCosts,
    /// Tests: walk every token (see [`Budget::set_exact_walks`]).
    exact_walks: bool,
    /// [`FIT_LIST_CAP`], or what a test set (see [`Budget::set_fit_list_cap`]).
    fit_cap: usize,
}

impl Budget {
    /// A budget of `max_tokens` accepted tokens (the stop token included) for a matcher whose
    /// chart is `chart`. Errors when `max_tokens` is below the shortest completion plus the stop
    /// token, naming that length.
    pub fn new(
        a: &Automata,
        comp: Arc<Completion>,
        chart: &Chart,
        accepted: usize,
        max_tokens: usize,
    ) -> Result<Budget> {
        let mut b = Budget { max_tokens, comp, rows: RowCosts::default(), exact_walks: false, fit_cap: FIT_LIST_CAP };
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

    /// The chart was rolled back (or reset) to `rows` rows: forget the row tables past them.
    pub fn rolled_back(&mut self, rows: usize) {
        self.rows.truncate(rows);
    }

    /// The shortest completion of `chart`'s last row in single-byte tokens (stop token excluded).
    pub fn shortest(&mut self, a: &Automata, chart: &Chart) -> u32 {
        self.rows.sync(a, &self.comp, chart);
        self.rows.cost(chart)
    }

    /// A walk in `mode` (see [`Walk`]); fit walks stop at `fit_cap` tokens.
    fn walk(
        &mut self,
        a: &Automata,
        trie: &TokenTrie,
        chart: &mut Chart,
        mask: &Bitset,
        mode: Mode,
        now: u32,
    ) -> Result<Walked> {
        let comp: &Completion = &self.comp;
        let classes = comp.classes.get_or_init(|| SubtreeClasses::of(&comp.vocab, trie));
        let mut maps = WALK_MAPS.with(std::cell::Cell::take).unwrap_or_default();
        maps.clear();
        maps.closed.clear(chart);
        maps.closed.hits = 0;
        let mut w = Walk {
            a,
            comp,
            trie,
            mask,
            classes,
            mode,
            now,
            items: maps.items,
            follows: maps.follows,
            follow_classes: maps.follow_classes,
            regions: maps.regions,
            region_slots: maps.region_slots,
            follow_of: maps.follow_of,
            frames: maps.frames,
            over_sets: Vec::new(),
            over_memo: maps.over_memo,
            seeds: Vec::new(),
            out: Vec::new(),
            cap: if matches!(mode, Mode::Limit { side: Side::Fit, .. }) { self.fit_cap } else { usize::MAX },
            capped: false,
            deferred: Vec::new(),
            deferred_tokens: 0,
            root_chars: Vec::new(),
            body_memo: maps.body_memo,
            front_memo: maps.front_memo,
            front_lists: maps.front_lists,
            front_build: None,
            exit_memo: maps.exit_memo,
            exit_lists: Vec::new(),
            plain_exits: maps.plain_exits,
            exit_levels: maps.exit_levels,
            exit_stays: maps.exit_stays,
            row_levels: maps.row_levels,
            row_level_items: maps.row_level_items,
            closed: maps.closed,
            pending: Vec::new(),
            rows_read: 0,
            stay_misses: 0,
            levels_after: EXIT_LEVELS_AFTER.get(),
        };
        let res = w.run(&mut self.rows, chart);
        comp.stats.closed_row_hits.fetch_add(w.closed.hits, Ordering::Relaxed);
        comp.stats.stay_union_misses.fetch_add(w.stay_misses, Ordering::Relaxed);
        let maps = WalkMaps {
            regions: w.regions,
            region_slots: w.region_slots,
            follow_of: w.follow_of,
            over_memo: w.over_memo,
            body_memo: w.body_memo,
            front_memo: w.front_memo,
            front_lists: w.front_lists,
            exit_memo: w.exit_memo,
            plain_exits: w.plain_exits,
            exit_levels: w.exit_levels,
            exit_stays: w.exit_stays,
            row_levels: w.row_levels,
            row_level_items: w.row_level_items,
            closed: w.closed,
            items: w.items,
            follows: w.follows,
            follow_classes: w.follow_classes,
            frames: w.frames,
        };
        if maps.entries() <= MAX_KEPT_WALK_ENTRIES {
            WALK_MAPS.with(|m| m.set(Some(maps)));
        }
        res?;
        Ok(Walked { out: w.out, capped: w.capped, deferred: w.deferred })
    }

    /// The shortest completion after every token of `mask` allowed from `chart`'s state, as
    /// `(cost, token)` for the tokens whose cost is not `C(now)`, by decreasing cost. For tests
    /// and benchmarks; the mask path uses the memoized form.
    pub fn token_costs(
        &mut self,
        a: &Automata,
        trie: &TokenTrie,
        chart: &mut Chart,
        mask: &Bitset,
    ) -> Result<Vec<(u32, u32)>> {
        let now = self.shortest(a, chart);
        let mut out = self.walk(a, trie, chart, mask, Mode::Exact, now)?.out;
        out.sort_unstable_by(|x, y| y.cmp(x));
        Ok(out)
    }

    /// Walk every token, not only those a limit walk cannot place (for tests of the skips).
    #[doc(hidden)]
    pub fn set_exact_walks(&mut self, on: bool) {
        self.exact_walks = on;
    }

    /// Sets how many tokens a fit walk lists before it gives way to an over walk or, far from
    /// the limit, to a fit walk at the limit (for tests of both: at 0 a walk that lists a
    /// token gives way).
    #[doc(hidden)]
    pub fn set_fit_list_cap(&mut self, cap: usize) {
        self.fit_cap = cap;
    }

    /// For a last row of one leaf item: the item's state and a key of what else its cost depends
    /// on (rule, origin row, lookahead), for [`Completion::covers`]. `None` for other rows and
    /// grammars whose rows are not costed by their items' byte paths alone.
    fn cover_key(&self, a: &Automata, chart: &Chart) -> Option<(StateId, u128)> {
        use crate::earley::mix128;
        let r = chart.last_row_index();
        let [it] = chart.row(r) else {
            return None;
        };
        let o = it.origin as usize;
        if !self.comp.mergeable || !self.comp.leaf[it.state.0 as usize] || o == r {
            return None;
        }
        let la = u128::from(it.la_origin) << 32 | u128::from(it.la);
        let rule = a.state(it.state).rule.index() as u128;
        Some((it.state, mix128(chart.row_signature(o) ^ mix128(la << 64 | rule))))
    }

    /// What decides whether a fit walk near `now` from the chart's last row is capped, origins
    /// left out: its items' states, lookahead and `U - now`. Rows at the same place in another
    /// object or array element (`{"` of each element) key alike.
    fn near_cap_key(&self, a: &Automata, chart: &Chart, now: u32) -> u64 {
        let r = chart.last_row_index();
        let mut h = crate::fasthash::FastState.build_hasher();
        for it in chart.row(r) {
            (it.state.0, it.la, self.rows.item_u(a, r, it).wrapping_sub(now)).hash(&mut h);
        }
        h.finish()
    }

    /// [`Budget::near_cap_key`] with rules for states: the distinct `(rule, lookahead, U - now)`
    /// of the last row's items, `U - now` clamped above [`FIT_SLACK`].
    fn near_rule_key(&self, a: &Automata, chart: &Chart, now: u32) -> u64 {
        let r = chart.last_row_index();
        let mut v: Vec<(u32, u32, u32)> = chart
            .row(r)
            .iter()
            .map(|it| {
                let u = self.rows.item_u(a, r, it).saturating_sub(now).min(FIT_SLACK + 1);
                (a.state(it.state).rule.index() as u32, it.la, u)
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        crate::fasthash::FastState.hash_one(&v)
    }

    /// A new memo entry for the chart state `now` that answers `limit` (see [`Entry`]);
    /// `near_capped`: an earlier fit walk of the state near `now` was capped (see
    /// [`FIT_LIST_CAP`]), so the walk starts with the one that follows it.
    #[allow(clippy::too_many_arguments)]
    fn walk_entry(
        &mut self,
        a: &Automata,
        trie: &TokenTrie,
        chart: &mut Chart,
        mask: &Bitset,
        now: u32,
        limit: u32,
        near_capped: bool,
    ) -> Result<Entry> {
        if self.exact_walks {
            let costs = Exact::new(self.walk(a, trie, chart, mask, Mode::Exact, now)?.out, now);
            let top = costs.over.first().map_or(now, |e| e.0);
            return Ok(Entry {
                now,
                bound: top,
                costs,
                over_from: 0,
                under_to: now.checked_sub(1),
                near_capped: false,
            });
        }
        let mut capped = near_capped;
        LAST_WALK.set((limit.saturating_sub(now) as usize) << 8);
        let note = |bit: usize| LAST_WALK.set(LAST_WALK.get() | bit);
        if let Some(d) = limit.checked_sub(now) {
            // PERF: in object keys near the end of the budget, a capped fit walk (~9k trie nodes
            // to list the cap) was ~40% of the limit walks' work; rows of an equal key cap alike.
            let key = self.near_cap_key(a, chart, now);
            let slack = d.min(FIT_SLACK);
            if !capped && self.comp.near_cap(key).is_some_and(|s| slack <= s) {
                bump(&self.comp.stats.near_cap_skips);
                capped = true;
            }
            // PERF: 1,090 of 1,376 capped fit walks of the replay traces had a row key never
            // seen capped (each key start of an object is a state of its own); by rules, ~900
            // were predicted, ~10 wrongly.
            let rule_key = (!capped).then(|| self.near_rule_key(a, chart, now));
            if rule_key.is_some_and(|k| self.comp.near_rule_capped(k, slack)) {
                bump(&self.comp.stats.near_rule_skips);
                capped = true;
            }
            // A fit walk at a lower limit answers every limit above it: walk at most
            // `FIT_SLACK` above `now`, so that later steps (lower limits) find it. If it lists
            // more than `fit_cap` tokens: near `now`, an over walk at the limit takes its place;
            // farther above (where an over walk would list most tokens, and its entry filter
            // them at every later step), a fit walk at the limit.
            let fit = |l: u32| Mode::Limit { limit: l, side: Side::Fit };
            let l = now + d.min(FIT_SLACK);
            let mut walked = None;
            let mut far = d > FIT_SLACK;
            if !capped {
                let Walked { out, capped: c, deferred } = self.walk(a, trie, chart, mask, fit(l), now)?;
                note(WALK_FIT_NEAR | if c { WALK_FIT_CAPPED } else { 0 });
                capped = c;
                if c {
                    self.comp.put_near_cap(key, slack);
                }
                if let Some(k) = rule_key {
                    self.comp.put_near_rule(k, slack, c);
                }
                // A capped list samples the costs: when most of it is above the limit, so are
                // most tokens, and an over walk lists fewer (a deferred subtree counts as above
                // when its least cost is).
                let above = out.iter().filter(|e| e.0 > limit).count()
                    + deferred.iter().filter(|e| e.least > limit).map(|e| e.tokens as usize).sum::<usize>();
                far &= 2 * above <= out.len() + deferred.iter().map(|e| e.tokens as usize).sum::<usize>();
                walked = (!c).then_some((out, l));
            }
            if walked.is_none() && far {
                let Walked { out, capped: c, .. } = self.walk(a, trie, chart, mask, fit(limit), now)?;
                note(WALK_FIT_LIMIT);
                walked = (!c).then_some((out, limit));
            }
            if let Some((out, l)) = walked {
                // Skipped tokens cost at most the limit.
                let costs = Exact::new(out, now);
                let top = costs.over.first().map_or(now, |e| e.0);
                return Ok(Entry { now, bound: top.max(l), costs, over_from: l, under_to: None, near_capped: capped });
            }
        }
        // Skipped tokens cost more than the limit; those listed at most the limit.
        let over = Mode::Limit { limit, side: Side::Over };
        let out = self.walk(a, trie, chart, mask, over, now)?.out;
        note(WALK_OVER);
        Ok(Entry {
            now,
            bound: INF,
            costs: Exact::new(out, INF),
            over_from: INF,
            under_to: Some(limit),
            near_capped: capped,
        })
    }

    /// Clears from `mask` the tokens after which the grammar cannot be completed and the stop
    /// token accepted within the budget, `accepted` tokens having been accepted. Stop tokens
    /// (`stop`) stay as they are while a token remains.
    ///
    /// PERF: a chart state is costed by a limit walk, which reads only the trie subtrees whose
    /// tokens may fall on the other side of the limit than their items' regions place them (in
    /// string contents, those that may close the string), and memoized per grammar with the
    /// limits its lists answer for.
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
        // PERF: far from the end of the budget of a grammar without recursion, no row costs
        // more than the limit, so no token does: the walk (new states, ~0.1-1 ms) lists nothing.
        if limit >= self.comp.ceiling {
            CEILING_SKIPS.set(CEILING_SKIPS.get() + 1);
            return Ok(());
        }
        let sig = chart.last_signature();
        if self.comp.memo_bound(sig).is_some_and(|b| limit >= b) {
            return Ok(());
        }
        // PERF: each position of a counted string within the longest token of its bound
        // (sp_97's `maxLength: 100`) is a row of its own, and far from the limit its walk (~1 ms
        // on Llama 3) removed nothing; an earlier position's bound holds for it.
        let cover = self.cover_key(a, chart);
        if let Some((y, key)) = cover {
            let depth = trie.max_depth;
            if self.comp.covered(key).iter().any(|&(x, b)| limit >= b && self.comp.covers(a, y, StateId(x), depth)) {
                bump(&self.comp.stats.cover_hits);
                return Ok(());
            }
        }
        let now = self.shortest(a, chart);
        // Fit lists answer limits from `now` up, over lists those below their walk's limit.
        let by_over = |e: &Entry| limit >= now && (limit >= e.bound || limit >= e.over_from);
        let answers = |e: &Entry| by_over(e) || e.under_to.is_some_and(|u| limit <= u);
        let entry = match self.comp.memo_get(sig) {
            Some(e) if answers(&e) => e,
            old => {
                // A row of equal merged key (another position of a counted repetition) may have
                // been costed: its entry holds for limits below the cap.
                let cap = self.max_tokens.min(INF as usize) as u32;
                let merged = if now < cap {
                    let r = chart.last_row_index();
                    let u: Vec<u32> = chart.row(r).iter().map(|it| self.rows.item_u(a, r, it)).collect();
                    self.comp.merged_signature(a, chart, &u, cap, trie.max_depth)
                } else {
                    None
                };
                if merged.is_some() {
                    bump(&self.comp.stats.merged_lookups);
                }
                match merged.and_then(|k| self.comp.memo_get(k)) {
                    // Not kept under `sig`: it holds for limits below the cap only.
                    Some(e) if e.now == now && answers(&e) => {
                        bump(&self.comp.stats.merged_hits);
                        e
                    }
                    _ => {
                        bump(if old.is_some() { &self.comp.stats.stale_walks } else { &self.comp.stats.fresh_walks });
                        let near_capped = old.is_some_and(|e| e.near_capped);
                        let e = self.walk_entry(a, trie, chart, mask, now, limit, near_capped)?;
                        if let Some((y, key)) = cover.filter(|_| e.bound < INF) {
                            self.comp.put_covered(key, y.0, e.bound);
                        }
                        let e = self.comp.memo_put(sig, e);
                        if let Some(k) = merged {
                            self.comp.memo_put_arc(k, e.clone());
                        }
                        e
                    }
                }
            }
        };
        if limit >= entry.bound {
            return Ok(());
        }
        let x = &entry.costs;
        debug_assert_eq!(entry.now, now);
        if by_over(&entry) {
            for &(c, t) in &x.over {
                if c <= limit {
                    break;
                }
                if !stop.contains(&t) {
                    mask.unset(t as usize);
                }
            }
        } else {
            // Only the listed tokens fit (below `now`: the budget was not kept to, or this is
            // the last step before a shortest completion). `under` is unordered: all of it is
            // filtered.
            if entry.under_to.is_some_and(|u| limit < u) {
                bump(&self.comp.stats.under_listings);
            }
            let keep: Vec<u32> = x
                .under
                .iter()
                .filter(|e| e.0 <= limit && mask.get(e.1 as usize))
                .map(|e| e.1)
                .chain(stop.iter().copied().filter(|&t| mask.get(t as usize)))
                .collect();
            mask.clear();
            for t in keep {
                mask.set(t as usize);
            }
        }
        Ok(())
    }
}

impl Budget {
    /// Whether [`Budget::restrict`] leaves the mask of chart state `sig` as it is, `accepted`
    /// tokens having been accepted, known from the grammar's [`Completion::ceiling`] or its
    /// memoized entry alone: every token the state allows costs at most the limit (the ceiling,
    /// or its entry's `bound`). At most one memo lookup, no row tables (they
    /// catch up at the next [`Budget::shortest`]), so a memoized mask is served as without a
    /// budget.
    pub fn leaves_mask(&self, sig: u128, accepted: usize) -> bool {
        let remaining = self.max_tokens.saturating_sub(accepted);
        let limit = (remaining.max(2) - 2).min(INF as usize) as u32;
        remaining >= 2 && (limit >= self.comp.ceiling || self.comp.memo_bound(sig).is_some_and(|b| limit >= b))
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The builtin JSON grammar compiled for a vocabulary of the 256 bytes and a stop token.
    fn byte_json() -> crate::matcher::CompiledGrammar {
        use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain([b"<stop>".to_vec()]).collect();
        let opts = VocabularyOptions { stop_token_ids: Some(vec![256]), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        crate::matcher::CompiledGrammar::new(&crate::builtin::builtin_json_grammar(), &vocab).unwrap()
    }

    #[test]
    fn the_class_table_holds_every_byte_class() {
        for b in 0..=255u8 {
            assert_eq!(byte_class(b), class_of(b), "{b:#x}");
        }
    }

    #[test]
    fn edge_classes_are_the_classes_of_every_byte_a_state_reads() {
        let g = byte_json();
        let (a, comp) = (g.automata(), g.completion());
        for s in 0..a.states().len() {
            let want = (0..=255u8)
                .filter(|&b| a.step(StateId(s as u32), b).is_some())
                .fold(0u64, |m, b| m | 1 << byte_class(b));
            assert_eq!(comp.edge_classes[s], want, "state {s}");
        }
    }

    #[test]
    fn regions_at_clamped_thresholds_equal_regions_at_every_threshold() {
        let g = byte_json();
        let (a, comp) = (g.automata(), g.completion());
        assert!(comp.top > 0);
        let mut clamped = 0;
        for s in (0..a.states().len() as u32).map(StateId).filter(|s| comp.leaf[s.0 as usize]) {
            for (side, depth, full) in [(Side::Fit, 4, true), (Side::Over, 4, true), (Side::Fit, 16, false)] {
                for t in -3..=comp.top + 3 {
                    let want = comp.region_fresh(a, s, side, t, depth, full);
                    assert_eq!(comp.region_fresh(a, s, side, comp.threshold(t), depth, full), want, "{s:?} {t}");
                    clamped += usize::from(comp.threshold(t) != t);
                }
            }
            for t in -3..=comp.top + 3 {
                for home in [t, i64::from(comp.dist(s))] {
                    let want = comp.char_stay_fresh(a, s, home, t, 8);
                    let (h, c) = (comp.threshold(home), comp.threshold(t));
                    assert_eq!(comp.char_stay_fresh(a, s, h, c, 8), want, "{s:?} {home} {t}");
                }
            }
        }
        assert!(clamped > 0);
    }

    #[test]
    fn memoized_stays_equal_fresh_stays_at_every_depth() {
        let g = byte_json();
        let (a, comp) = (g.automata(), g.completion());
        let mut differ = 0;
        for s in (0..a.states().len() as u32).map(StateId).filter(|s| comp.leaf[s.0 as usize]) {
            for depth in [1, 2, 8, 4, 16] {
                let want = comp.stay_fresh(a, s, depth);
                assert_eq!(comp.stay(a, s, depth), want, "{s:?} depth {depth}");
                differ += usize::from(want != comp.stay_fresh(a, s, 1));
            }
        }
        assert!(differ > 0);
    }

    #[test]
    fn state_sets_hold_what_a_hash_set_holds_across_resets_and_epoch_wraps() {
        let mut set = StateSet::default();
        let mut x: u32 = 12345;
        for round in 0..6 {
            if round == 3 {
                // The next reset wraps the epoch: every stale stamp must be forgotten.
                set.epoch = u32::MAX;
            }
            set.reset(64);
            let mut want = std::collections::HashMap::new();
            for _ in 0..200 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let q = (x >> 16) % 64;
                let new = want.len() as u32;
                let got = set.index(q, new);
                match want.get(&q) {
                    Some(&v) => assert_eq!(got, Ok(v), "round {round}, state {q}"),
                    None => {
                        assert_eq!(got, Err(new), "round {round}, state {q}");
                        want.insert(q, new);
                    }
                }
                assert!(!set.insert(q));
                assert_eq!(set.len, want.len());
            }
        }
    }

    #[test]
    fn class_bits_equal_the_classes_of_every_byte() {
        for lo in 0..=255u8 {
            for hi in lo..=255u8 {
                let want = (lo..=hi).fold(0u64, |m, b| m | (1u64 << byte_class(b)));
                assert_eq!(class_bits(lo, hi), want, "{lo:#x}..={hi:#x}");
            }
        }
    }

    #[test]
    fn costs_sorted_by_counting_keep_every_token_in_decreasing_cost() {
        let mut rng = crate::test_rng::XorShift(0x9E37_79B9_7F4A_7C15);
        let mut next = |n: u64| rng.below(n);
        // Narrow spans (counted), with and without `INF`, and wide ones (compared).
        for (len, span, inf) in [(0, 1, 0), (1, 1, 0), (2, 3, 0), (50, 5, 0), (300, 40, 3), (64, 1_000, 0), (20, 8, 20)]
        {
            for _ in 0..20 {
                let costs: Vec<(u32, u32)> = (0..len)
                    .map(|t| {
                        let c = if inf > 0 && next(inf) == 0 { INF } else { 7 + next(span) as u32 };
                        (c, t)
                    })
                    .collect();
                let got = by_decreasing_cost(costs.clone());
                assert!(got.windows(2).all(|w| w[0].0 >= w[1].0), "not by decreasing cost: {got:?}");
                let (mut got, mut want) = (got, costs);
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "len {len} span {span}");
            }
        }
    }

    /// A [`RuleTable`] holds the values lowered since its last reset, and its `touched` list
    /// names exactly the rules below [`INF`]: a reset that left a value would give the next
    /// row's rules the last row's `U`. With `reset` keeping the values it fails.
    #[test]
    fn rule_tables_hold_the_values_lowered_since_their_reset() {
        let mut u = RuleTable::default();
        u.reset(8);
        assert!(u.lower(3, 5));
        assert!(!u.lower(3, 7));
        assert!(u.lower(3, 2));
        assert!(!u.lower(5, INF));
        assert!(u.lower(0, 0));
        assert_eq!((u.get(0), u.get(3), u.get(5)), (0, 2, INF));
        let mut touched = u.touched.clone();
        touched.sort_unstable();
        assert_eq!(touched, vec![0, 3]);
        u.reset(16);
        assert!(u.touched.is_empty());
        assert!((0..16).all(|r| u.get(r) == INF), "a reset table holds no value");
        assert!(u.lower(12, 1));
        assert_eq!(u.touched, vec![12]);
    }
}
