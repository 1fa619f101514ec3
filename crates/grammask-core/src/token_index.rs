//! The token index: a vocabulary's token trie and everything built once per vocabulary and shared
//! by every grammar compiled against it.
//!
//! Pipeline place: built from a [`Vocabulary`] (by [`TokenIndex::for_vocab`], one per vocabulary,
//! found again through a registry of weak references) and held by each
//! [`crate::compiled::CompiledGrammar`]. It owns the [`TokenTrie`], the string-body slice
//! ([`BodySlice`]), the free-text class slices ([`ClassSlice`]) and run indexes ([`RunIndex`]) built
//! on first use, and the cross-grammar cache of kernel classifications keyed by
//! [`Automata::structure_hash`](crate::compiler::Automata::structure_hash).
use crate::build_counts::{timed, Build};
use crate::compiler::RuleMemo;
use crate::follow::ByteSet;
use crate::limits;
use crate::mask::{BodyEnds, KernelMask, LeadNodes, QuoteEnds};
use crate::slice::{
    BodySlice, ClassBodySlice, ClassSlice, ClassTextIndex, FirstChars, QuoteCut, RunBases, RunIndex, StringIndex,
    TextSlice, Walked, WalkedBody,
};
use crate::trie::TokenTrie;
use crate::vocab::Vocabulary;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock, Weak};

/// A vocabulary with its token trie, built once per vocabulary and shared, plus the
/// cross-grammar cache of kernel classifications keyed by [`Automata::structure_hash`](crate::compiler::Automata::structure_hash): the
/// inside of a JSON string or number is classified once per vocabulary, not once per grammar.
#[derive(Debug)]
pub struct TokenIndex {
    pub vocab: Arc<Vocabulary>,
    pub trie: TokenTrie,
    kernels: RwLock<HashMap<u128, Arc<KernelMask>>>,
    kernel_bytes: AtomicUsize,
    /// The prefix keys ([`Automata::structure_key`](crate::compiler::Automata::structure_key))
    /// of the states whose kernels `kernels` holds, where known: a state with such a prefix key
    /// asks the cache before walking. Cleared with `kernels`.
    kernel_prefixes: RwLock<HashSet<u128>>,
    /// Open objects' string-body kernels with their uncertain tokens sorted
    /// ([`crate::mask::BodyEnds`]), by the kernels' cross-grammar key (at most
    /// [`MAX_BODY_ENDS`]): every grammar with an open object derives its key positions from one.
    body_ends: RwLock<HashMap<u128, Arc<BodyEnds>>>,
    /// What a lead kernel reads of the trie per prefix byte, run class and bound ([`LeadNodes`]),
    /// built on first use (at most [`MAX_LEAD_NODES`]; JSON has a few: its whitespace, alone and
    /// after `,` and `:`).
    lead_nodes: RwLock<Vec<Arc<LeadNodes>>>,
    /// String-body slice, built with the index.
    body: OnceLock<BodySlice>,
    /// Quote cuts by quote form ([`crate::slice::quote_form`]), built on first use (at most
    /// [`MAX_QUOTE_CUTS`]; past them the table starts over).
    quote_cuts: RwLock<HashMap<Vec<u32>, Arc<QuoteCut>>>,
    /// Quote forms asked for once ([`Self::quote_cut_if_seen`]), at most [`MAX_QUOTE_CUTS`].
    quote_forms_seen: RwLock<HashSet<Vec<u32>>>,
    /// Free-text slices by ASCII class, built on first use (at most [`MAX_CLASS_SLICES`]).
    class_slices: RwLock<HashMap<u128, Arc<ClassSlice>>>,
    /// Run indexes by (ASCII class, UTF-8 too), each with the tick of `run_clock` at which a
    /// compile or a walk last needed it, built on first use (at most [`MAX_RUN_INDEXES`]; past
    /// them the least recently needed make room, see [`Self::build_run_indexes`]).
    run_indexes: RwLock<RunIndexes>,
    /// Compiles that asked for run indexes so far.
    run_clock: AtomicU64,
    /// Run indexes built by [`Self::build_later`]'s threads.
    run_indexes_built_later: AtomicUsize,
    /// The run indexes in flight: queued for a [`Self::build_later`] thread (a later compile
    /// leaves them to it) or being built, by class ([`InFlight`]).
    run_indexes_in_flight: Mutex<Vec<((u128, bool), InFlight)>>,
    /// Notified whenever a build in flight ends ([`BuildInFlight`]'s drop).
    run_index_landed: Condvar,
    /// Waits for another thread's build begun ([`Self::run_index`]; for tests).
    run_index_waits: AtomicUsize,
    /// UTF-8 run indexes of call-loop classes less their refused characters
    /// ([`Self::run_index_less_off_fill`]), by (ASCII class, refused characters), at most
    /// [`MAX_WIDE_RUN_INDEXES`] (past them each grammar builds its own).
    wide_run_indexes: RwLock<Vec<WideRunIndex>>,
    /// What every run index shares ([`RunBases`]; 1.8 MB on Llama 3), built with the index.
    run_bases: OnceLock<RunBases>,
    /// Loop classes of the grammars compiled so far (see `CompiledGrammar::new`).
    classes_seen: RwLock<HashSet<(u128, bool)>>,
    /// The tokens' `"` occurrences, built on first use (sibling kernels, `mask/sibling.rs`).
    quote_ends: OnceLock<QuoteEnds>,
    /// Where body text first reads each ASCII character (`slice/walked.rs`; 1.8 ms, 0.5 MB on
    /// Llama 3), built by [`Self::prepare_walked`] or on first use.
    first_chars: OnceLock<FirstChars>,
    /// Where body text reads each string of two or three ASCII characters (`slice/walked.rs`;
    /// 1.3 ms, 1.1 MB on Llama 3), built by [`Self::prepare_walked`] or on first use.
    string_index: OnceLock<StringIndex>,
    /// Plain string text (`slice/text.rs`), for region walks: built by
    /// [`Self::prepare_walked`]'s thread only (a fill never builds it, [`Self::text_slice`]).
    text: OnceLock<TextSlice>,
    /// Whether [`Self::prepare_walked`] ran.
    walked_prepared: AtomicBool,
    /// The thread [`Self::prepare_walked`] started, with the id of the process that started it,
    /// until [`Self::wait_walked`] takes it.
    walked_thread: Mutex<Option<(u32, std::thread::JoinHandle<()>)>>,
    /// Builds of `first_chars` or `string_index` by their first use rather than by
    /// [`Self::prepare_walked`]'s thread (for tests: a fill that builds one pays for it).
    walked_built_on_use: AtomicUsize,
    /// Body slices by walked characters, built on first use (at most [`MAX_WALKED_BODIES`];
    /// `None`: a character is not walkable).
    walked_bodies: RwLock<HashMap<Walked, Option<Arc<WalkedBody>>>>,
    /// Counted class-body slices by character automaton form, each with the tick of
    /// `class_body_clock` at which it was last used, built on first use (at most
    /// [`limits::CLASS_BODY_SLICE_BYTES`] together; past them the least recently used make room).
    class_body_slices: RwLock<ClassBodySlices>,
    /// The trie's character bits below each node, for class-body slices of classes of body text
    /// ([`ClassBodySlice::pruned`]), built with the index.
    class_text: OnceLock<ClassTextIndex>,
    /// Uses of `class_body_slices` so far.
    class_body_clock: AtomicU64,
    /// Rule DFAs of the grammars compiled so far, shared by later compiles (at most
    /// [`limits::RULE_MEMO_BYTES`]; the automata do not depend on the vocabulary, but their
    /// memory is counted here, with the other caches grammars share).
    pub(crate) rule_dfas: RuleMemo,
}

/// Where a run index in flight is: queued for a [`TokenIndex::build_later`] thread, or being
/// built by some thread of the process of that id (a forked child has no such thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    Queued,
    Building(u32),
}

/// A class marked [`InFlight::Building`] by the thread that builds it: dropped (the build done,
/// kept or not, or the thread panicking), it clears the mark and wakes the threads waiting for it.
/// Invariant: every `Building` mark is cleared by its guard, so a wait for one ends.
struct BuildInFlight<'a> {
    index: &'a TokenIndex,
    class: (u128, bool),
}

impl Drop for BuildInFlight<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.index.lock_in_flight();
        in_flight.retain(|e| e.0 != self.class);
        drop(in_flight);
        self.index.run_index_landed.notify_all();
    }
}

/// Run indexes by (ASCII class, UTF-8 too), each with the tick at which it was last needed.
type RunIndexes = HashMap<(u128, bool), (Arc<RunIndex>, AtomicU64)>;

/// A UTF-8 run index of an ASCII class less some multi-byte characters, with its key.
type WideRunIndex = ((u128, Vec<Box<[u8]>>), Arc<RunIndex>);

/// Most body slices with walked characters kept per vocabulary (each is a token bitset plus its
/// frontier).
const MAX_WALKED_BODIES: usize = 32;

/// Most [`BodyEnds`] per vocabulary (one per string-body automaton and FOLLOW set: MaskBench's
/// schemas all have the one of `json_char.key_other`).
const MAX_BODY_ENDS: usize = 8;

/// Most [`QuoteCut`]s kept per vocabulary (each a token bitset, 16 KB on Llama 3, plus its
/// exits: MaskBench's schemas have a few hundred `pattern` strings).
const MAX_QUOTE_CUTS: usize = 256;

/// Run classes with [`LeadNodes`] kept per vocabulary (past them the list starts over).
const MAX_LEAD_NODES: usize = 8;

/// Counted class-body slices by character automaton form, each with the tick at which it was last
/// used.
type ClassBodySlices = HashMap<Vec<u32>, (Arc<ClassBodySlice>, AtomicU64)>;

/// Bytes a kept class-body slice counts against [`limits::CLASS_BODY_SLICE_BYTES`]: the slice, its
/// form and the map entry (an estimate, as in [`TokenIndex::memory_parts`]).
fn class_body_bytes(form: &[u32], slice: &ClassBodySlice) -> usize {
    slice.memory_size() + 4 * form.len() + 32
}

/// Most run indexes kept per vocabulary (each: one byte per token and per trie node, a node
/// bitset, lead lists and up to 65 token bitsets, 16 KB each on a 128k vocabulary; ~1.1 MB on
/// Llama 3 on average).
pub const MAX_RUN_INDEXES: usize = 16;

/// Most UTF-8 run indexes less refused characters kept per vocabulary (~1 MB each on Llama 3;
/// MaskBench has a few such call loops: o68280's and o22050's `\s`-refusing keys).
const MAX_WIDE_RUN_INDEXES: usize = 8;

/// Most loop classes remembered per vocabulary as seen.
const MAX_CLASSES_SEEN: usize = 4096;

/// Most free-text class slices kept per vocabulary (each is a token bitset plus its frontier).
const MAX_CLASS_SLICES: usize = 32;

impl TokenIndex {
    /// The `"` occurrences of the tokens ([`QuoteEnds`]), built on first use (~1 ms on Llama 3).
    pub fn quote_ends(&self) -> &QuoteEnds {
        self.quote_ends.get_or_init(|| timed(Build::QuoteEnds, || QuoteEnds::new(&self.vocab)))
    }

    /// What every run index of the vocabulary shares ([`RunBases`]).
    pub fn run_bases(&self) -> &RunBases {
        self.run_bases.get_or_init(|| RunBases::new(&self.trie, self.vocab.vocab_size()))
    }

    pub fn body_slice(&self) -> &BodySlice {
        self.body.get_or_init(|| BodySlice::new(&self.trie, self.vocab.vocab_size()))
    }

    /// The trie's character bits below each node ([`ClassTextIndex`]).
    pub fn class_text(&self) -> &ClassTextIndex {
        self.class_text.get_or_init(|| ClassTextIndex::new(&self.trie))
    }

    /// Where body text first reads each ASCII character ([`FirstChars`]); built here when
    /// [`Self::prepare_walked`]'s thread has not set it yet.
    pub fn first_chars(&self) -> &FirstChars {
        self.first_chars.get_or_init(|| {
            self.walked_built_on_use.fetch_add(1, Ordering::Relaxed);
            timed(Build::WalkedIndex, || FirstChars::new(&self.trie))
        })
    }

    /// [`Self::first_chars`] if it is built (never builds it).
    pub fn first_chars_built(&self) -> Option<&FirstChars> {
        self.first_chars.get()
    }

    /// Where body text reads each string of two or three ASCII characters ([`StringIndex`]);
    /// built here when [`Self::prepare_walked`]'s thread has not set it yet.
    pub fn string_index(&self) -> &StringIndex {
        self.string_index.get_or_init(|| {
            self.walked_built_on_use.fetch_add(1, Ordering::Relaxed);
            timed(Build::WalkedIndex, || StringIndex::new(&self.trie))
        })
    }

    /// The plain-text slice ([`TextSlice`]) once [`Self::prepare_walked`]'s thread has built it;
    /// never built here (a region walk without it walks the whole trie, as before).
    pub fn text_slice(&self) -> Option<&TextSlice> {
        self.text.get()
    }

    /// The plain-text slice, built here unless set (the walked-index thread; tests).
    #[doc(hidden)]
    pub fn build_text_slice(&self) -> &TextSlice {
        self.text.get_or_init(|| TextSlice::new(&self.trie, self.vocab.vocab_size()))
    }

    /// Starts building [`FirstChars`] and [`StringIndex`] (and then the [`TextSlice`] region
    /// walks take) on a thread of their own, once per vocabulary: called when a kernel's body cover first misreads (the first sign a walked
    /// body may be needed, usually many fills before one is), so that no fill pays for them
    /// (3.1 ms together on Llama 3). The thread builds each apart and then sets it: a fill that
    /// needs one before it is set builds its own (the first set wins; both are equal), and no
    /// lock is held across a build, so a process forked meanwhile never waits for a build its
    /// child does not run. Where no thread can be spawned, they are built on first use.
    pub fn prepare_walked(self: &Arc<Self>) {
        if self.walked_prepared.swap(true, Ordering::AcqRel) {
            return;
        }
        let index = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("grammask-walked-index".into()).spawn(move || {
            if index.first_chars.get().is_none() {
                let _ = index.first_chars.set(FirstChars::new(&index.trie));
            }
            if index.string_index.get().is_none() {
                let _ = index.string_index.set(StringIndex::new(&index.trie));
            }
            index.build_text_slice();
        });
        if let Ok(thread) = spawned {
            *self.walked_thread.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((std::process::id(), thread));
        }
    }

    /// Whether [`Self::prepare_walked`] ran (a fill asked for the walked indexes).
    pub fn walked_prepared(&self) -> bool {
        self.walked_prepared.load(Ordering::Acquire)
    }

    /// Waits for [`Self::prepare_walked`]'s thread to end (tests: then no fill builds them; a
    /// compile's class-body thread, before work that would slow it down). Only the first caller
    /// waits (it takes the thread), and none in a process forked from the one that started it
    /// (the thread is not there: joining it would never return).
    pub fn wait_walked(&self) {
        let thread = self.walked_thread.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some((pid, thread)) = thread {
            if pid == std::process::id() {
                let _ = thread.join();
            }
        }
    }

    /// Builds of [`FirstChars`] or [`StringIndex`] done by their first use rather than by
    /// [`Self::prepare_walked`] (at most 2).
    pub fn walked_built_on_use(&self) -> usize {
        self.walked_built_on_use.load(Ordering::Relaxed)
    }

    /// The body slice with the ASCII characters or strings of `walked` walked ([`WalkedBody`]),
    /// built on first use; `None` when one is not walkable or the per-vocabulary budget is spent.
    pub fn walked_body(&self, walked: Walked) -> Option<Arc<WalkedBody>> {
        if let Some(w) = read(&self.walked_bodies).get(&walked) {
            return w.clone();
        }
        if read(&self.walked_bodies).len() >= MAX_WALKED_BODIES {
            return None;
        }
        let built = timed(Build::WalkedBody, || match walked {
            Walked::Chars(chars) => WalkedBody::new(&self.trie, self.body_slice(), self.first_chars(), chars),
            Walked::Strings(strings) => WalkedBody::with_strings(
                &self.trie,
                self.body_slice(),
                || self.first_chars(),
                self.string_index(),
                strings,
            ),
            Walked::StartRun { strings, run, stop, inside } => WalkedBody::with_start_run(
                &self.trie,
                self.body_slice(),
                || self.first_chars(),
                self.string_index(),
                strings,
                run,
                stop,
                inside,
            ),
        })
        .map(Arc::new);
        write(&self.walked_bodies).entry(walked).or_insert(built).clone()
    }

    /// The free-text slice of ASCII class `ascii`, built on first use; `None` once the per-vocabulary
    /// budget is spent (the kernel then takes the full walk).
    pub fn class_slice(&self, ascii: u128) -> Option<Arc<ClassSlice>> {
        if let Some(c) = read(&self.class_slices).get(&ascii) {
            return Some(c.clone());
        }
        if read(&self.class_slices).len() >= MAX_CLASS_SLICES {
            return None;
        }
        // PERF: taken from the class's run index (built anyway for the same grammar states), not
        // from a trie walk of its own: 5-6 ms less per class on Llama 3.
        let built = timed(Build::ClassSlice, || match self.run_index(ascii, true) {
            Some(ri) => ri.class_slice(&self.trie),
            None => ClassSlice::new(&self.trie, self.vocab.vocab_size(), ascii),
        });
        let mut w = write(&self.class_slices);
        if w.len() >= MAX_CLASS_SLICES {
            return w.get(&ascii).cloned();
        }
        Some(w.entry(ascii).or_insert_with(|| Arc::new(built)).clone())
    }

    /// The run index of a class ([`RunIndex`]), built on first use; `None` once the
    /// per-vocabulary budget is spent. One that another thread of the process is building is
    /// waited for, not built again; one queued for a [`Self::build_later`] thread is taken over
    /// (built here, the thread skips it), as is a missing one: a fill that needs it pays for its
    /// build once, whichever thread would have built it.
    /// PERF: MaskBench o42521 t8 (`[a-z0-9-.]` of `_schema`'s pattern, Llama 3) built the class
    /// the compile's run-index thread was building: 6.6 M instructions against 0.45 M with it
    /// built, in about one run of two.
    pub fn run_index(&self, ascii: u128, utf8: bool) -> Option<Arc<RunIndex>> {
        let class = (ascii, utf8);
        if let Some(r) = self.cached_run_index(ascii, utf8) {
            return Some(r);
        }
        let _building = {
            let mut in_flight = self.lock_in_flight();
            let mut waited = false;
            let start = std::time::Instant::now();
            while let Some(InFlight::Building(pid)) = in_flight.iter().find(|e| e.0 == class).map(|e| e.1) {
                if pid != std::process::id() {
                    break;
                }
                if !waited {
                    self.run_index_waits.fetch_add(1, Ordering::Relaxed);
                    waited = true;
                }
                in_flight = self.run_index_landed.wait(in_flight).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if waited {
                let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                crate::build_counts::count(Build::RunIndexWait, ns);
                drop(in_flight);
                if let Some(r) = self.cached_run_index(ascii, utf8) {
                    return Some(r);
                }
                in_flight = self.lock_in_flight();
            }
            self.mark_building(&mut in_flight, class)
        };
        let now = self.run_clock.load(Ordering::Relaxed);
        self.build_within(&[class], now);
        read(&self.run_indexes).get(&class).map(|r| r.0.clone())
    }

    /// Marks `class` as being built by this thread (queued or not, and whoever else built or
    /// builds it: the first kept wins), until the guard returned is dropped.
    fn mark_building<'a>(
        &'a self,
        in_flight: &mut MutexGuard<'_, Vec<((u128, bool), InFlight)>>,
        class: (u128, bool),
    ) -> BuildInFlight<'a> {
        let building = InFlight::Building(std::process::id());
        match in_flight.iter_mut().find(|e| e.0 == class) {
            Some(e) => e.1 = building,
            None => in_flight.push((class, building)),
        }
        BuildInFlight { index: self, class }
    }

    fn lock_in_flight(&self) -> MutexGuard<'_, Vec<((u128, bool), InFlight)>> {
        self.run_indexes_in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for another thread's run index builds ([`Self::run_index`]) begun so far (for tests).
    #[doc(hidden)]
    pub fn run_index_waits(&self) -> usize {
        self.run_index_waits.load(Ordering::Relaxed)
    }

    /// The run index of a class if it is built (marked as needed now), never built here.
    pub fn cached_run_index(&self, ascii: u128, utf8: bool) -> Option<Arc<RunIndex>> {
        let now = self.run_clock.load(Ordering::Relaxed);
        let r = read(&self.run_indexes);
        let r = r.get(&(ascii, utf8))?;
        r.1.fetch_max(now, Ordering::Relaxed);
        Some(r.0.clone())
    }

    /// The run index of a class for a compile's background thread: the cached one, else one built
    /// from the run bases for the caller alone, without the index lock (a fill's lookup never
    /// waits on it) and not cached (it would take a slot of the per-vocabulary budget, and a later
    /// compile would evict another grammar's index for it); `None` where the run bases are not
    /// built (built here, a fill needing them would wait).
    pub fn run_index_off_fill(&self, ascii: u128, utf8: bool) -> Option<Arc<RunIndex>> {
        if let Some(r) = self.cached_run_index(ascii, utf8) {
            return Some(r);
        }
        let bases = self.run_bases.get()?;
        let built =
            timed(Build::RunIndex, || RunIndex::of_class(&self.trie, self.vocab.vocab_size(), bases, ascii, utf8));
        Some(Arc::new(built))
    }

    /// The UTF-8 run index of an ASCII class less the multi-byte characters `refused`
    /// ([`RunIndex::from_bases_less`]): the vocabulary's, else one built from the run bases
    /// outside the cache's lock and kept for later grammars while the cache has room (past
    /// [`MAX_WIDE_RUN_INDEXES`], for the caller alone); `None` where the run bases are not built.
    pub fn run_index_less_off_fill(&self, ascii: u128, refused: &[Box<[u8]>]) -> Option<Arc<RunIndex>> {
        if let Some(r) = self.cached_run_index_less(ascii, refused) {
            return Some(r);
        }
        let bases = self.run_bases.get()?;
        let vocab_size = self.vocab.vocab_size();
        let built = timed(Build::WideRunIndex, || {
            Arc::new(RunIndex::from_bases_less(&self.trie, vocab_size, bases, ascii, true, refused))
        });
        let mut w = write(&self.wide_run_indexes);
        if let Some(r) = w.iter().find(|((c, x), _)| *c == ascii && x.as_slice() == refused) {
            return Some(r.1.clone());
        }
        if w.len() < MAX_WIDE_RUN_INDEXES {
            w.push(((ascii, refused.to_vec()), built.clone()));
        }
        Some(built)
    }

    /// The vocabulary's [`Self::run_index_less_off_fill`] index if it is built, never built here.
    pub fn cached_run_index_less(&self, ascii: u128, refused: &[Box<[u8]>]) -> Option<Arc<RunIndex>> {
        let r = read(&self.wide_run_indexes);
        r.iter().find(|((c, x), _)| *c == ascii && x.as_slice() == refused).map(|r| r.1.clone())
    }

    /// Whether the run index of a class was built (for tests).
    #[cfg(test)]
    pub(crate) fn has_run_index(&self, ascii: u128, utf8: bool) -> bool {
        read(&self.run_indexes).contains_key(&(ascii, utf8))
    }

    /// Builds the run indexes of a grammar being compiled, those of `classes` not built yet, each
    /// from the shared [`RunBases`] ([`RunIndex::of_class`]), and marks them all as needed at a new
    /// tick. Past the per-vocabulary budget, the indexes no compile or walk needed for the longest
    /// make room (a grammar that took one keeps it alive); the classes needed at the current tick
    /// are never dropped. A walk's lookup ([`Self::run_index`]) marks its class at the current
    /// tick, and builds a missing one the same way.
    /// PERF: the budget was spent for good by the 44th schema of the 287-schema tail sample
    /// (`bench/tail_states.py --limit 300 --seed 1818`), so every later grammar's new classes
    /// walked the trie in its masks: MaskBench o60252's `email` positions took ~2 ms there
    /// against ~0.1 ms in a fresh process.
    pub fn build_run_indexes(&self, classes: &[(u128, bool)]) {
        self.build_run_indexes_but(classes, |_| false);
    }

    /// [`Self::build_run_indexes`], except that the classes not built yet for which `later`
    /// holds are left unbuilt (room is made for them) and returned with the tick they are needed
    /// at, for [`Self::build_later`] once the compile's first mask is filled: a fill that needs
    /// one before builds it, as any missing class ([`Self::run_index`]).
    pub fn build_run_indexes_but(
        &self,
        classes: &[(u128, bool)],
        later: impl Fn((u128, bool)) -> bool,
    ) -> (u64, Vec<(u128, bool)>) {
        let tick = self.run_clock.fetch_add(1, Ordering::Relaxed) + 1;
        (tick, self.build_within_but(classes, tick, later))
    }

    /// Builds those of `left` (from [`Self::build_run_indexes_but`], needed at `tick`) that no fill
    /// has built since and no other such thread is to build, on a thread of their own, each outside the index lock (a fill's lookup
    /// never waits on the thread; one that needs a class first builds it too, and the first
    /// kept wins: both are equal). Where no thread can be spawned, they are built here. Returns
    /// the thread.
    /// PERF: llama.cpp's `arithmetic.gbnf` on Llama 3 built `[a-z0-9_]` and `[0-9]` in its
    /// compile (7.6 M of its 10.9 M instructions, compile and first mask), which its first mask
    /// does not read.
    pub fn build_later(self: &Arc<Self>, left: Vec<(u128, bool)>, tick: u64) -> Option<std::thread::JoinHandle<()>> {
        let left: Vec<(u128, bool)> = {
            let mut in_flight = self.lock_in_flight();
            let left: Vec<(u128, bool)> = left
                .into_iter()
                .filter(|c| !in_flight.iter().any(|e| e.0 == *c) && !read(&self.run_indexes).contains_key(c))
                .collect();
            in_flight.extend(left.iter().map(|&c| (c, InFlight::Queued)));
            left
        };
        if left.is_empty() {
            return None;
        }
        let index = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("grammask-run-indexes".into()).spawn({
            let left = left.clone();
            move || index.build_left(&left, tick)
        });
        match spawned {
            Ok(thread) => Some(thread),
            Err(_) => {
                self.build_left(&left, tick);
                None
            }
        }
    }

    /// [`Self::build_later`]'s builds, in order: each still queued (a fill took none over) is
    /// marked as being built, so that a fill that needs it meanwhile waits for it.
    fn build_left(&self, left: &[(u128, bool)], tick: u64) {
        for &class in left {
            let Some(_building) = self.take_queued(class) else { continue };
            if !read(&self.run_indexes).contains_key(&class) {
                if let Some(built) = self.run_index_off_fill(class.0, class.1) {
                    self.keep_built(class.0, class.1, built, tick);
                    self.run_indexes_built_later.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Marks `class` as being built by this thread if it is queued ([`InFlight::Queued`]);
    /// `None` where it is not (a fill took it over).
    fn take_queued(&self, class: (u128, bool)) -> Option<BuildInFlight<'_>> {
        let mut in_flight = self.lock_in_flight();
        let queued = in_flight.contains(&(class, InFlight::Queued));
        queued.then(|| self.mark_building(&mut in_flight, class))
    }

    /// Keeps `built` as the run index of `(ascii, utf8)` needed at `tick` unless one is kept
    /// already, making room as [`Self::build_within_but`] does (none where every kept one is
    /// needed at `tick` or later).
    fn keep_built(&self, ascii: u128, utf8: bool, built: Arc<RunIndex>, tick: u64) {
        let mut w = write(&self.run_indexes);
        if w.contains_key(&(ascii, utf8)) {
            return;
        }
        if w.len() >= MAX_RUN_INDEXES {
            let last_needed = |e: &(Arc<RunIndex>, AtomicU64)| e.1.load(Ordering::Relaxed);
            let old = w.iter().filter(|(_, e)| last_needed(e) < tick).min_by_key(|(_, e)| last_needed(e));
            let Some(oldest) = old.map(|(&k, _)| k) else { return };
            w.remove(&oldest);
        }
        w.insert((ascii, utf8), (built, AtomicU64::new(tick)));
    }

    /// Run indexes built by [`Self::build_later`]'s threads (for tests).
    pub fn run_indexes_built_later(&self) -> usize {
        self.run_indexes_built_later.load(Ordering::Relaxed)
    }

    /// Builds those of `classes` not built yet as needed at `tick`, dropping the least recently
    /// needed others (needed before `tick`) to make room.
    fn build_within(&self, classes: &[(u128, bool)], tick: u64) {
        self.build_within_but(classes, tick, |_| false);
    }

    /// [`Self::build_within`] but for the classes not built yet for which `later` holds, which
    /// are returned unbuilt (room is made for them as for the others).
    fn build_within_but(
        &self,
        classes: &[(u128, bool)],
        tick: u64,
        later: impl Fn((u128, bool)) -> bool,
    ) -> Vec<(u128, bool)> {
        let mut w = write(&self.run_indexes);
        let mut todo: Vec<(u128, bool)> = Vec::new();
        for &c in classes {
            match w.get(&c) {
                Some(e) => {
                    e.1.fetch_max(tick, Ordering::Relaxed);
                }
                None if !todo.contains(&c) => todo.push(c),
                None => {}
            }
        }
        let last_needed = |e: &(Arc<RunIndex>, AtomicU64)| e.1.load(Ordering::Relaxed);
        while w.len() + todo.len() > MAX_RUN_INDEXES {
            let old = w.iter().filter(|(_, e)| last_needed(e) < tick).min_by_key(|(_, e)| last_needed(e));
            let Some(oldest) = old.map(|(&k, _)| k) else { break };
            w.remove(&oldest);
        }
        todo.truncate(MAX_RUN_INDEXES.saturating_sub(w.len()));
        let (left, todo): (Vec<_>, Vec<_>) = todo.into_iter().partition(|&c| later(c));
        if todo.is_empty() {
            return left;
        }
        // PERF: each class from the shared bases rather than from a walk of the trie (per class,
        // or per eight in byte lanes): llama.cpp's grammars on Llama 3, 9 classes, cold.
        let bases = self.run_bases();
        for &(ascii, utf8) in &todo {
            let ri =
                timed(Build::RunIndex, || RunIndex::of_class(&self.trie, self.vocab.vocab_size(), bases, ascii, utf8));
            w.insert((ascii, utf8), (Arc::new(ri), AtomicU64::new(tick)));
        }
        left
    }

    /// The counted class-body slice of a character automaton's form ([`ClassBodySlice::new`]), built
    /// on first use and shared by the grammars compiled against the vocabulary (a slice depends on
    /// the form and the vocabulary only).
    /// PERF: each was built per compiled grammar, in the mask at its first position: a walk of the
    /// class-text part of the trie, 10-17 M instructions on Llama 3 for a pattern class such as
    /// `[\w\s-]` (MaskBench o82696 and o82667 `css_class`) or `[^/]` (o65430 `identifier`).
    /// Kept within [`limits::CLASS_BODY_SLICE_BYTES`]: a new slice evicts the least recently used
    /// ones (a slice over the whole budget is not kept).
    /// PERF: at most 16 were kept (a count): in a long-lived process (MaskBench's 11,305 schemas
    /// in one worker) every grammar past them with another form built its own slice, in its
    /// first fill where the compile's thread was not done (2.3-3.3 ms on Llama 3).
    pub fn class_body_slice(&self, form: &[u32]) -> Arc<ClassBodySlice> {
        self.class_body_slice_within(form, limits::CLASS_BODY_SLICE_BYTES)
    }

    /// [`Self::class_body_slice`], keeping at most `budget` bytes of slices.
    fn class_body_slice_within(&self, form: &[u32], budget: usize) -> Arc<ClassBodySlice> {
        if let Some(s) = self.cached_class_body_slice(form) {
            return s;
        }
        // The JSON string character's form is read off the body slice (built once per vocabulary).
        let built = timed(Build::ClassBodySlice, || {
            Arc::new(
                ClassBodySlice::from_body(&self.trie, || self.body_slice(), form)
                    .or_else(|| ClassBodySlice::pruned(&self.trie, self.class_text(), self.body_slice(), form))
                    .unwrap_or_else(|| ClassBodySlice::new(&self.trie, self.vocab.vocab_size(), form)),
            )
        });
        let bytes = class_body_bytes(form, &built);
        let mut w = write(&self.class_body_slices);
        if let Some((s, _)) = w.get(form) {
            return s.clone();
        }
        if bytes > budget {
            return built;
        }
        let mut kept: usize = w.iter().map(|(f, (s, _))| class_body_bytes(f, s)).sum();
        while kept + bytes > budget {
            let Some(oldest) = w.iter().min_by_key(|(_, (_, t))| t.load(Ordering::Relaxed)).map(|(f, _)| f.clone())
            else {
                break;
            };
            let (s, _) = w.remove(&oldest).expect("a kept form");
            kept -= class_body_bytes(&oldest, &s);
        }
        let now = self.class_body_clock.fetch_add(1, Ordering::Relaxed) + 1;
        w.insert(form.to_vec(), (built.clone(), AtomicU64::new(now)));
        built
    }

    /// The counted class-body slice of a form if it is kept ([`Self::class_body_slice`]), marked
    /// as used now.
    pub fn cached_class_body_slice(&self, form: &[u32]) -> Option<Arc<ClassBodySlice>> {
        let r = read(&self.class_body_slices);
        let (s, t) = r.get(form)?;
        t.store(self.class_body_clock.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
        Some(s.clone())
    }

    /// The free-text slice of ASCII class `ascii` if it was built.
    pub fn cached_class_slice(&self, ascii: u128) -> Option<Arc<ClassSlice>> {
        read(&self.class_slices).get(&ascii).cloned()
    }

    /// Whether a grammar with a state looping on `ascii` was compiled before (its slice is then
    /// built, or every such state was a string body).
    pub(crate) fn class_seen(&self, ascii: u128, utf8: bool) -> bool {
        read(&self.classes_seen).contains(&(ascii, utf8))
    }

    pub(crate) fn see_class(&self, ascii: u128, utf8: bool) {
        let mut w = write(&self.classes_seen);
        if w.len() < MAX_CLASSES_SEEN {
            w.insert((ascii, utf8));
        }
    }

    pub(crate) fn shared_kernel(&self, key: u128) -> Option<Arc<KernelMask>> {
        read(&self.kernels).get(&key).cloned()
    }

    /// The [`BodyEnds`] of the string-body kernel under cross-grammar key `key`, made by
    /// `make` (from that kernel) on first use.
    pub(crate) fn body_ends(
        &self,
        key: u128,
        make: impl FnOnce() -> crate::error::Result<BodyEnds>,
    ) -> crate::error::Result<Arc<BodyEnds>> {
        if let Some(e) = read(&self.body_ends).get(&key) {
            return Ok(e.clone());
        }
        let built = Arc::new(timed(Build::BodyEnds, make)?);
        let mut w = write(&self.body_ends);
        if w.len() >= MAX_BODY_ENDS {
            timed(Build::BodyEndsRestart, || w.clear());
        }
        Ok(w.entry(key).or_insert(built).clone())
    }

    /// The [`LeadNodes`] of the run `class{0,bound}` (after byte `prefix`, if any), built on
    /// first use.
    pub(crate) fn lead_nodes(&self, prefix: Option<u8>, class: &ByteSet, bound: u32) -> Arc<LeadNodes> {
        let bound = bound.min(self.trie.max_depth);
        let find = |l: &[Arc<LeadNodes>]| {
            l.iter().find(|n| n.prefix == prefix && n.class == *class && n.bound == bound).cloned()
        };
        if let Some(n) = find(&read(&self.lead_nodes)) {
            return n;
        }
        let built = Arc::new(timed(Build::LeadNodes, || LeadNodes::new(&self.trie, prefix, *class, bound)));
        let mut w = write(&self.lead_nodes);
        if let Some(n) = find(&w) {
            return n;
        }
        if w.len() >= MAX_LEAD_NODES {
            timed(Build::LeadNodesRestart, || w.clear());
        }
        w.push(built.clone());
        built
    }

    /// [`Self::quote_cut`] where `form` was asked for before (by this call; else it is only
    /// noted, at most [`MAX_QUOTE_CUTS`] forms, and `None`).
    #[doc(hidden)]
    pub fn quote_cut_if_seen(&self, form: Vec<u32>) -> Option<Arc<QuoteCut>> {
        if let Some(c) = read(&self.quote_cuts).get(&form) {
            return Some(c.clone());
        }
        {
            let mut seen = write(&self.quote_forms_seen);
            if seen.len() >= MAX_QUOTE_CUTS {
                seen.clear();
            }
            if seen.insert(form.clone()) {
                return None;
            }
        }
        Some(self.quote_cut(form))
    }

    /// The [`QuoteCut`] of quote form `form` ([`crate::slice::quote_form`]), built on first use.
    pub fn quote_cut(&self, form: Vec<u32>) -> Arc<QuoteCut> {
        if let Some(c) = read(&self.quote_cuts).get(&form) {
            return c.clone();
        }
        let vocab_size = self.vocab.vocab_size();
        let built = Arc::new(timed(Build::QuoteCut, || QuoteCut::new(&self.trie, &form, vocab_size)));
        let mut w = write(&self.quote_cuts);
        if w.len() >= MAX_QUOTE_CUTS {
            timed(Build::QuoteCutsRestart, || w.clear());
        }
        w.entry(form).or_insert(built).clone()
    }

    /// Whether a kernel was shared under prefix key `prefix` (see `kernel_prefixes`).
    pub(crate) fn shared_prefix(&self, prefix: u128) -> bool {
        read(&self.kernel_prefixes).contains(&prefix)
    }

    /// Shares `km` under `key`; `prefix`, the state's prefix key when it reaches more states
    /// than the early key takes.
    pub(crate) fn share_kernel(&self, key: u128, prefix: Option<u128>, km: &Arc<KernelMask>) {
        let size = km.memory_size();
        let mut w = write(&self.kernels);
        // Bounded: when full, start over (the common kernels are recomputed on next use).
        if self.kernel_bytes.load(Ordering::Relaxed) + size > limits::SHARED_KERNEL_CACHE_BYTES {
            timed(Build::KernelCacheRestart, || w.clear());
            write(&self.kernel_prefixes).clear();
            self.kernel_bytes.store(0, Ordering::Relaxed);
        }
        if timed(Build::KernelShared, || w.insert(key, km.clone())).is_none() {
            self.kernel_bytes.fetch_add(size, Ordering::Relaxed);
        }
        if let Some(p) = prefix {
            write(&self.kernel_prefixes).insert(p);
        }
    }
}

impl TokenIndex {
    /// Bytes held per part, by name: everything built once per vocabulary and shared by the
    /// grammars compiled against it (the vocabulary itself included), as built so far (the lazy
    /// parts grow with use, up to their per-vocabulary budgets).
    ///
    /// Invariant: every field of [`TokenIndex`] is counted under one name (the destructuring
    /// below has no `..`, so a new field does not compile until it is counted).
    pub fn memory_parts(&self) -> Vec<(&'static str, usize)> {
        let TokenIndex {
            vocab,
            trie,
            kernels,
            kernel_bytes: _, // counted through `kernels`
            kernel_prefixes,
            body_ends,
            lead_nodes,
            body,
            quote_cuts,
            quote_forms_seen,
            class_slices,
            run_indexes,
            run_clock: _,               // a counter
            run_indexes_built_later: _, // a counter
            run_indexes_in_flight: _,   // a few classes
            run_index_landed: _,        // no heap
            run_index_waits: _,         // a counter
            wide_run_indexes,
            run_bases,
            classes_seen,
            quote_ends,
            first_chars,
            string_index,
            text,
            walked_prepared: _,     // a flag
            walked_thread: _,       // a thread handle
            walked_built_on_use: _, // a counter
            walked_bodies,
            class_body_slices,
            class_text,
            class_body_clock: _, // a counter
            rule_dfas,
        } = self;
        // Per hash-map entry: its key and `Arc` plus the table's own slot (an estimate).
        let entry = 32;
        let kernels: usize = read(kernels).values().map(|k| k.memory_size() + entry).sum::<usize>()
            + read(kernel_prefixes).len() * entry;
        let classes: usize = read(class_slices).values().map(|c| c.memory_size() + entry).sum();
        let runs: usize = read(run_indexes).values().map(|r| r.0.memory_size() + entry).sum();
        let wide: usize = read(wide_run_indexes)
            .iter()
            .map(|((_, refused), r)| r.memory_size() + refused.iter().map(|c| c.len() + 16).sum::<usize>() + entry)
            .sum();
        let walked: usize =
            read(walked_bodies).values().map(|w| w.as_ref().map_or(0, |w| w.memory_size()) + entry).sum();
        let class_bodies: usize = read(class_body_slices).iter().map(|(f, (s, _))| class_body_bytes(f, s)).sum();
        vec![
            ("vocabulary", vocab.memory_size()),
            ("trie", trie.memory_size()),
            ("body_slice", body.get().map_or(0, BodySlice::memory_size)),
            ("run_bases", run_bases.get().map_or(0, RunBases::memory_size)),
            ("run_indexes", runs),
            ("wide_run_indexes", wide),
            ("class_slices", classes),
            ("walked_bodies", walked),
            ("quote_cuts", read(quote_cuts).iter().map(|(f, c)| c.memory_size() + 4 * f.len() + entry).sum()),
            ("quote_forms_seen", read(quote_forms_seen).iter().map(|f| 4 * f.len() + entry).sum()),
            ("class_body_slices", class_bodies),
            ("class_text", class_text.get().map_or(0, ClassTextIndex::memory_size)),
            ("rule_automata", rule_dfas.memory_size()),
            ("first_chars", first_chars.get().map_or(0, FirstChars::memory_size)),
            ("string_index", string_index.get().map_or(0, StringIndex::memory_size)),
            ("text_slice", text.get().map_or(0, TextSlice::memory_size)),
            ("quote_ends", quote_ends.get().map_or(0, QuoteEnds::memory_size)),
            ("shared_kernels", kernels),
            ("body_ends", read(body_ends).values().map(|e| e.memory_size() + entry).sum()),
            ("lead_nodes", read(lead_nodes).iter().map(|n| n.memory_size() + entry).sum()),
            ("classes_seen", read(classes_seen).len() * entry),
        ]
    }

    /// Bytes held in all ([`Self::memory_parts`]).
    pub fn memory_size(&self) -> usize {
        self.memory_parts().iter().map(|(_, n)| n).sum()
    }
}

pub(crate) fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

type IndexRegistry = Mutex<Vec<(Weak<Vocabulary>, Weak<TokenIndex>)>>;
static INDEXES: IndexRegistry = Mutex::new(Vec::new());

impl TokenIndex {
    /// The shared index of `vocab`, built on first use.
    pub fn for_vocab(vocab: &Arc<Vocabulary>) -> Arc<TokenIndex> {
        let mut reg = INDEXES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        reg.retain(|(v, i)| v.strong_count() > 0 && i.strong_count() > 0);
        for (v, i) in reg.iter() {
            if v.upgrade().is_some_and(|v| Arc::ptr_eq(&v, vocab)) {
                if let Some(i) = i.upgrade() {
                    return i;
                }
            }
        }
        let idx = Arc::new(TokenIndex {
            vocab: vocab.clone(),
            trie: TokenTrie::new(vocab),
            kernels: RwLock::new(HashMap::new()),
            kernel_bytes: AtomicUsize::new(0),
            kernel_prefixes: RwLock::new(HashSet::new()),
            body_ends: RwLock::new(HashMap::new()),
            lead_nodes: RwLock::new(Vec::new()),
            body: OnceLock::new(),
            quote_cuts: RwLock::new(HashMap::new()),
            quote_forms_seen: RwLock::new(HashSet::new()),
            class_slices: RwLock::new(HashMap::new()),
            run_indexes: RwLock::new(HashMap::new()),
            run_clock: AtomicU64::new(0),
            run_indexes_built_later: AtomicUsize::new(0),
            run_indexes_in_flight: Mutex::new(Vec::new()),
            run_index_landed: Condvar::new(),
            run_index_waits: AtomicUsize::new(0),
            wide_run_indexes: RwLock::new(Vec::new()),
            run_bases: OnceLock::new(),
            classes_seen: RwLock::new(HashSet::new()),
            quote_ends: OnceLock::new(),
            first_chars: OnceLock::new(),
            string_index: OnceLock::new(),
            text: OnceLock::new(),
            walked_prepared: AtomicBool::new(false),
            walked_thread: Mutex::new(None),
            walked_built_on_use: AtomicUsize::new(0),
            walked_bodies: RwLock::new(HashMap::new()),
            class_body_slices: RwLock::new(HashMap::new()),
            class_text: OnceLock::new(),
            class_body_clock: AtomicU64::new(0),
            rule_dfas: RuleMemo::new(limits::RULE_MEMO_BYTES),
        });
        // Built with the trie (a few ms on a 128k vocabulary) rather than in some first mask or
        // compile: nearly every grammar has a loop class or a string body that takes a run index.
        let _ = idx.body_slice();
        // Its boundary nodes too (string bodies read up to a few characters,
        // [`crate::slice::Bounded::Within`]). PERF: 14.5 M instructions on Llama 3; built by a
        // fill (or a thread the fill raced), the first such fill of a process took ~1 ms more.
        idx.body_slice().prepare_boundaries(&idx.trie);
        let _ = idx.run_bases();
        // PERF: a class-body slice built without it walks the class-text part of the trie
        // (~2 ms on Llama 3), in the first fill that finds it unbuilt.
        let _ = idx.class_text();
        reg.push((Arc::downgrade(vocab), Arc::downgrade(&idx)));
        idx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{VocabType, VocabularyOptions};

    /// Printable ASCII and a few longer tokens.
    fn small_vocab() -> Arc<Vocabulary> {
        let mut toks: Vec<Vec<u8>> = (b' '..=b'~').map(|b| vec![b]).collect();
        toks.extend(["ab", "ABC", "a1", "</s>"].iter().map(|t| t.as_bytes().to_vec()));
        let opts = VocabularyOptions { stop_token_ids: Some(vec![toks.len() as u32 - 1]), ..Default::default() };
        Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
    }

    /// A UTF-8 run index less refused characters is built once per vocabulary and key while the
    /// cache has room ([`TokenIndex::run_index_less_off_fill`]): a second request takes the same
    /// index, a key past [`MAX_WIDE_RUN_INDEXES`] is built for its caller alone.
    #[test]
    fn wide_run_indexes_are_kept_per_vocabulary() {
        let index = TokenIndex::for_vocab(&small_vocab());
        let class = (b'a'..=b'z').fold(0u128, |c, b| c | 1 << b);
        let refused = |i: usize| vec![[0xC2, 0xA0 + i as u8].to_vec().into_boxed_slice()];
        let first = index.run_index_less_off_fill(class, &refused(0)).unwrap();
        assert!(Arc::ptr_eq(&first, &index.run_index_less_off_fill(class, &refused(0)).unwrap()));
        assert!(Arc::ptr_eq(&first, &index.cached_run_index_less(class, &refused(0)).unwrap()));
        assert!(index.cached_run_index_less(class, &refused(1)).is_none());
        for i in 1..=MAX_WIDE_RUN_INDEXES {
            assert!(index.run_index_less_off_fill(class, &refused(i)).is_some());
        }
        assert!(index.cached_run_index_less(class, &refused(MAX_WIDE_RUN_INDEXES - 1)).is_some());
        assert!(index.cached_run_index_less(class, &refused(MAX_WIDE_RUN_INDEXES)).is_none());
    }

    /// A class a walk looked up since the last compile is kept when a new compile makes room: the
    /// least recently needed index goes, however it was last needed. Fails when a walk's lookup
    /// does not count as a use (the JSON string body's run index, built in the masks, was dropped
    /// by the next compiles and never built again: MaskBench o9812's first `description` position
    /// walked the body, 3.4 ms, in the tail sample).
    #[test]
    fn walks_keep_their_run_indexes() {
        let vocab = small_vocab();
        let index = TokenIndex::for_vocab(&vocab);
        let class_of = |i: u8| -> u128 { (b'a'..=b'z').filter(|&b| b != b'a' + i).fold(0, |c, b| c | 1 << b) };
        for i in 0..MAX_RUN_INDEXES as u8 {
            index.build_run_indexes(&[(class_of(i), false)]);
        }
        // Class 0 is the least recently compiled; a walk needs it now.
        assert!(index.run_index(class_of(0), false).is_some());
        index.build_run_indexes(&[(class_of(30), false)]);
        let kept = |i: u8| read(&index.run_indexes).contains_key(&(class_of(i), false));
        assert!(kept(30) && kept(0), "the class a walk needed was dropped");
        assert!(!kept(1), "the least recently needed class is kept");
        // A walk builds a missing class the same way.
        assert!(index.run_index(class_of(1), false).is_some() && !kept(2));
    }

    /// A fill that needs the run index another thread is building waits for that build and builds
    /// none itself; one that needs a class queued for a [`TokenIndex::build_later`] thread builds
    /// it, and the thread then skips it ([`TokenIndex::run_index`]). Fails when the fill builds
    /// the class in flight again (MaskBench o42521 t8, Llama 3: 6.6 M instructions against 0.45 M)
    /// or the thread builds a class a fill took over.
    #[test]
    fn fills_wait_for_the_run_index_in_flight() {
        use crate::build_counts::{thread_count, Build};
        let index = TokenIndex::for_vocab(&small_vocab());
        let class = ((b'a'..=b'z').fold(0u128, |c, b| c | 1 << b), false);
        // Another thread's build under way, marked as `build_left` marks it.
        let building = index.mark_building(&mut index.lock_in_flight(), class);
        let fill = std::thread::spawn({
            let index = Arc::clone(&index);
            move || {
                let (built, waited) = (thread_count(Build::RunIndex), thread_count(Build::RunIndexWait));
                let ri = index.run_index(class.0, class.1).unwrap();
                (ri, thread_count(Build::RunIndex) - built, thread_count(Build::RunIndexWait) - waited)
            }
        });
        // Until the fill waits (or, building its own, is done).
        while index.run_index_waits() == 0 && !fill.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let kept = index.run_index_off_fill(class.0, class.1).unwrap();
        index.keep_built(class.0, class.1, Arc::clone(&kept), 1);
        drop(building);
        let (ri, built, waited) = fill.join().unwrap();
        assert_eq!(built, 0, "the fill built the run index in flight");
        assert_eq!(waited, 1, "the wait is not counted");
        assert!(Arc::ptr_eq(&ri, &kept));
        assert!(index.lock_in_flight().is_empty());
        // A queued class is built by the fill that needs it, not again by the thread.
        let queued = ((b'0'..=b'9').fold(0u128, |c, b| c | 1 << b), false);
        index.lock_in_flight().push((queued, InFlight::Queued));
        let built = thread_count(Build::RunIndex);
        assert!(index.run_index(queued.0, queued.1).is_some());
        assert_eq!(thread_count(Build::RunIndex) - built, 1);
        assert!(index.lock_in_flight().is_empty());
        index.build_left(&[queued], 1);
        assert_eq!(index.run_indexes_built_later(), 0, "the thread built a class taken over");
    }

    /// The lead-node list counts its builds and its restart on the building thread
    /// ([`crate::build_counts`], read by `bench/tail_states.py --builds`), and a lookup counts
    /// nothing. Fails when a build or the restart past [`MAX_LEAD_NODES`] goes uncounted, or a
    /// cached list is built again.
    #[test]
    fn lead_node_builds_are_counted() {
        use crate::build_counts::{thread_count, Build};
        let index = TokenIndex::for_vocab(&small_vocab());
        let (built, restarts) = (thread_count(Build::LeadNodes), thread_count(Build::LeadNodesRestart));
        let class_of = |i: u8| {
            let mut c = ByteSet::default();
            c.insert_range(b'a', b'a' + i);
            c
        };
        for i in 0..MAX_LEAD_NODES as u8 {
            index.lead_nodes(None, &class_of(i), 4);
            index.lead_nodes(None, &class_of(i), 4);
        }
        assert_eq!(thread_count(Build::LeadNodes) - built, MAX_LEAD_NODES as u64);
        assert_eq!(thread_count(Build::LeadNodesRestart), restarts, "a restart before the list is full");
        index.lead_nodes(None, &class_of(MAX_LEAD_NODES as u8), 4);
        assert_eq!(thread_count(Build::LeadNodes) - built, MAX_LEAD_NODES as u64 + 1);
        assert_eq!(thread_count(Build::LeadNodesRestart) - restarts, 1, "the restart is not counted");
    }

    /// A wide run index ([`TokenIndex::run_index_less_off_fill`]) counts its build on the building
    /// thread once per kept key, nothing on a cached lookup, and each build past
    /// [`MAX_WIDE_RUN_INDEXES`] (not kept). Fails when a build goes uncounted or a lookup counts.
    #[test]
    fn wide_run_index_builds_are_counted() {
        use crate::build_counts::{thread_count, Build};
        let index = TokenIndex::for_vocab(&small_vocab());
        let class = (b'a'..=b'z').fold(0u128, |c, b| c | 1 << b);
        let refused = |i: usize| vec![[0xC2, 0xA0 + i as u8].to_vec().into_boxed_slice()];
        let built = || thread_count(Build::WideRunIndex);
        let before = built();
        for i in 0..MAX_WIDE_RUN_INDEXES {
            index.run_index_less_off_fill(class, &refused(i));
            index.run_index_less_off_fill(class, &refused(i));
            index.cached_run_index_less(class, &refused(i));
        }
        assert_eq!(built() - before, MAX_WIDE_RUN_INDEXES as u64, "one build per kept key");
        index.run_index_less_off_fill(class, &refused(MAX_WIDE_RUN_INDEXES));
        index.run_index_less_off_fill(class, &refused(MAX_WIDE_RUN_INDEXES));
        assert_eq!(built() - before, MAX_WIDE_RUN_INDEXES as u64 + 2, "a build past the bound");
    }

    /// A position whose callees are counted string bodies (MaskBench o82667's `caption`,
    /// `maxLength: 5000`: `json_char.block{0,3} json_char.short | ...`) is not composed from
    /// class-body slices: those bodies take the string-body slice, and a class slice of every
    /// string character would walk most of the trie (3-5 ms on Llama 3 at that position, against a
    /// 0.7 ms walk). Fails when composition asks any callee for its class body first.
    #[test]
    fn string_bodies_are_not_composed_from_class_slices() {
        use crate::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
        use crate::matcher::{Matcher, MatcherOptions};
        let vocab = small_vocab();
        let index = TokenIndex::for_vocab(&vocab);
        let schema = r#"{"type": "object", "properties": {"caption": {"type": "string", "maxLength": 5000}}}"#;
        let g =
            json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
        let cg = Arc::new(crate::compiled::CompiledGrammar::new(&g, &vocab).unwrap());
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        assert!(m.accept_bytes(br#"{"caption": ""#).unwrap());
        m.compute_mask().unwrap();
        assert!(read(&index.class_body_slices).is_empty(), "a class-body slice was built for a string body");
    }

    /// Two grammars with the same counted class (`[a-zA-Z]{20}`, between different bytes) share
    /// one class-body slice, the vocabulary's. Fails when each compiled grammar builds its own
    /// again (the second grammar's slice is not the index's).
    #[test]
    fn grammars_share_class_body_slices() {
        let vocab = small_vocab();
        let index = TokenIndex::for_vocab(&vocab);
        let grammars: Vec<_> = [r#"root ::= "<" [a-zA-Z]{20} ">""#, r#"root ::= "[" [a-zA-Z]{20} "]""#]
            .iter()
            .map(|g| {
                crate::compiled::CompiledGrammar::new(&crate::ebnf::parse_ebnf(g, "root").unwrap(), &vocab).unwrap()
            })
            .collect();
        for cg in &grammars {
            let states = (0..cg.automata().states().len() as u32).map(crate::compiler::StateId);
            let taken = states.filter(|&s| cg.class_body_capacity(s).is_some()).count();
            assert!(taken >= 20, "{taken} states take a class-body slice");
        }
        let slices = read(&index.class_body_slices);
        assert_eq!(slices.len(), 1);
        let shared = &slices.values().next().unwrap().0;
        // The index's and each grammar's.
        assert_eq!(Arc::strong_count(shared), 1 + grammars.len());
    }

    /// Class-body slices of many forms (past the 16 once kept) are all kept while within the
    /// byte budget, and a new one past it evicts the least recently used: a form used since
    /// stays. Fails with a count bound (the 17th form on was built for its caller alone) or with
    /// an eviction of the oldest built rather than the least recently used.
    #[test]
    fn class_body_slices_are_kept_by_bytes_least_recently_used_out() {
        let index = TokenIndex::for_vocab(&small_vocab());
        // Form `i`: the class of one ASCII letter range `a..=a+i`, a character automaton of one
        // boundary pair.
        let form = |i: u8| vec![0, 1, u32::from(b'a'), u32::from(b'a' + i), 0];
        let kept = |i: u8| read(&index.class_body_slices).contains_key(&form(i));
        for i in 0..24 {
            index.class_body_slice(&form(i));
        }
        assert!((0..24).all(kept), "a form within the byte budget was not kept");
        let bytes = |i: u8| class_body_bytes(&form(i), &index.class_body_slice(&form(i)));
        let budget: usize = (0..24).map(bytes).sum();
        // Form 0 used again: form 1 is the least recently used.
        index.cached_class_body_slice(&form(0));
        index.class_body_slice_within(&form(24), budget);
        assert!(kept(0) && kept(24), "the form used last or the new one was evicted");
        assert!(!kept(1), "the least recently used form was kept past the budget");
        let total: usize = read(&index.class_body_slices).iter().map(|(f, (s, _))| class_body_bytes(f, s)).sum();
        assert!(total <= budget, "{total} bytes kept past a budget of {budget}");
    }

    /// Grammars compiled one after another, each looping on a class of its own, past the
    /// per-vocabulary budget of run indexes, then the first ones again: every compile leaves its
    /// own class's run index built (the least recently needed one made room), and no more than the
    /// budget are kept. Fails when a compile past the budget builds nothing (the indexes of every
    /// grammar after the budget's were walked in their masks: MaskBench o60252 in the tail
    /// sample) or when a class seen before is not built again at compile.
    #[test]
    fn every_compile_gets_its_run_indexes() {
        let vocab = small_vocab();
        let index = TokenIndex::for_vocab(&vocab);
        // Class `i`: the letters with the `i`-th one left out (each a loop class of its own).
        let class_of = |i: u8| -> u128 { (b'a'..=b'z').filter(|&b| b != b'a' + i).fold(0, |c, b| c | 1 << b) };
        let compile = |i: u8| {
            let class: String = (b'a'..=b'z').filter(|&b| b != b'a' + i).map(char::from).collect();
            let g = crate::ebnf::parse_ebnf(&format!("root ::= \"<\" [{class}]* \">\""), "root").unwrap();
            crate::compiled::CompiledGrammar::new(&g, &vocab).unwrap()
        };
        let n = MAX_RUN_INDEXES as u8 + 4;
        for i in (0..n).chain(0..4) {
            let cg = compile(i);
            // No string body: the indexes its first mask does not read are built on a thread.
            cg.wait_run_indexes();
            let built = |i: u8| read(&index.run_indexes).keys().any(|&(c, _)| c == class_of(i));
            assert!(built(i), "grammar {i}: its class has no run index");
            assert!(read(&index.run_indexes).len() <= MAX_RUN_INDEXES);
            drop(cg);
        }
    }
}
