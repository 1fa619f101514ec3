//! Counted string bodies of any character class: a shortcut for kernel classification at the
//! positions of `"[C]{m,n}"` (a JSON Schema `pattern` such as `^[A-Za-z\u00aa...]{1,200}$`), `C`
//! any set of JSON string characters, ASCII or not, negated or not.
//!
//! Pipeline place: the compiled grammar finds, per kernel state, a chain of *class levels*
//! ([`class_level`], memoized in [`ClassBodies`]); a state whose chain reads one class `c` times
//! before it can read no more ([`class_capacity`]) takes that class's slice: the tokens that are
//! `C`-text, by the characters they begin ([`ClassBodySlice`], built once per class and compiled
//! grammar). Its kernel is then the slice tokens that begin at most `c` characters, plus walks of
//! the few frontier subtrees the body automaton walks (`"` at a boundary, `\u`, `\/`): no trie
//! walk whose cost grows with the tokens of `C` (a letters class reads most of the vocabulary;
//! each such position took 21-26 ms on Llama 3).
//!
//! A class level is the byte automaton of one character, either inline (the level state's own
//! byte edges, all characters ending in one state `t`) or a call (the state's single rule edge
//! `(C, t)`, whose callee reads one character and ends in a final state without edges); either
//! way the state's other bytes are `"`-like (walked), every byte no string holds is refused,
//! and the states inside a character are plain and not final. The characters are the body
//! automaton's ([`super::body`]): an ASCII byte, a UTF-8 sequence, a short escape.
//!
//! Exactness: along a chain of `c` levels of one class ending in a level that reads no class
//! byte, with no final state at a boundary (the rule cannot end inside), a token is read inside
//! the rule iff it is `C`-text beginning at most `c` characters; any other token leaves the class
//! at a frontier node, and only the walked frontier bytes can be read there (the levels read
//! nothing else), so every other token is refused with no rule end on its way. A chain may end
//! instead in an *exit* ([`exit_reads`]): a plain, non-final state none of whose bytes begins a
//! class character; then a token can also leave the class text after exactly `c` characters (at
//! a boundary) at a byte the exit reads, and those nodes are walked too
//! ([`ClassBodySlice::exits_at`]); a longer class text is refused at the exit. A chain may also
//! be final at some boundaries (a key pattern `[a-z]{1,500}`: the rule may end after any
//! character) when no byte of the rule's FOLLOW set begins a class character ([`ends_served`]):
//! a token that leaves the class text is still refused inside the rule, but the rule ends on its
//! way leave it uncertain, and the only such ends a context can continue are the last boundary
//! before it leaves, when the rule ended there and the byte it leaves by is in FOLLOW (any earlier
//! end is followed by a class byte). Those nodes are walked too (`exits_at` of each final
//! boundary and FOLLOW byte), and walking one replays its path exactly, so it records what the
//! whole walk would. An exit may then be final too (its boundary is one of those ends).
//! A level may also read a few *side bytes* ([`side_bytes`]): one-byte ASCII characters that lead
//! elsewhere than its class characters (an e-mail domain label `[0-9A-Za-z]` reads `-` and `.`
//! besides, into other states). A token that leaves the class text after `k` characters by a
//! side byte of the level at `k` goes on in that other state: those nodes (`exits_at(k, x)`) are
//! walked as well; a side byte begins no class character, so the chain stays exact.
use super::body::{body_table, BodySlice};
use super::{walk_chars, Body, CharCounts, FrontierNode};
use crate::bitset::Bitset;
use crate::compiler::{Automata, StateId};
use crate::fasthash::FastMap;
use crate::follow::ByteSet;
use crate::trie::TokenTrie;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One level of a counted class body (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassLevel {
    /// Every character of class `form` (an id of [`ClassBodies`], or of the caller's interner)
    /// leads to this state; the ASCII side bytes (a mask, see [`char_form`]) lead elsewhere.
    Next(StateId, u32, u128),
    /// No class byte can be read here: only walked bytes (`"`) and no byte a string cannot hold.
    Zero,
}

/// Most (state, body state) pairs in one character's automaton.
const MAX_FORM_PAIRS: usize = 4096;
/// Most character automata one compiled grammar keeps (most states' bytes form one: a literal's
/// next byte), and most class slices it builds; past them a state is walked.
const MAX_FORMS: usize = 1024;
const MAX_CLASSES: usize = 8;
/// Fewest characters in a class for its slice to be built (a state that reads few characters
/// prunes the trie early anyway: digits, hex).
const MIN_CLASS_CHARS: u64 = 32;

/// The number of characters (byte strings from the boundary back to it) a form reads.
fn class_chars(form: &[u32]) -> u64 {
    // Pair offsets; a run's target is the boundary 0, which ends a character, or a pair with
    // fewer bytes left in its character (at most 3 steps deep, so four passes settle the counts).
    let mut offsets = Vec::new();
    let mut i = 0;
    while i < form.len() {
        offsets.push(i);
        i += 2 + 3 * form[i + 1] as usize;
    }
    let mut chars = vec![0u64; offsets.len()];
    for _ in 0..4 {
        for (p, &o) in offsets.iter().enumerate() {
            let runs = form[o + 2..o + 2 + 3 * form[o + 1] as usize].chunks(3);
            chars[p] = runs
                .map(|r| u64::from(r[1] - r[0] + 1) * if r[2] == 0 { 1 } else { chars[r[2] as usize] })
                .fold(0u64, u64::saturating_add);
        }
    }
    chars[0]
}

/// The buffers of [`char_form`], kept between calls.
/// PERF: the compiled grammar asks for the form of every wide state (`build_class_bodies`:
/// ~1,750 asks per typical MaskBench schema); four fresh allocations per ask were a fifth of
/// the asks' cost, stepping each edge byte by byte (now by body-table runs) most of the rest
/// (band callgrind: `Inner::form` 248 -> 46 M instructions).
#[derive(Debug, Default)]
pub struct FormScratch {
    pairs: Vec<(StateId, u8)>,
    index: FastMap<(StateId, u8), u32>,
    edges: Vec<crate::compiler::ByteEdge>,
    form: Vec<u32>,
}

/// The canonical form of the character automaton from `start` (see the module doc): its
/// (state, body state) pairs numbered in discovery order, pair 0 the boundary, each written as
/// its body state, its number of byte runs, then `(lo, hi, target pair)` per run; `None` if it
/// is no class character automaton. `call`: the characters end in a final state without edges
/// (a callee's end); else in one plain state, returned too. A start that reads no body byte
/// has the form of pair 0 alone with no runs.
///
/// Written into `sc`'s buffers, kept between calls.
pub fn char_form<'s>(
    a: &Automata,
    start: StateId,
    call: bool,
    sc: &'s mut FormScratch,
) -> Option<(&'s [u32], Option<StateId>, u128)> {
    let plain = |q: StateId| a.rule_edges(q).is_empty();
    if !plain(start) || (call && a.state(start).is_final) {
        return None;
    }
    let (table, _) = body_table();
    let (class_end, sides) = if call { (None, 0) } else { side_bytes(a, start)? };
    let is_side = |x: u8| x < 0x80 && sides >> x & 1 == 1;
    let FormScratch { pairs, index, edges, form } = sc;
    pairs.clear();
    index.clear();
    form.clear();
    pairs.push((start, 0));
    index.insert((start, 0), 0);
    let mut end: Option<StateId> = class_end;
    let mut i = 0;
    while i < pairs.len() {
        let (q, b) = pairs[i];
        i += 1;
        form.push(u32::from(b));
        let count_at = form.len();
        form.push(0);
        edges.clear();
        edges.extend_from_slice(a.byte_edges(q));
        edges.sort_unstable_by_key(|e| e.lo);
        let runs = body_runs();
        for e in edges.iter() {
            // One body-table run of bytes at a time: every byte of it steps alike.
            let mut x = e.lo;
            loop {
                let mut hi = runs[usize::from(b)][usize::from(x)].min(e.hi);
                // The start's side bytes are left out of the form: a run stops before each.
                if i == 1 && sides != 0 {
                    if is_side(x) {
                        if x == e.hi {
                            break;
                        }
                        x += 1;
                        continue;
                    }
                    if let Some(y) = (x..=hi).skip(1).find(|&y| is_side(y)) {
                        hi = y - 1;
                    }
                }
                let target = match table[usize::from(b)][usize::from(x)] {
                    Body::Dead => return None,
                    Body::Walk => None,
                    Body::To(0) if call => {
                        let t = a.state(e.target);
                        if !(t.is_final && a.byte_edges(e.target).is_empty() && plain(e.target)) {
                            return None;
                        }
                        Some(0)
                    }
                    Body::To(0) => {
                        if !plain(e.target) || *end.get_or_insert(e.target) != e.target {
                            return None;
                        }
                        Some(0)
                    }
                    Body::To(nb) => {
                        if !plain(e.target) || a.state(e.target).is_final {
                            return None;
                        }
                        let next = pairs.len() as u32;
                        let j = *index.entry((e.target, nb)).or_insert(next);
                        if j == next {
                            if pairs.len() >= MAX_FORM_PAIRS {
                                return None;
                            }
                            pairs.push((e.target, nb));
                        }
                        Some(j)
                    }
                };
                if let Some(target) = target {
                    // Runs: consecutive bytes to one target.
                    let n = form.len();
                    if form[count_at] > 0 && form[n - 2] + 1 == u32::from(x) && form[n - 1] == target {
                        form[n - 2] = u32::from(hi);
                    } else {
                        form.extend([u32::from(x), u32::from(hi), target]);
                        form[count_at] += 1;
                    }
                }
                if hi == e.hi {
                    break;
                }
                x = hi + 1;
            }
        }
    }
    Some((form, end, sides))
}

/// Most *side bytes* of an inline class level: ASCII characters it reads into another state than
/// its class characters' (the `-` and `.` of an e-mail domain label, `[0-9A-Za-z]` its class).
const MAX_SIDE_BYTES: u32 = 8;

/// The class characters' end state and the side bytes of inline level `start` (see
/// [`char_form`]): when its one-byte ASCII characters lead to more than one state and it reads
/// no other byte but `"`-like ones, the state that at least [`MIN_CLASS_CHARS`] of them lead to is
/// the class's, and the others (at most [`MAX_SIDE_BYTES`]) are side bytes, walked as frontier
/// (`ClassBodySlice::exits_at`); `(None, 0)` when they lead to one state or none; `None` (no
/// level) otherwise. A loop's level with side bytes ends its chain ([`class_capacity`]).
fn side_bytes(a: &Automata, start: StateId) -> Option<(Option<StateId>, u128)> {
    let (table, _) = body_table();
    let mut by_target: Vec<(StateId, u128)> = Vec::new();
    for e in a.byte_edges(start) {
        for x in (e.lo..=e.hi).filter(|&x| x < 0x80 && table[0][usize::from(x)] == Body::To(0)) {
            match by_target.iter_mut().find(|(t, _)| *t == e.target) {
                Some((_, m)) => *m |= 1 << x,
                None => by_target.push((e.target, 1 << x)),
            }
        }
    }
    if by_target.len() <= 1 {
        return Some((None, 0));
    }
    // Only ASCII text: a level that reads every other character besides (an unanchored pattern's
    // state before its trigger byte) would take a slice of nearly the whole vocabulary.
    if a.byte_edges(start).iter().any(|e| e.hi >= 0x80) {
        return None;
    }
    let (end, class) = *by_target.iter().max_by_key(|(t, m)| (m.count_ones(), std::cmp::Reverse(t.0)))?;
    let sides = by_target.iter().fold(0u128, |s, (_, m)| s | m) & !class;
    (u64::from(class.count_ones()) >= MIN_CLASS_CHARS && sides.count_ones() <= MAX_SIDE_BYTES)
        .then_some((Some(end), sides))
}

/// Per body state and byte `x`: the last byte of the run from `x` over which the body table
/// ([`body_table`]) steps alike.
fn body_runs() -> &'static [[u8; 256]; 9] {
    static RUNS: std::sync::OnceLock<[[u8; 256]; 9]> = std::sync::OnceLock::new();
    RUNS.get_or_init(|| {
        let (table, _) = body_table();
        let mut runs = [[255u8; 256]; 9];
        for (row, out) in table.iter().zip(runs.iter_mut()) {
            for x in (0..255).rev() {
                out[x] = if row[x] == row[x + 1] { out[x + 1] } else { x as u8 };
            }
        }
        runs
    })
}

/// The class level of state `r` (see the module doc), `None` if it is none. `form` interns a
/// character automaton's form: `form(start, call)` is [`char_form`] with the form as an id (the
/// compiled grammar memoizes it by start state).
pub fn class_level(
    a: &Automata,
    r: StateId,
    mut form: impl FnMut(StateId, bool) -> Option<StartForm>,
) -> Option<ClassLevel> {
    let (table, _) = body_table();
    match *a.rule_edges(r) {
        [] => {
            let (id, end, empty, sides) = form(r, false)?;
            match end {
                Some(t) => Some(ClassLevel::Next(t, id, sides)),
                None => empty.then_some(ClassLevel::Zero),
            }
        }
        [(c, t)] => {
            // The state's own bytes are all walked (`"`).
            let own = a.byte_edges(r).iter().all(|e| (e.lo..=e.hi).all(|x| table[0][usize::from(x)] == Body::Walk));
            let (id, _, empty, _) = form(a.callee_start(r, c), true)?;
            (own && !empty).then_some(ClassLevel::Next(t, id, 0))
        }
        _ => None,
    }
}

/// A chain of class levels from a kernel state ([`class_capacity`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassChain {
    /// The class (a form id).
    pub class: u32,
    /// The capacity: the levels in the chain, at most `max_chars`.
    pub chars: u32,
    /// The exit state the chain ends in, if it ends in one (else in [`ClassLevel::Zero`]).
    pub exit: Option<StateId>,
    /// The boundaries `k` (characters read, `1..=chars`, ascending) after which the rule may end
    /// (the level state there is final).
    pub ends: Vec<u32>,
    /// The levels that read side bytes: (characters read before the level, its side bytes),
    /// ascending.
    pub sides: Vec<(u32, u128)>,
    /// The bytes the exit reads that are one-byte class characters (`-` after `....` of any
    /// character), as an ASCII mask, at most [`MAX_INNER_BYTES`] (see [`exit_reads`]).
    pub inner: u128,
}

/// The class and capacity of the counted class body at `s`: the `c` of a chain of `c` levels of
/// one class from `s` ending in [`ClassLevel::Zero`] (or `max_chars` when the chain reads at least
/// that many characters, loops included: no token begins more), `None` if there is no such chain.
/// Or a chain of `c` levels ending in an *exit* `r`, a state that is no level of the class (`-`
/// after `[0-9A-Za-z]{8}`): then `exit` is `Some(r)`, for the caller to check ([`exit_reads`]).
/// The boundaries at which a level is final (a key pattern `[a-z]{1,500}` may end after any
/// character) are listed in `ends`, for the caller to check ([`ends_served`]).
///
/// A state that is no level, after at least one character, may *nest* the chain: `nested(r)` gives `(start, t)` when `r` reads
/// only walked bytes and its one rule edge calls the rule starting at `start` into `t`. When the
/// level of `t` is [`ClassLevel::Zero`], the chain goes on in the callee (no character read on
/// the way): every end of the callee leads to `t`, which reads no class byte (only walked ones,
/// `"`), so the class text the callee refuses is refused after it too. The callee's final
/// boundaries are the rule's ends only while every `t` on the way is final (`open`: the rule
/// ends where all the callees do). A chain that nests ends in [`ClassLevel::Zero`] or after
/// `max_chars` levels only (no exit and no loop inside a callee).
/// Not at the chain's first state: a key start (a call of the key's counted pattern, then `"`)
/// is served by composing its callee's kernel, as before nesting.
/// PERF: with loops inside callees, an open object's key start (a call of its key loop, which
/// the body slice serves in ~0.2 ms) took the class slice of its key characters instead, ~2 ms
/// (MaskBench BFCL_java_67 token 27).
///
/// PERF: a `maxLength` string whose `pattern` ends in `.*` (MaskBench sp_340's `version`,
/// `^(\d+\.\d+\.\d+.*)$` within 32 characters) is written as nested optional rules
/// (`str.re_30 ::= (str.re_1 str.re_31)?`, each a call of the `.` rule and of the next); its
/// chain stopped at the first nested call, an exit that reads nothing, and each position after
/// the numbers walked the trie (5.5-10 ms on Llama 3).
pub fn class_capacity(
    s: StateId,
    max_chars: u32,
    mut level: impl FnMut(StateId) -> Option<ClassLevel>,
    is_final: impl Fn(StateId) -> bool,
    nested: impl Fn(StateId) -> Option<(StateId, StateId)>,
) -> Option<ClassChain> {
    let mut class = None;
    let (mut ends, mut sides) = (Vec::new(), Vec::new());
    // Callees the chain went into, and whether their ends are the rule's (every `t` final).
    let (mut depth, mut open) = (0usize, true);
    let chain = |class: Option<u32>, chars, exit, ends, sides| {
        class.map(|class| ClassChain { class, chars, exit, ends, sides, inner: 0 })
    };
    let mut r = s;
    let mut c = 0;
    while c < max_chars {
        match level(r) {
            Some(ClassLevel::Zero) => return chain(class, c, None, ends, sides),
            Some(ClassLevel::Next(_, k, _)) if class.is_some_and(|k0| k0 != k) => {
                return (depth == 0).then(|| chain(class, c, Some(r), ends, sides)).flatten()
            }
            None => match nested(r) {
                Some((start, t)) if c > 0 && depth < MAX_NESTED && level(t) == Some(ClassLevel::Zero) => {
                    depth += 1;
                    open &= is_final(t);
                    // A callee that may end at once ends the rule at this boundary too.
                    if open && c > 0 && is_final(start) && ends.last() != Some(&c) {
                        ends.push(c);
                    }
                    r = start;
                }
                _ => return (depth == 0).then(|| chain(class, c, Some(r), ends, sides)).flatten(),
            },
            // A loop with side bytes is left to the run indexes and class slices, as before them.
            Some(ClassLevel::Next(t, _, side)) if t == r && side != 0 => {
                return (depth == 0).then(|| chain(class, c, Some(r), ends, sides)).flatten()
            }
            Some(ClassLevel::Next(t, k, side)) => {
                class = Some(k);
                if side != 0 {
                    sides.push((c, side));
                }
                if is_final(t) && open {
                    ends.push(c + 1);
                }
                if t == r {
                    // A loop inside a callee is left to the body and run shortcuts (an open
                    // object's key start calls its key loop: the body slice serves it).
                    if depth > 0 {
                        return None;
                    }
                    // A loop: every later boundary is the same state.
                    if is_final(t) && open {
                        ends.extend(c + 2..=max_chars);
                    }
                    break;
                }
                r = t;
                c += 1;
            }
        }
    }
    chain(class, max_chars, None, ends, sides)
}

/// Most callees one class chain goes into ([`class_capacity`]): a `.{0,n}` tail is nested about
/// one rule per three characters.
const MAX_NESTED: usize = 64;

/// Whether a chain of class `form` whose rule may end at some boundaries is one a class-body slice
/// serves, with `follow` the rule's FOLLOW set: no byte of `follow` begins a class character. Then
/// a rule end is followed by a byte outside the class, so of the tokens that leave the class text,
/// only those leaving it at a boundary where the rule ended, by a byte of `follow`, can be
/// uncertain ([`ClassBodySlice::exits_at`]); every other rule end on a token's path is followed by
/// a class byte, which no context reads after the rule.
pub fn ends_served(form: &[u32], follow: &ByteSet) -> bool {
    let runs = &form[2..2 + 3 * form[1] as usize];
    runs.chunks(3).all(|run| (run[0]..=run[1]).all(|x| !follow.contains(x as u8)))
}

/// Whether exit state `r` of a chain of class `form` ([`class_capacity`]) is one a class-body
/// slice serves, with the bytes it reads that are one-byte class characters (an ASCII mask):
/// plain, and every byte it reads either begins no class character (a token leaving the class
/// at `r` leaves it at a byte `r` reads: [`ClassBodySlice::exits_at`]) or is a whole class
/// character of one ASCII byte (a token of more class characters than the chain goes on at `r`
/// only where its next character is such a byte: [`ClassBodySlice::past_reading`]); any other
/// class character is refused at `r`, and so is an exit reading more than [`MAX_INNER_BYTES`]
/// of the one-byte ones. A final exit is a boundary in the chain's `ends` (the level before
/// leads to it), which [`ends_served`] checks.
pub fn exit_reads(a: &Automata, r: StateId, form: &[u32]) -> Option<u128> {
    let runs = &form[2..2 + 3 * form[1] as usize];
    let run_of = |x: u8| runs.chunks(3).find(|run| (run[0]..=run[1]).contains(&u32::from(x)));
    let (table, _) = body_table();
    let mut inner = 0u128;
    if !a.rule_edges(r).is_empty() {
        return None;
    }
    for x in a.byte_edges(r).iter().flat_map(|e| e.lo..=e.hi) {
        match run_of(x) {
            None => {}
            // Back to the boundary pair 0 in one byte: the whole character.
            Some(run) if x < 0x80 && run[2] == 0 && table[0][usize::from(x)] == Body::To(0) => inner |= 1 << x,
            Some(_) => return None,
        }
    }
    (inner.count_ones() <= MAX_INNER_BYTES).then_some(inner)
}

/// Most one-byte class characters a chain's exit may read ([`exit_reads`]). Invariant: the
/// inner-exit walk (`KernelWalk::walk_inner_exits`) visits the subtrees of the trie nodes right
/// past `c` characters of class text whose byte is one the exit reads: the tokens with such a
/// byte at that place, whatever follows it, so the frontier's size is set by which class
/// characters the exit reads. A few separators (`-` and `:` of a date, `+`, `-`, `Z` of its
/// zone) make a small one (at most ~1 K of Llama 3's 275 K trie nodes with their subtrees,
/// MaskBench o89194). An exit that goes on in class text (a level of an overlapping class, of
/// at least [`MIN_CLASS_CHARS`] characters: `[\w\-/]` after the `.` of `^[\w\-\./]+\.php+$`)
/// makes it all class text past `c` characters (~80-100 K nodes, walked on chart frames: 4x
/// main's instructions on MaskBench o63939): such an exit refuses the chain, as before inner
/// exits, whatever `c` is.
const MAX_INNER_BYTES: u32 = 8;

/// The tokens that are text of one class (a character automaton's form, see [`char_form`]), by
/// the characters they begin, and the frontier nodes the body automaton walks.
#[derive(Debug)]
pub struct ClassBodySlice {
    counts: CharCounts,
    /// The nodes where a path of class text first reads `"` at a boundary, `\u` or `\/` (in trie
    /// order); every other node where it leaves the class reads a byte no level reads.
    pub walked: Vec<FrontierNode>,
    /// `walked_chars[i]`: the characters the path above `walked[i]` begins.
    pub walked_chars: Vec<u32>,
    /// The class automaton's table (`table[pair][byte]`: the next pair, or [`NONE`]), for
    /// [`Self::prepare_past`]'s walk.
    table: Box<[[u16; 256]]>,
    /// `past[k]`: the children of the nodes with children whose path is class text ending at a
    /// character boundary after `k` characters, whose byte is a one-byte class character
    /// (`one_byte`), by byte; set by [`Self::prepare_past`] (see [`Self::past_reading`]).
    past: std::sync::OnceLock<Box<[PastByByte]>>,
    one_byte: u128,
    /// The other nodes where a path of class text leaves the class at a character boundary, by
    /// (characters begun above them, byte): the ones a chain's exit state may read.
    exits: Exits,
}

/// Frontier nodes keyed by (characters begun above them, byte), their paths in one byte arena.
/// PERF: a `Box` per path and a comparison sort were ~40% of [`ClassBodySlice::new`] (~7 K exits a
/// slice on Llama 3: MaskBench o63939's five slices, 33.8 M instructions, built on the compile's
/// thread or in the first fill that finds one unbuilt).
#[derive(Debug, Default)]
struct Exits {
    /// Sorted by (characters, byte), in trie order within a key (after [`Self::sort`]).
    nodes: Vec<Exit>,
    paths: Vec<u8>,
}

#[derive(Clone, Copy, Debug)]
struct Exit {
    chars: u32,
    byte: u8,
    node: u32,
    /// `paths[path.0..path.1]`: the bytes above the node.
    path: (u32, u32),
}

impl Exits {
    fn push(&mut self, chars: u32, byte: u8, node: u32, path: &[u8]) {
        let from = self.paths.len() as u32;
        self.paths.extend_from_slice(path);
        self.nodes.push(Exit { chars, byte, node, path: (from, self.paths.len() as u32) });
    }

    /// Sorts by (characters, byte), then node. Nodes pushed in trie order (both builders push
    /// them so) take a counting sort by key, which keeps that order within a key.
    fn sort(&mut self) {
        let key = |e: &Exit| e.chars as usize * 256 + usize::from(e.byte);
        if !self.nodes.windows(2).all(|w| w[0].node < w[1].node) {
            self.nodes.sort_unstable_by_key(|e| (key(e), e.node));
            return;
        }
        let Some(top) = self.nodes.iter().map(key).max() else { return };
        let mut starts = vec![0u32; top + 2];
        for e in &self.nodes {
            starts[key(e) + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut sorted = vec![self.nodes[0]; self.nodes.len()];
        for e in &self.nodes {
            let at = &mut starts[key(e)];
            sorted[*at as usize] = *e;
            *at += 1;
        }
        self.nodes = sorted;
    }

    /// The nodes keyed (`chars`, `byte`), with their paths, in trie order.
    fn at(&self, chars: u32, byte: u8) -> impl Iterator<Item = (u32, &[u8])> {
        let from = self.nodes.partition_point(|e| (e.chars, e.byte) < (chars, byte));
        let same = self.nodes[from..].iter().take_while(move |e| (e.chars, e.byte) == (chars, byte));
        same.map(|e| (e.node, &self.paths[e.path.0 as usize..e.path.1 as usize]))
    }

    /// Every node with its key and path, in order (for tests).
    fn listed(&self) -> Vec<(u32, u8, u32, &[u8])> {
        self.nodes
            .iter()
            .map(|e| (e.chars, e.byte, e.node, &self.paths[e.path.0 as usize..e.path.1 as usize]))
            .collect()
    }

    fn memory_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Exit>() + self.paths.capacity()
    }
}

/// Nodes by their (ASCII) byte ([`ClassBodySlice::past_reading`]).
#[derive(Debug)]
struct PastByByte {
    starts: Box<[u32; 129]>,
    nodes: Box<[u32]>,
}

impl PastByByte {
    /// The children of `parents` (trie nodes) whose byte is in `bytes` (ASCII), by byte: a
    /// counting sort, in trie order within a byte.
    fn new(trie: &TokenTrie, parents: &[u32], bytes: u128) -> PastByByte {
        let nodes = &trie.nodes;
        let (mut kids, mut starts) = (Vec::new(), Box::new([0u32; 129]));
        for &n in parents {
            let (end, mut c) = (nodes[n as usize].subtree_end, n + 1);
            while c < end {
                let x = nodes[c as usize].byte;
                if x < 0x80 && bytes >> x & 1 == 1 {
                    kids.push(c);
                    starts[usize::from(x) + 1] += 1;
                }
                c = nodes[c as usize].subtree_end;
            }
        }
        for x in 0..128 {
            starts[x + 1] += starts[x];
        }
        let mut at = *starts;
        let mut past = vec![0u32; kids.len()].into_boxed_slice();
        for c in kids {
            let x = usize::from(nodes[c as usize].byte);
            past[at[x] as usize] = c;
            at[x] += 1;
        }
        PastByByte { starts, nodes: past }
    }
}

/// No transition in a [`ClassBodySlice::new`] table.
const NONE: u16 = u16::MAX;

/// A form's table (`table[pair][byte]`: the next pair, or [`NONE`]) and each pair's body state.
fn form_table(form: &[u32]) -> (Vec<[u16; 256]>, Vec<u8>) {
    let (mut table, mut body) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < form.len() {
        let mut row = [NONE; 256];
        body.push(form[i] as u8);
        let runs = form[i + 1] as usize;
        for run in form[i + 2..i + 2 + 3 * runs].chunks(3) {
            for x in run[0]..=run[1] {
                row[x as usize] = run[2] as u16;
            }
        }
        table.push(row);
        i += 2 + 3 * runs;
    }
    (table, body)
}

/// Class-body slices read off the body slice ([`ClassBodySlice::from_body`]), for tests.
static FROM_BODY: AtomicUsize = AtomicUsize::new(0);

test_counter! {
    /// How many class-body slices this thread found by a pruned scan ([`ClassBodySlice::pruned`]).
    pub fn class_body_slices_pruned => PRUNED
}

/// *Character bits* ([`CHAR_BITS`]): what one trie node's byte adds to the body text of its path,
/// by the body state before it. A bit of its own per ASCII character at a boundary (`\` for an
/// escape begun), per escaped character, one for every lead byte of a multi-byte character, one
/// for every continuation byte, and one for a byte the body automaton does not read (`Walk` or
/// `Dead`), set on every node below such a byte too.
const NOT_BODY: u8 = 0;
const MULTI: u8 = 1;
/// The escaped characters `\"`, `\\`, `b`, `f`, `n`, `r`, `t` after `\` (`\/` and `\u` are walked).
const ESCAPED: u8 = 2;
const CONT: u8 = 9;

/// The character bit of byte `x` from body state `b` (see [`NOT_BODY`]).
const fn char_bit_of(b: u8, x: u8) -> u8 {
    match super::body::body_step_of(b, x) {
        Body::To(_) if b == 0 && x >= 0x80 => MULTI,
        // ASCII (`\`: an escape begun); 0x20 and up, so clear of the bits below.
        Body::To(_) if b == 0 => x,
        Body::To(_) if b == 1 => match x {
            b'"' => ESCAPED,
            b'\\' => ESCAPED + 1,
            b'b' => ESCAPED + 2,
            b'f' => ESCAPED + 3,
            b'n' => ESCAPED + 4,
            b'r' => ESCAPED + 5,
            _ => ESCAPED + 6,
        },
        Body::To(_) => CONT,
        _ => NOT_BODY,
    }
}

/// [`char_bit_of`] for every body state and byte.
static CHAR_BITS: [[u8; 256]; 9] = {
    let mut t = [[NOT_BODY; 256]; 9];
    let mut b = 0;
    while b < 9 {
        let mut x = 0;
        while x < 256 {
            t[b][x] = char_bit_of(b as u8, x as u8);
            x += 1;
        }
        b += 1;
    }
    t
};

/// Per vocabulary, for [`ClassBodySlice::pruned`]: per trie node, the union of the character bits
/// ([`NOT_BODY`]) of the node and of every node below it, as the body automaton reads its path.
/// A class-body scan skips a subtree whose bits the class reads all: every path in it is class text.
/// Built with the vocabulary's index (16 bytes a node: 4.4 MB on Llama 3).
#[derive(Debug)]
pub struct ClassTextIndex {
    below: Vec<u128>,
}

/// [`ClassTextIndex::new`]'s body state past a byte outside body text.
const OUT: u8 = 9;

/// Per body state (and [`OUT`]) and byte: the state after the byte (`OUT` where the body automaton
/// does not read it) and its character bit.
static TEXT_STEPS: [[(u8, u8); 256]; 10] = {
    let mut t = [[(OUT, NOT_BODY); 256]; 10];
    let mut b = 0;
    while b < 9 {
        let mut x = 0;
        while x < 256 {
            if let Body::To(c) = super::body::body_step_of(b as u8, x as u8) {
                t[b][x] = (c, char_bit_of(b as u8, x as u8));
            }
            x += 1;
        }
        b += 1;
    }
    t
};

/// `ONE[k]`: bit `k` alone.
/// PERF: a shift of a `u128` by a variable is ~10 instructions, a sixth of the index's build.
static ONE: [u128; 128] = {
    let mut t = [0u128; 128];
    let mut k = 0;
    while k < 128 {
        t[k] = 1 << k;
        k += 1;
    }
    t
};

impl ClassTextIndex {
    /// PERF: 15.4 M instructions on Llama 3's 274,520 nodes, once per vocabulary (22.1 M with a
    /// zeroed array, a look-up of the body table and a `u128` shift per node).
    pub fn new(trie: &TokenTrie) -> ClassTextIndex {
        let nodes = &trie.nodes;
        let mut below: Vec<u128> = Vec::with_capacity(nodes.len());
        // at[d]: the body state after the node at depth d on the current path (OUT: not body text).
        let mut at = vec![0u8; trie.max_depth as usize + 1];
        for n in nodes {
            let d = n.depth as usize;
            let (next, bit) = TEXT_STEPS[usize::from(at[d - 1])][usize::from(n.byte)];
            at[d] = next;
            below.push(ONE[usize::from(bit)]);
        }
        // Preorder: a child comes after its parent, so a reverse pass sees the children first.
        for i in (0..nodes.len()).rev() {
            let p = nodes[i].parent;
            if p != u32::MAX {
                below[p as usize] |= below[i];
            }
        }
        ClassTextIndex { below }
    }

    pub fn memory_size(&self) -> usize {
        self.below.capacity() * std::mem::size_of::<u128>()
    }
}

/// The character bits ([`NOT_BODY`]) form `table` reads, where it reads exactly the body text
/// whose bits are among them: `None` otherwise (a class of some multi-byte characters only, a
/// form whose pairs step other than the body automaton). Exact: every pair `p`, of body state
/// `b`, reads byte `x` iff the body automaton steps on it from `b` (`To(c)`) and the bit of
/// `(b, x)` is in the set, into a pair of body state `c`; only pair 0 has body state 0. Then the
/// form reads a path iff the body automaton does and every node's bit is in the set, in the
/// body state along it.
fn text_bits(table: &[[u16; 256]], pair_body: &[u8]) -> Option<u128> {
    let steps = &body_table().0;
    let mut bits = 1u128 << CONT;
    let read = |p: usize| (0..256).filter(move |&x| table[p][x] != NONE);
    bits |= read(0).fold(0u128, |m, x| m | 1 << CHAR_BITS[0][x]);
    if let Some(&e) = table[0].get(usize::from(b'\\')).filter(|&&e| e != NONE) {
        bits |= read(usize::from(e)).fold(0u128, |m, x| m | 1 << CHAR_BITS[1][x]);
    }
    for (p, row) in table.iter().enumerate() {
        let b = usize::from(pair_body[p]);
        if (p == 0) != (b == 0) || b >= steps.len() {
            return None;
        }
        for (x, &next) in row.iter().enumerate() {
            let want = match steps[b][x] {
                Body::To(c) if bits >> CHAR_BITS[b][x] & 1 == 1 => Some(c),
                _ => None,
            };
            match (next, want) {
                (NONE, None) => {}
                (q, Some(c)) if q != NONE && pair_body[usize::from(q)] == c => {}
                _ => return None,
            }
        }
    }
    Some(bits)
}

/// How many class-body slices were read off the body slice so far (all vocabularies), for tests.
#[doc(hidden)]
pub fn class_body_slices_from_body() -> usize {
    FROM_BODY.load(Ordering::Relaxed)
}

impl ClassBodySlice {
    /// PERF: one walk of the class-text part of the trie (and its frontier), the class automaton
    /// a table lookup per node.
    pub fn new(trie: &TokenTrie, vocab_size: usize, form: &[u32]) -> ClassBodySlice {
        let (table, body) = form_table(form);
        let mut counts = CharCounts::new(vocab_size);
        let mut walked = Vec::new();
        let mut walked_chars = Vec::new();
        let mut exits = Exits::default();
        let step = |p: u16, x: u8| Some(table[usize::from(p)][usize::from(x)]).filter(|&next| next != NONE);
        let token = |k: u32, t: u32| counts.insert(k, t);
        let leave = |node: u32, path: &[u8], (p, k): (u16, u32), x: u8| {
            if body_table().0[usize::from(body[usize::from(p)])][usize::from(x)] == Body::Walk {
                walked.push(FrontierNode { node, path: path.into(), dead: false });
                walked_chars.push(k);
            } else if p == 0 {
                exits.push(k, x, node, path);
            }
        };
        walk_chars(trie, 0u16, step, |p| p == 0, |_, _| {}, token, leave);
        counts.finish();
        ClassBodySlice::assemble(counts, walked, walked_chars, table, exits)
    }

    /// The slice of `form` read off the vocabulary's body slice, where the form reads exactly the
    /// body automaton's characters (the JSON string character: an unanchored `pattern`'s tail,
    /// MaskBench o56021's `^[A-Za-z][A-Za-z0-9_]*` within a `maxLength`); `None` otherwise.
    /// Exact: every pair `p` of the form reads byte `x` iff its body state `b` steps on it
    /// (`To(c)`), into a pair whose body state is `c`, and only pair 0 has body state 0 (the
    /// boundary). Then [`Self::new`]'s walk and [`BodySlice::new`]'s visit the same nodes with
    /// the same characters begun and leave at the same ones, so their tokens by characters are
    /// equal, the body frontier's walked nodes (`"` at a boundary, `\u`, `\/`) are this slice's
    /// `walked`, and its dead nodes left at a boundary are its `exits`.
    /// PERF: a copy of the body slice's counts and a pass over its frontier, against a walk of the
    /// body-text part of the trie (~16.5 M instructions, ~2.5 ms on Llama 3) in the fill that
    /// found the slice unbuilt (o56021 token 5: its states' tries at compile went to string bodies).
    /// `body` gives the body slice (built on first use), asked only for such a form.
    pub fn from_body<'b>(
        trie: &TokenTrie,
        body: impl FnOnce() -> &'b BodySlice,
        form: &[u32],
    ) -> Option<ClassBodySlice> {
        let (steps, _) = body_table();
        let (table, pair_body) = form_table(form);
        for (p, row) in table.iter().enumerate() {
            let b = usize::from(pair_body[p]);
            if (p == 0) != (b == 0) {
                return None;
            }
            for (&next, step) in row.iter().zip(steps[b].iter()) {
                match (next, *step) {
                    (NONE, Body::To(_)) => return None,
                    (NONE, _) => {}
                    (q, Body::To(c)) if pair_body[usize::from(q)] == c => {}
                    _ => return None,
                }
            }
        }
        let body = body();
        let (mut walked, mut walked_chars, mut exits) = (Vec::new(), Vec::new(), Exits::default());
        for f in &body.frontier {
            // The body state and characters begun where the path leaves (as `walk_chars` counts).
            let (mut b, mut k) = (0u8, 0u32);
            for &x in &f.path {
                k += u32::from(b == 0);
                let Body::To(c) = steps[usize::from(b)][usize::from(x)] else {
                    unreachable!("a frontier path is body text")
                };
                b = c;
            }
            if !f.dead {
                walked.push(FrontierNode { node: f.node, path: f.path.clone(), dead: false });
                walked_chars.push(k);
            } else if b == 0 {
                exits.push(k, trie.nodes[f.node as usize].byte, f.node, &f.path);
            }
        }
        FROM_BODY.fetch_add(1, Ordering::Relaxed);
        Some(ClassBodySlice::assemble(body.counts().clone(), walked, walked_chars, table, exits))
    }

    /// The slice of `form` found by a scan of the trie that skips every subtree of class text
    /// whole ([`ClassTextIndex`]), where the form reads the body text of some character bits
    /// ([`text_bits`]: an ASCII class, negated or not, with or without the multi-byte
    /// characters and escapes); `None` otherwise.
    /// Exact: [`Self::new`]'s walk visits the nodes whose parent's path is class text; this scan
    /// visits them too but those below a node whose subtree is class text all through: no node
    /// there leaves the class, and their tokens are body text of the characters the body slice
    /// counts for them. So the walked nodes and exits are [`Self::new`]'s, in trie order, and the
    /// counts are the body slice's less the tokens below a node whose character the class refuses.
    /// PERF: [`Self::new`] walks the class-text part of the trie (~96 K nodes, ~6.8 M instructions
    /// for `[\w.\- ]` on Llama 3), in the compile's thread or in the first fill that finds the slice
    /// unbuilt (MaskBench o63939 t6, o37613 t5: the fill took ~2-3.4 ms).
    pub fn pruned(trie: &TokenTrie, index: &ClassTextIndex, body: &BodySlice, form: &[u32]) -> Option<ClassBodySlice> {
        let (table, pair_body) = form_table(form);
        let bits = text_bits(&table, &pair_body)?;
        let steps = &body_table().0;
        let nodes = &trie.nodes;
        let depth = trie.max_depth as usize + 1;
        // at[d]: (body state, characters begun) after the node at depth d on the current path.
        let mut at: Vec<(u8, u32)> = vec![(0, 0); depth];
        let mut path: Vec<u8> = vec![0; depth];
        let (mut walked, mut walked_chars, mut exits) = (Vec::new(), Vec::new(), Exits::default());
        // Body tokens that are not class text: at or below a node whose character it refuses.
        let mut refused = Bitset::new(body.slice.len());
        let mut i = 0;
        while i < nodes.len() {
            let n = &nodes[i];
            let d = n.depth as usize;
            let (q, k) = at[d - 1];
            let x = usize::from(n.byte);
            if bits >> CHAR_BITS[usize::from(q)][x] & 1 == 0 {
                // The path leaves the class here (as `Self::new`'s `leave`).
                match steps[usize::from(q)][x] {
                    Body::Walk => {
                        walked.push(FrontierNode { node: i as u32, path: path[..d - 1].into(), dead: false });
                        walked_chars.push(k);
                    }
                    step => {
                        if q == 0 {
                            exits.push(k, n.byte, i as u32, &path[..d - 1]);
                        }
                        if matches!(step, Body::To(_)) {
                            for &t in trie.subtree_tokens(i as u32) {
                                refused.set(t as usize);
                            }
                        }
                    }
                }
                i = n.subtree_end as usize;
            } else if index.below[i] & !bits == 0 {
                i = n.subtree_end as usize;
            } else {
                let Body::To(c) = steps[usize::from(q)][x] else { unreachable!("a class byte is body text") };
                at[d] = (c, k + u32::from(q == 0));
                path[d - 1] = n.byte;
                i += 1;
            }
        }
        PRUNED.set(PRUNED.get() + 1);
        Some(ClassBodySlice::assemble(body.counts().without(&refused), walked, walked_chars, table, exits))
    }

    fn assemble(
        counts: CharCounts,
        walked: Vec<FrontierNode>,
        walked_chars: Vec<u32>,
        table: Vec<[u16; 256]>,
        mut exits: Exits,
    ) -> ClassBodySlice {
        exits.sort();
        // The one-byte class characters: ASCII bytes from the boundary back to it.
        let one_byte = (0..0x80u8).filter(|&x| table[0][usize::from(x)] == 0).fold(0u128, |m, x| m | 1 << x);
        let past = std::sync::OnceLock::new();
        ClassBodySlice { counts, walked, walked_chars, table: table.into(), past, one_byte, exits }
    }

    /// Whether `other` holds the same tokens by characters, walked nodes (with their paths and
    /// characters), exits and table (for tests: slices of one form built two ways).
    #[doc(hidden)]
    pub fn same_as(&self, other: &ClassBodySlice) -> bool {
        let walked = |s: &ClassBodySlice| s.walked.iter().map(|f| (f.node, f.path.clone())).collect::<Vec<_>>();
        self.counts == other.counts
            && walked(self) == walked(other)
            && self.walked_chars == other.walked_chars
            && self.exits.listed() == other.exits.listed()
            && (self.one_byte, &self.table) == (other.one_byte, &other.table)
    }

    /// Adds to `out` the class-text tokens that begin at most `capacity` characters.
    pub fn add_within(&self, capacity: u32, out: &mut Bitset) {
        self.counts.add_within(capacity, out);
    }

    /// Builds [`Self::past_reading`]'s lists, for every character count: a walk of the class
    /// text of its own (the compile's thread, for a grammar with inner exits, after its slices:
    /// the slice is cached by the vocabulary, so are they).
    /// PERF: collected in [`Self::new`]'s walk, the boundary nodes made every slice build ~60%
    /// slower (o56021's `[A-Za-z0-9_]` class 15.8 -> 25.8 M instructions on Llama 3), the ones
    /// in fills (a slice missed at compile, or raced) and the compile's thread's alike; by byte
    /// for every `k` with the slice, they tripled a `.` class's (25 -> 77 M, sp_340).
    pub fn prepare_past(&self, trie: &TokenTrie) {
        self.past.get_or_init(|| {
            let table = &self.table;
            let step = |p: u16, x: u8| Some(table[usize::from(p)][usize::from(x)]).filter(|&next| next != NONE);
            // The nodes with children whose path is class text ending at a boundary, by characters.
            let mut boundaries: Vec<Vec<u32>> = Vec::new();
            let read = |i: u32, (p, k): (u16, u32)| {
                if p == 0 && trie.nodes[i as usize].subtree_end > i + 1 {
                    if boundaries.len() <= k as usize {
                        boundaries.resize(k as usize + 1, Vec::new());
                    }
                    boundaries[k as usize].push(i);
                }
            };
            walk_chars(trie, 0u16, step, |p| p == 0, read, |_, _| {}, |_, _: &[u8], _, _| {});
            boundaries.iter().map(|parents| PastByByte::new(trie, parents, self.one_byte)).collect()
        });
    }

    /// Whether [`Self::prepare_past`] has set the lists: a chain with inner exits takes the
    /// slice only then (else a walk: a fill never builds them).
    pub fn past_ready(&self) -> bool {
        self.past.get().is_some()
    }

    /// The nodes right past class text of `k` characters (at a boundary) whose byte is `x`, a
    /// one-byte class character (see [`exit_reads`]), in trie order; none before
    /// [`Self::prepare_past`].
    pub fn past_reading(&self, k: u32, x: u8) -> &[u32] {
        let Some(p) = self.past.get().and_then(|past| past.get(k as usize)).filter(|_| x < 0x80) else { return &[] };
        &p.nodes[p.starts[usize::from(x)] as usize..p.starts[usize::from(x) + 1] as usize]
    }

    /// The nodes where class text of `k` characters leaves the class at byte `x` (see
    /// [`exit_reads`]).
    /// (node, the bytes above it), in trie order.
    pub fn exits_at(&self, k: u32, x: u8) -> impl Iterator<Item = (u32, &[u8])> {
        self.exits.at(k, x)
    }

    /// Heap bytes held: the counts, the frontier lists as allocated, and the nodes' paths.
    pub fn memory_size(&self) -> usize {
        let lists = self.walked.capacity() * std::mem::size_of::<FrontierNode>()
            + self.walked_chars.capacity() * 4
            + self.table.len() * std::mem::size_of::<[u16; 256]>()
            + self.past.get().map_or(0, |past| past.iter().map(|p| p.nodes.len() * 4 + 129 * 4).sum::<usize>())
            + self.exits.memory_size();
        let paths: usize = self.walked.iter().map(|f| f.path.len()).sum();
        self.counts.memory_size() + lists + paths
    }
}

/// The counted class bodies of one compiled grammar: class levels by state, character automata
/// (at most [`MAX_FORMS`]) and the slices of those that are counted classes (at most
/// [`MAX_CLASSES`]), reserved at compile and built on a thread of their own
/// ([`Self::reserve`], [`Self::set_built`]) or built on first use.
#[derive(Debug, Default)]
pub struct ClassBodies {
    inner: Mutex<Inner>,
    /// Notified whenever the compile's thread sets a slice ([`Self::set_built`]).
    set: Condvar,
    /// Slices a fill built: not reserved at compile, or not set by the compile's thread yet (for
    /// tests).
    built_in_fills: AtomicUsize,
    /// Fills waiting for the compile's thread (for tests).
    waiting: AtomicUsize,
}

/// Longest a fill waits for the compile's thread to finish the slice it is building (about one
/// build of a wide class's slice on Llama 3); past it the fill builds the slice itself.
const BUILD_WAIT: Duration = Duration::from_millis(2);

/// A character automaton's form id, its inline end state, whether it reads no class byte,
/// and its side bytes.
pub type StartForm = (u32, Option<StateId>, bool, u128);

/// A class's slice: not taken, reserved for the compile's thread, being built by it (in the
/// process of that id: a forked child has no such thread), or at hand.
#[derive(Debug, Default)]
enum Taken {
    #[default]
    No,
    Reserved,
    Building(u32),
    Yes(Arc<ClassBodySlice>),
}

#[derive(Debug, Default)]
struct Inner {
    levels: FastMap<StateId, Option<ClassLevel>>,
    /// By (start state, call): the form id, the inline end state, and whether the form is empty.
    starts: FastMap<(StateId, bool), Option<StartForm>>,
    ids: FastMap<Vec<u32>, u32>,
    forms: Vec<(Vec<u32>, Taken)>,
    /// Slices taken or reserved (at most [`MAX_CLASSES`]).
    slices: usize,
    /// By form id: whether it is a class of body text ([`ClassBodies::pending_cheap`]).
    cheap: FastMap<u32, bool>,
    scratch: FormScratch,
}

impl Inner {
    fn form(&mut self, a: &Automata, start: StateId, call: bool) -> Option<StartForm> {
        if let Some(&f) = self.starts.get(&(start, call)) {
            return f;
        }
        let f = char_form(a, start, call, &mut self.scratch).and_then(|(form, end, sides)| {
            // An empty form reads no class byte (pair 0 with no runs).
            let empty = form.len() == 2;
            let next = self.forms.len() as u32;
            let id = match self.ids.get(form) {
                Some(&id) => id,
                None if self.forms.len() < MAX_FORMS => {
                    self.ids.insert(form.to_vec(), next);
                    self.forms.push((form.to_vec(), Taken::No));
                    next
                }
                None => return None,
            };
            Some((id, end, empty, sides))
        });
        self.starts.insert((start, call), f);
        f
    }
}

impl ClassBodies {
    /// The chain of the counted class body at `s` ([`class_capacity`]), with the levels memoized;
    /// `None` where there is none, its exit is none [`exit_reads`] allows, or its rule may end at a
    /// boundary and FOLLOW (`follow`, of the rule of `s`) is none [`ends_served`] allows.
    pub fn chain(&self, a: &Automata, max_chars: u32, s: StateId, follow: &ByteSet) -> Option<ClassChain> {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let inner = &mut *inner;
        let level = |r: StateId| {
            if let Some(&l) = inner.levels.get(&r) {
                return l;
            }
            let l = class_level(a, r, |start, call| inner.form(a, start, call));
            inner.levels.insert(r, l);
            l
        };
        let (table, _) = body_table();
        let nested = |r: StateId| match *a.rule_edges(r) {
            [(callee, t)]
                if a.byte_edges(r).iter().all(|e| (e.lo..=e.hi).all(|x| table[0][usize::from(x)] == Body::Walk)) =>
            {
                Some((a.callee_start(r, callee), t))
            }
            _ => None,
        };
        let chain = class_capacity(s, max_chars, level, |r| a.state(r).is_final, nested)?;
        let form = &inner.forms[chain.class as usize].0;
        let ends = chain.ends.is_empty() || ends_served(form, follow);
        let inner = match chain.exit {
            Some(r) => exit_reads(a, r, form)?,
            None => 0,
        };
        if !ends {
            return None;
        }
        Some(ClassChain { inner, ..chain })
    }

    /// The class (form id) every character of which leads from `s` to its next level, if `s` is a
    /// class level ([`class_level`], memoized as in [`Self::chain`]).
    pub fn level_class(&self, a: &Automata, s: StateId) -> Option<u32> {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let inner = &mut *inner;
        let level = match inner.levels.get(&s) {
            Some(&l) => l,
            None => {
                let l = class_level(a, s, |start, call| inner.form(a, start, call));
                inner.levels.insert(s, l);
                l
            }
        };
        match level? {
            ClassLevel::Next(_, k, _) => Some(k),
            ClassLevel::Zero => None,
        }
    }

    /// The slice of class `class` (from [`Self::chain`]), taken on first use from `build` (the
    /// vocabulary's slice of that form: [`crate::token_index::TokenIndex::class_body_slice`]);
    /// `None` for a class of few characters or past [`MAX_CLASSES`] slices. A class reserved for
    /// the compile's thread ([`Self::reserve`]) that the thread has not begun is built here
    /// (the thread then skips it); one the thread is building is waited for, at most
    /// [`BUILD_WAIT`], and then built here too (the first set wins; both are equal). A thread of
    /// another process (before a fork) is not waited for.
    /// A class of body text ([`Self::pending_cheap`]) is not waited for: its scan costs less.
    pub fn slice(&self, class: u32, build: impl FnOnce(&[u32]) -> Arc<ClassBodySlice>) -> Option<Arc<ClassBodySlice>> {
        let wait = if self.pending_cheap(class) { Duration::ZERO } else { BUILD_WAIT };
        self.slice_waiting(class, wait, build)
    }

    /// Whether the slice of class `class` is reserved for the compile's thread, not set yet, and
    /// cheap to build: a class of body text, found by [`ClassBodySlice::pruned`]'s scan (~0.3 M
    /// instructions for `[\w.\- ]` on Llama 3, ~0.8 M for `[^,"]`, against 6.8 and 15.5 M walked).
    pub fn pending_cheap(&self, class: u32) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let inner = &mut *inner;
        let (form, taken) = &inner.forms[class as usize];
        if !matches!(taken, Taken::Reserved | Taken::Building(_)) {
            return false;
        }
        *inner.cheap.entry(class).or_insert_with(|| {
            let (table, pair_body) = form_table(form);
            text_bits(&table, &pair_body).is_some()
        })
    }

    /// [`Self::slice`], waiting at most `wait` for a slice the compile's thread is building.
    fn slice_waiting(
        &self,
        class: u32,
        wait: Duration,
        build: impl FnOnce(&[u32]) -> Arc<ClassBodySlice>,
    ) -> Option<Arc<ClassBodySlice>> {
        let mut guard = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut deadline = None;
        loop {
            let inner = &mut *guard;
            match &inner.forms[class as usize].1 {
                Taken::Yes(s) => return Some(s.clone()),
                Taken::Building(pid) if *pid == std::process::id() => {
                    let end = *deadline.get_or_insert_with(|| Instant::now() + wait);
                    let left = end.saturating_duration_since(Instant::now());
                    if !left.is_zero() {
                        self.waiting.fetch_add(1, Ordering::Relaxed);
                        guard = self.set.wait_timeout(guard, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
                        self.waiting.fetch_sub(1, Ordering::Relaxed);
                        continue;
                    }
                    self.built_in_fills.fetch_add(1, Ordering::Relaxed);
                }
                Taken::Reserved | Taken::Building(_) => {
                    self.built_in_fills.fetch_add(1, Ordering::Relaxed);
                }
                Taken::No => {
                    if inner.slices >= MAX_CLASSES || class_chars(&inner.forms[class as usize].0) < MIN_CLASS_CHARS {
                        return None;
                    }
                    inner.slices += 1;
                    self.built_in_fills.fetch_add(1, Ordering::Relaxed);
                }
            }
            break;
        }
        // Built with the lock held: the compile's thread, once done, finds the slice set.
        let (form, taken) = &mut guard.forms[class as usize];
        let s = build(form);
        *taken = Taken::Yes(s.clone());
        Some(s)
    }

    /// Reserves the slice of class `class` for the compile's thread, within [`MAX_CLASSES`]
    /// slices and for a class of enough characters: its form, for that thread to build and
    /// [`Self::set_built`]; `None` where it is taken or reserved already, or takes none.
    pub fn reserve(&self, class: u32) -> Option<Vec<u32>> {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let inner = &mut *inner;
        let (form, taken) = &mut inner.forms[class as usize];
        if !matches!(taken, Taken::No) || inner.slices >= MAX_CLASSES || class_chars(form) < MIN_CLASS_CHARS {
            return None;
        }
        inner.slices += 1;
        *taken = Taken::Reserved;
        Some(form.clone())
    }

    /// The number of characters class `class` reads (its slice's tokens grow with it: the
    /// compile's thread builds the smaller classes first).
    pub fn class_chars(&self, class: u32) -> u64 {
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        class_chars(&inner.forms[class as usize].0)
    }

    /// Whether the slice of class `class` is reserved for the compile's thread and not set yet.
    pub fn pending(&self, class: u32) -> bool {
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        matches!(inner.forms[class as usize].1, Taken::Reserved | Taken::Building(_))
    }

    /// Whether the slice of class `class` is taken or reserved ([`Self::reserve`]).
    pub fn taken_or_reserved(&self, class: u32) -> bool {
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        !matches!(inner.forms[class as usize].1, Taken::No)
    }

    /// Marks the slice of reserved class `class` as being built by the compile's thread (a fill
    /// that needs it meanwhile waits for it, [`Self::slice`]); `false` where a fill built it
    /// already (the thread skips it).
    pub fn begin_build(&self, class: u32) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let taken = &mut inner.forms[class as usize].1;
        let reserved = matches!(taken, Taken::Reserved);
        if reserved {
            *taken = Taken::Building(std::process::id());
        }
        reserved
    }

    /// Sets the slice of reserved class `class` (the compile's thread), unless a fill set it,
    /// and wakes the fills waiting for it.
    pub fn set_built(&self, class: u32, slice: Arc<ClassBodySlice>) {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let taken = &mut inner.forms[class as usize].1;
        if matches!(taken, Taken::Reserved | Taken::Building(_)) {
            *taken = Taken::Yes(slice);
        }
        drop(inner);
        self.set.notify_all();
    }

    /// Slices a fill built: not reserved at compile, or not set by the compile's thread yet.
    pub fn built_in_fills(&self) -> usize {
        self.built_in_fills.load(Ordering::Relaxed)
    }

    /// Whether the slice of class `class` is at hand: taken already, or in `cached` (the
    /// vocabulary's slices), then taken from there within [`MAX_CLASSES`]; never built (a class
    /// reserved and not set yet is not at hand unless cached).
    pub fn has_slice(&self, class: u32, cached: impl FnOnce(&[u32]) -> Option<Arc<ClassBodySlice>>) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let inner = &mut *inner;
        let (form, taken) = &mut inner.forms[class as usize];
        let room = match taken {
            Taken::Yes(_) => return true,
            Taken::Reserved | Taken::Building(_) => true,
            Taken::No => inner.slices < MAX_CLASSES,
        };
        if room {
            if let Some(s) = cached(form) {
                if matches!(taken, Taken::No) {
                    inner.slices += 1;
                }
                *taken = Taken::Yes(s);
                return true;
            }
        }
        false
    }

    /// Heap bytes of the levels, forms and slices.
    pub fn memory_size(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slices: usize = inner
            .forms
            .iter()
            .filter_map(|(_, t)| if let Taken::Yes(s) = t { Some(s.memory_size()) } else { None })
            .sum();
        let forms: usize = inner.forms.iter().map(|(f, _)| f.len() * 8).sum();
        slices + forms + (inner.levels.len() + inner.starts.len()) * 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;

    /// The byte-at-a-time form builder that [`char_form`] replaced (its runs of body-table
    /// bytes give the same forms).
    fn char_form_bytewise(a: &Automata, start: StateId, call: bool) -> Option<(Vec<u32>, Option<StateId>, u128)> {
        let plain = |q: StateId| a.rule_edges(q).is_empty();
        if !plain(start) || (call && a.state(start).is_final) {
            return None;
        }
        let (table, _) = body_table();
        let (class_end, sides) = if call { (None, 0) } else { side_bytes(a, start)? };
        let mut pairs: Vec<(StateId, u8)> = vec![(start, 0)];
        let mut index: FastMap<(StateId, u8), u32> = FastMap::default();
        index.insert((start, 0), 0);
        let mut form = Vec::new();
        let mut end: Option<StateId> = class_end;
        let mut i = 0;
        while i < pairs.len() {
            let (q, b) = pairs[i];
            i += 1;
            form.push(u32::from(b));
            let count_at = form.len();
            form.push(0);
            let mut edges = a.byte_edges(q).to_vec();
            edges.sort_unstable_by_key(|e| e.lo);
            for e in edges {
                for x in e.lo..=e.hi {
                    if i == 1 && x < 0x80 && sides >> x & 1 == 1 {
                        continue;
                    }
                    let target = match table[usize::from(b)][usize::from(x)] {
                        Body::Dead => return None,
                        Body::Walk => continue,
                        Body::To(0) if call => {
                            let t = a.state(e.target);
                            if !(t.is_final && a.byte_edges(e.target).is_empty() && plain(e.target)) {
                                return None;
                            }
                            0
                        }
                        Body::To(0) => {
                            if !plain(e.target) || *end.get_or_insert(e.target) != e.target {
                                return None;
                            }
                            0
                        }
                        Body::To(nb) => {
                            if !plain(e.target) || a.state(e.target).is_final {
                                return None;
                            }
                            let next = pairs.len() as u32;
                            let j = *index.entry((e.target, nb)).or_insert(next);
                            if j == next {
                                if pairs.len() >= MAX_FORM_PAIRS {
                                    return None;
                                }
                                pairs.push((e.target, nb));
                            }
                            j
                        }
                    };
                    // Runs: consecutive bytes to one target.
                    let n = form.len();
                    if form[count_at] > 0 && form[n - 2] + 1 == u32::from(x) && form[n - 1] == target {
                        form[n - 2] = u32::from(x);
                    } else {
                        form.extend([u32::from(x), u32::from(x), target]);
                        form[count_at] += 1;
                    }
                }
            }
        }
        Some((form, end, sides))
    }

    /// A class of `"\"" [a-zA-Z]{40} "\""` reserved for the compile's thread, with a slice built
    /// from a small vocabulary.
    fn reserved_class() -> (ClassBodies, u32, Arc<ClassBodySlice>) {
        let g = parse_ebnf(r#"root ::= "\"" [a-zA-Z]{40} "\"""#, "root").unwrap();
        let a = Automata::build(&g).unwrap();
        let bodies = ClassBodies::default();
        let follow = ByteSet::default();
        let class = (0..a.states().len() as u32)
            .find_map(|s| bodies.chain(&a, 16, StateId(s), &follow))
            .expect("a class chain")
            .class;
        let form = bodies.reserve(class).expect("a class to reserve");
        let toks = ["ab", "Ab", "xyz", "a\"", "\"", "9"].map(|t| t.as_bytes().to_vec());
        let opts = crate::vocab::VocabularyOptions { vocab_size: Some(toks.len()), ..Default::default() };
        let vocab = crate::vocab::Vocabulary::new(toks.to_vec(), crate::vocab::VocabType::Raw, opts).unwrap();
        let slice = Arc::new(ClassBodySlice::new(&TokenTrie::new(&vocab), toks.len(), &form));
        (bodies, class, slice)
    }

    /// A fill that needs a slice the compile's thread is building waits for the thread's slice
    /// and builds none; with no thread to set it (it died, or a fork left it behind) the wait
    /// ends at its bound and the fill builds it; a slice reserved and not begun, or marked by
    /// another process's thread, is built by the fill at once; the thread then keeps the fill's.
    /// Exits pushed in trie order take the counting sort, others the comparison sort: both give
    /// the nodes by (characters, byte), then node, each with its own path.
    #[test]
    fn exits_sort_by_key_then_node() {
        let pushes = [(2, b'a', 5, "ab"), (0, b'z', 1, ""), (2, b'a', 3, "x"), (1, b'-', 9, "q"), (0, b'z', 0, "")];
        let want = vec![(0, b'z', 0, ""), (0, b'z', 1, ""), (1, b'-', 9, "q"), (2, b'a', 3, "x"), (2, b'a', 5, "ab")];
        for in_trie_order in [false, true] {
            let mut order = pushes.to_vec();
            if in_trie_order {
                order.sort_by_key(|p| p.2);
            }
            let mut e = Exits::default();
            for (k, x, node, path) in order {
                e.push(k, x, node, path.as_bytes());
            }
            e.sort();
            let got: Vec<_> = e
                .nodes
                .iter()
                .flat_map(|n| e.at(n.chars, n.byte).filter(move |&(m, _)| m == n.node).map(move |(m, p)| (n, m, p)))
                .map(|(n, m, p)| (n.chars, n.byte, m, std::str::from_utf8(p).unwrap()))
                .collect();
            assert_eq!(got, want, "pushed in trie order: {in_trie_order}");
        }
    }

    #[test]
    fn fills_wait_for_the_slice_the_thread_is_building() {
        let (bodies, class, thread_slice) = reserved_class();
        assert!(bodies.begin_build(class));
        std::thread::scope(|sc| {
            let fill =
                sc.spawn(|| bodies.slice_waiting(class, Duration::from_secs(60), |_| panic!("built in the fill")));
            while bodies.waiting.load(Ordering::Relaxed) == 0 {
                std::thread::yield_now();
            }
            bodies.set_built(class, thread_slice.clone());
            assert!(Arc::ptr_eq(&fill.join().unwrap().unwrap(), &thread_slice));
        });
        assert_eq!(bodies.built_in_fills(), 0);

        // No thread to set it: the fill waits its bound, then builds.
        let (bodies, class, slice) = reserved_class();
        assert!(bodies.begin_build(class));
        let got = bodies.slice_waiting(class, Duration::from_millis(1), |_| slice.clone()).unwrap();
        assert!(Arc::ptr_eq(&got, &slice));
        assert_eq!(bodies.built_in_fills(), 1);

        // Marked by another process's thread: not waited for (an hour's bound would hang).
        let (bodies, class, slice) = reserved_class();
        bodies.inner.lock().unwrap().forms[class as usize].1 = Taken::Building(std::process::id().wrapping_add(1));
        let got = bodies.slice_waiting(class, Duration::from_secs(3600), |_| slice.clone()).unwrap();
        assert!(Arc::ptr_eq(&got, &slice));

        // Reserved, not begun: the fill builds it, and the thread skips it.
        let (bodies, class, slice) = reserved_class();
        let got = bodies.slice_waiting(class, Duration::from_secs(3600), |_| slice.clone()).unwrap();
        assert!(Arc::ptr_eq(&got, &slice));
        assert!(!bodies.begin_build(class));
        bodies.set_built(class, reserved_class().2);
        assert!(Arc::ptr_eq(&bodies.slice(class, |_| panic!("built twice")).unwrap(), &slice));
    }

    /// Every state's form, inline and as a callee, equals the byte-at-a-time builder's, on
    /// grammars of ASCII, negated and non-ASCII classes, escapes and callee characters.
    #[test]
    fn forms_by_table_runs_equal_forms_by_bytes() {
        let grammars = [
            r#"root ::= "\"" [a-z]{1,5} "\"""#,
            r#"root ::= "\"" [^"\\\x00-\x1f]* "\"""#,
            r#"root ::= "\"" ([^"\\\x00-\x1f/] | "\\" ["\\/bfnrt])* "/" [\u00e0-\u0fff]{2} "\"""#,
            r#"root ::= "\"" c c c? "-" [\u0080-\U0010FFFF]{2} "\""
c ::= [^"\\\x00-\x1f] | "\\u" [0-9a-f]{4}"#,
            r#"root ::= "\"" [0-9A-Za-z]{1,63} ("-" [0-9A-Za-z]{1,63})* "." [a-z]{2,8} "\"""#,
            r#"root ::= "\"" [A-Za-z\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u4e00-\u9fff]{1,3} "\"""#,
        ];
        let mut sc = FormScratch::default();
        let (mut found, mut sided) = (0, 0);
        for src in grammars {
            let g = parse_ebnf(src, "root").unwrap();
            let a = Automata::build(&g).unwrap();
            for s in (0..a.states().len() as u32).map(StateId) {
                for call in [false, true] {
                    let want = char_form_bytewise(&a, s, call);
                    let got = char_form(&a, s, call, &mut sc).map(|(form, end, sides)| (form.to_vec(), end, sides));
                    assert_eq!(got, want, "{src}: state {s:?}, call {call}");
                    found += usize::from(want.as_ref().is_some_and(|(f, _, _)| f.len() > 2));
                    sided += usize::from(want.is_some_and(|(_, _, sides)| sides != 0));
                }
            }
        }
        assert!(found >= 10, "{found} non-empty forms");
        assert!(sided >= 2, "{sided} forms with side bytes");
    }

    /// The forms of the class chains of `schema`'s states, each once.
    fn chain_forms(schema: &str) -> Vec<Vec<u32>> {
        let opts = crate::json_schema::JsonSchemaOptions { strict_mode: false, ..Default::default() };
        let a = Automata::build(&crate::json_schema::json_schema_to_grammar(schema, &opts).unwrap()).unwrap();
        let bodies = ClassBodies::default();
        let mut forms = Vec::new();
        for s in 0..a.states().len() as u32 {
            if let Some(chain) = bodies.chain(&a, 16, StateId(s), &ByteSet::default()) {
                forms.extend(bodies.reserve(chain.class));
            }
        }
        forms
    }

    /// A slice read off the body slice equals the walked one ([`ClassBodySlice::new`]): its tokens
    /// by characters, walked nodes (`"` at a boundary, `\u`, `\/`) with their characters, exits
    /// (a control byte or `0xFF` at a boundary; a bad continuation inside a character is none),
    /// and one-byte characters; for the JSON string character only (an unanchored pattern's tail
    /// within a `maxLength`, MaskBench o56021's `name`), not for a class of fewer characters.
    #[test]
    fn string_character_slice_read_off_the_body_slice_equals_the_walked_one() {
        let toks: Vec<Vec<u8>> = [
            &b"ab"[..],
            b"a\"",
            b"\"",
            b"ab\"}",
            b"\\n",
            b"a\\u00e9",
            b"\\u",
            b"\\/",
            b"x\\/y",
            b"\xC3\xA9t",
            b"\xC3",
            b"\xC3A",
            b"a\x01",
            b"\x01",
            b"\xFF",
            b"e\xFFb",
            b"\\q",
            b"ab cd",
            b"\xE4\xB8\xAD\xE4",
            b"_9",
            b"\\\\\"",
        ]
        .iter()
        .map(|t| t.to_vec())
        .chain((0x20u8..0x7F).map(|b| vec![b]))
        .collect();
        let opts = crate::vocab::VocabularyOptions { vocab_size: Some(toks.len()), ..Default::default() };
        let vocab = crate::vocab::Vocabulary::new(toks.clone(), crate::vocab::VocabType::Raw, opts).unwrap();
        let trie = TokenTrie::new(&vocab);
        let body = BodySlice::new(&trie, toks.len());
        let schemas = [
            r#"{"type": "string", "maxLength": 18, "pattern": "^[A-Za-z][A-Za-z0-9_]*"}"#,
            r#"{"type": "string", "pattern": "^.{1,20}$"}"#,
            r#"{"type": "string", "pattern": "^[a-zA-Z_]{1,30}$"}"#,
        ];
        let (mut read_off, mut refused) = (0, 0);
        for form in schemas.iter().flat_map(|schema| chain_forms(schema)) {
            let walked = ClassBodySlice::new(&trie, toks.len(), &form);
            let Some(got) = ClassBodySlice::from_body(&trie, || &body, &form) else {
                refused += 1;
                continue;
            };
            read_off += 1;
            for k in 0..20 {
                let (mut a, mut b) = (Bitset::new(toks.len()), Bitset::new(toks.len()));
                walked.add_within(k, &mut a);
                got.add_within(k, &mut b);
                assert_eq!(a, b, "tokens within {k} characters");
            }
            let nodes = |s: &ClassBodySlice| s.walked.iter().map(|f| (f.node, f.path.to_vec())).collect::<Vec<_>>();
            assert_eq!(nodes(&got), nodes(&walked));
            assert_eq!(got.walked_chars, walked.walked_chars);
            let exits = |s: &ClassBodySlice| {
                let e = &s.exits;
                let path = |x: &Exit| e.paths[x.path.0 as usize..x.path.1 as usize].to_vec();
                e.nodes.iter().map(|x| (x.chars, x.byte, x.node, path(x))).collect::<Vec<_>>()
            };
            assert_eq!(exits(&got), exits(&walked));
            assert!(!walked.exits.nodes.is_empty() && walked.walked.len() >= 4, "the vocabulary leaves the class");
            assert_eq!((got.one_byte, &got.table), (walked.one_byte, &walked.table));
        }
        // The string character; `.` (its `\\` escape reads no `n`) and `[a-zA-Z_]` are not it.
        assert_eq!((read_off, refused), (1, 2));
    }

    /// A slice found by the pruned scan ([`ClassBodySlice::pruned`]) equals the walked one
    /// ([`ClassBodySlice::new`]) for classes of body text (ASCII classes, negated ones reading the
    /// multi-byte characters and some escapes), and the scan refuses a class of some multi-byte
    /// characters only; on a vocabulary of escapes, multi-byte characters, control and invalid
    /// bytes, `"` and text leaving each class at a boundary and inside a character.
    #[test]
    fn pruned_class_text_slice_equals_the_walked_one() {
        let mut toks: Vec<Vec<u8>> = [
            &b"ab"[..],
            b"a,b",
            b",",
            b"a\"",
            b"ab\"}",
            b"\\n",
            b"\\\"",
            b"x\\\"y",
            b"a\\u00e9",
            b"\\/",
            b"a.b-c d",
            b"a_b/c",
            b"\xC3\xA9t",
            b"\xC3",
            b"a\xC3",
            b"\xE4\xB8\xAD\xE4",
            b"a\x01",
            b"e\xFFb",
            b"\\q",
            b"A-Z9",
            b"ab cd,",
            b"__init__.php",
            b"\\\\",
        ]
        .iter()
        .map(|t| t.to_vec())
        .collect();
        toks.extend((0x20u8..0x7F).map(|b| vec![b]));
        let opts = crate::vocab::VocabularyOptions { vocab_size: Some(toks.len()), ..Default::default() };
        let vocab = crate::vocab::Vocabulary::new(toks.clone(), crate::vocab::VocabType::Raw, opts).unwrap();
        let trie = TokenTrie::new(&vocab);
        let body = BodySlice::new(&trie, toks.len());
        let index = ClassTextIndex::new(&trie);
        let schemas = [
            r#"{"type": "string", "maxLength": 64, "pattern": "^[\\w\\.\\- ]+$"}"#,
            r#"{"type": "string", "maxLength": 255, "pattern": "^[^,\"]+$"}"#,
            r#"{"type": "string", "pattern": "^[\\w\\-\\./]+\\.php+$", "maxLength": 1024}"#,
            r#"{"type": "string", "pattern": "^[^/]{1,40}$"}"#,
            r#"{"type": "string", "pattern": "^[a-zA-Z_]{1,30}$"}"#,
            r#"{"type": "string", "pattern": "^[A-Za-z\u00e0-\u00ff]{1,30}$"}"#,
        ];
        let (mut pruned, mut refused) = (0, 0);
        for form in schemas.iter().flat_map(|schema| chain_forms(schema)) {
            let walked = ClassBodySlice::new(&trie, toks.len(), &form);
            let Some(got) = ClassBodySlice::pruned(&trie, &index, &body, &form) else {
                refused += 1;
                continue;
            };
            pruned += 1;
            assert!(got.same_as(&walked), "form {form:?}");
            assert!(!walked.exits.nodes.is_empty() && !walked.walked.is_empty(), "the vocabulary leaves the class");
        }
        // Each ASCII class (the `.php` pattern's two: `[\w\-\./]`, and `[\w\-/]` after a `.`) and
        // `[^,"]`, `[^/]` (escapes and multi-byte characters); not the letters of U+00E0 to U+00FF.
        assert_eq!((pruned, refused), (7, 1));
    }
}
