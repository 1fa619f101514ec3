//! Regular expressions (the common subset of ECMA-262 and Python `re`) to grammar.
//!
//! Pipeline: [`Regex::parse`] ([`parser`]) turns a pattern into a small AST ([`ast`]: codepoint
//! sets, concatenation, alternation, bounded repetition, assertions). From there two paths lead to
//! EBNF:
//! - [`regex_to_ebnf`] prints the AST directly ([`emit`]): compact, mirrors the pattern, keeps
//!   `x{m,n}` as is. Patterns with assertions other than a leading `^` / trailing `$` go through
//!   the automaton instead, so anchors and word boundaries are always exact.
//! - [`CharDfa::from_regex`] ([`nfa`]) builds a deterministic automaton over Unicode scalar values
//!   ([`dfa`]), which the JSON Schema converter combines (intersection, complement, length bounds)
//!   and prints with [`CharDfa::to_ebnf`], as raw text or as the body of a JSON string literal.
//!
//! Limits: repetition bounds up to `MAX_REPEAT_BOUND`, group nesting up to `MAX_NESTING`, at most
//! [`MAX_DFA_STATES`] states per automaton and [`MAX_NFA_STATES`] expanded NFA states.
use crate::error::{Error, ErrorKind, Result};

mod ast;
pub mod charset;
mod dfa;
mod emit;
mod nfa;
mod parser;
#[cfg(test)]
mod tests;

pub use charset::CharSet;
pub use dfa::CharDfa;
pub use nfa::MAX_NFA_STATES;

/// Most states of one [`CharDfa`]; building or combining automata past it is a `LimitExceeded`
/// error (products may explore up to four times as many pairs before minimization).
pub const MAX_DFA_STATES: usize = 10_000;

/// Pattern flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegexFlags {
    /// Simple case folding of every literal and class.
    pub ignore_case: bool,
    /// `.` also matches the line terminators `\n \r \u2028 \u2029`.
    pub dot_all: bool,
}

/// A parsed pattern. Flags are already applied to its sets.
pub struct Regex {
    node: ast::Node,
    /// Deepest group nesting (at most `MAX_NESTING`).
    depth: usize,
}

impl std::fmt::Debug for Regex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The tree itself is not printed: it may be too deep for a recursive formatter.
        f.debug_struct("Regex").field("depth", &self.depth).finish_non_exhaustive()
    }
}

/// Group nesting up to which AST walks run on the caller's stack.
const SHALLOW_DEPTH: usize = 64;
/// Stack for walks over deeper patterns: AST depth is at most 3 * `MAX_NESTING` and each level
/// costs a few small frames (about 2 KiB in debug builds), so 64 MiB leaves a wide margin.
const DEEP_STACK_BYTES: usize = 64 << 20;

/// Runs a recursive walk over the AST of `re`; for deeply nested patterns the walk runs on a
/// helper thread with a large stack, so callers on small stacks (2 MiB threads) are safe.
fn with_stack<T: Send>(re: &Regex, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    if re.depth <= SHALLOW_DEPTH {
        return f();
    }
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("grammask-regex".into())
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(scope, f)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("cannot start a thread for a deep pattern: {e}")))?;
        handle.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

impl Regex {
    /// Parses the common subset of ECMA-262 and Python `re`.
    pub fn parse(pattern: &str, flags: RegexFlags) -> Result<Regex> {
        let (node, depth) = parser::parse(pattern, flags)?;
        Ok(Regex { node, depth })
    }

    /// EBNF rules for the full-match language of the pattern (raw text); the entry rule is
    /// `rule_name`, helper rules are `rule_name_N`. Mirrors the pattern's structure when it has
    /// no assertions besides a leading `^` / trailing `$`, else prints its automaton.
    pub fn to_ebnf(&self, rule_name: &str) -> Result<String> {
        if with_stack(self, || Ok(emit::has_inner_assertion(&self.node, true, true)))? {
            let dfa = CharDfa::from_regex(self, Anchoring::FullMatch)?;
            return Ok(dfa.to_ebnf(rule_name, TextMode::Raw));
        }
        let body = with_stack(self, || Ok(emit::node_expr(&self.node)))?;
        Ok(format!("{rule_name} ::= {body}\n"))
    }
}

/// Whether a pattern must match the whole string or, as in JSON Schema `pattern`, anywhere in it
/// (ECMA-262 search semantics: unanchored unless the pattern anchors itself with ^ / $).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchoring {
    FullMatch,
    Search,
}

/// How a language of strings is spelled in the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextMode {
    /// The string's UTF-8 bytes as they are.
    Raw,
    /// The body (between the quotes) of a JSON string literal whose decoded value is in the
    /// language: each codepoint may be written literally when JSON allows it unescaped (>= U+0020,
    /// not " or \), as a short escape (\" \\ \/ \b \f \n \r \t) where one exists, or as \uXXXX with
    /// hex digits of either case (astral codepoints as a surrogate pair). Exactly the JSON
    /// spelling set, nothing more.
    JsonStringBody,
    /// As [`TextMode::JsonStringBody`], restricted to the canonical spellings of
    /// [`crate::spelling`]: printable ASCII other than " and \ raw only, no \/, \u only for
    /// control characters without a short escape and for U+007F and above.
    JsonStringBodyCanonical,
}

impl CharDfa {
    /// The automaton of `re` under `anchoring`.
    pub fn from_regex(re: &Regex, anchoring: Anchoring) -> Result<CharDfa> {
        with_stack(re, || nfa::determinize(&re.node, anchoring == Anchoring::Search))
    }

    /// EBNF rules for the language; the entry rule is named `rule_prefix`, helper rules
    /// `rule_prefix_N`. States with one predecessor are inlined, self-loops become `x*`.
    #[must_use]
    pub fn to_ebnf(&self, rule_prefix: &str, mode: TextMode) -> String {
        emit::dfa_to_ebnf(self, rule_prefix, mode)
    }

    /// [`CharDfa::to_ebnf`] for a union of [`CharDfa::then_exit`] languages: the exit marker
    /// `j` prints as the EBNF sequence `exits[j]`.
    #[must_use]
    pub fn to_ebnf_with_exits(&self, rule_prefix: &str, mode: TextMode, exits: &[String]) -> String {
        emit::dfa_to_ebnf_with_exits(self, rule_prefix, mode, exits)
    }
}

/// `Grammar.from_regex`: full match, raw UTF-8, `.` matches every codepoint (`XGrammar`'s
/// behaviour); the entry rule is `rule_name`.
pub fn regex_to_ebnf(pattern: &str, rule_name: &str) -> Result<String> {
    regex_to_ebnf_with(pattern, rule_name, RegexFlags { ignore_case: false, dot_all: true })
}

/// [`regex_to_ebnf`] with explicit flags.
pub fn regex_to_ebnf_with(pattern: &str, rule_name: &str, flags: RegexFlags) -> Result<String> {
    if rule_name.is_empty() {
        return Err(Error::new(ErrorKind::InvalidArgument, "the rule name must not be empty"));
    }
    if pattern.len() > crate::limits::MAX_GRAMMAR_BYTES {
        return Err(Error::limit("regular expression (bytes)", crate::limits::MAX_GRAMMAR_BYTES));
    }
    Regex::parse(pattern, flags)?.to_ebnf(rule_name)
}

/// `Grammar.from_regex`: [`regex_to_ebnf`] parsed into a [`Grammar`](crate::grammar::Grammar)
/// whose root rule is `root`.
pub fn regex_to_grammar(pattern: &str) -> Result<crate::grammar::Grammar> {
    let text = regex_to_ebnf(pattern, "root")?;
    crate::ebnf::parse_ebnf(&text, "root")
}
