//! EBNF output buffer for the JSON Schema converter: unique rule names, literal and character-class
//! escaping, and a size bound. Everything the converter writes goes through [`Ebnf`], so the output
//! is always well-formed text in XGrammar's dialect with each rule defined exactly once.

use std::collections::hash_map::Entry;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::hash::BuildHasher as _;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::fasthash::{FastMap, FastState};

/// Largest EBNF text the converter produces, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 8 << 20;

/// Rules written so far. Invariant: every name in `names` is defined at most once in `text`, and a
/// name is in `names` iff it was handed out by [`Ebnf::fresh`] or [`Ebnf::named`].
#[derive(Default)]
pub struct Ebnf {
    text: String,
    names: HashSet<String, FastState>,
    /// Next suffix to try per stem (keeps `fresh` amortised O(1)).
    counters: FastMap<String, usize>,
    /// The first rule defined with each (long enough) body, by the body's hash: where its body
    /// and its name lie in `text` (a later rule with the same body is written as an alias of it,
    /// see [`Ebnf::define`]).
    /// PERF: spans into `text`, not copies of the bodies (nearly all the text), and `FastHasher`
    /// rather than std's `SipHash` (on these bodies and on the converter's goal memo it took ~20%
    /// of converting the MaskBench schemas that reach [`MAX_OUTPUT_BYTES`]).
    bodies: FastMap<u64, Spans>,
    /// Bodies whose hash an earlier, different body of `bodies` took (hash, spans).
    collided: Vec<(u64, Spans)>,
    /// The rule each alias written by [`Ebnf::define`] names (never itself an alias).
    aliases: FastMap<String, String>,
    /// Names reserved with [`Ebnf::named`] (never written as aliases) and helper rules written
    /// with [`Ebnf::define_once`].
    reserved: HashSet<String, FastState>,
    /// Rules written to match every string body except some words: (rule, words), with the rule
    /// of every string body they differ from ([`crate::grammar::ExcludedWords`]).
    pub excluded: Vec<(String, Vec<Box<[u8]>>)>,
    pub any_body: Option<String>,
    /// The rule written for each set of excluded keys (sorted, deduplicated) by
    /// [`super::jstr::not_in_for`]: its language depends on the set alone.
    pub not_in: FastMap<Vec<String>, String>,
    /// Key-set rules kept out of the text (`super::key_sets`), when the converter writes them
    /// apart.
    pub key_sets: Vec<super::key_sets::KeySetObject>,
    /// Write key tries apart ([`Self::key_tries`]) instead of into the text.
    pub direct_tries: bool,
    /// Key tries kept out of the text (`super::jstr::build_tries`) when `direct_tries`.
    pub key_tries: Vec<super::jstr::KeyTrie>,
    /// Rules of fixed text kept out of the text (`super::fixed_rules`) when `direct_tries`:
    /// (name, body).
    pub fixed: Vec<(&'static str, &'static str)>,
    /// Bytes their text would have taken: counted against [`MAX_OUTPUT_BYTES`] as if written,
    /// so that both outputs fail alike.
    deferred: usize,
}

/// [`crate::grammar::ExcludedWords`] by rule name.
#[derive(Default)]
pub struct ExcludedNames {
    pub any: Option<String>,
    pub rules: Vec<(String, Vec<Box<[u8]>>)>,
}

/// The rules written apart from the text, as grammar IR.
#[derive(Default)]
pub struct Apart {
    pub key_sets: Vec<super::key_sets::KeySetObject>,
    pub key_tries: Vec<super::jstr::KeyTrie>,
    pub fixed: Vec<(&'static str, &'static str)>,
    /// Bytes the text of these rules would have taken.
    pub bytes: usize,
}

/// Where a rule's body and its name lie in [`Ebnf`]'s text.
type Spans = (Range<usize>, Range<usize>);

/// Bodies at least this long are shared between rules that spell them alike.
const SHARE_MIN_BODY: usize = 24;

impl Ebnf {
    /// A new rule name derived from `base` (sanitised to `[A-Za-z0-9_]`), unique in this buffer.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut stem: String =
            base.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).take(40).collect();
        if stem.is_empty() || stem.as_bytes()[0].is_ascii_digit() {
            stem.insert(0, 'r');
        }
        if self.names.insert(stem.clone()) {
            return stem;
        }
        let mut i = self.counters.get(&stem).copied().unwrap_or(1);
        loop {
            let cand = format!("{stem}_{i}");
            i += 1;
            if self.names.insert(cand.clone()) {
                self.counters.insert(stem, i);
                return cand;
            }
        }
    }

    /// Reserves an exact name (used for `root` and shared helper rules).
    pub fn named(&mut self, name: &str) -> String {
        let fresh = self.names.insert(name.to_string());
        debug_assert!(fresh, "rule name {name} reserved twice");
        self.reserved.insert(name.to_string());
        name.to_string()
    }

    /// Writes the helper rule `name ::= body` unless it was written already (rules shared by
    /// the whole grammar, written where first needed). `name` must extend a reserved name with a
    /// `.` (never produced by [`Ebnf::fresh`]), and every call with `name` must pass the same body.
    pub fn define_once(&mut self, name: &str, body: &str) -> Result<()> {
        if self.reserved.insert(name.to_string()) {
            self.write(name, body)?;
        }
        Ok(())
    }

    /// [`Self::define_once`] with a body of fixed text ([`Self::define_fixed`]).
    pub fn define_once_fixed(&mut self, name: &'static str, body: &'static str) -> Result<()> {
        if self.reserved.insert(name.to_string()) {
            self.define_fixed(name, body)?;
        }
        Ok(())
    }

    /// Writes `name ::= body` for a reserved `name` and a body of fixed text (the shared
    /// character, number and key-deviation rules); with `direct_tries`, counts it and keeps it
    /// apart ([`Self::fixed`]), to be defined from a parse of that text kept for the process.
    pub fn define_fixed(&mut self, name: &'static str, body: &'static str) -> Result<()> {
        if !self.direct_tries {
            return self.write(name, body);
        }
        self.defer(name.len(), body.len())?;
        self.fixed.push((name, body));
        Ok(())
    }

    /// Writes `name ::= body`. Fails when the output grows past [`MAX_OUTPUT_BYTES`].
    ///
    /// Two rules with the same body text define the same language (a body names only rules, whose
    /// definitions are shared). A body already written under another name is therefore written
    /// as an alias of that rule: the grammar compiler inlines the alias, so callers share one
    /// automaton. PERF: a schema with many properties of one string type (`maxLength: 256`) had
    /// a copy of the counted string per property, and the copies together passed the automaton
    /// size limit.
    pub fn define(&mut self, name: &str, body: &str) -> Result<()> {
        if body.len() < SHARE_MIN_BODY || self.reserved.contains(name) {
            return self.write(name, body);
        }
        let h = FastState.hash_one(body);
        let text = &self.text;
        let taken = self.bodies.get(&h);
        let same = |(b, _): &&Spans| &text[b.clone()] == body;
        let first = taken
            .filter(same)
            .or_else(|| taken.and_then(|_| self.collided.iter().filter(|c| c.0 == h).map(|c| &c.1).find(same)));
        if let Some((_, first)) = first {
            let first = text[first.clone()].to_string();
            self.write(name, &first)?;
            self.aliases.insert(name.to_string(), first);
            return Ok(());
        }
        let at = self.text.len();
        self.write(name, body)?;
        let body_at = at + name.len() + " ::= ".len();
        debug_assert_eq!(&self.text[body_at..body_at + body.len()], body);
        let spans = (body_at..body_at + body.len(), at..at + name.len());
        match self.bodies.entry(h) {
            Entry::Occupied(_) => self.collided.push((h, spans)),
            Entry::Vacant(slot) => {
                slot.insert(spans);
            }
        }
        Ok(())
    }

    /// The rule `name` is an alias of ([`Self::define`]), else `name`: equal results name rules
    /// of one language.
    pub fn canonical<'n>(&'n self, name: &'n str) -> &'n str {
        self.aliases.get(name).map_or(name, String::as_str)
    }

    /// Counts the text of a rule `name ::= body` written apart ([`Self::key_sets`]) as
    /// [`Self::write`] would.
    pub fn defer(&mut self, name: usize, body: usize) -> Result<()> {
        if self.text.len() + self.deferred + name + body + 6 > MAX_OUTPUT_BYTES {
            return Err(Error::limit("generated grammar size in bytes", MAX_OUTPUT_BYTES));
        }
        self.deferred += name + body + 6;
        Ok(())
    }

    /// Counts `n` bytes of rule text written apart ([`Self::key_tries`]) as [`Self::raw`] would.
    pub fn defer_raw(&mut self, n: usize) -> Result<()> {
        if self.text.len() + self.deferred + n > MAX_OUTPUT_BYTES {
            return Err(Error::limit("generated grammar size in bytes", MAX_OUTPUT_BYTES));
        }
        self.deferred += n;
        Ok(())
    }

    fn write(&mut self, name: &str, body: &str) -> Result<()> {
        if self.text.len() + self.deferred + name.len() + body.len() + 6 > MAX_OUTPUT_BYTES {
            return Err(Error::limit("generated grammar size in bytes", MAX_OUTPUT_BYTES));
        }
        let _ = writeln!(self.text, "{name} ::= {body}");
        Ok(())
    }

    /// Appends complete rule text produced elsewhere (the regex printer); its rule names must
    /// carry a prefix this buffer handed out, extended with a `.` (never produced by `fresh`).
    pub fn raw(&mut self, text: &str) -> Result<()> {
        if self.text.len() + self.deferred + text.len() > MAX_OUTPUT_BYTES {
            return Err(Error::limit("generated grammar size in bytes", MAX_OUTPUT_BYTES));
        }
        self.text.push_str(text);
        if !text.ends_with('\n') {
            self.text.push('\n');
        }
        Ok(())
    }

    #[cfg(test)]
    pub fn into_text(self) -> String {
        self.text
    }

    /// The text, the rules that match every string body but some words, and the rule of every
    /// string body (see the fields).
    pub fn into_parts(self) -> (String, ExcludedNames, Apart) {
        let apart =
            Apart { key_sets: self.key_sets, key_tries: self.key_tries, fixed: self.fixed, bytes: self.deferred };
        (self.text, ExcludedNames { any: self.any_body, rules: self.excluded }, apart)
    }
}

/// Escapes one character for use inside an EBNF `"..."` literal.
pub(crate) fn push_lit_char(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => out.push(c),
    }
}

/// An EBNF string literal matching exactly `s`. The empty string gives `""`.
pub fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_lit_char(&mut out, c);
    }
    out.push('"');
    out
}

/// `alts` joined as an alternation, parenthesised when there is more than one.
pub fn alt(alts: &[String]) -> String {
    match alts.len() {
        0 => String::new(),
        1 => alts[0].clone(),
        _ => format!("({})", alts.join(" | ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sanitised() {
        let mut e = Ebnf::default();
        assert_eq!(e.fresh("a-b"), "a_b");
        assert_eq!(e.fresh("a-b"), "a_b_1");
        assert_eq!(e.fresh("9x"), "r9x");
        assert_eq!(e.fresh(""), "r");
    }

    #[test]
    fn equal_bodies_are_aliases() {
        let mut e = Ebnf::default();
        let r = e.named("json_char");
        let long = format!("\"\\\"\" {r}{{0,256}} \"\\\"\"");
        for n in ["a", "b"] {
            let n = e.fresh(n);
            e.define(&n, &long).unwrap();
        }
        e.define("c", "\"x\"").unwrap();
        e.define("d", "\"x\"").unwrap(); // short bodies are not shared
        e.define(&r, &long).unwrap(); // reserved names are never aliases
        e.define_once("json_char.k", "\"y\"").unwrap();
        e.define_once("json_char.k", "\"y\"").unwrap();
        let text = e.into_text();
        assert_eq!(
            text,
            format!("a ::= {long}\nb ::= a\nc ::= \"x\"\nd ::= \"x\"\njson_char ::= {long}\njson_char.k ::= \"y\"\n")
        );
        crate::ebnf::parse_ebnf(&format!("{text}root ::= b"), "root").unwrap();
    }

    #[test]
    fn bodies_with_one_hash_stay_apart() {
        // `b`'s body takes the hash slot that `a`'s holds (a forced collision): `b` is written in
        // full, and a later rule spelled like `b` is an alias of `b`, not of `a`.
        let mut e = Ebnf::default();
        let (one, two) = ("\"first body, long enough\"", "\"second body, long enough\"");
        e.define("a", one).unwrap();
        let a_spans = e.bodies[&FastState.hash_one(one)].clone();
        e.bodies.insert(FastState.hash_one(two), a_spans);
        e.define("b", two).unwrap();
        e.define("c", two).unwrap();
        e.define("d", one).unwrap();
        assert_eq!(e.into_text(), format!("a ::= {one}\nb ::= {two}\nc ::= b\nd ::= a\n"));
    }

    #[test]
    fn literals_escape() {
        assert_eq!(lit("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
