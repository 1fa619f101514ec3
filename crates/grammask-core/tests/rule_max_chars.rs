//! The `max_chars` rule option on recursive rules against a reference written from its
//! definition.
//!
//! Definition (XGrammar 0.2.8's, see `compiler/char_budget.rs`): an occurrence of a `max_chars=N`
//! rule that is not nested in another bounded occurrence, started at character `o`, ends at the
//! first position `p >= o + N` where it can end (its rule matches the text from `o` to `p`):
//! nothing inside it reads a byte after `p`. Nested bounded occurrences are not bounded on their
//! own. Strings (`accept_string`) are held to it like tokens.
//!
//! The reference simulates every parse stack: a level per open rule occurrence, the outermost
//! bounded one marked with its start. At each position, the occurrences whose level is on top,
//! at an end of its rule, with at least `N` characters read, have ended: no stack holding them
//! reads the next byte. Along random walks of tokens and strings, every mask bit is checked
//! against the reference and against `accept_token` on a copy of the matcher (also after
//! rollback, reset, a fork and a serialized round trip).
//!
//! Token expressions (`Token(id)`): a level at one reads that whole token (`accept_token` only),
//! counting its characters at once, as XGrammar 0.2.8 counts a token's decoded characters; a
//! level of an ended occurrence reads none.

use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::collections::HashSet;
use std::sync::Arc;

mod common;
use common::Rng;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Sym {
    B(u8),
    R(usize),
    /// `Token(id)`.
    T(u32),
}

/// A grammar: rule names, their alternatives (sequences of symbols) and `max_chars` bounds.
struct RecGrammar {
    names: Vec<&'static str>,
    alts: Vec<Vec<Vec<Sym>>>,
    bound: Vec<Option<u32>>,
}

impl RecGrammar {
    /// `rules`: (name, bound, alternatives); an alternative is space-separated items, each a rule
    /// name, `#id` (`Token(id)`) or literal bytes. Rule 0 is the root.
    fn new(rules: &[(&'static str, Option<u32>, &[&str])]) -> RecGrammar {
        let names: Vec<&str> = rules.iter().map(|r| r.0).collect();
        let alts = rules
            .iter()
            .map(|r| {
                r.2.iter()
                    .map(|alt| {
                        let mut seq = Vec::new();
                        for item in alt.split_whitespace() {
                            match names.iter().position(|n| *n == item) {
                                Some(i) => seq.push(Sym::R(i)),
                                None if item.len() > 1 && item.starts_with('#') => {
                                    seq.push(Sym::T(item[1..].parse().unwrap()));
                                }
                                None => seq.extend(item.bytes().map(Sym::B)),
                            }
                        }
                        seq
                    })
                    .collect()
            })
            .collect();
        RecGrammar { names, alts, bound: rules.iter().map(|r| r.1).collect() }
    }

    fn ebnf(&self) -> String {
        use std::fmt::Write;
        let mut out = format!("root ::= {}\n", self.names[0]);
        for (r, name) in self.names.iter().enumerate() {
            let opt = self.bound[r].map_or(String::new(), |n| format!("[max_chars={n}]"));
            let alts: Vec<String> = self.alts[r]
                .iter()
                .map(|a| {
                    if a.is_empty() {
                        return "\"\"".to_owned();
                    }
                    let items: Vec<String> = a
                        .iter()
                        .map(|s| match s {
                            Sym::B(b) => format!("\"{}\"", *b as char),
                            Sym::R(x) => self.names[*x].to_owned(),
                            Sym::T(id) => format!("Token({id})"),
                        })
                        .collect();
                    items.join(" ")
                })
                .collect();
            writeln!(out, "{name}{opt} ::= {}", alts.join(" | ")).unwrap();
        }
        out
    }
}

/// One open occurrence: its rule, positions `(alternative, index)`, its start when it is the
/// outermost bounded one, and the rule it waits on, if any.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Level {
    rule: usize,
    pos: Vec<(u8, u8)>,
    start: Option<usize>,
    waiting: Option<usize>,
}

type Config = Vec<Level>;

/// Stacks deeper than this are not explored (deeper than any input checked needs).
const MAX_DEPTH: usize = 40;

struct RecRef<'g> {
    g: &'g RecGrammar,
    /// `false`: the grammar without its budgets.
    bounded: bool,
}

impl RecRef<'_> {
    fn start(&self) -> Vec<Config> {
        let start = self.g.bound[0].filter(|_| self.bounded).map(|_| 0);
        vec![vec![Level { rule: 0, pos: self.start_pos(0), start, waiting: None }]]
    }

    fn start_pos(&self, r: usize) -> Vec<(u8, u8)> {
        (0..self.g.alts[r].len()).map(|a| (a as u8, 0)).collect()
    }

    fn is_final(&self, l: &Level) -> bool {
        l.pos.iter().any(|&(a, i)| i as usize == self.g.alts[l.rule][a as usize].len())
    }

    fn step(&self, l: &Level, s: Sym) -> Vec<(u8, u8)> {
        let mut out: Vec<(u8, u8)> = l
            .pos
            .iter()
            .filter(|&&(a, i)| self.g.alts[l.rule][a as usize].get(i as usize) == Some(&s))
            .map(|&(a, i)| (a, i + 1))
            .collect();
        out.sort_unstable();
        out
    }

    /// Every configuration reachable without reading a byte (entering and ending rules) at
    /// character position `at`.
    fn closure(&self, configs: Vec<Config>, at: usize) -> Vec<Config> {
        let mut seen: HashSet<Config> = configs.iter().cloned().collect();
        let mut work = configs;
        let mut out = Vec::new();
        while let Some(c) = work.pop() {
            let top = c.last().unwrap();
            let mut next = Vec::new();
            if top.waiting.is_none() {
                if self.is_final(top) && c.len() > 1 {
                    let mut d = c.clone();
                    let child = d.pop().unwrap();
                    let p = d.last_mut().unwrap();
                    p.pos = self.step(p, Sym::R(child.rule));
                    p.waiting = None;
                    next.push(d);
                }
                let inside = c.iter().any(|l| l.start.is_some());
                if c.len() < MAX_DEPTH {
                    for &(a, i) in &top.pos {
                        if let Some(&Sym::R(r)) = self.g.alts[top.rule][a as usize].get(i as usize) {
                            let start = (self.bounded && !inside && self.g.bound[r].is_some()).then_some(at);
                            let mut d = c.clone();
                            d.last_mut().unwrap().waiting = Some(r);
                            d.push(Level { rule: r, pos: self.start_pos(r), start, waiting: None });
                            next.push(d);
                        }
                    }
                }
            }
            for d in next {
                if seen.insert(d.clone()) {
                    work.push(d);
                }
            }
            out.push(c);
        }
        out
    }

    /// The configurations after reading `bytes` from position `at` (all ASCII: one byte, one
    /// character).
    fn read(&self, configs: &[Config], bytes: &[u8], at: usize) -> Vec<Config> {
        let mut cur = configs.to_vec();
        for (j, &b) in bytes.iter().enumerate() {
            cur = self.step_all(cur, Sym::B(b), at + j).into_iter().collect();
            if cur.is_empty() {
                break;
            }
        }
        cur
    }

    /// The configurations that read `s` at position `p` (from the closure of `configs`), but
    /// none inside an occurrence that has read its budget and can end at `p`: it ends there.
    fn step_all(&self, configs: Vec<Config>, s: Sym, p: usize) -> HashSet<Config> {
        let all = self.closure(configs, p);
        let ended: HashSet<(usize, usize)> = all
            .iter()
            .filter_map(|c| {
                let top = c.last().unwrap();
                let o = top.start?;
                let n = self.g.bound[top.rule]? as usize;
                (top.waiting.is_none() && self.is_final(top) && p - o >= n).then_some((top.rule, o))
            })
            .collect();
        let mut next = HashSet::new();
        for c in all {
            if c.iter().any(|l| l.start.is_some_and(|o| ended.contains(&(l.rule, o)))) {
                continue;
            }
            let top = c.last().unwrap();
            if top.waiting.is_some() {
                continue;
            }
            let pos = self.step(top, s);
            if !pos.is_empty() {
                let mut d = c.clone();
                d.last_mut().unwrap().pos = pos;
                next.insert(d);
            }
        }
        next
    }

    /// The configurations after token `t` read with `accept_token`: its bytes as text (unless it
    /// is special), or the token at once by a `Token(t)` level (its characters counted together:
    /// the test vocabularies are ASCII, one byte one character).
    fn read_token(&self, configs: &[Config], vocab: &Vocabulary, t: u32, at: usize) -> Vec<Config> {
        let mut out = self.step_all(configs.to_vec(), Sym::T(t), at);
        if !vocab.is_special(t) {
            out.extend(self.read(configs, vocab.token_bytes(t), at));
        }
        out.into_iter().collect()
    }

    fn complete(&self, configs: &[Config], at: usize) -> bool {
        self.closure(configs.to_vec(), at)
            .iter()
            .any(|c| c.len() == 1 && c[0].waiting.is_none() && self.is_final(&c[0]))
    }
}

const ALPHABET: &[u8] = b"()x+[]yz<>,";

fn vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = ALPHABET.iter().map(|&c| vec![c]).collect();
    for _ in 0..50 {
        let len = 2 + rng.below(3) as usize;
        toks.push((0..len).map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize]).collect());
    }
    common::raw_vocab_with_stop(toks)
}

/// The recursive grammars, each with the budgets `n` stands for.
fn grammars(n: u32) -> Vec<RecGrammar> {
    vec![
        // Nested expressions.
        RecGrammar::new(&[("E", Some(n), &["( E )", "x", "x + E"])]),
        // Nested brackets, nullable.
        RecGrammar::new(&[("B", Some(n), &["[ B ] B", ""])]),
        // A JSON-like value; the list rule has no budget of its own.
        RecGrammar::new(&[("V", Some(n), &["[ ]", "[ L ]", "x", "( V )"]), ("L", None, &["V", "V , L"])]),
        // Mutual recursion; C is used inside A (not bounded there) and outside it.
        RecGrammar::new(&[
            ("S", None, &["A", "< C >"]),
            ("A", Some(n), &["( C )", "y"]),
            ("C", Some(n + 1), &["[ A ]", "z", "z C z"]),
        ]),
        // An occurrence that can end and go on: it ends once its budget is read.
        RecGrammar::new(&[("S", None, &["E >"]), ("E", Some(n), &["( E ) Z", "x"]), ("Z", None, &["", "z Z"])]),
    ]
}

/// Checks every mask bit of `m` against the reference (and `accept_token` on a copy); returns
/// the allowed tokens that are not the stop token. Counts in `cut` the tokens only a budget
/// refused (the reference without budgets, `free`, reads them from `free_cur`).
#[allow(clippy::too_many_arguments)]
fn check_mask(
    m: &mut Matcher,
    r: &RecRef,
    cur: &[Config],
    at: usize,
    vocab: &Vocabulary,
    what: &str,
    free: (&RecRef, &[Config]),
    cut: &mut usize,
) -> Vec<u32> {
    let mask = m.compute_mask().unwrap().clone();
    let stop = *m.stop_token_ids().first().unwrap();
    let mut allowed = Vec::new();
    for t in 0..vocab.vocab_size() as u32 {
        let want = if t == stop { r.complete(cur, at) } else { !r.read_token(cur, vocab, t, at).is_empty() };
        if t != stop && !want && !free.0.read_token(free.1, vocab, t, at).is_empty() {
            *cut += 1;
        }
        assert_eq!(mask.get(t as usize), want, "mask bit {:?} ({what})", String::from_utf8_lossy(vocab.token_bytes(t)));
        let mut c = m.clone();
        assert_eq!(
            c.accept_token(t).unwrap(),
            want,
            "accept {:?} ({what})",
            String::from_utf8_lossy(vocab.token_bytes(t))
        );
        if want && t != stop {
            allowed.push(t);
        }
    }
    allowed
}

/// Random walks (three per grammar and budget `n` in `0..5`, over two random vocabularies);
/// returns (walks, steps, strings accepted, tokens only a budget refused).
fn walk_all(
    seed: u64,
    vocab: fn(&mut Rng) -> Arc<Vocabulary>,
    grammars: fn(u32, &Vocabulary) -> Vec<RecGrammar>,
) -> (usize, usize, usize, usize) {
    let mut rng = Rng(seed);
    let (mut checked, mut strings, mut cut, mut steps) = (0usize, 0usize, 0usize, 0usize);
    for round in 0..2 {
        let vocab = vocab(&mut rng);
        for n in 0..5 {
            for g in grammars(n, &vocab) {
                let text = g.ebnf();
                let grammar = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
                let cg = Arc::new(CompiledGrammar::new(&grammar, &vocab).unwrap());
                // A serialized round trip compiles to the same masks.
                let cg2 = Arc::new(CompiledGrammar::deserialize_json(&cg.serialize_json(), &vocab).unwrap());
                let (r, free) = (RecRef { g: &g, bounded: true }, RecRef { g: &g, bounded: false });
                for walk in 0..3 {
                    let compiled = if walk == 2 { cg2.clone() } else { cg.clone() };
                    let mut m = Matcher::new(compiled, MatcherOptions::default()).unwrap();
                    // (configurations, without budgets, characters read)
                    let mut hist: Vec<(Vec<Config>, Vec<Config>, usize)> = vec![(r.start(), free.start(), 0)];
                    let mut text_so_far: Vec<String> = Vec::new();
                    for _ in 0..14 {
                        let (cur, fcur, at) = hist.last().unwrap().clone();
                        let what = format!("{text}after {text_so_far:?}, round {round} walk {walk}");
                        let allowed = check_mask(&mut m, &r, &cur, at, &vocab, &what, (&free, &fcur), &mut cut);
                        if allowed.is_empty() || at > 26 {
                            break;
                        }
                        steps += 1;
                        // A string (`None`) or token read: the reference's next configurations.
                        let push = |b: &[u8], t: Option<u32>, hist: &mut Vec<_>, text_so_far: &mut Vec<String>| {
                            let next = match t {
                                Some(t) => (r.read_token(&cur, &vocab, t, at), free.read_token(&fcur, &vocab, t, at)),
                                None => (r.read(&cur, b, at), free.read(&fcur, b, at)),
                            };
                            if !next.0.is_empty() {
                                hist.push((next.0, next.1, at + b.len()));
                                let tag = if t.is_some() { "" } else { "s:" };
                                text_so_far.push(format!("{tag}{}", String::from_utf8_lossy(b)));
                            }
                        };
                        match rng.below(8) {
                            0 | 1 => {
                                // A string, held to the budgets too: mostly an allowed token's
                                // bytes and one more byte, else random bytes.
                                let len = 1 + rng.below(3) as usize;
                                let mut b: Vec<u8> =
                                    (0..len).map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize]).collect();
                                if rng.below(4) != 0 {
                                    let t = allowed[rng.below(allowed.len() as u64) as usize];
                                    b = vocab.token_bytes(t).to_vec();
                                    b.push(ALPHABET[rng.below(ALPHABET.len() as u64) as usize]);
                                }
                                let ok = !r.read(&cur, &b, at).is_empty();
                                assert_eq!(m.accept_bytes(&b).unwrap(), ok, "string {b:?} ({what})");
                                strings += usize::from(ok);
                                push(&b, None, &mut hist, &mut text_so_far);
                            }
                            2 if hist.len() > 1 => {
                                let k = 1 + rng.below(2.min(hist.len() as u64 - 1)) as usize;
                                m.rollback(k).unwrap();
                                hist.truncate(hist.len() - k);
                                text_so_far.truncate(text_so_far.len() - k);
                            }
                            3 => {
                                // A fork goes its own way; the original is unchanged.
                                let mut f = m.clone();
                                let t = allowed[rng.below(allowed.len() as u64) as usize];
                                assert!(f.accept_token(t).unwrap());
                                let b = vocab.token_bytes(t);
                                let (next, fnext) =
                                    (r.read_token(&cur, &vocab, t, at), free.read_token(&fcur, &vocab, t, at));
                                let w = format!("{what}, fork after {}", String::from_utf8_lossy(b));
                                check_mask(&mut f, &r, &next, at + b.len(), &vocab, &w, (&free, &fnext), &mut cut);
                            }
                            _ => {
                                let t = allowed[rng.below(allowed.len() as u64) as usize];
                                assert!(m.accept_token(t).unwrap());
                                push(vocab.token_bytes(t), Some(t), &mut hist, &mut text_so_far);
                            }
                        }
                    }
                    m.reset();
                    let w = format!("{text}after reset");
                    check_mask(&mut m, &r, &r.start(), 0, &vocab, &w, (&free, &free.start()), &mut cut);
                    checked += 1;
                }
            }
        }
    }
    (checked, steps, strings, cut)
}

#[test]
fn recursive_max_chars_follow_the_reference_along_random_walks() {
    let (checked, steps, strings, cut) = walk_all(0x9E37_79B9_7F4A_7C15, vocab, |n, _| grammars(n));
    // The walks met ended occurrences (tokens only a budget refused).
    assert!(
        checked == 2 * 5 * 5 * 3 && steps > 1000 && strings > 25 && cut > 50,
        "{checked} walks, {steps} steps, {strings} strings, {cut} cut"
    );
}

/// [`vocab`] with three tokens for `Token(...)`: `<x>` (its bytes never read as text by
/// [`token_grammars`]), `x+` (read both ways) and the special `<|p|>`.
fn token_vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let v = vocab(rng);
    let mut toks: Vec<Vec<u8>> = (0..v.num_encoded() as u32).map(|t| v.token_bytes(t).to_vec()).collect();
    let stop = toks.len() as u32 - 1;
    toks.retain(|t| t != b"<x>" && t != b"x+");
    let n = toks.len() as u32;
    toks.extend([b"<x>".to_vec(), b"x+".to_vec(), b"<|p|>".to_vec()]);
    let opts = VocabularyOptions {
        stop_token_ids: Some(vec![n - 1]),
        special_token_ids: Some(vec![n + 2]),
        ..Default::default()
    };
    assert_eq!(v.token_bytes(stop), b"</s>");
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// Recursive `max_chars` grammars with `Token(...)` of [`token_vocab`]'s three tokens.
fn token_grammars(n: u32, vocab: &Vocabulary) -> Vec<RecGrammar> {
    let id = |b: &[u8]| (0..vocab.num_encoded() as u32).find(|&t| vocab.token_bytes(t) == b).unwrap();
    let (x, plus, p) = (id(b"<x>"), id(b"x+"), id(b"<|p|>"));
    let e =
        ["( E )".to_owned(), "x".into(), "x + E".into(), format!("#{x} E"), format!("#{plus} E"), format!("x #{x}")];
    let a = [format!("#{p} A"), "y Z".into(), format!("#{x}"), format!("y Z #{p}")];
    let v = ["[ L ]".to_owned(), format!("#{plus} x"), format!("#{p}"), format!("x #{plus}")];
    fn strs(alts: &[String]) -> Vec<&str> {
        alts.iter().map(String::as_str).collect()
    }
    let (e, a, v) = (strs(&e), strs(&a), strs(&v));
    vec![
        // Nested expressions; a token read both ways (`x+`) and one read as a token only.
        RecGrammar::new(&[("E", Some(n), &e)]),
        // An occurrence that can end and go on, with a special token.
        RecGrammar::new(&[("S", None, &["A >"]), ("A", Some(n + 1), &a), ("Z", None, &["", "z Z"])]),
        // Tokens in a list rule with no budget of its own.
        RecGrammar::new(&[("V", Some(n + 2), &v), ("L", None, &["V", "V , L"])]),
    ]
}

#[test]
fn recursive_max_chars_with_token_expressions_follow_the_reference() {
    let (checked, steps, strings, cut) = walk_all(0x2545_F491_4F6C_DD1D, token_vocab, token_grammars);
    assert!(
        checked == 2 * 5 * 3 * 3 && steps > 450 && strings > 6 && cut > 20,
        "{checked} walks, {steps} steps, {strings} strings, {cut} cut"
    );
}

/// The budget counts characters, not bytes: `é` is one character of two bytes.
#[test]
fn recursive_max_chars_count_characters() {
    let toks: Vec<Vec<u8>> =
        vec![b"(".to_vec(), b")".to_vec(), "é".as_bytes().to_vec(), vec![0xC3], vec![0xA9], b"</s>".to_vec()];
    let opts = VocabularyOptions { stop_token_ids: Some(vec![5]), ..Default::default() };
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let text = "root ::= e\ne[max_chars=2] ::= \"(\" e \")\" | \"é\" | \"é\" e";
    let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    let accepts = |s: &[u8]| {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        m.accept_bytes(s).unwrap()
    };
    assert!(accepts("éé".as_bytes()), "2 characters, 4 bytes: within the budget");
    assert!(!accepts("ééé".as_bytes()), "ended after 2 characters");
    assert!(accepts("(éé)".as_bytes()), "nested: the inner occurrence is not bounded");
    // Token by token across a split character: the second byte of the third é is refused only
    // once the occurrence could end; its first byte is refused there already.
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_token(3).unwrap() && m.accept_token(4).unwrap(), "é as two byte tokens");
    let mask = m.compute_mask().unwrap().clone();
    assert!(mask.get(2) && mask.get(3), "one character read: more may follow");
    assert!(m.accept_token(3).unwrap());
    let mask = m.compute_mask().unwrap().clone();
    assert!(mask.get(4) && !mask.get(3), "inside the second character");
    assert!(m.accept_token(4).unwrap());
    let mask = m.compute_mask().unwrap().clone();
    assert!(!mask.get(2) && !mask.get(3) && !mask.get(0), "two characters read and it can end: it ends");
}

#[test]
fn recursive_max_chars_beside_other_features_compile() {
    // With max_tokens on the same rule, or beside a recursive max_tokens rule: both budgets
    // (`rule_max_tokens.rs` checks their masks).
    for text in [
        "root ::= e\ne[max_chars=2, max_tokens=2] ::= \"(\" e \")\" | \"x\"",
        "root ::= e | f\ne[max_chars=2] ::= \"(\" e \")\" | \"x\"\nf[max_tokens=1] ::= \"(\" f \")\" | \"y\"",
        "root ::= x\nx[lazy, max_tokens=2] ::= y \",\"\ny[max_tokens=1] ::= [a-z]+",
        // Token expressions with one of the two budgets or both (`token_edges.rs` and
        // `rule_max_tokens.rs` check them).
        "root ::= e\ne[max_chars=2] ::= \"(\" e \")\" | Token(1)",
        "root ::= e | f\ne[max_chars=2] ::= \"(\" e \")\" | Token(1)\nf[max_tokens=1] ::= \"(\" f \")\" | \"y\"",
        "root ::= e\ne[max_chars=5, max_tokens=2] ::= \"(\" e \")\" | ExcludeToken(1) e | \"x\"",
        // Token expressions beside lookahead assertions too (`rule_max_tokens.rs` checks them).
        "root ::= e\ne[max_chars=2] ::= \"(\" e \")\" | \"x\" | Token(1) (= \")\")",
    ] {
        let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
        assert!(grammask_core::compiler::Automata::build(&g).is_ok(), "{text}");
    }
}

/// `max_chars` rules using `max_tokens` rules, with `{n}` the character budget and `{m}` the token
/// budget: the `max_chars` rule keeps its rule edges (a budget the chart enforces, as on a
/// recursive rule) so the inner rule keeps its occurrences.
const WITH_TOKEN_BUDGETS: [&str; 6] = [
    "root ::= \"<\" x \">\"\nx[max_chars={n}] ::= y \",\" [xyz]*\ny[max_tokens={m}] ::= [xyz]+ (\"+\" [xyz]+)*",
    "root ::= x+\nx[max_chars={n}] ::= \"(\" y \")\" | y \",\"\ny[max_tokens={m}] ::= [xz]+ | \"[\" [xyz]* \"]\"",
    "root ::= e \">\"\ne[max_chars={n}] ::= \"(\" e \")\" | y\ny[max_tokens={m}] ::= [xyz]+ (\"+\" [xyz]+)*",
    // `lazy` is `max_chars=0` there.
    "root ::= \"<\" x \">\"\nx[lazy] ::= y \",\" [xyz]*\ny[max_tokens={m}] ::= [xyz]+ (\"+\" [xyz]+)*",
    "root ::= x+ \">\"\nx[lazy] ::= \"(\" y \")\" z | y\ny[max_tokens={m}] ::= [xz]+ | \"[\" [xyz]* \"]\"\nz ::= [+,]*",
    // Nullable: it ends at once, before any character.
    "root ::= (\"<\" x)+ \">\"\nx[lazy] ::= (y \",\")* | \"(\" y \")\"\ny[max_tokens={m}] ::= [xyz]+",
];

fn compile_text(text: &str, vocab: &Arc<Vocabulary>) -> Arc<CompiledGrammar> {
    let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap_or_else(|e| panic!("{text}: {e}"));
    Arc::new(CompiledGrammar::new(&g, vocab).unwrap_or_else(|e| panic!("{text}: {e}")))
}

/// With one budget out of reach, a `max_chars` (or `lazy`) rule using a `max_tokens` rule masks
/// like the grammar without that budget (each budget alone has its own reference above and in
/// `rule_max_tokens.rs`); with both in reach, masks equal `accept_token` on a copy.
#[test]
fn max_chars_rules_using_max_tokens_rules_keep_both_budgets() {
    let mut rng = Rng(0x5151_7C15_9E37_79B9);
    let vocab = vocab(&mut rng);
    let stop = (vocab.vocab_size() - 1) as u32;
    let strip = |text: &str, opt: &str| text.replace(&format!("[{opt}]"), "");
    for text in WITH_TOKEN_BUDGETS {
        let lazy = !text.contains("{n}");
        for (n, m) in [(3u32, 1u32), (5, 2), (2, 3), (1000, 1), (1000, 2), (4, 1000), (6, 1000)] {
            if lazy && n == 1000 {
                continue;
            }
            let both = text.replace("{n}", &n.to_string()).replace("{m}", &m.to_string());
            // The grammar without the budget out of reach, if one is.
            let reference = if n == 1000 {
                Some(strip(&both, "max_chars=1000"))
            } else if m == 1000 {
                Some(strip(&both, "max_tokens=1000"))
            } else {
                None
            };
            let c = compile_text(&both, &vocab);
            let r = reference.as_ref().map(|t| compile_text(t, &vocab));
            for walk in 0..8 {
                let mut mm = Matcher::new(c.clone(), MatcherOptions::default()).unwrap();
                let mut mr = r.as_ref().map(|r| Matcher::new(r.clone(), MatcherOptions::default()).unwrap());
                for step in 0..16 {
                    let what = format!("{both:?} walk {walk} step {step}");
                    let mask = mm.compute_mask().unwrap().clone();
                    if let Some(mr) = &mut mr {
                        assert_eq!(&mask, mr.compute_mask().unwrap(), "{what}: mask against {reference:?}");
                    }
                    let mut allowed = Vec::new();
                    for t in 0..vocab.vocab_size() as u32 {
                        let ok = mm.clone().accept_token(t).unwrap();
                        assert_eq!(mask.get(t as usize), ok, "{what}: token {:?}", vocab.token_bytes(t));
                        if ok && t != stop {
                            allowed.push(t);
                        }
                    }
                    if allowed.is_empty() {
                        break;
                    }
                    let t = allowed[rng.below(allowed.len() as u64) as usize];
                    assert!(mm.accept_token(t).unwrap());
                    if let Some(mr) = &mut mr {
                        assert!(mr.accept_token(t).unwrap());
                    }
                }
            }
        }
    }
}

#[test]
fn max_chars_rules_using_max_tokens_rules_agree_with_xgrammar() {
    // XGrammar 0.2.8 on `s:` then tokens: x ends at its first end once 6 characters are read, y
    // once its one token is read (where it can end: only `!` follows).
    let text = "root ::= \"s:\" x \"#\"\nx[max_chars=6] ::= y \"!\" [a-z]*\ny[max_tokens=1] ::= [a-z]+ (\",\" [a-z]+)*";
    let toks: Vec<&[u8]> = vec![b"s:", b"hello", b"!", b"#", b"ab", b"cd", b"cdef", b",", b"a", b"b", b"</s>"];
    let vocab = Arc::new(
        Vocabulary::new(
            toks.iter().map(|t| t.to_vec()).collect(),
            VocabType::Raw,
            VocabularyOptions { stop_token_ids: Some(vec![10]), ..Default::default() },
        )
        .unwrap(),
    );
    let c = compile_text(text, &vocab);
    let walk = |ids: &[u32]| -> Option<Vec<u32>> {
        let mut m = Matcher::new(c.clone(), MatcherOptions::default()).unwrap();
        for &t in ids {
            if !m.accept_token(t).unwrap() {
                return None;
            }
        }
        Some(m.compute_mask().unwrap().iter_ones().map(|t| t as u32).collect())
    };
    assert_eq!(walk(&[0, 1]), Some(vec![2]), "y spent where it can end: only !");
    assert_eq!(walk(&[0, 1, 2]), Some(vec![3]), "hello! is 6 characters: x ends");
    assert_eq!(walk(&[0, 4, 2]).map(|v| v.contains(&5) && !v.contains(&6)), Some(true), "ab!cd fits, ab!cdef not");
    assert!(walk(&[0, 4, 2, 5, 3]).is_some());
    assert!(walk(&[0, 4, 7]).is_none(), "y spent after ab: no ,");
    let mut m = Matcher::new(c.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(b"s:abcdefgh!#").unwrap() && m.is_completed(), "strings do not spend y");
}
