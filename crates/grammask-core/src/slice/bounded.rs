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
//! body state) pairs by byte depth, each pair explored once, at the depth it is first met (the
//! most bytes left: reading every body text of `r` more bytes implies it for fewer).
//!
//! Exactness: when every body text of at most `max_bytes` bytes is read from `s` by a
//! configuration that stays inside the kernel's rule (its stack above the rule's, a pushdown
//! simulation without origins, as the walk reads it), every slice token (body text, at most the
//! trie's depth) is accepted; every other token lies below a frontier node. No configuration
//! inside the rule reads a dead byte (checked on the way), so a dead node's tokens are read only
//! after the rule ends, as with the unbounded cover ([`Cover::may_end`]: the walk replays those
//! whose bytes FOLLOW may continue); the others (`"`, `\u`, `\/`) are walked for real.
use super::body::body_step;
use super::{Body, Cover};
use crate::compiler::{Automata, StateId};
use crate::fasthash::{FastMap, FastState};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Kernel states the bounded cover served, for tests.
static SERVED: AtomicUsize = AtomicUsize::new(0);

/// How many kernel states [`bounded_cover`] served so far (all grammars), for tests.
#[doc(hidden)]
pub fn bounded_covers_served() -> usize {
    SERVED.load(Ordering::Relaxed)
}

/// Most (set, body state) pairs one search explores; past it the state is walked.
const MAX_PAIRS: usize = 4096;
/// Most configurations in one set, and most pending returns in one configuration.
const MAX_CONFIGS: usize = 64;
const MAX_STACK: usize = 16;

/// A configuration: a state and its pending return states (innermost last).
type Config = (StateId, Vec<StateId>);

/// Whether the rule of `s` reads, from `s`, every string-body text of at most `max_bytes` bytes
/// without ending (see the module doc); `Some(Cover)` for the body slice's shortcut, `None` when
/// it does not or the search passes its bounds.
pub fn bounded_cover(a: &Automata, s: StateId, max_bytes: u32) -> Option<Cover> {
    let mut pairs = Pairs::default();
    let mut exits: FastMap<StateId, Exit> = FastMap::default();
    let mut may_end = false;
    let root = close(a, vec![(s, Vec::new())], &mut may_end)?;
    let mut layer = Vec::new();
    pairs.add(root, 0, &mut layer)?;
    // Pairs by depth in steps: a byte, or a whole multi-byte character where every
    // configuration reads them all alike (`char_exit`); a text of `n` bytes is at most `n` steps.
    let mut depth = 0;
    while depth < max_bytes && !layer.is_empty() {
        let mut next = Vec::new();
        for &(id, b) in &layer {
            let set = pairs.sets[id as usize].clone();
            // At a boundary, the multi-byte characters as one step when every configuration
            // reads them alike (or none of them).
            let whole = if b == 0 { chars_at_once(a, &set, &mut exits) } else { None };
            let mut closed_here: Vec<(Vec<Config>, Vec<Config>)> = Vec::new();
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
                    let stepped: Vec<Config> = set
                        .iter()
                        .flat_map(|(q, st)| {
                            a.byte_edges(*q)
                                .iter()
                                .filter(move |e| e.lo <= xb && xb <= e.hi)
                                .map(move |e| (e.target, st.clone()))
                        })
                        .collect();
                    if stepped.is_empty() {
                        return None;
                    }
                    // Runs that step alike (most of a class) close once per pair.
                    let closed = match closed_here.iter().find(|(from, _)| *from == stepped) {
                        Some((_, to)) => to.clone(),
                        None => {
                            let to = close(a, stepped.clone(), &mut may_end)?;
                            closed_here.push((stepped, to.clone()));
                            to
                        }
                    };
                    pairs.add(closed, nb, &mut next)?;
                }
                x = u16::from(end) + 1;
            }
            if let Some(stepped) = whole {
                pairs.add(close(a, stepped, &mut may_end)?, 0, &mut next)?;
            }
        }
        layer = next;
        depth += 1;
    }
    SERVED.fetch_add(1, Ordering::Relaxed);
    Some(Cover { may_end, walk_dead: false })
}

/// The configuration sets met (interned) and the (set, body state) pairs explored.
#[derive(Default)]
struct Pairs {
    ids: FastMap<Vec<Config>, u32>,
    sets: Vec<Vec<Config>>,
    seen: HashSet<(u32, u8), FastState>,
}

impl Pairs {
    /// Pair `(set, b)` to explore in the next layer (`next`) unless met before (an empty set
    /// refuses any further byte); `None` past [`MAX_PAIRS`].
    fn add(&mut self, set: Vec<Config>, b: u8, next: &mut Vec<(u32, u8)>) -> Option<()> {
        let id = match self.ids.get(&set) {
            Some(&id) => id,
            None => {
                let id = self.sets.len() as u32;
                self.ids.insert(set.clone(), id);
                self.sets.push(set);
                id
            }
        };
        if self.seen.insert((id, b)) {
            if self.seen.len() > MAX_PAIRS {
                return None;
            }
            next.push((id, b));
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
            Exit::Reads(t) => out.push((t, st.clone())),
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
fn close(a: &Automata, mut work: Vec<Config>, may_end: &mut bool) -> Option<Vec<Config>> {
    let mut out: Vec<Config> = Vec::new();
    // Few configurations: a list beats a hash set.
    let mut done: Vec<Config> = Vec::new();
    while let Some((q, st)) = work.pop() {
        if done.iter().any(|(d, ds)| *d == q && *ds == st) {
            continue;
        }
        done.push((q, st.clone()));
        if done.len() > 4 * MAX_CONFIGS {
            return None;
        }
        let state = a.state(q);
        if state.is_final {
            match st.split_last() {
                Some((&t, rest)) => work.push((t, rest.to_vec())),
                None => *may_end = true,
            }
        }
        for &(r, t) in a.rule_edges(q) {
            let tail = a.state(t).is_final && a.byte_edges(t).is_empty() && a.rule_edges(t).is_empty();
            let mut callee = st.clone();
            if !tail {
                if callee.len() >= MAX_STACK {
                    return None;
                }
                callee.push(t);
            }
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
