//! Bounded cover: whether a kernel state reads every string-body text of at most the longest
//! token's length, for the body slice's shortcut where the unbounded cover search fails.
//!
//! Pipeline place: kernel classification ([`crate::mask`]'s walk), after
//! [`super::BodySlice::covers_or_misread`] refuses a state. That search asks for every body text,
//! of any length; a string counted by `maxLength` refuses text past its bound, so every position
//! of a `pattern` string with `maxLength` (`[a-zA-Z0-9_.-]+` within 3..255 characters: the
//! converter's product of the pattern's automaton and the length counter) walked the whole trie,
//! 5-10 ms each on Llama 3, though no token is longer than the bound left. Here the product is
//! searched only as deep as the longest token: a breadth-first search over (configuration set,
//! body state) pairs by characters, each pair explored once, at the depth it is first met (the
//! most characters left: reading every body text of `r` more characters implies it for fewer).
//!
//! Exactness: when every body text of at most `max_chars` characters (the trie's depth: no
//! token has more) is read from `s` by a configuration that stays inside the kernel's rule (its
//! stack above the rule's, a pushdown simulation without origins, as the walk reads it), every
//! slice token is accepted; every other token lies below a frontier node. No configuration
//! inside the rule reads a dead byte (checked on the way), so a dead node's tokens are read only
//! after the rule ends, as with the unbounded cover ([`Cover::may_end`]: the walk replays those
//! whose bytes FOLLOW may continue); the others (`"`, `\u`, `\/`) are walked for real.
//!
//! Short bounds: where the rule reads every body text of `L` characters but not every one of
//! `L + 1` (fewer than the longest token: a string that must still match its pattern within
//! its last `L + 1` characters, or that ends after them), the search says so
//! ([`Bounded::Within`]): the slice tokens of at most `L` characters are accepted, the tokens
//! past them lie below the boundary nodes after `L` characters
//! ([`super::BodySlice::boundary_nodes`], walked for real), and the others below frontier nodes
//! before them. Where every text of `L` characters ends the rule, nothing inside it reads on,
//! and no rule end comes before, the body closes there ([`Bounded::Closing`]): its tokens past
//! `L` characters are one group decided in the fill, as a `json_char{n}` block's last positions.
//! PERF (MaskBench, Llama 3): `[0-9a-fA-F]+` with exactly 12 characters walked the whole trie
//! at each of its first positions (`o10013`, 68-86 M instructions each); `[A-z]+` within 3..64
//! at its start and after `Asia` (`o23174`, ~134 M).
use super::body::body_step;
use super::{Body, Cover};
use crate::compiler::{Automata, StateId};
use crate::fasthash::FastMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Kernel states the bounded cover served, for tests.
static SERVED: AtomicUsize = AtomicUsize::new(0);
/// Kernel states served by a short bound ([`Bounded::Within`] or [`Bounded::Closing`]), and
/// those closing, for tests ([`note_short_bound`]).
static WITHIN: AtomicUsize = AtomicUsize::new(0);
static CLOSING: AtomicUsize = AtomicUsize::new(0);

/// How many kernel states [`bounded_cover`] served so far (all grammars), for tests.
#[doc(hidden)]
pub fn bounded_covers_served() -> usize {
    SERVED.load(Ordering::Relaxed)
}

/// How many kernel states a short bound ([`Bounded::Within`] or [`Bounded::Closing`]) served so
/// far (all grammars), and how many of them closing, for tests.
#[doc(hidden)]
pub fn bounded_within_found() -> (usize, usize) {
    (WITHIN.load(Ordering::Relaxed), CLOSING.load(Ordering::Relaxed))
}

/// Notes a kernel state served by a short bound (closing or not), for [`bounded_within_found`].
pub(crate) fn note_short_bound(closing: bool) {
    WITHIN.fetch_add(1, Ordering::Relaxed);
    if closing {
        CLOSING.fetch_add(1, Ordering::Relaxed);
    }
}

/// Most (set, body state) pairs one search explores; past it the state is walked.
const MAX_PAIRS: usize = 4096;
/// Most configurations in one set, and most pending returns in one configuration.
const MAX_CONFIGS: usize = 64;
const MAX_STACK: usize = 16;

/// A configuration: a state and its pending return states, as an interned stack
/// ([`Stacks`]): equal stacks have equal ids, so a set of configurations compares, hashes and
/// clones as plain pairs.
type Config = (StateId, u32);

/// The stacks of pending return states met in one search, interned: id 0 is the empty stack,
/// id `i > 0` is `nodes[i - 1]`: (the stack below, its innermost return state, its depth).
#[derive(Default)]
struct Stacks {
    nodes: Vec<(u32, StateId, u32)>,
    ids: FastMap<(u32, StateId), u32>,
}

impl Stacks {
    /// The stack `below` with `top` pushed as its innermost return; `None` past [`MAX_STACK`].
    fn push(&mut self, below: u32, top: StateId) -> Option<u32> {
        if self.depth(below) >= MAX_STACK as u32 {
            return None;
        }
        let depth = self.depth(below) + 1;
        let nodes = &mut self.nodes;
        Some(*self.ids.entry((below, top)).or_insert_with(|| {
            nodes.push((below, top, depth));
            nodes.len() as u32
        }))
    }

    /// The innermost return state of `stack` and the stack below it; `None` for the empty stack.
    fn pop(&self, stack: u32) -> Option<(StateId, u32)> {
        let &(below, top, _) = self.nodes.get(stack.checked_sub(1)? as usize)?;
        Some((top, below))
    }

    fn depth(&self, stack: u32) -> u32 {
        stack.checked_sub(1).map_or(0, |i| self.nodes[i as usize].2)
    }
}

/// What [`bounded_search`] found from a kernel state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bounded {
    /// Every body text of at most the longest token's length is read: the body slice's
    /// shortcut, as with the unbounded cover.
    Cover(Cover),
    /// Every body text of at most `chars` characters (`1 <= chars`, fewer than the longest
    /// token) is read, not every one of `chars + 1` (or the search stopped there): the slice
    /// tokens of at most `chars` characters are read, the nodes after `chars` characters of
    /// body text are walked for real, and so is the frontier before them (`cover` as for the
    /// unbounded cover, for the rule's ends inside those `chars` characters).
    Within { chars: u32, cover: Cover },
    /// [`Bounded::Within`] where the rule ends after every body text of exactly `chars`
    /// characters, inside none of them (no configuration left inside the rule) and nowhere
    /// before: a closing body, as [`crate::compiled::CompiledGrammar::closing_body`]'s (a
    /// counted string's last characters after its `pattern` matched, read through the nested
    /// rules of the pattern's automaton).
    Closing { chars: u32 },
}

/// Whether the rule of `s` reads, from `s`, every string-body text of at most `max_chars`
/// characters without ending (see the module doc): [`Bounded::Cover`] when it does, else
/// [`Bounded::Within`] with the most characters it reads every text of, `None` when that is 0.
///
/// Exactness of the characters: the search goes by layers, layer `k` the (set, body state 0)
/// pairs first met after `k` characters, each pair explored once; a set that refuses a body
/// character, reads a dead byte or passes the bounds while layer `k` is stepped makes `k` the
/// answer (every text of fewer characters was read by the layers before; a pair met again later
/// has fewer characters left, so its refusals showed at its first layer).
pub fn bounded_search(a: &Automata, s: StateId, max_chars: u32) -> Option<Bounded> {
    let mut pairs = Pairs::default();
    let mut exits: FastMap<StateId, Exit> = FastMap::default();
    let mut ends = Ends::default();
    let root = close(a, &mut pairs.stacks, vec![(s, 0)], &mut ends.any)?;
    let mut layer = Vec::new();
    let root = pairs.intern(root);
    pairs.add_pair(root, 0, 0, &mut layer)?;
    let mut chars = 0;
    // Whether the rule ended before the last layer (a closing body ends only at its end).
    let mut ended_before = ends.any;
    while chars < max_chars && !layer.is_empty() {
        // Rule ends while stepping a layer that fails are past `chars` characters: not counted.
        let mut step_ends = ends;
        match next_layer(a, &layer, chars, &mut pairs, &mut exits, &mut step_ends) {
            Some(next) => {
                ended_before = ends.any;
                (layer, ends) = (next, step_ends);
                chars += 1;
            }
            None if chars == 0 => return None,
            None => {
                let closed = layer.iter().all(|&(id, _)| pairs.sets[id as usize].is_empty());
                // Every text of `chars` characters leads to a pair of the layer only where no
                // pair was met again later (a loop back to an earlier set).
                if closed && ends.any && !ended_before && !ends.inside_char && !pairs.met_later {
                    return Some(Bounded::Closing { chars });
                }
                return Some(Bounded::Within { chars, cover: Cover { may_end: ends.any, walk_dead: false } });
            }
        }
    }
    SERVED.fetch_add(1, Ordering::Relaxed);
    Some(Bounded::Cover(Cover { may_end: ends.any, walk_dead: false }))
}

test_counter! {
    /// How many bounded searches [`bounded_short`] spared on this thread so far, for tests.
    pub fn bounded_searches_spared => SHORT
}

/// Whether [`bounded_search`] from a state, with `max_chars`, can only answer `None` or a
/// [`Bounded::Within`] with more than `most_nodes` nodes past its characters, given where the
/// state's own body cover search met its misread (`at`: a path of `at.steps` characters, each
/// pair of the body slice being at a character boundary, that the rule reads and is still inside
/// after, its next character misread). `nodes_past(k)`: the nodes past `k` characters, which
/// does not grow with `k`. Counts the searches it spares.
/// Why: both searches read the same configurations (the cover search's inert states read no body
/// byte, and a misread is the same refusal or dead byte for both), so the layer at which the
/// bounded search fails is at most `at.steps` (the path's pairs are met by then): it reads no
/// more characters than that (no [`Bounded::Cover`] below `max_chars`), and it is no closing body:
/// with no pair met at two depths, the path's pair after `c < at.steps` characters is in layer
/// `c` and reads on, and so does its pair after `at.steps` ([`MisreadAt::reads_on`]).
/// PERF: a string that must not hold `swagger` or start with `portal` (MaskBench o23177 t110)
/// failed its bounded search after 5 characters, 7.1 M instructions, for a short bound with most
/// of the trie past it.
pub fn bounded_short(
    at: super::cover::MisreadAt,
    max_chars: u32,
    nodes_past: impl Fn(u32) -> usize,
    most_nodes: usize,
) -> bool {
    let short = at.reads_on && at.steps < max_chars && nodes_past(at.steps) > most_nodes;
    SHORT.set(SHORT.get() + usize::from(short));
    short
}

/// Where the kernel's rule ended in a bounded search.
#[derive(Clone, Copy, Default)]
struct Ends {
    /// Somewhere.
    any: bool,
    /// Inside a character (after `\` or a UTF-8 lead byte).
    inside_char: bool,
}

/// [`bounded_search`]'s cover where it reads every body text up to `max_bytes` (the longest
/// token, in bytes: as many characters at most).
pub fn bounded_cover(a: &Automata, s: StateId, max_bytes: u32) -> Option<Cover> {
    match bounded_search(a, s, max_bytes)? {
        Bounded::Cover(cover) => Some(cover),
        Bounded::Within { .. } | Bounded::Closing { .. } => None,
    }
}

/// The boundary pairs one more character leads to from `layer` (sets after a character, body
/// state 0), each not met before; `None` where some set refuses a body character or reads a
/// dead byte on the way, or past the bounds. `ends` notes where the rule ends on the way.
fn next_layer(
    a: &Automata,
    layer: &[(u32, u8)],
    chars: u32,
    pairs: &mut Pairs,
    exits: &mut FastMap<StateId, Exit>,
    ends: &mut Ends,
) -> Option<Vec<(u32, u8)>> {
    // A rule end noted where the closed set is used (after a character, or inside one).
    let mut note = |ended: bool, nb: u8| {
        ends.any |= ended;
        ends.inside_char |= ended && nb != 0;
    };
    let mut next = Vec::new();
    // The pairs inside a character (after `\` or a UTF-8 lead byte) are stepped on the way.
    let mut work: Vec<(u32, u8)> = layer.to_vec();
    let mut stepped: Vec<Config> = Vec::new();
    while let Some((id, b)) = work.pop() {
        let set = pairs.sets[id as usize].clone();
        // At a boundary, the multi-byte characters as one step when every configuration
        // reads them alike (or none of them).
        let whole = if b == 0 { chars_at_once(a, &set, exits) } else { None };
        let mut x = 0u16;
        while x < 256 {
            let xb = x as u8;
            if whole.is_some() && xb >= 0x80 {
                break;
            }
            let end = run_end(a, &set, b, xb);
            let step = body_step(b, xb);
            let reads = set.iter().any(|(q, _)| a.byte_edges(*q).iter().any(|e| e.lo <= xb && xb <= e.hi));
            // A dead byte read inside the rule would put a token outside the slice inside it:
            // dead frontier nodes are walked only where the rule may have ended.
            if step == Body::Dead && reads {
                return None;
            }
            if let Body::To(nb) = step {
                stepped.clear();
                stepped.extend(set.iter().flat_map(|(q, st)| {
                    a.byte_edges(*q).iter().filter(move |e| e.lo <= xb && xb <= e.hi).map(move |e| (e.target, *st))
                }));
                if stepped.is_empty() {
                    return None;
                }
                let (closed, ended) = pairs.closed(a, &stepped)?;
                note(ended, nb);
                // Inside a character, `chars + 1` characters are begun too.
                pairs.add_pair(closed, nb, chars + 1, if nb == 0 { &mut next } else { &mut work })?;
            }
            x = u16::from(end) + 1;
        }
        if let Some(stepped) = whole {
            let mut ended = false;
            let closed = close(a, &mut pairs.stacks, stepped, &mut ended)?;
            let id = pairs.intern(closed);
            pairs.add_pair(id, 0, chars + 1, &mut next)?;
            note(ended, 0);
        }
    }
    Some(next)
}

/// The configuration sets met (interned) and the (set, body state) pairs explored, each with the
/// characters begun where it was first met.
#[derive(Default)]
struct Pairs {
    ids: FastMap<Vec<Config>, u32>,
    sets: Vec<Vec<Config>>,
    seen: FastMap<(u32, u8), u32>,
    /// The stacks the sets' configurations hold.
    stacks: Stacks,
    /// The closures met ([`close`]): the configurations a byte run steps to, and the id of their
    /// closed set with whether the kernel's rule ended on the way. Runs that step alike (most of
    /// a class, in every pair of a set) close once per search.
    closures: FastMap<Vec<Config>, (u32, bool)>,
    /// Some pair was met again after more characters than where it was first met: a layer then
    /// lists only the pairs first met there, not every pair its texts lead to.
    met_later: bool,
}

impl Pairs {
    /// The id of configuration set `set`.
    fn intern(&mut self, set: Vec<Config>) -> u32 {
        match self.ids.get(&set) {
            Some(&id) => id,
            None => {
                let id = self.sets.len() as u32;
                self.ids.insert(set.clone(), id);
                self.sets.push(set);
                id
            }
        }
    }

    /// The id of the closure of `stepped` and whether the kernel's rule ends on the way
    /// ([`close`], memoized); `None` past the bounds.
    fn closed(&mut self, a: &Automata, stepped: &[Config]) -> Option<(u32, bool)> {
        if let Some(&found) = self.closures.get(stepped) {
            return Some(found);
        }
        let mut ended = false;
        let closed = close(a, &mut self.stacks, stepped.to_vec(), &mut ended)?;
        let found = (self.intern(closed), ended);
        self.closures.insert(stepped.to_vec(), found);
        Some(found)
    }

    /// Pair `(id, b)`, met after `chars` characters begun, to explore (`next`) unless met
    /// before (an empty set refuses any further byte); `None` past [`MAX_PAIRS`].
    fn add_pair(&mut self, id: u32, b: u8, chars: u32, next: &mut Vec<(u32, u8)>) -> Option<()> {
        match self.seen.entry((id, b)) {
            std::collections::hash_map::Entry::Occupied(e) => self.met_later |= *e.get() < chars,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(chars);
                if self.seen.len() > MAX_PAIRS {
                    return None;
                }
                next.push((id, b));
            }
        }
        Some(())
    }
}

/// How a state reads the multi-byte characters: none of their bytes, all of them alike into one
/// state (through plain, non-final states: nothing ends or calls inside a character), or some
/// other way.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Exit {
    Reads(StateId),
    None,
    Other,
}

/// The configurations of `set` after any multi-byte character, when every configuration reads
/// them all alike or reads none of their bytes; `None` otherwise (or when none reads them).
fn chars_at_once(a: &Automata, set: &[Config], exits: &mut FastMap<StateId, Exit>) -> Option<Vec<Config>> {
    let mut out = Vec::new();
    for (q, st) in set {
        match *exits.entry(*q).or_insert_with(|| char_exit(a, *q)) {
            Exit::Reads(t) => out.push((t, *st)),
            Exit::None => {}
            Exit::Other => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

/// [`Exit`] of state `q`: none of the multi-byte bytes read, or every well-formed character
/// read alike into one state through plain states ([`super::cover::state_char_exit`]).
fn char_exit(a: &Automata, q: StateId) -> Exit {
    if !a.byte_edges(q).iter().any(|e| e.hi >= 0x80) {
        return Exit::None;
    }
    super::cover::state_char_exit(a, q).map_or(Exit::Other, Exit::Reads)
}

/// The last byte from `x` on that every configuration of `set` and the body step in state `b`
/// treat as `x` (the next edge bound of any of them, or 255).
fn run_end(a: &Automata, set: &[Config], b: u8, x: u8) -> u8 {
    let mut end = 255u8;
    for (q, _) in set {
        for e in a.byte_edges(*q) {
            if e.lo > x {
                end = end.min(e.lo - 1);
            } else if e.hi >= x {
                end = end.min(e.hi);
            }
        }
    }
    let first = body_step(b, x);
    let mut y = x;
    while y < end && body_step(b, y + 1) == first {
        y += 1;
    }
    y
}

/// The closure of `set` inside the kernel's rule: calls entered (a tail call, into a final state
/// without edges, pushes nothing), callees' ends returned from; configurations that read no byte
/// are dropped, and so are ends of the kernel's rule (an empty stack at a final state), which set
/// `may_end`. Sorted and deduplicated; `None` past the bounds.
fn close(a: &Automata, stacks: &mut Stacks, mut work: Vec<Config>, may_end: &mut bool) -> Option<Vec<Config>> {
    let mut out: Vec<Config> = Vec::new();
    // Few configurations: a list beats a hash set.
    let mut done: Vec<Config> = Vec::new();
    while let Some((q, st)) = work.pop() {
        if done.contains(&(q, st)) {
            continue;
        }
        done.push((q, st));
        if done.len() > 4 * MAX_CONFIGS {
            return None;
        }
        let state = a.state(q);
        if state.is_final {
            match stacks.pop(st) {
                Some((t, below)) => work.push((t, below)),
                None => *may_end = true,
            }
        }
        for &(r, t) in a.rule_edges(q) {
            let tail = a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty();
            let callee = if tail { st } else { stacks.push(st, t)? };
            work.push((a.callee_start(q, r), callee));
        }
        if !a.byte_edges(q).is_empty() {
            out.push((q, st));
        }
    }
    if out.len() > MAX_CONFIGS {
        return None;
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interned stacks: equal stacks get one id, a pop gives back the push, and a stack deeper
    /// than [`MAX_STACK`] is refused (as the search's bounds ask).
    #[test]
    fn stacks_intern_push_and_pop() {
        let mut stacks = Stacks::default();
        assert_eq!(stacks.pop(0), None);
        let one = stacks.push(0, StateId(7)).unwrap();
        let two = stacks.push(one, StateId(9)).unwrap();
        assert_ne!(one, two);
        assert_eq!(stacks.push(0, StateId(7)), Some(one));
        assert_eq!(stacks.push(one, StateId(9)), Some(two));
        assert_ne!(stacks.push(0, StateId(9)), Some(two));
        assert_eq!(stacks.pop(two), Some((StateId(9), one)));
        assert_eq!(stacks.pop(one), Some((StateId(7), 0)));
        assert_eq!((stacks.depth(0), stacks.depth(one), stacks.depth(two)), (0, 1, 2));
        let mut deep = 0;
        for i in 0..MAX_STACK {
            deep = stacks.push(deep, StateId(i as u32)).unwrap();
        }
        assert_eq!(stacks.push(deep, StateId(0)), None);
    }
}
