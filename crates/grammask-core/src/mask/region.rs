//! Regular-region kernels: a kernel state classified by stepping a lazy DFA down the token trie
//! instead of Earley chart frames, where the rest of the kernel's rule is read through rule
//! calls whose return stacks stay short (a regex-bodied string's right-linear rules).
//!
//! Pipeline place: tried inside the kernel walk ([`KernelWalk::classify`]) once the cheap covers
//! of a string body failed, and before the whole-trie walk; [`byte_region`](super::byte_region)
//! is its special case without rule edges.
//!
//! Exactness: a configuration is an automaton state with a return stack (interned), the stack
//! empty for the kernel's own level (origin 0 in a kernel chart). Closing a set of
//! configurations enters callees (pushing the state after the call, unless that state is final
//! with no edges: a tail call, whose return would pop again at once) and returns from final
//! states; it is Earley's prediction and completion for one input, so after any bytes the set is
//! empty if and only if the kernel chart's row is, and holds a final state with an empty stack if
//! and only if the kernel's rule ended there ([`kernel_ended`]). The walk then accepts, refuses
//! and records uncertain suffixes ([`record_uncertain`]) exactly as [`KernelWalk::walk`] does.
//! Grammars with lookaheads, budgets or token edges (whose charts carry more than states and
//! origins) are left to the walk.
//!
//! PERF: a `oneOf` of 9 unanchored keyword patterns (MaskBench o12278, token 392) walked the
//! body's frontier through chart frames, ~170 instructions per trie node and 69 M for the fill;
//! a DFA step is a class lookup and a table load.
//!
//! Where the kernel's start reads every plain text alive ([`RegionDfa::text_covers`]), the walk
//! takes the vocabulary's [`TextSlice`] and walks only its frontier (see [`walk_region`]).
//! PERF: MaskBench o51168's `^.*$` key less its names (`key.re`, token 253) and o27348's
//! `\S+(\s+(.+\S))?\s*$` tail (token 94) walked the whole trie: 14.4 M instructions each on
//! Llama 3, 3.8 M with the cut.
use super::*;

/// DFA states one grammar's region cache holds; past it the cache is cleared and the walk that
/// filled it is left to the chart walk. Each costs its configurations and one `u32` per byte
/// class (at most 256), so the cache stays under ~8 MB.
pub const REGION_MAX_DFA_STATES: usize = 4096;

/// Seed sets whose targets one grammar's region cache keeps ([`RegionDfa::step_seeded`]).
const MAX_SEED_TARGETS: usize = 1 << 16;

/// Configurations one DFA state may hold; a larger set (an ambiguous or deeply nested region)
/// leaves the kernel to the chart walk.
const REGION_MAX_CONFIGS: usize = 512;

/// Configurations a closure searches linearly before it hashes them ([`RegionDfa::close`]).
const SMALL_CLOSURE: usize = 32;

test_counter! {
    /// How many closures this thread's region walks marked or hashed, past [`SMALL_CLOSURE`]
    /// configurations ([`Marks`]; for tests).
    pub fn region_hashed_closures => HASHED_CLOSURES
}

thread_local! {
    /// For tests: a term every configuration of this thread's closures takes in its set's digest
    /// instead of its hash ([`force_region_digest_term`]).
    static FORCED_DIGEST_TERM: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// For tests: this thread's closures digest their sets as if every configuration's term were
/// `term` (`None`: its hash, [`digest_term`]). With `Some(0)` every set collides with the first
/// set of the digest; with `Some(1)` every set of one size does: the sets met are then told apart
/// by their size and members alone, as a true collision would be.
#[doc(hidden)]
pub fn force_region_digest_term(term: Option<u64>) {
    FORCED_DIGEST_TERM.set(term);
}

test_counter! {
    /// How many of this thread's closures met a set of their digest with other members, and
    /// became a DFA state of their own (for tests: true collisions are never met in practice).
    pub fn region_digest_collisions => DIGEST_COLLISIONS
}

test_counter! {
    /// How many configurations this thread's region closures marked at their stack
    /// ([`Marks::by_stack`]), their state marked under another stack (for tests).
    pub fn region_stack_marks => STACK_MARKS
}

test_counter! {
    /// How many kernels this thread's region walks took from the plain-text slice, walking only its
    /// frontier ([`crate::slice::TextSlice`]; for tests).
    pub fn region_text_cuts => TEXT_CUTS
}

test_counter! {
    /// How many text-cover searches this thread's region walks refused without searching, their
    /// start reading texts of bounded length only (a counted pattern, [`RegionDfa::reads_bounded`];
    /// for tests).
    pub fn region_bounded_refusals => BOUNDED_REFUSALS
}

thread_local! {
    /// Kernels this thread's region walks classified by the plain-text cut less refused bytes,
    /// and subtrees of a refused byte cut again ([`Cut::below`]).
    static REFUSAL_CUTS: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// How many kernels this thread's region walks classified by the plain-text cut less the
/// characters of a few refused first bytes ([`RegionDfa::text_refusals`]), and how many subtrees
/// of a refused byte they cut again (for tests).
#[doc(hidden)]
pub fn region_refusal_cuts() -> (usize, usize) {
    REFUSAL_CUTS.get()
}

/// Rounds of a [`RegionDfa::text_refusals`] search, each skipping the refusals found before.
const REFUSAL_ROUNDS: usize = 8;

/// Trie nodes the refused bytes of one DFA state may label together ([`TextSlice::nodes_of`]),
/// each walked below its path replayed: past it the state is not cut.
const REFUSED_MAX_NODES: usize = 24576;

/// The bytes that step one text-automaton state to `next` and the region DFA alike (one DFA
/// class), `byte` one of them ([`RegionDfa::refusal_round`]).
#[derive(Debug)]
struct TextGroup {
    byte: u8,
    next: u8,
    bytes: Bytes,
}

/// The [`TextGroup`]s of each text-automaton state, for DFA classes `class_of`.
fn text_groups(class_of: &[u8; 256]) -> Vec<Vec<TextGroup>> {
    (0..crate::slice::TEXT_STATES as u8)
        .map(|u| {
            let mut groups: Vec<TextGroup> = Vec::new();
            for x in 0..=255u8 {
                let crate::slice::Body::To(v) = crate::slice::text_step(u, x) else { continue };
                let c = class_of[usize::from(x)];
                match groups.iter_mut().find(|g| g.next == v && class_of[usize::from(g.byte)] == c) {
                    Some(g) => add(&mut g.bytes, x),
                    None => {
                        let mut bytes = [0; 2];
                        add(&mut bytes, x);
                        groups.push(TextGroup { byte: x, next: v, bytes });
                    }
                }
            }
            groups
        })
        .collect()
}

/// Nodes a refused byte's subtree holds at least for [`Cut::below`] to cut it again.
const CUT_MIN_NODES: usize = 512;

/// A set of bytes, bit `x % 128` of word `x / 128` (a state's refused first bytes).
type Bytes = [u128; 2];

/// The bytes of `r`, in order.
fn bytes_of(r: Bytes) -> impl Iterator<Item = u8> {
    (0..2u8).flat_map(move |w| {
        let mut bits = r[usize::from(w)];
        std::iter::from_fn(move || {
            let b = bits.trailing_zeros();
            (b < 128).then(|| {
                bits &= bits - 1;
                w * 128 + b as u8
            })
        })
    })
}

fn add(r: &mut Bytes, x: u8) {
    r[usize::from(x >> 7)] |= 1 << (x & 127);
}

/// How a [`RegionDfa::text_covers`] search ended.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TextCover {
    /// Every plain text is read alive.
    Covers,
    /// Some plain text kills the DFA.
    Dies,
    /// Past the search's budget.
    GivesUp,
}

/// (DFA state, text state) pairs one [`RegionDfa::text_covers`] search explores at most beyond
/// those known to read plain text alive, and of them at a character boundary (each steps every
/// byte class); past either the kernel walks the whole trie.
/// PERF: the boundary cap was set for counted patterns (MaskBench o21456's e-mail within 254
/// characters: a new DFA state at every character, its token 16 searching 16.1 -> 26.1 M
/// instructions with 1,024 pairs of any kind before giving up); those starts now never search
/// ([`bounded_rules`]). A names trie (o51168's key) meets a few dozen boundaries.
const TEXT_COVER_MAX_PAIRS: usize = 1024;
const TEXT_COVER_MAX_BOUNDARIES: usize = 48;

/// Return-stack depth past which a kernel state is not taken as a region (a recursive rule that
/// calls itself other than as a tail call).
const REGION_MAX_STACK: u32 = 24;

/// Frames of a walk: tokens longer than `MAX_FRAMES - 1` bytes leave the kernel to the walk.
const MAX_FRAMES: usize = 256;

/// A transition not computed yet.
const UNKNOWN: u32 = u32::MAX;
/// A transition to the empty set.
const DEAD: u32 = u32::MAX - 1;
/// In a transition target (`2 * id * classes + ENDED`, the DFA state's row of the table, doubled):
/// the kernel's rule ended in DFA state `id`.
const ENDED: u32 = 1;
/// In a walk's frame: the kernel's rule ended somewhere on the path (targets stay below it, as
/// `2 * REGION_MAX_DFA_STATES * 256 + 1` does).
const ABOVE: u32 = 1 << 31;

/// An automaton state with its interned return stack (0: empty, the kernel's own level).
type Config = (StateId, u32);

/// A configuration's term in the digest of a set ([`RegionDfa::set_ids`]): the digest is the
/// wrapping sum of its members' terms, so it does not depend on their order.
fn digest_term((s, k): Config) -> u64 {
    use std::hash::BuildHasher;
    crate::fasthash::FastState.hash_one(u64::from(s.0) << 32 | u64::from(k))
}

/// A lazy DFA over configurations, shared by the kernels of one compiled grammar: later kernels
/// of the same string reach the states and transitions earlier ones computed.
///
/// Invariants: `next.len() == sets.len() * classes`; `next[d * classes + c]` is `UNKNOWN`, `DEAD`
/// or the target `2 * e * classes + ENDED?` where `e` is the DFA state of `sets[d]` stepped on any byte of
/// class `c` and closed, with `ENDED` iff `ended[e]`; `ended[d]` iff some configuration of
/// `sets[d]` is final with an empty stack.
#[derive(Debug, Default)]
pub struct RegionDfa {
    /// Byte classes: two bytes share a class iff every byte edge of the automata holds both or
    /// neither (so they step every configuration alike). `classes == 0` until first use.
    class_of: ByteClasses,
    classes: usize,
    /// A byte of each class.
    reps: Vec<u8>,
    /// `stacks[k]`: (parent stack, return state) of stack `k`; entry 0 is the empty stack.
    stacks: Vec<(u32, StateId)>,
    stack_depth: Vec<u32>,
    stack_ids: FastMap<(u32, StateId), u32>,
    /// Each DFA state's configurations (distinct, in the order its closure met them).
    sets: Vec<Box<[Config]>>,
    /// The DFA state of each set's digest ([`digest_term`]): the first set of a digest; a later
    /// set with the same digest (never met in practice) stays out of the map, a DFA state of its
    /// own, as is each later closure equal to it (duplicate DFA states, same masks).
    /// PERF: the sets were sorted and hashed as keys; sorting the closures of 280
    /// configurations was 5.0 M of MaskBench clang-format t7's 27.9 M instructions.
    set_ids: FastMap<u64, u32>,
    ended: Vec<bool>,
    next: Vec<u32>,
    /// The DFA state of each kernel state closed so far.
    starts: FastMap<StateId, u32>,
    /// The target of each seed set the text-cover search closed so far (the sorted
    /// configurations a step reaches before its closure, [`RegionDfa::step_seeded`]), at most
    /// [`MAX_SEED_TARGETS`]: steps of several DFA states, or classes, that reach the same seeds
    /// (a names trie's states on every byte but their next letter) close them once.
    seed_targets: FastMap<Box<[Config]>, u32>,
    /// Kernel states found not to be regions (kept across clears).
    not_regions: std::collections::HashSet<StateId, crate::fasthash::FastState>,
    /// Per grammar rule, whether it reads strings of bounded length only ([`bounded_rules`];
    /// empty: none known; kept across clears).
    bounded_rules: Vec<bool>,
    /// Whether each DFA state asked reads every plain text alive ([`RegionDfa::text_covers`]).
    text_verdicts: FastMap<u32, TextCover>,
    /// The first bytes each DFA state asked refuses, every other plain text being read alive,
    /// or `None` ([`RegionDfa::text_refusals`]).
    /// Keyed by (DFA state, text-automaton state it starts in).
    refusals: FastMap<(u32, u8), Option<Bytes>>,
    /// [`text_groups`] of `class_of`, built on the first refusal search.
    text_groups: Vec<Vec<TextGroup>>,
    /// (DFA state, text-automaton state) pairs from which every plain text is read alive (the
    /// pairs of the searches that succeeded).
    text_alive: std::collections::HashSet<(u32, u8), crate::fasthash::FastState>,
    /// Kernels this cache classified (for tests).
    pub served: usize,
    /// The buffers of [`RegionDfa::close`], kept between closures.
    scratch: Scratch,
}

/// The buffers of a closure ([`RegionDfa::close`]) and of a step's seeds ([`RegionDfa::step`]).
#[derive(Debug, Default)]
struct Scratch {
    seeds: Vec<Config>,
    todo: Vec<Config>,
    set: Vec<Config>,
    seen: Marks,
}

/// The configurations of a closure past [`SMALL_CLOSURE`]: each is marked at its state
/// (`by_state[s]`: the closure's epoch and the stack), else at its stack (`by_stack[k]`: the
/// epoch and the state), else hashed into `rest`; an entry of an older epoch is free.
/// PERF: a callee called from many places (`ws` between 140 optional properties, MaskBench
/// clang-format t7) meets one state under many stacks, and their return states each under the
/// same stack: marking either, a closure of 280 configurations hashes none (hashing them all
/// was 2.8 M of t7's instructions).
#[derive(Debug, Default)]
struct Marks {
    epoch: u32,
    by_state: Vec<(u32, u32)>,
    by_stack: Vec<(u32, u32)>,
    rest: std::collections::HashSet<Config, crate::fasthash::FastState>,
}

impl Marks {
    /// Frees every entry, for a closure over `states` automaton states.
    fn clear(&mut self, states: usize) {
        if self.epoch == u32::MAX {
            self.epoch = 0;
            self.by_state.fill((0, 0));
            self.by_stack.fill((0, 0));
        }
        self.epoch += 1;
        self.rest.clear();
        if self.by_state.len() < states {
            // Zeroed pages, touched where marked.
            self.by_state = vec![(0, 0); states];
        }
    }

    /// Whether `(s, k)` is marked. A configuration takes its state's entry if free, else its
    /// stack's if free, and entries stay for the epoch: a free entry on the way means unmarked.
    #[inline]
    fn contains(&self, (s, k): Config) -> bool {
        let (e, stack) = self.by_state[s.0 as usize];
        if e != self.epoch || stack == k {
            return e == self.epoch;
        }
        match self.by_stack.get(k as usize) {
            Some(&(e, state)) if e == self.epoch => state == s.0 || self.rest.contains(&(s, k)),
            _ => false,
        }
    }

    /// Marks `(s, k)`; whether it was not marked.
    #[inline]
    fn insert(&mut self, (s, k): Config) -> bool {
        let epoch = self.epoch;
        let at_state = &mut self.by_state[s.0 as usize];
        if at_state.0 != epoch {
            *at_state = (epoch, k);
            return true;
        }
        if at_state.1 == k {
            return false;
        }
        if self.by_stack.len() <= k as usize {
            self.by_stack.resize(k as usize + 1, (0, 0));
        }
        let at_stack = &mut self.by_stack[k as usize];
        if at_stack.0 != epoch {
            *at_stack = (epoch, s.0);
            STACK_MARKS.set(STACK_MARKS.get() + 1);
            return true;
        }
        at_stack.1 != s.0 && self.rest.insert((s, k))
    }
}

/// A byte's class ([`RegionDfa::class_of`]).
#[derive(Debug)]
struct ByteClasses([u8; 256]);

impl Default for ByteClasses {
    fn default() -> ByteClasses {
        ByteClasses([0; 256])
    }
}

/// Why a closure gave up.
enum Limit {
    /// The state is not a region (stack too deep, too many configurations).
    NotRegion,
    /// The cache is full.
    Full,
}

impl RegionDfa {
    /// Whether the grammar's charts carry only states and origins (see the module doc).
    pub fn applies(a: &Automata) -> bool {
        !a.has_lookahead()
            && a.budgets().is_empty()
            && a.rec_budgets().is_none()
            && a.char_budgets().is_none()
            && !a.has_token_edges()
    }

    fn init(&mut self, a: &Automata) {
        if self.classes != 0 {
            return;
        }
        let mut cut = [false; 257];
        for e in a.all_byte_edges() {
            cut[e.lo as usize] = true;
            cut[e.hi as usize + 1] = true;
        }
        let mut c = 0usize;
        for (b, (class, &cut_here)) in self.class_of.0.iter_mut().zip(&cut).enumerate() {
            if b > 0 && cut_here {
                c += 1;
            }
            *class = c as u8;
            if self.reps.len() == c {
                self.reps.push(b as u8);
            }
        }
        self.classes = c + 1;
        self.clear();
    }

    /// Drops every DFA state and stack (the classes stay).
    fn clear(&mut self) {
        self.stacks = vec![(0, StateId(u32::MAX))];
        self.stack_depth = vec![0];
        self.stack_ids.clear();
        self.sets.clear();
        self.set_ids.clear();
        self.ended.clear();
        self.next.clear();
        self.starts.clear();
        self.seed_targets.clear();
        self.text_verdicts.clear();
        self.refusals.clear();
        self.text_alive.clear();
    }

    fn push(&mut self, k: u32, ret: StateId) -> Result<u32, Limit> {
        if let Some(&id) = self.stack_ids.get(&(k, ret)) {
            return Ok(id);
        }
        let depth = self.stack_depth[k as usize] + 1;
        if depth > REGION_MAX_STACK {
            return Err(Limit::NotRegion);
        }
        let id = self.stacks.len() as u32;
        self.stacks.push((k, ret));
        self.stack_depth.push(depth);
        self.stack_ids.insert((k, ret), id);
        Ok(id)
    }

    /// The target ([`ENDED`]-tagged DFA state) of the closure of the configurations `seeds` writes
    /// (`DEAD` when empty).
    fn close(&mut self, a: &Automata, seeds: impl FnOnce(&Self, &mut Vec<Config>)) -> Result<u32, Limit> {
        // PERF: a fresh set and vectors per closure grew by doubling, ~40% of the closures of a
        // counted e-mail pattern's first kernels (MaskBench o21456: ~2 M instructions a fill).
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.todo.clear();
        seeds(self, &mut scratch.todo);
        let found = self.close_in(a, &mut scratch);
        self.scratch = scratch;
        found
    }

    /// [`Self::close`] of `scratch.todo`, with `scratch`'s set and vector.
    fn close_in(&mut self, a: &Automata, scratch: &mut Scratch) -> Result<u32, Limit> {
        let Scratch { todo, set, seen, .. } = scratch;
        set.clear();
        seen.clear(a.states().len());
        let mut marked = false;
        let mut key = 0u64;
        while let Some((s, k)) = todo.pop() {
            // A small set is searched, a larger one marked (`seen` holds `set` past the first
            // `SMALL_CLOSURE` configurations).
            // PERF: hashing every configuration was half of the closures' cost in MaskBench
            // o21456 (~12 configurations each, ~1.4 M instructions a fill).
            let met = if !marked && set.len() < SMALL_CLOSURE {
                set.contains(&(s, k))
            } else {
                if !marked {
                    marked = true;
                    for &c in set.iter() {
                        seen.insert(c);
                    }
                    HASHED_CLOSURES.set(HASHED_CLOSURES.get() + 1);
                }
                !seen.insert((s, k))
            };
            if met {
                continue;
            }
            set.push((s, k));
            key = key.wrapping_add(digest_term((s, k)));
            if set.len() > REGION_MAX_CONFIGS {
                return Err(Limit::NotRegion);
            }
            for &(r, ret) in a.rule_edges(s) {
                // A return state that is final with no edges returns again at once: no push.
                let tail = a.state(ret).is_final && a.byte_edges(ret).is_empty() && a.rule_edges(ret).is_empty();
                let callee = if tail { k } else { self.push(k, ret)? };
                todo.push((a.rule_start(r), callee));
            }
            if k != 0 && a.state(s).is_final {
                let (parent, ret) = self.stacks[k as usize];
                todo.push((ret, parent));
            }
        }
        if set.is_empty() {
            return Ok(DEAD);
        }
        if let Some(term) = FORCED_DIGEST_TERM.get() {
            key = term.wrapping_mul(set.len() as u64);
        }
        // Sets of distinct configurations are equal iff of one size and one holds the other's
        // members (`seen` holds `set` where `marked`).
        let known = self.set_ids.get(&key).copied();
        let equal = |id: u32| {
            let other = &self.sets[id as usize];
            other.len() == set.len() && other.iter().all(|c| if marked { seen.contains(*c) } else { set.contains(c) })
        };
        if let Some(id) = known {
            if equal(id) {
                return Ok(self.target(id));
            }
            DIGEST_COLLISIONS.set(DIGEST_COLLISIONS.get() + 1);
        }
        if self.sets.len() >= REGION_MAX_DFA_STATES {
            return Err(Limit::Full);
        }
        let id = self.sets.len() as u32;
        let ended = set.iter().any(|&(s, k)| k == 0 && a.state(s).is_final);
        self.ended.push(ended);
        if known.is_none() {
            self.set_ids.insert(key, id);
        }
        self.sets.push(set[..].into());
        self.next.extend(std::iter::repeat_n(UNKNOWN, self.classes));
        Ok(self.target(id))
    }

    /// The transition target of DFA state `id` (see [`ENDED`]).
    fn target(&self, id: u32) -> u32 {
        2 * id * self.classes as u32 + u32::from(self.ended[id as usize]) * ENDED
    }

    /// The DFA state a (non-`DEAD`) target or frame leads to.
    fn id_of(&self, target: u32) -> u32 {
        ((target & !ABOVE) / 2) / self.classes as u32
    }

    /// The target of DFA state `d` on class `c`, computed (it was `UNKNOWN`).
    #[cold]
    fn step(&mut self, a: &Automata, d: u32, c: usize) -> Result<u32, Limit> {
        let at = d as usize * self.classes + c;
        let byte = self.reps[c];
        let t = self.close(a, |dfa, todo| {
            // A state met under many stacks (a callee called from many places) is stepped once
            // while it stays in its slot of `stepped`.
            let mut stepped = [(StateId(u32::MAX), None); 4];
            for &(s, k) in &dfa.sets[d as usize] {
                let slot = &mut stepped[s.0 as usize % 4];
                if slot.0 != s {
                    *slot = (s, a.step(s, byte));
                }
                if let Some(t) = slot.1 {
                    todo.push((t, k));
                }
            }
        })?;
        self.next[at] = t;
        Ok(t)
    }

    /// [`Self::step`] through the seed memo (`seed_targets`), for the text-cover search: it steps
    /// every class of each state it meets, where most lead to the same seeds.
    /// PERF: for every step (a counted pattern's walk, MaskBench o21456 token 16, meets new
    /// seeds at nearly each one) the memo's sorting and hashing cost 16.1 -> 25.1 M instructions.
    #[cold]
    fn step_seeded(&mut self, a: &Automata, d: u32, c: usize) -> Result<u32, Limit> {
        let at = d as usize * self.classes + c;
        let byte = self.reps[c];
        let mut seeds = std::mem::take(&mut self.scratch.seeds);
        seeds.clear();
        seeds.extend(self.sets[d as usize].iter().filter_map(|&(s, k)| a.step(s, byte).map(|t| (t, k))));
        seeds.sort_unstable();
        seeds.dedup();
        let known = self.seed_targets.get(&seeds[..]).copied();
        let t = match known {
            Some(t) => Ok(t),
            None => self.close(a, |_, todo| todo.extend_from_slice(&seeds)),
        };
        if let (Ok(t), None) = (&t, known) {
            if self.seed_targets.len() < MAX_SEED_TARGETS {
                self.seed_targets.insert(seeds[..].into(), *t);
            }
        }
        self.scratch.seeds = seeds;
        let t = t?;
        self.next[at] = t;
        Ok(t)
    }

    /// The target of DFA state `d` on `byte`, computed if unknown (through the seed memo where
    /// `seeded`).
    fn next_on(&mut self, a: &Automata, d: u32, byte: u8, seeded: bool) -> Result<u32, Limit> {
        let c = usize::from(self.class_of.0[usize::from(byte)]);
        match self.next[d as usize * self.classes + c] {
            UNKNOWN if seeded => self.step_seeded(a, d, c),
            UNKNOWN => self.step(a, d, c),
            t => Ok(t),
        }
    }

    /// Whether DFA state `d` reads every plain text (the text automaton's paths,
    /// [`crate::slice::text_step`]) without dying, ending inside a character included: a
    /// product search of the DFA with the text automaton, at most [`TEXT_COVER_MAX_PAIRS`] new
    /// pairs. Then every token of the [`crate::slice::TextSlice`] is accepted from `d` (a token
    /// is accepted iff the DFA is alive after it), and no node on a plain-text path records an
    /// uncertain token (only dead nodes do).
    fn text_covers(&mut self, a: &Automata, d: u32) -> Result<TextCover, Limit> {
        if let Some(&v) = self.text_verdicts.get(&d) {
            return Ok(v);
        }
        // A start that reads texts of bounded length only dies on a longer plain text.
        // PERF: a counted pattern (MaskBench o21456's e-mail within 254 characters) meets a new
        // DFA state at every character: its searches gave up at their caps, ~2-3 M instructions.
        if self.reads_bounded(a, d) {
            BOUNDED_REFUSALS.set(BOUNDED_REFUSALS.get() + 1);
            // No refusal search either: a longer text of any characters dies too.
            self.text_verdicts.insert(d, TextCover::GivesUp);
            return Ok(TextCover::GivesUp);
        }
        let mut seen = std::collections::HashSet::<(u32, u8), crate::fasthash::FastState>::default();
        seen.insert((d, 0));
        let mut todo = vec![(d, 0u8)];
        let mut boundaries = 1;
        let covers = 'search: loop {
            let Some((e, u)) = todo.pop() else { break TextCover::Covers };
            if self.text_alive.contains(&(e, u)) {
                continue;
            }
            // Bytes of one DFA class and one text step lead alike: each (class, step) once.
            let mut done = [0u16; 256];
            for x in 0..=255u8 {
                let crate::slice::Body::To(v) = crate::slice::text_step(u, x) else { continue };
                let c = usize::from(self.class_of.0[usize::from(x)]);
                if done[c] >> v & 1 == 1 {
                    continue;
                }
                done[c] |= 1 << v;
                let t = self.next_on(a, e, x, true)?;
                if t == DEAD {
                    break 'search TextCover::Dies;
                }
                let pair = (self.id_of(t), v);
                if !self.text_alive.contains(&pair) && seen.insert(pair) {
                    boundaries += usize::from(v == 0);
                    if seen.len() > TEXT_COVER_MAX_PAIRS || boundaries > TEXT_COVER_MAX_BOUNDARIES {
                        break 'search TextCover::GivesUp;
                    }
                    todo.push(pair);
                }
            }
        };
        if covers == TextCover::Covers {
            self.text_alive.extend(seen);
        }
        self.text_verdicts.insert(d, covers);
        Ok(covers)
    }

    /// Whether DFA state `d` reads texts of bounded length only: the rules of its
    /// configurations' states, and of the states their stacks return to, are bounded
    /// ([`Self::for_grammar`]). Every state of a grammar's automata can complete its rule
    /// (dead states and unproductive rules are pruned), so the bytes read from a configuration
    /// are at most its rules' longest strings; a rule not known bounded answers false, which is
    /// always safe.
    fn reads_bounded(&self, a: &Automata, d: u32) -> bool {
        let bounded = |s: StateId| self.bounded_rules.get(a.state(s).rule.index()).is_some_and(|&b| b);
        self.sets[d as usize].iter().all(|&(s, mut k)| {
            while k != 0 {
                let (parent, ret) = self.stacks[k as usize];
                if !bounded(ret) {
                    return false;
                }
                k = parent;
            }
            bounded(s)
        })
    }

    /// A region DFA for the automata built from `g`, with which of its rules read strings of
    /// bounded length only ([`bounded_rules`]).
    pub fn for_grammar(g: &crate::grammar::Grammar) -> RegionDfa {
        RegionDfa { bounded_rules: bounded_rules(g), ..RegionDfa::default() }
    }

    /// The first bytes `R` (ASCII characters, UTF-8 leads) such that DFA state `d`, in text
    /// state `u` (a character begun), reads alive every plain text in which no character begins
    /// with a byte of `R` (ending inside a character included), each byte of `R` one [`TextSlice::nodes_of`] lists, at most
    /// [`REFUSED_MAX_NODES`] nodes together; `None` if none found. Then every such token is
    /// accepted from `d`, and only the text frontier and each path's first node of a byte of
    /// `R` need a walk ([`Cut::below`]). `Some` of the empty set: `d` reads every plain text.
    /// Searched in rounds ([`Self::refusal_round`]), each skipping the bytes refused before.
    fn text_refusals(&mut self, a: &Automata, d: u32, u: u8, text: &TextSlice) -> Result<Option<Bytes>, Limit> {
        if let Some(&r) = self.refusals.get(&(d, u)) {
            return Ok(r);
        }
        let mut refused = [0u128; 2];
        let mut found = None;
        for _ in 0..REFUSAL_ROUNDS {
            let Some(new) = self.refusal_round(a, (d, u), text, refused)? else { break };
            if new == [0, 0] {
                found = Some(refused);
                break;
            }
            refused = [refused[0] | new[0], refused[1] | new[1]];
            let nodes: usize = bytes_of(refused).map(|x| text.nodes_of(x).map_or(0, <[u32]>::len)).sum();
            if nodes > REFUSED_MAX_NODES {
                break;
            }
        }
        self.refusals.insert((d, u), found);
        Ok(found)
    }

    /// One round of [`Self::text_refusals`]: [`Self::text_covers`]' product search from `start`
    /// skipping the bytes of `refused` at a boundary. A listed byte that kills the DFA at a
    /// boundary is a new refusal; any other death at a pair whose last character began with a
    /// listed byte refuses that byte instead (inside a character, or a key's `\s*` before `:`
    /// that refuses letters after a space); any other death, or the search's budget, gives
    /// `None`. `Some` of the empty set: every plain text in which no character begins with a
    /// byte of `refused` is read alive.
    fn refusal_round(
        &mut self,
        a: &Automata,
        start: (u32, u8),
        text: &TextSlice,
        refused: Bytes,
    ) -> Result<Option<Bytes>, Limit> {
        if self.text_groups.is_empty() {
            self.text_groups = text_groups(&self.class_of.0);
        }
        let groups = std::mem::take(&mut self.text_groups);
        let found = self.refusal_search(a, start, text, refused, &groups);
        self.text_groups = groups;
        found
    }

    /// [`Self::refusal_round`] with the text groups at hand.
    fn refusal_search(
        &mut self,
        a: &Automata,
        start: (u32, u8),
        text: &TextSlice,
        refused: Bytes,
        groups: &[Vec<TextGroup>],
    ) -> Result<Option<Bytes>, Limit> {
        let mut listed = [0u128; 2];
        for x in (0..=255u8).filter(|&x| text.nodes_of(x).is_some()) {
            add(&mut listed, x);
        }
        // Each pair met: the listed first bytes of the character read last (or inside) on the
        // paths that met it, `None` if one was not listed (a death there is blamed on them).
        let mut seen = FastMap::<(u32, u8), Option<Bytes>>::default();
        let mut blamed = std::collections::HashSet::<(u32, u8), crate::fasthash::FastState>::default();
        seen.insert(start, None);
        let mut todo = vec![start];
        let mut boundaries = 1;
        let mut new = [0u128; 2];
        while let Some((e, u)) = todo.pop() {
            let mut mine = [0u128; 2];
            let mut died = false;
            for g in &groups[usize::from(u)] {
                let live = if u == 0 { [g.bytes[0] & !refused[0], g.bytes[1] & !refused[1]] } else { g.bytes };
                if live == [0, 0] {
                    continue;
                }
                let t = self.next_on(a, e, g.byte, true)?;
                if t == DEAD {
                    if u == 0 && live[0] & !listed[0] == 0 && live[1] & !listed[1] == 0 {
                        mine = [mine[0] | live[0], mine[1] | live[1]];
                        continue;
                    }
                    died = true;
                    break;
                }
                // The first bytes a path into the next pair reads its last character by.
                let first = if u != 0 {
                    seen[&(e, u)]
                } else if live[0] & !listed[0] == 0 && live[1] & !listed[1] == 0 {
                    Some(live)
                } else {
                    None
                };
                let pair = (self.id_of(t), g.next);
                if self.text_alive.contains(&pair) {
                    continue;
                }
                match seen.get_mut(&pair) {
                    Some(met) => {
                        *met = met.zip(first).map(|(m, f)| [m[0] | f[0], m[1] | f[1]]);
                        if blamed.contains(&pair) {
                            let Some(f) = first else { return Ok(None) };
                            new = [new[0] | f[0], new[1] | f[1]];
                        }
                    }
                    None => {
                        seen.insert(pair, first);
                        boundaries += usize::from(g.next == 0);
                        if seen.len() > TEXT_COVER_MAX_PAIRS || boundaries > TEXT_COVER_MAX_BOUNDARIES {
                            return Ok(None);
                        }
                        todo.push(pair);
                    }
                }
            }
            if died {
                let Some(f) = seen[&(e, u)] else {
                    return Ok(None);
                };
                new = [new[0] | f[0], new[1] | f[1]];
                blamed.insert((e, u));
            } else {
                new = [new[0] | mine[0], new[1] | mine[1]];
            }
        }
        Ok(Some(new))
    }

    fn start(&mut self, a: &Automata, state: StateId) -> Result<u32, Limit> {
        if let Some(&d) = self.starts.get(&state) {
            return Ok(d);
        }
        let d = self.close(a, |_, todo| todo.push((state, 0)))?;
        self.starts.insert(state, d);
        Ok(d)
    }
}

/// Per rule of `g`, whether every string of the rule is of bounded length: its body has no
/// unbounded repetition, no token or excluded-string expression, and references bounded rules
/// only, none on a cycle of references. A grammar-level fact, linear in the grammar.
pub fn bounded_rules(g: &crate::grammar::Grammar) -> Vec<bool> {
    use crate::grammar::Expr;
    const UNKNOWN_RULE: u8 = 0;
    const ON_STACK: u8 = 1;
    const YES: u8 = 2;
    const NO: u8 = 3;
    let n = g.rules().len();
    let mut rule = vec![UNKNOWN_RULE; n];
    // Whether each expression's own parts (not its rule references) are bounded, and its
    // referenced rules, found per rule body.
    let mut refs: Vec<usize> = Vec::new();
    let mut stack: Vec<crate::grammar::ExprId> = Vec::new();
    let mut local = |r: usize, refs: &mut Vec<usize>| -> bool {
        refs.clear();
        stack.clear();
        stack.push(g.rules()[r].body);
        let mut ok = g.rules()[r].lookahead.is_none();
        while let Some(e) = stack.pop() {
            match g.expr(e) {
                Expr::Repeat { max: None, .. } | Expr::Token(_) | Expr::ExcludeToken(_) | Expr::JsonStringExcept(_) => {
                    ok = false;
                }
                Expr::RuleRef(t) => refs.push(t.index()),
                _ => {}
            }
            stack.extend_from_slice(g.children(e));
        }
        ok
    };
    // Depth-first over references: (rule, its references, the next one to visit).
    let mut walk: Vec<(usize, Vec<usize>, usize)> = Vec::new();
    for start in 0..n {
        if rule[start] != UNKNOWN_RULE {
            continue;
        }
        let ok = local(start, &mut refs);
        rule[start] = if ok { ON_STACK } else { NO };
        if !ok {
            continue;
        }
        walk.push((start, refs.clone(), 0));
        while let Some((r, rs, next)) = walk.last_mut() {
            let r = *r;
            if let Some(&t) = rs.get(*next) {
                *next += 1;
                match rule[t] {
                    UNKNOWN_RULE => {
                        let ok = local(t, &mut refs);
                        rule[t] = if ok { ON_STACK } else { NO };
                        if ok {
                            walk.push((t, refs.clone(), 0));
                        } else {
                            rule[r] = NO;
                        }
                    }
                    YES => {}
                    // On the stack (a cycle of references) or unbounded.
                    _ => rule[r] = NO,
                }
                continue;
            }
            walk.pop();
            if rule[r] == ON_STACK {
                rule[r] = YES;
            }
            if rule[r] == NO {
                if let Some((p, ..)) = walk.last() {
                    rule[*p] = NO;
                }
            }
        }
    }
    rule.into_iter().map(|v| v == YES).collect()
}

/// What a region walk found, as [`KernelWalk`] holds it.
pub(super) struct RegionMask {
    pub accepted: Bitset,
    pub uncertain: Vec<(u32, u32)>,
    pub suffix_ids: SuffixIds,
    pub suffixes: Vec<Box<[u8]>>,
    /// The walk's buffers for a dead node's path and the rule ends on it.
    path: Vec<u8>,
    ends: Vec<bool>,
}

/// The classification of kernel `state` by the region DFA `dfa` (see the module doc), or `None`
/// when the state is not a region or the cache filled up (then cleared). `follow` is FOLLOW of
/// the state's rule; `text` the vocabulary's plain-text slice, where built (see [`walk_region`]).
/// The caller checks [`RegionDfa::applies`].
pub(super) fn classify_region(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    follow: Option<&ByteSet>,
    dfa: &mut RegionDfa,
    text: Option<&TextSlice>,
) -> Option<RegionMask> {
    if dfa.not_regions.contains(&state) || trie.max_depth as usize >= MAX_FRAMES {
        return None;
    }
    dfa.init(a);
    match walk_region(a, trie, vocab_size, state, follow, dfa, text) {
        Ok(m) => {
            dfa.served += 1;
            Some(m)
        }
        Err(Limit::NotRegion) => {
            dfa.not_regions.insert(state);
            None
        }
        Err(Limit::Full) => {
            dfa.clear();
            None
        }
    }
}

/// Walks the trie from kernel `state` by the region DFA. Where `text` is given and the start
/// reads every plain text alive ([`RegionDfa::text_covers`]), the slice's tokens are accepted
/// and only its frontier subtrees are walked, each below its path replayed: the same
/// classification as the walk of the whole trie (the nodes left out are plain-text nodes, each
/// accepted and none dead), with the uncertain tokens in the same (trie) order.
fn walk_region(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    follow: Option<&ByteSet>,
    dfa: &mut RegionDfa,
    text: Option<&TextSlice>,
) -> Result<RegionMask, Limit> {
    let start = dfa.start(a, state)?;
    let mut out = RegionMask {
        accepted: Bitset::new(vocab_size),
        uncertain: Vec::new(),
        suffix_ids: SuffixIds::default(),
        suffixes: Vec::new(),
        path: Vec::new(),
        ends: Vec::new(),
    };
    if start == DEAD {
        return Ok(out);
    }
    // `frames[d]`: the target after the current path's first d bytes (`frames[0]`: the start,
    // no rule end after no byte), with `ABOVE` iff the kernel's rule ended after 1 to d of them.
    let mut frames = [start & !ENDED; MAX_FRAMES];
    let Some(text) = text else {
        walk_nodes(a, trie, follow, dfa, &mut frames, &mut out, 0, trie.nodes.len())?;
        return Ok(out);
    };
    let verdict = dfa.text_covers(a, dfa.id_of(start))?;
    match verdict {
        TextCover::Covers => {}
        TextCover::Dies => {
            if let Some(refused) = dfa.text_refusals(a, dfa.id_of(start), 0, text)? {
                let (cuts, again) = REFUSAL_CUTS.get();
                REFUSAL_CUTS.set((cuts + 1, again));
                let mut cut = Cut { a, trie, follow, text, dfa, frames: &mut frames, out: &mut out };
                cut.below(None, refused)?;
                return Ok(out);
            }
            walk_nodes(a, trie, follow, dfa, &mut frames, &mut out, 0, trie.nodes.len())?;
            return Ok(out);
        }
        TextCover::GivesUp => {
            walk_nodes(a, trie, follow, dfa, &mut frames, &mut out, 0, trie.nodes.len())?;
            return Ok(out);
        }
    }
    TEXT_CUTS.set(TEXT_CUTS.get() + 1);
    out.accepted.or_assign(&text.slice);
    // `frames[1..=replayed.len()]` hold the path `replayed`: a frontier node's path keeps the
    // prefix it shares with the one before (frontier nodes are in trie order).
    let mut replayed: &[u8] = &[];
    for f in &text.frontier {
        let keep = replayed.iter().zip(&f.path[..]).take_while(|(x, y)| x == y).count();
        for (j, &x) in f.path.iter().enumerate().skip(keep) {
            let up = frames[j];
            let next = dfa.next_on(a, dfa.id_of(up), x, false)?;
            debug_assert!(next < DEAD, "a plain-text path from a covering state stays alive");
            frames[j + 1] = next | (up & ABOVE) | (next & ENDED) << 31;
        }
        replayed = &f.path;
        let node = f.node as usize;
        walk_nodes(a, trie, follow, dfa, &mut frames, &mut out, node, trie.nodes[node].subtree_end as usize)?;
    }
    Ok(out)
}

/// A region walk cut by refused bytes ([`RegionDfa::text_refusals`]): the walk's context.
struct Cut<'c, 'a> {
    a: &'a Automata,
    trie: &'a TokenTrie,
    follow: Option<&'a ByteSet>,
    text: &'a TextSlice,
    dfa: &'c mut RegionDfa,
    frames: &'c mut [u32; MAX_FRAMES],
    out: &'c mut RegionMask,
}

impl Cut<'_, '_> {
    /// Classifies the nodes below `root` (the whole trie for `None`) as [`walk_nodes`] would,
    /// in the same order. Requires: `root`'s path is plain text, `frames` holds it, and its DFA
    /// state, in the text state after that path, refuses `refused` ([`RegionDfa::text_refusals`]).
    /// The frontier below `root` is the text frontier's nodes there and each path's first node
    /// of a refused byte (no two nested); the tokens of the other nodes are accepted (plain text
    /// without a refused byte at a boundary: alive). A text frontier node is walked; a refused
    /// byte's node is stepped and, alive, cut again by its own state's refusals (or walked).
    fn below(&mut self, root: Option<usize>, refused: Bytes) -> Result<(), Limit> {
        let trie = self.trie;
        let (from, end) = match root {
            Some(n) => (n + 1, trie.nodes[n].subtree_end as usize),
            None => (0, trie.nodes.len()),
        };
        let frontier = &self.text.frontier;
        let (lo, hi) = (
            frontier.partition_point(|f| (f.node as usize) < from),
            frontier.partition_point(|f| (f.node as usize) < end),
        );
        let mut refused_nodes: Vec<u32> = Vec::new();
        for x in bytes_of(refused) {
            let nodes = self.text.nodes_of(x).expect("refused bytes are listed");
            let (lo, hi) =
                (nodes.partition_point(|&n| (n as usize) < from), nodes.partition_point(|&n| (n as usize) < end));
            refused_nodes.extend_from_slice(&nodes[lo..hi]);
        }
        refused_nodes.sort_unstable();
        // `replayed`: the path `frames[..=replayed.len()]` holds (at least `root`'s).
        let mut replayed = Vec::new();
        node_path(trie, root, &mut replayed);
        let mut path = Vec::new();
        let mut covered = from;
        // Both lists in trie order, merged (a text frontier node first where both hold it).
        let (mut i, mut j) = (lo, 0);
        loop {
            let is_refused = match (frontier[i..hi].first(), refused_nodes.get(j)) {
                (Some(f), Some(&r)) => r < f.node,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (None, None) => break,
            };
            let node = if is_refused { refused_nodes[j] } else { frontier[i].node } as usize;
            if node < covered {
                (i, j) = if is_refused { (i, j + 1) } else { (i + 1, j) };
                continue;
            }
            self.accept(covered, node);
            covered = trie.nodes[node].subtree_end as usize;
            if is_refused {
                node_path(trie, Some(node), &mut path);
                path.pop();
                j += 1;
            } else {
                path.clear();
                path.extend_from_slice(&frontier[i].path);
                i += 1;
            }
            let keep = replayed.iter().zip(&path).take_while(|(x, y)| x == y).count();
            for (j, &x) in path.iter().enumerate().skip(keep) {
                let up = self.frames[j];
                let next = self.dfa.next_on(self.a, self.dfa.id_of(up), x, false)?;
                debug_assert!(next < DEAD, "a plain-text path without refused bytes stays alive");
                self.frames[j + 1] = next | (up & ABOVE) | (next & ENDED) << 31;
            }
            std::mem::swap(&mut replayed, &mut path);
            let n = &trie.nodes[node];
            if is_refused {
                let up = self.frames[replayed.len()];
                let next = self.dfa.next_on(self.a, self.dfa.id_of(up), n.byte, false)?;
                // PERF: a small subtree is walked: its cut's search and merge cost more.
                if next != DEAD && n.subtree_end as usize - node > CUT_MIN_NODES {
                    // The text state after the byte: a character boundary or inside one.
                    let crate::slice::Body::To(u) = crate::slice::text_step(0, n.byte) else {
                        unreachable!("a refused byte begins plain text")
                    };
                    let inner = self.dfa.text_refusals(self.a, self.dfa.id_of(next), u, self.text)?;
                    if let Some(r) = inner {
                        self.frames[replayed.len() + 1] = next | (up & ABOVE) | (next & ENDED) << 31;
                        self.accept(node, node + 1);
                        let (cuts, again) = REFUSAL_CUTS.get();
                        REFUSAL_CUTS.set((cuts, again + 1));
                        self.below(Some(node), r)?;
                        continue;
                    }
                }
            }
            let (a, follow) = (self.a, self.follow);
            walk_nodes(a, trie, follow, self.dfa, self.frames, self.out, node, n.subtree_end as usize)?;
        }
        self.accept(covered, end);
        Ok(())
    }

    /// Accepts the tokens of nodes `from..to`.
    fn accept(&mut self, from: usize, to: usize) {
        let t = &self.trie;
        let words = self.out.accepted.words_mut();
        for &k in &t.tokens[t.first_token[from] as usize..t.first_token[to] as usize] {
            words[k as usize >> 5] |= 1 << (k & 31);
        }
    }
}

/// The byte path of `node` (empty for the root, `None`) into `path`.
fn node_path(trie: &TokenTrie, node: Option<usize>, path: &mut Vec<u8>) {
    path.clear();
    let mut p = node.map_or(u32::MAX, |n| n as u32);
    while p != u32::MAX {
        path.push(trie.nodes[p as usize].byte);
        p = trie.nodes[p as usize].parent;
    }
    path.reverse();
}

/// Walks trie nodes `from..end` (whole subtrees, in trie order; `frames` holding the path above
/// `from`) by the region DFA, into `out` (see [`walk_region`]).
#[allow(clippy::too_many_arguments)]
fn walk_nodes(
    a: &Automata,
    trie: &TokenTrie,
    follow: Option<&ByteSet>,
    dfa: &mut RegionDfa,
    frames: &mut [u32; MAX_FRAMES],
    out: &mut RegionMask,
    from: usize,
    end: usize,
) -> Result<(), Limit> {
    let mut i = from;
    loop {
        let at = {
            let table = Table { next: &dfa.next, class_of: &dfa.class_of.0 };
            walk_stretch(trie, &table, frames, out.accepted.words_mut(), i, end)
        };
        let Some(at) = at else { break };
        let n = &trie.nodes[at];
        let d = n.depth as usize;
        let (up, class) = (frames[d - 1], dfa.class_of.0[n.byte as usize] as usize);
        if dfa.next[((up & !ABOVE) / 2) as usize + class] == UNKNOWN {
            // Computed, the node is stepped again.
            dfa.step(a, dfa.id_of(up), class)?;
            i = at;
            continue;
        }
        // A dead node below a rule end: its tokens are uncertain.
        let (path, ends) = (&mut out.path, &mut out.ends);
        path.clear();
        let mut p = n.parent;
        while p != u32::MAX {
            path.push(trie.nodes[p as usize].byte);
            p = trie.nodes[p as usize].parent;
        }
        path.reverse();
        path.push(n.byte);
        ends.clear();
        ends.extend(frames[1..d].iter().map(|&f| f & ENDED != 0));
        let sink = (&mut out.suffix_ids, &mut out.suffixes, &mut out.uncertain);
        record_uncertain(trie, at, path, ends, follow, sink);
        i = n.subtree_end as usize;
    }
    Ok(())
}

/// [`classify_region`] as a kernel mask.
pub fn classify_region_kernel(
    a: &Automata,
    trie: &TokenTrie,
    vocab_size: usize,
    state: StateId,
    follow: Option<&ByteSet>,
    dfa: &mut RegionDfa,
    text: Option<&TextSlice>,
) -> Option<KernelMask> {
    let m = classify_region(a, trie, vocab_size, state, follow, dfa, text)?;
    Some(kernel_mask(TokenSet::Bits(m.accepted), m.uncertain, m.suffixes))
}

/// The transitions a stretch of the walk reads.
struct Table<'t> {
    next: &'t [u32],
    class_of: &'t [u8; 256],
}

/// Walks the trie from node `i` to `end` (in trie order, `frames` holding the path above it, see
/// `walk_region`), setting the bits of accepted tokens in `words` and skipping dead subtrees
/// with no rule end above, until the end (`None`) or a node it cannot decide alone: an unknown
/// transition, or a dead step below a rule end (which records uncertain tokens).
/// PERF: kept apart from the DFA's growth and the recording so that the table, the classes and
/// the bitset stay in registers: ~20 instructions per trie node.
fn walk_stretch(
    trie: &TokenTrie,
    table: &Table<'_>,
    frames: &mut [u32; MAX_FRAMES],
    words: &mut [u32],
    mut i: usize,
    end: usize,
) -> Option<usize> {
    let (nodes, tokens) = (&trie.nodes[..end], &trie.tokens[..]);
    while i < nodes.len() {
        let n = &nodes[i];
        // `MAX_FRAMES` is a power of two above every depth (`classify_region`): no bound check.
        let d = n.depth as usize & (MAX_FRAMES - 1);
        let up = frames[(d - 1) & (MAX_FRAMES - 1)];
        let next = table.next[((up & !ABOVE) / 2) as usize + table.class_of[n.byte as usize] as usize];
        if next >= DEAD {
            if next == UNKNOWN || up & ABOVE != 0 {
                return Some(i);
            }
            i = n.subtree_end as usize;
            continue;
        }
        frames[d] = next | (up & ABOVE) | (next & ENDED) << 31;
        for &t in &tokens[n.tok_start as usize..n.tok_end as usize] {
            words[t as usize >> 5] |= 1 << (t & 31);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::bounded_rules;
    use crate::ebnf::parse_ebnf;

    /// Bounded rules: a counted chain of rules is bounded; an unbounded repetition, a rule using
    /// one, and rules on a cycle of references are not.
    #[test]
    fn bounded_rules_are_the_finite_languages_without_cycles() {
        let src = r#"
            root ::= "\"" c2 "\"" | loop | uses | rec
            c2 ::= ch c1 | ch
            c1 ::= ch ch? | "\\u" [0-9a-f]{4}
            ch ::= [a-z@.]
            loop ::= ch* "x"
            uses ::= loop "y"
            rec ::= "(" rec2 ")" | "z"
            rec2 ::= rec | "w"
        "#;
        let g = parse_ebnf(src, "root").unwrap();
        let b = bounded_rules(&g);
        let of = |name: &str| b[g.rules().iter().position(|r| r.name == name).unwrap()];
        assert!(of("c2") && of("c1") && of("ch"));
        assert!(!of("loop") && !of("uses") && !of("rec") && !of("rec2") && !of("root"));
    }

    /// `Automata::all_byte_edges` (what `RegionDfa::init` cuts byte classes by) is every state's
    /// byte edges, each once, in state order: on a grammar with dead paths pruned, one with
    /// lookahead and a JSON Schema object.
    #[test]
    fn all_byte_edges_are_every_states_edges() {
        let grammars = [
            parse_ebnf("root ::= \"a\" x | \"ab\" | [0-9]+ \".\" [a-f]\nx ::= \"b\" x", "root").unwrap(),
            parse_ebnf("root ::= w (\" \" w)* \"!\"\nw ::= [a-z]+ (= \" \" | \"!\")", "root").unwrap(),
            crate::json_schema::json_schema_to_grammar(
                r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}}}"#,
                &crate::json_schema::JsonSchemaOptions::default(),
            )
            .unwrap(),
        ];
        for g in &grammars {
            let a = crate::compiler::Automata::build(g).unwrap();
            let per_state: Vec<_> =
                (0..a.states().len() as u32).flat_map(|s| a.byte_edges(crate::compiler::StateId(s)).to_vec()).collect();
            assert!(!per_state.is_empty());
            assert_eq!(a.all_byte_edges(), &per_state[..]);
        }
    }
}
