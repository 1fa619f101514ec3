//! Documented bounds on untrusted input. Every limit is a typed `LimitExceeded` error when hit;
//! docs/limits.md lists them with their cost.

/// Deepest nesting of parentheses/brackets accepted by the EBNF and regex parsers, and of
/// schemas in the JSON Schema converter. Parsers use explicit stacks or recursion bounded by this.
pub const MAX_NESTING: usize = 1_000;
/// Largest bound `n` in `{m,n}` repetition.
pub const MAX_REPEAT_BOUND: u32 = 100_000;
/// Most automaton states of one compiled grammar (all rules together).
pub const MAX_AUTOMATON_STATES: usize = 2_000_000;
/// Largest grammar text (EBNF, regex, schema) in bytes.
pub const MAX_GRAMMAR_BYTES: usize = 64 << 20;
/// Longest token in bytes the vocabulary accepts.
pub const MAX_TOKEN_BYTES: usize = 1 << 16;
/// Most Earley items in one chart row before the matcher refuses the input (ambiguity bound).
pub const MAX_ITEMS_PER_ROW: usize = 100_000;
/// Most items visited by completions while reading one byte (a few ms of work): highly ambiguous
/// grammars such as `s ::= s s | "a" | ""` hit it after ~500 bytes instead of going cubic.
pub const MAX_ROW_WORK: usize = 250_000;
/// Most Earley work (the completion visits of [`MAX_ROW_WORK`] plus the items of every row built)
/// of one matcher call: a mask fill (every chart and trie walk it runs), an accepted token, or
/// each started [`FILL_WORK_INPUT_BYTES`] of an accepted string. A fill walks many trie nodes, an
/// Earley row each, so the per-row bounds alone let a highly ambiguous grammar's fill run for
/// minutes; past this the call fails (`LimitExceeded`) with the matcher unchanged.
pub const MAX_FILL_WORK: usize = 20_000_000;
/// Input bytes of an accepted string that [`MAX_FILL_WORK`] pays for (a longer string has that
/// budget for each started block), so accepting a long text stays linear, never refused for its
/// length alone.
pub const FILL_WORK_INPUT_BYTES: usize = 4096;
/// Memory for memoized full masks per compiled grammar; past it, new masks are not memoized.
pub const MASK_MEMO_BYTES: usize = 64 << 20;
/// Memory for kernel classifications shared across the grammars of one vocabulary; past it, the
/// shared cache starts over.
pub const SHARED_KERNEL_CACHE_BYTES: usize = 512 << 20;
/// Memory for rule automata shared across the grammars of one vocabulary (keys and DFAs); past
/// it, the least recently used are dropped.
pub const RULE_MEMO_BYTES: usize = 8 << 20;
/// Memory for counted class-body slices shared across the grammars of one vocabulary
/// (`TokenIndex::class_body_slice`; one per character class form, ~0.5-0.6 MB each on Llama 3
/// and Qwen 2.5, see docs/benchmarks.md, session 62); past it, the least recently used are
/// dropped (a grammar holding one keeps it).
pub const CLASS_BODY_SLICE_BYTES: usize = 32 << 20;
/// Cover-search pairs (and refutation states) that one compile spends finding the run classes of
/// its states (`CompiledGrammar::new`: which per-vocabulary run indexes and class slices to build);
/// past it the remaining states' searches give up (undecided), and a fill that reaches such a
/// state searches it under its own per-state budget.
pub const MAX_COMPILE_RUN_CLASS_PAIRS: usize = 1 << 18;
/// Cover-search pairs the class-body thread of one compile spends on the string starts that read
/// their text inline (`slice::search_string_starts`); past it, a fill searches the rest itself.
pub const MAX_COMPILE_STRING_START_PAIRS: usize = 1 << 16;
