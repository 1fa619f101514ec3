//! The `max_tokens` rule option against a reference written from its definition.
//!
//! Grammars `root ::= ("<" x ">")+` with `x[max_tokens=N]` over a small regular body, given here
//! also as a hand-written DFA. The reference reads the accepted steps byte by byte: an occurrence
//! of `x` starting at byte `o` has used `K - first(o)` tokens while the step after `K` tokens is
//! read (`first(o)`: tokens ending at or before `o`; strings are not tokens), and once that
//! reaches `N` tokens may only read bytes that bring its DFA one byte nearer a final state
//! (ending in a final state); strings are read as if no budget were spent (but `max_tokens=0`
//! rules are built spent). Along random walks of tokens and strings, every mask bit is checked against
//! the reference and against `accept_token` on a copy of the matcher; rollback and reset are
//! checked to restore the budgets.

use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

mod common;
use common::Rng;

const ALPHABET: &[u8] = b"<>abcd.";

/// `x`'s body in EBNF and as a DFA: `(state, byte, target)` edges from start state 0, finals.
struct Body {
    ebnf: &'static str,
    edges: &'static [(u8, u8, u8)],
    finals: &'static [u8],
}

const BODIES: &[Body] = &[
    Body { ebnf: "[ab]* \".\"", edges: &[(0, b'a', 0), (0, b'b', 0), (0, b'.', 1)], finals: &[1] },
    Body {
        ebnf: "\"a\"+ | \"bcd\"",
        edges: &[(0, b'a', 1), (1, b'a', 1), (0, b'b', 2), (2, b'c', 3), (3, b'd', 4)],
        finals: &[1, 4],
    },
    Body {
        ebnf: "(\"ab\" | \"c\")+ \"d\"?",
        edges: &[(0, b'a', 1), (1, b'b', 2), (0, b'c', 2), (2, b'a', 1), (2, b'c', 2), (2, b'd', 3)],
        finals: &[2, 3],
    },
];

impl Body {
    fn step(&self, q: u8, b: u8) -> Option<u8> {
        self.edges.iter().find(|e| e.0 == q && e.1 == b).map(|e| e.2)
    }

    /// Bytes from `q` to the nearest final state.
    fn dist(&self, q: u8) -> u32 {
        let mut d = [u32::MAX; 8];
        for &f in self.finals {
            d[f as usize] = 0;
        }
        for _ in 0..8 {
            for &(s, _, t) in self.edges {
                if d[t as usize] != u32::MAX {
                    d[s as usize] = d[s as usize].min(d[t as usize] + 1);
                }
            }
        }
        d[q as usize]
    }
}

/// The reference: whether the steps (bytes, is a token) are a prefix of the language, and
/// whether the whole input is complete.
fn reference(body: &Body, n: u32, steps: &[(Vec<u8>, bool)]) -> Option<bool> {
    // Phase: 0 expects '<', 1 inside x (DFA state q, occurrence start `o`), 2 after '>'.
    let (mut phase, mut q, mut o) = (0u8, 0u8, 0usize);
    let mut token_ends: Vec<usize> = Vec::new();
    let mut pos = 0usize;
    for (bytes, is_token) in steps {
        let k = token_ends.len();
        for &b in bytes {
            match phase {
                0 | 2 => {
                    if b != b'<' {
                        return None;
                    }
                    phase = 1;
                    q = 0;
                    o = pos + 1;
                }
                _ => {
                    let first = token_ends.iter().filter(|&&e| e <= o).count();
                    // Strings ignore budgets (as in XGrammar); `max_tokens=0` is built spent.
                    let spent = (*is_token || n == 0) && k - first >= n as usize;
                    let fin = body.finals.contains(&q);
                    if b == b'>' && fin {
                        phase = 2;
                    } else {
                        let t = body.step(q, b)?;
                        if spent && (fin || body.dist(t) + 1 != body.dist(q)) {
                            return None;
                        }
                        q = t;
                    }
                }
            }
            pos += 1;
        }
        if *is_token {
            token_ends.push(pos);
        }
    }
    Some(phase == 2)
}

fn vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = ALPHABET.iter().map(|&c| vec![c]).collect();
    for _ in 0..60 {
        let len = 2 + rng.below(3) as usize;
        toks.push((0..len).map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize]).collect());
    }
    common::raw_vocab_with_stop(toks)
}

fn compiled(body: &Body, n: u32, vocab: &Arc<Vocabulary>) -> Arc<CompiledGrammar> {
    let text = format!("root ::= (\"<\" x \">\")+\nx[max_tokens={n}] ::= {}", body.ebnf);
    let g = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
    Arc::new(CompiledGrammar::new(&g, vocab).unwrap())
}

/// Checks the mask of `m` (after `steps`) bit by bit against the reference and `accept_token`.
fn check_mask(m: &mut Matcher, body: &Body, n: u32, steps: &[(Vec<u8>, bool)], vocab: &Vocabulary) -> Vec<u32> {
    let mask = m.compute_mask().unwrap().clone();
    let stop = *m.stop_token_ids().first().unwrap();
    let mut allowed = Vec::new();
    let mut ext = steps.to_vec();
    for t in 0..vocab.vocab_size() as u32 {
        let want = if t == stop {
            reference(body, n, steps) == Some(true)
        } else {
            ext.push((vocab.token_bytes(t).to_vec(), true));
            let ok = reference(body, n, &ext).is_some();
            ext.pop();
            ok
        };
        let mut c = m.clone();
        assert_eq!(c.accept_token(t).unwrap(), want, "accept {:?} after {steps:?}", vocab.token_bytes(t));
        assert_eq!(
            mask.get(t as usize),
            want,
            "mask bit {:?} after {steps:?} (N={n}, {})",
            vocab.token_bytes(t),
            body.ebnf
        );
        if want && t != stop {
            allowed.push(t);
        }
    }
    allowed
}

#[test]
fn masks_follow_the_reference_along_random_walks() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..6 {
        let vocab = vocab(&mut rng);
        for body in BODIES {
            for n in 0..4 {
                let cg = compiled(body, n, &vocab);
                for _walk in 0..3 {
                    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                    let mut steps: Vec<(Vec<u8>, bool)> = Vec::new();
                    for _ in 0..14 {
                        let allowed = check_mask(&mut m, body, n, &steps, &vocab);
                        if allowed.is_empty() {
                            break;
                        }
                        match rng.below(8) {
                            // A string step (any short string; not counted as a token, and
                            // read as if no budget were spent): accepted iff the reference says.
                            0 | 2 => {
                                let len = 1 + rng.below(3) as usize;
                                let b: Vec<u8> = (0..len).map(|_| ALPHABET[rng.below(7) as usize]).collect();
                                steps.push((b.clone(), false));
                                let want = reference(body, n, &steps).is_some();
                                assert_eq!(m.accept_bytes(&b).unwrap(), want, "string {b:?} after {steps:?}");
                                if !want {
                                    steps.pop();
                                }
                            }
                            // Rollback of one or two steps restores the budgets.
                            1 if !steps.is_empty() => {
                                let k = 1 + rng.below(2.min(steps.len() as u64)) as usize;
                                m.rollback(k).unwrap();
                                steps.truncate(steps.len() - k);
                            }
                            _ => {
                                let t = allowed[rng.below(allowed.len() as u64) as usize];
                                assert!(m.accept_token(t).unwrap());
                                steps.push((vocab.token_bytes(t).to_vec(), true));
                            }
                        }
                    }
                    // Reset restores the start.
                    m.reset();
                    check_mask(&mut m, body, n, &[], &vocab);
                }
                let _ = round;
            }
        }
    }
}

/// The boundary rule on a fixed vocabulary: a token read across the start of `x` is its first.
#[test]
fn a_token_across_the_start_is_the_first_token() {
    let toks: Vec<Vec<u8>> = [&b"<"[..], b"<a", b"a", b">", b".", b"</s>"].iter().map(|t| t.to_vec()).collect();
    let opts = VocabularyOptions { stop_token_ids: Some(vec![5]), ..Default::default() };
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let cg = compiled(&BODIES[0], 2, &vocab);
    let allows = |m: &mut Matcher, t: u32| m.compute_mask().unwrap().get(t as usize);
    // "<a" is x's first token; "a" its second; then only "." may follow.
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_token(1).unwrap() && m.accept_token(2).unwrap());
    assert!(!allows(&mut m, 2) && allows(&mut m, 4));
    // "<" ends before x: "a", "a" are x's two tokens.
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    assert!(m.accept_token(0).unwrap() && m.accept_token(2).unwrap());
    assert!(allows(&mut m, 2));
    assert!(m.accept_token(2).unwrap());
    assert!(!allows(&mut m, 2) && allows(&mut m, 4));
    // A string does not count: "<", then the string "a" three times, then tokens.
    let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
    assert!(m.accept_token(0).unwrap());
    for _ in 0..3 {
        assert!(m.accept_bytes(b"a").unwrap());
    }
    assert!(m.accept_token(2).unwrap() && allows(&mut m, 2));
    assert!(m.accept_token(2).unwrap() && !allows(&mut m, 2));
    // Rolling back one token opens the budget again.
    m.rollback(1).unwrap();
    assert!(allows(&mut m, 2));
}

// ---------------------------------------------------------------------------------------------
// Recursive rules. The reference is a stack recognizer written from the definition: a
// configuration is a stack of open rule occurrences (levels), each in the set of positions of
// its rule's alternatives it may be at (positions that read the same symbols are one level, as
// an automaton over bytes and rule names reads them), with its spend point: the token count at
// which its own budget or an enclosing one is spent (`first(o) + N`, the smaller one). A level
// read during a token after its spend point may only take a symbol that keeps it on a shortest
// way to its end (a rule weighing its shortest length) and may not go on once it can end; a rule
// it enters is spent too. Left recursion (`E ::= E + x | x`, an alternative starting with its
// own rule): a level that can end may instead be wrapped in a new level of its rule started at
// the same position, after that first `E` (as many times as the input needs), unless it is spent:
// a spent level ends instead of growing. Left recursion through other rules (`A ::= q + | x`,
// `q ::= A y | z`, a group entered through `A`): a level of the group's entry that can end may
// likewise be wrapped in a chain of levels of the group started at the same position, along a
// cycle of left calls back to its rule, unless one of them is spent then (each level's spend
// point as if predicted there, the one wrapped guessing those put around it later). A group
// entered through several rules opens chains at the ends of those with a budget (of all of
// them if none has one). Strings are read free.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Sym {
    B(u8),
    R(usize),
    /// `Token(<T>)`: the special token `<T>` of `rec_vocab`, one token that weighs one byte.
    T,
}

/// A grammar: rule names, their alternatives (sequences of symbols) and `max_tokens` bounds.
struct RecGrammar {
    names: Vec<&'static str>,
    alts: Vec<Vec<Vec<Sym>>>,
    bound: Vec<Option<u32>>,
    /// Per rule: its `max_chars` (a recursive character budget, XGrammar's semantics: see
    /// `rule_max_chars.rs`), if any.
    chars: Vec<Option<u32>>,
    /// Per rule: its lookahead assertion (`rule ::= body (= L)`), `L` a sequence of byte sets:
    /// the rule may only end where the input that follows starts with a string of `L`.
    la: Vec<Option<&'static [&'static [u8]]>>,
    minlen: Vec<u32>,
    /// Per rule: its group of rules left-recursive through each other (its least rule, see
    /// `group_of`), if any.
    group: Vec<Option<usize>>,
    /// Per rule: whether its ended levels open the cycles of its group around them: the group's
    /// rules used otherwise than by a left call from it (its entries) that have a budget, or
    /// every entry if none has.
    wraps: Vec<bool>,
    /// Per rule: its group is entered through several rules and none of its rules has a budget,
    /// so a chain is opened by the entry it starts with only (as if the group were entered
    /// through that rule alone): an ended level wraps when its rule is its chain's first level's.
    bottom_opens: Vec<bool>,
}

impl RecGrammar {
    /// `rules`: (name, bound, alternatives); an alternative is space-separated items, each a rule
    /// name or literal bytes. Rule 0 is the root.
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
                                None if item == "T" => seq.push(Sym::T),
                                None => seq.extend(item.bytes().map(Sym::B)),
                            }
                        }
                        seq
                    })
                    .collect()
            })
            .collect();
        let bound = rules.iter().map(|r| r.1).collect();
        let chars = vec![None; rules.len()];
        let la = vec![None; rules.len()];
        let mut g = RecGrammar {
            names,
            alts,
            bound,
            chars,
            la,
            minlen: Vec::new(),
            group: Vec::new(),
            wraps: Vec::new(),
            bottom_opens: Vec::new(),
        };
        g.minlen = vec![u32::MAX; rules.len()];
        loop {
            let mut changed = false;
            for r in 0..rules.len() {
                let m = g.alts[r].iter().map(|a| g.weight(a)).min().unwrap();
                if m < g.minlen[r] {
                    g.minlen[r] = m;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        g.group = (0..rules.len()).map(|r| g.group_of(r)).collect();
        let entry: Vec<bool> = (0..rules.len()).map(|r| g.group[r].is_some() && g.entered(r)).collect();
        let budgeted =
            |r: usize| (0..rules.len()).any(|q| entry[q] && g.group[q] == g.group[r] && g.bound[q].is_some());
        g.wraps = (0..rules.len()).map(|r| entry[r] && (g.bound[r].is_some() || !budgeted(r))).collect();
        let group = &g.group;
        let members = |r: usize| (0..rules.len()).filter(move |&q| group[r].is_some() && group[q] == group[r]);
        let bottom_opens = (0..rules.len())
            .map(|r| members(r).filter(|&q| entry[q]).count() > 1 && members(r).all(|q| g.bound[q].is_none()))
            .collect();
        g.bottom_opens = bottom_opens;
        g
    }

    /// The grammar with `max_chars` budgets on the named rules.
    fn with_chars(mut self, chars: &[(&str, u32)]) -> RecGrammar {
        for &(name, n) in chars {
            let r = self.names.iter().position(|x| *x == name).unwrap();
            self.chars[r] = Some(n);
        }
        self
    }

    /// The grammar with lookahead assertions on the named rules.
    fn with_lookahead(mut self, la: &[(&str, &'static [&'static [u8]])]) -> RecGrammar {
        for &(name, l) in la {
            let r = self.names.iter().position(|x| *x == name).unwrap();
            self.la[r] = Some(l);
        }
        self
    }

    /// The rules an alternative of `r` starts with (the grammars here have no empty rule there).
    fn left(&self, r: usize) -> Vec<usize> {
        self.alts[r]
            .iter()
            .filter_map(|a| match a.first() {
                Some(Sym::R(x)) if *x != r => Some(*x),
                _ => None,
            })
            .collect()
    }

    /// The left-call paths `r -> .. -> to` through other rules, each without repeats.
    fn left_paths(&self, r: usize, to: usize, path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        for x in self.left(r) {
            if x == to {
                out.push(path.clone());
            } else if !path.contains(&x) {
                path.push(x);
                self.left_paths(x, to, path, out);
                path.pop();
            }
        }
    }

    /// `r`'s group of rules left-recursive through each other (its least rule), if any. Several
    /// of them may be entered otherwise than by a left call from the group (`entered`); every
    /// cycle of left calls in the group must pass through each of those (the grammars here are
    /// so: the reference would nest levels of a chain at one position without end otherwise).
    fn group_of(&self, r: usize) -> Option<usize> {
        let mut cycles = Vec::new();
        self.left_paths(r, r, &mut Vec::new(), &mut cycles);
        if cycles.iter().all(Vec::is_empty) {
            return None;
        }
        let group: Vec<usize> = (0..self.names.len())
            .filter(|&q| {
                let (mut there, mut back) = (Vec::new(), Vec::new());
                self.left_paths(r, q, &mut Vec::new(), &mut there);
                self.left_paths(q, r, &mut Vec::new(), &mut back);
                q == r || (!there.is_empty() && !back.is_empty())
            })
            .collect();
        for &e in group.iter().filter(|&&e| self.entered(e)) {
            for &q in group.iter().filter(|&&q| q != e) {
                let mut cycles = Vec::new();
                self.left_paths(q, q, &mut Vec::new(), &mut cycles);
                let avoids = cycles.iter().any(|p| !p.is_empty() && !p.contains(&e));
                // Random grammars (`random_marked_groups`) record it instead.
                let recorded = AVOIDS.with(|a| a.get().map(|was| a.set(Some(was || avoids))).is_some());
                assert!(recorded || !avoids, "{}: a cycle of left calls avoids '{}'", self.names[q], self.names[e]);
            }
        }
        group.first().copied()
    }

    /// Whether `q` is used otherwise than by a left call from a rule of its group.
    fn entered(&self, q: usize) -> bool {
        let in_group = |x: usize| {
            let (mut there, mut back) = (Vec::new(), Vec::new());
            self.left_paths(x, q, &mut Vec::new(), &mut there);
            self.left_paths(q, x, &mut Vec::new(), &mut back);
            x == q || (!there.is_empty() && !back.is_empty())
        };
        q == 0
            || (0..self.names.len()).any(|x| {
                self.alts[x]
                    .iter()
                    .any(|a| a.iter().enumerate().any(|(i, s)| *s == Sym::R(q) && (i > 0 || !in_group(x))))
            })
    }

    fn weight(&self, seq: &[Sym]) -> u32 {
        seq.iter().fold(0u32, |acc, s| match s {
            Sym::B(_) | Sym::T => acc.saturating_add(1),
            Sym::R(r) => acc.saturating_add(self.minlen.get(*r).copied().unwrap_or(u32::MAX)),
        })
    }

    /// The grammar in EBNF; `T` is `Token(id)` for the id of `<T>` in `vocab`.
    fn ebnf(&self, vocab: &Vocabulary) -> String {
        use std::fmt::Write;
        let token = (0..vocab.vocab_size() as u32).find(|&t| vocab.token_bytes(t) == b"<T>");
        // A grammar whose rule 0 is `root` is the grammar as written (no wrapper rule).
        let mut out = if self.names[0] == "root" { String::new() } else { format!("root ::= {}\n", self.names[0]) };
        for (r, name) in self.names.iter().enumerate() {
            // Lower-case rules are captured, so the compiler keeps them apart (never copied into
            // their callers): each is a level of its own, as the reference reads it.
            let opt = match (self.bound[r], self.chars[r]) {
                (Some(n), Some(c)) => format!("[max_tokens={n}, max_chars={c}]"),
                (Some(n), None) => format!("[max_tokens={n}]"),
                (None, Some(c)) => format!("[max_chars={c}]"),
                (None, None) if name.starts_with(|c: char| c.is_ascii_lowercase()) => "[capture]".to_owned(),
                (None, None) => String::new(),
            };
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
                            Sym::T => format!("Token({})", token.expect("a vocabulary with <T>")),
                            Sym::R(x) => self.names[*x].to_owned(),
                        })
                        .collect();
                    items.join(" ")
                })
                .collect();
            let la = match self.la[r] {
                Some(l) => {
                    let set =
                        |s: &[u8]| s.iter().map(|&b| format!("\"{}\"", b as char)).collect::<Vec<_>>().join(" | ");
                    let sets: Vec<String> = l.iter().map(|s| format!("({})", set(s))).collect();
                    format!(" (= {})", sets.join(" "))
                }
                None => String::new(),
            };
            writeln!(out, "{name}{opt} ::= {}{la}", alts.join(" | ")).unwrap();
        }
        out
    }
}

thread_local! {
    /// While set: whether a grammar built had a cycle of left calls avoiding an entry of its
    /// group (which [`RecGrammar::new`] otherwise refuses).
    static AVOIDS: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Random grammars of the kind [`rec_marked_groups`] holds: `R ::= C`, a budget `C` around the
/// group's entries `A` (budgeted, `n`) and `b`, `q` (captured, no budget), alternatives of up to
/// three symbols, the first often a rule of the group; kept when every rule has a finite shortest
/// length, every cycle of left calls passes through every entry, more than one rule of the group
/// is an entry, and the engine compiles it. The same grammars for every `n` (a fixed seed).
fn random_marked_groups(n: u32) -> Vec<RecGrammar> {
    random_groups(n, Some(n))
}

/// [`random_marked_groups`] without the entry's budget (`A` as the other rules of its group):
/// groups entered through several rules, none of their rules with a budget, inside `C`'s.
fn random_unbudgeted_groups(n: u32) -> Vec<RecGrammar> {
    random_groups(n, None)
}

/// [`random_marked_groups`] with `a` the budget of `A`.
fn random_groups(n: u32, a: Option<u32>) -> Vec<RecGrammar> {
    let mut rng = Rng(0x0DDB_1A5E_5EED_0017);
    let mut out = Vec::new();
    let vocab = rec_vocab(&mut Rng(7));
    let names = ["C", "A", "b", "q"];
    let bytes = ["x", "y", "z", "(", ")", "+", ","];
    while out.len() < 8 {
        let mut alts: Vec<Vec<String>> = Vec::new();
        for r in 0..names.len() {
            let k = 2 + rng.below(2) as usize;
            alts.push(
                (0..k)
                    .map(|i| {
                        let len = 1 + rng.below(3) as usize;
                        let sym = |rng: &mut Rng, at: usize| -> String {
                            let rule = (at == 0 && i == 0) || rng.below(3) == 0;
                            if rule && (r != 0 || at > 0) {
                                names[1 + rng.below(3) as usize].to_owned()
                            } else {
                                bytes[rng.below(bytes.len() as u64) as usize].to_owned()
                            }
                        };
                        (0..len).map(|at| sym(&mut rng, at)).collect::<Vec<_>>().join(" ")
                    })
                    .collect(),
            );
        }
        // `C` enters the group through two of its rules.
        alts[0].push("A".to_owned());
        alts[0].push(["b", "q"][rng.below(2) as usize].to_owned());
        let refs: Vec<Vec<&str>> = alts.iter().map(|a| a.iter().map(String::as_str).collect()).collect();
        let rules: Vec<(&'static str, Option<u32>, &[&str])> = vec![
            ("R", None, &["C"][..]),
            ("C", Some(n + 1 + rng.below(2) as u32), &refs[0]),
            ("A", a, &refs[1]),
            ("b", None, &refs[2]),
            ("q", None, &refs[3]),
        ];
        AVOIDS.with(|a| a.set(Some(false)));
        let g = RecGrammar::new(&rules);
        let avoids = AVOIDS.with(|a| a.replace(None)) == Some(true);
        let a = 2;
        let entries = (2..5).filter(|&q| g.group[q].is_some() && g.group[q] == g.group[a] && g.entered(q)).count();
        if avoids || g.minlen.contains(&u32::MAX) || g.group[a].is_none() || entries < 2 {
            continue;
        }
        let grammar = grammask_core::ebnf::parse_ebnf(&g.ebnf(&vocab), "root").unwrap();
        if grammask_core::compiler::Automata::build(&grammar).is_ok() {
            out.push(g);
        }
    }
    out
}

/// One open occurrence: its rule, positions `(alternative, index)`, spend point, and the rule
/// it has entered (waits on), if any.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Level {
    rule: usize,
    pos: Vec<(u8, u8)>,
    spend: Option<usize>,
    /// Inside an occurrence of a `max_tokens=0` rule: spent from the start, for strings too.
    zero: bool,
    /// The byte position it started at, and the tokens ended at or before it.
    start: usize,
    first: usize,
    /// The outermost `max_chars` occurrence around it (or itself): `(rule, start)`.
    chars: Option<(usize, usize)>,
    waiting: Option<usize>,
    /// The top level only: the parse's pending lookahead obligations, `(rule, bytes of its
    /// lookahead matched)`, sorted, without repeats (the levels below hold none).
    owed: Vec<(usize, usize)>,
}

type Config = Vec<Level>;

/// Stacks deeper than this are not explored (deeper than any input checked needs).
const MAX_DEPTH: usize = 30;

struct RecRef<'g> {
    g: &'g RecGrammar,
    /// Which budgets hold: `max_tokens`, `max_chars` (`false`: the grammar without them).
    tokens: bool,
    chars: bool,
    /// Whether lookahead assertions hold (`false`: the grammar without them).
    lookahead: bool,
}

impl<'g> RecRef<'g> {
    fn new(g: &'g RecGrammar) -> RecRef<'g> {
        RecRef { g, tokens: true, chars: true, lookahead: true }
    }

    /// `owed` once a level of rule `r` has ended: its lookahead, if any, is owed too.
    fn owe(&self, owed: &[(usize, usize)], r: usize) -> Vec<(usize, usize)> {
        let mut out = owed.to_vec();
        if self.lookahead && self.g.la[r].is_some() {
            out.push((r, 0));
            out.sort_unstable();
            out.dedup();
        }
        out
    }

    /// `owed` after byte `b`: `None` if an obligation cannot read it; those matched whole go.
    fn pay(&self, owed: &[(usize, usize)], b: u8) -> Option<Vec<(usize, usize)>> {
        let mut out = Vec::new();
        for &(r, i) in owed {
            let l = self.g.la[r].unwrap();
            if !l[i].contains(&b) {
                return None;
            }
            if i + 1 < l.len() {
                out.push((r, i + 1));
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    fn bound(&self, r: usize) -> Option<u32> {
        self.g.bound[r].filter(|_| self.tokens)
    }

    fn char_bound(&self, r: usize) -> Option<u32> {
        self.g.chars[r].filter(|_| self.chars)
    }

    fn start(&self) -> Vec<Config> {
        let r = 0;
        let (spend, zero) = (self.bound(r).map(|n| n as usize), self.bound(r) == Some(0));
        let chars = self.char_bound(r).map(|_| (r, 0));
        vec![vec![Level {
            rule: r,
            pos: self.start_pos(r),
            spend,
            zero,
            start: 0,
            first: 0,
            chars,
            waiting: None,
            owed: Vec::new(),
        }]]
    }

    /// The spend point and `zero` of a level of rule `r` inside a level with `spend` and `zero`,
    /// `first` tokens ended at or before its start.
    fn own_spend(&self, spend: Option<usize>, zero: bool, r: usize, first: usize) -> (Option<usize>, bool) {
        let own = self.bound(r).map(|n| first + n as usize);
        let spend = match (spend, own) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        (spend, zero || self.bound(r) == Some(0))
    }

    /// Levels at the top of `c` started at the same position in the same group (at least one):
    /// a chain of left calls, its entry the lowest.
    fn chain_len(&self, c: &Config) -> usize {
        let top = c.last().unwrap();
        let group = self.g.group[top.rule];
        if group.is_none() {
            return 1;
        }
        c.iter().rev().take_while(|l| l.start == top.start && self.g.group[l.rule] == group).count()
    }

    /// Whether the top level of `c`, ended, opens chains of its group around it: its rule
    /// `wraps`, or in a group whose chains are opened by their first level, it is that level's.
    fn opens(&self, c: &Config) -> bool {
        let top = c.last().unwrap();
        if self.g.bottom_opens[top.rule] {
            c[c.len() - self.chain_len(c)].rule == top.rule
        } else {
            self.g.wraps[top.rule]
        }
    }

    /// `level`, of a group, under each guess of the budgets of the levels a later wrap puts
    /// around it (none, or one of its group's rules): a wrap through tighter ones is refused, so
    /// the guess that names the tightest budget around it reads it as that budget holds (a
    /// tighter guess only reads less).
    fn guesses(&self, level: Level) -> Vec<Level> {
        let Some(group) = self.g.group[level.rule] else { return vec![level] };
        let mut out = vec![level.clone()];
        for q in (0..self.g.names.len()).filter(|&q| self.g.group[q] == Some(group) && self.bound(q).is_some()) {
            let (spend, zero) = self.own_spend(level.spend, level.zero, q, level.first);
            if (spend, zero) != (level.spend, level.zero) {
                out.push(Level { spend, zero, ..level.clone() });
            }
        }
        out
    }

    fn start_pos(&self, r: usize) -> Vec<(u8, u8)> {
        (0..self.g.alts[r].len()).map(|a| (a as u8, 0)).collect()
    }

    fn is_final(&self, l: &Level) -> bool {
        l.pos.iter().any(|&(a, i)| i as usize == self.g.alts[l.rule][a as usize].len())
    }

    fn dist(&self, rule: usize, pos: &[(u8, u8)]) -> u32 {
        pos.iter().map(|&(a, i)| self.g.weight(&self.g.alts[rule][a as usize][i as usize..])).min().unwrap()
    }

    fn step(&self, rule: usize, pos: &[(u8, u8)], s: Sym) -> Vec<(u8, u8)> {
        let mut out: Vec<(u8, u8)> = pos
            .iter()
            .filter(|&&(a, i)| self.g.alts[rule][a as usize].get(i as usize) == Some(&s))
            .map(|&(a, i)| (a, i + 1))
            .collect();
        out.sort_unstable();
        out
    }

    /// The level's positions after symbol `s`, if it may take it (`spent`: only on a shortest way).
    fn take(&self, l: &Level, s: Sym, spent: bool) -> Option<Vec<(u8, u8)>> {
        let next = self.step(l.rule, &l.pos, s);
        if next.is_empty() {
            return None;
        }
        if spent {
            let w = match s {
                Sym::B(_) | Sym::T => 1,
                Sym::R(r) => self.g.minlen[r],
            };
            if self.is_final(l) || w.saturating_add(self.dist(l.rule, &next)) != self.dist(l.rule, &l.pos) {
                return None;
            }
        }
        Some(next)
    }

    /// Every configuration reachable without reading a byte (entering and ending rules) at byte
    /// position `at`. `k`: tokens before the step being read (`None`: a string, read free);
    /// `first`: tokens ended at or before `at`.
    fn closure(&self, configs: Vec<Config>, k: Option<usize>, first: usize, at: usize) -> Vec<Config> {
        let mut seen: std::collections::HashSet<Config> = configs.iter().cloned().collect();
        let mut work = configs;
        let mut out = Vec::new();
        while let Some(c) = work.pop() {
            let top = c.last().unwrap();
            let spent = top.zero || matches!((k, top.spend), (Some(k), Some(s)) if k >= s);
            let mut next = Vec::new();
            if top.waiting.is_none() {
                // Left recursion: an ended level is wrapped in a level of its rule started at the
                // same position (`E + x` around `E`), unless spent: a spent level ends.
                let wrapped = self.step(top.rule, &self.start_pos(top.rule), Sym::R(top.rule));
                if self.is_final(top) && !spent && !wrapped.is_empty() {
                    let mut d = c.clone();
                    let l = d.last_mut().unwrap();
                    l.pos = wrapped;
                    l.owed = self.owe(&l.owed, top.rule);
                    next.push(d);
                }
                // Left recursion through other rules: an ended level of a rule that `wraps` (at
                // any place in its chain) is wrapped in a chain of levels started at its position, along a cycle of left calls back to
                // its rule (`a` in `b ::= a "z"` in `a ::= b "x"`). The new outer level takes its
                // place under its parent with a guess (see `guesses`); the ended level, read
                // under its guess, fits only inside levels no tighter than it. Each new level
                // takes a left call now, which no spent level takes (a spent occurrence does not
                // grow); the innermost is the tightest.
                if self.is_final(top) && self.opens(&c) {
                    let mut cycles = Vec::new();
                    self.g.left_paths(top.rule, top.rule, &mut Vec::new(), &mut cycles);
                    let parent = (c.len() > 1).then(|| &c[c.len() - 2]);
                    let (due, zero_due) = self.own_spend(
                        parent.and_then(|p| p.spend),
                        parent.is_some_and(|p| p.zero),
                        top.rule,
                        top.first,
                    );
                    let outer = Level { spend: due, zero: zero_due, waiting: None, ..top.clone() };
                    for path in cycles.into_iter().filter(|p| !p.is_empty()) {
                        for outer in self.guesses(outer.clone()) {
                            let mut d = c.clone();
                            d.pop();
                            let mut chain = vec![top.rule];
                            chain.extend(&path);
                            let (mut due, mut zero_due) = (outer.spend, outer.zero);
                            for (i, &r) in chain.iter().enumerate() {
                                if i > 0 {
                                    (due, zero_due) = self.own_spend(due, zero_due, r, top.first);
                                }
                                // Each level waits on the next; the last has read the ended one.
                                let waiting = chain.get(i + 1).copied();
                                let pos = match waiting {
                                    Some(_) => self.start_pos(r),
                                    None => self.step(r, &self.start_pos(r), Sym::R(top.rule)),
                                };
                                let owed = if waiting.is_some() { Vec::new() } else { self.owe(&top.owed, top.rule) };
                                d.push(Level {
                                    rule: r,
                                    pos,
                                    waiting,
                                    owed,
                                    spend: due,
                                    zero: zero_due,
                                    ..outer.clone()
                                });
                            }
                            let fits =
                                top.spend.unwrap_or(usize::MAX) <= due.unwrap_or(usize::MAX) && (top.zero || !zero_due);
                            let shut = zero_due || matches!((k, due), (Some(k), Some(s)) if k >= s);
                            if fits && !shut {
                                next.push(d);
                            }
                        }
                    }
                }
                if self.is_final(top) && c.len() > 1 {
                    let mut d = c.clone();
                    let child = d.pop().unwrap();
                    let p = d.last_mut().unwrap();
                    p.pos = self.step(p.rule, &p.pos, Sym::R(child.rule));
                    p.waiting = None;
                    p.owed = self.owe(&child.owed, child.rule);
                    next.push(d);
                }
                if c.len() < MAX_DEPTH {
                    let mut rules: Vec<usize> = top
                        .pos
                        .iter()
                        .filter_map(|&(a, i)| match self.g.alts[top.rule][a as usize].get(i as usize) {
                            Some(Sym::R(r)) => Some(*r),
                            _ => None,
                        })
                        .collect();
                    rules.sort_unstable();
                    rules.dedup();
                    for r in rules {
                        // Left recursion: the levels around are opened when this one ends (above):
                        // neither `top`'s rule nor a rule that opens them already in its chain
                        // below is entered again here.
                        let below = &c[c.len() - self.chain_len(&c)..c.len() - 1];
                        let opened = if self.g.bottom_opens[r] {
                            c[c.len() - self.chain_len(&c)].rule == r
                        } else {
                            self.g.wraps[r] && below.iter().any(|l| l.rule == r)
                        };
                        if top.start == at && (r == top.rule || opened) {
                            continue;
                        }
                        if self.take(top, Sym::R(r), spent).is_none() {
                            continue;
                        }
                        let (child_spend, zero) = self.own_spend(top.spend, top.zero, r, first);
                        let mut d = c.clone();
                        d.last_mut().unwrap().waiting = Some(r);
                        let owed = std::mem::take(&mut d.last_mut().unwrap().owed);
                        let pos = self.start_pos(r);
                        let chars = top.chars.or(self.char_bound(r).map(|_| (r, at)));
                        let level = Level {
                            rule: r,
                            pos,
                            spend: child_spend,
                            zero,
                            start: at,
                            first,
                            chars,
                            waiting: None,
                            owed,
                        };
                        // A level of a group takes a guess of the budgets wrapped around it later.
                        for level in self.guesses(level) {
                            let mut e = d.clone();
                            e.push(level);
                            next.push(e);
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

    /// The configurations after reading `syms` (bytes, or `Sym::T` alone: a token edge, one
    /// position) as one step (`k`: tokens before it, `None` for a string); `token_ends`: positions
    /// where the accepted tokens ended; `chars`: characters read before each position up to
    /// `pos`, the positions read.
    fn read(
        &self,
        configs: &[Config],
        syms: &[Sym],
        k: Option<usize>,
        token_ends: &[usize],
        chars: &[usize],
    ) -> Vec<Config> {
        let pos = chars.len() - 1;
        // Inside `syms` (bytes then: `Sym::T` is read alone) one position is one character.
        let chars_at = |p: usize| chars.get(p).copied().unwrap_or(chars[pos] + p - pos);
        let mut cur = configs.to_vec();
        for (j, &b) in syms.iter().enumerate() {
            let first = token_ends.iter().filter(|&&e| e <= pos + j).count();
            let mut next = std::collections::HashSet::new();
            let all = self.closure(cur, k, first, pos + j);
            // `max_chars` occurrences that have read their budget (ASCII: a byte is a character;
            // `<T>` three, its text's, as XGrammar counts a token's) and can end here end here:
            // nothing inside them reads another byte.
            let ended: std::collections::HashSet<(usize, usize)> = all
                .iter()
                .filter_map(|c| {
                    let top = c.last().unwrap();
                    let n = self.char_bound(top.rule)? as usize;
                    let own = top.chars == Some((top.rule, top.start));
                    (own && top.waiting.is_none() && self.is_final(top) && chars_at(pos + j) - chars_at(top.start) >= n)
                        .then_some((top.rule, top.start))
                })
                .collect();
            for c in all {
                let top = c.last().unwrap();
                if top.waiting.is_some() || top.chars.is_some_and(|o| ended.contains(&o)) {
                    continue;
                }
                let spent = top.zero || matches!((k, top.spend), (Some(k), Some(s)) if k >= s);
                // A token edge's token pays the obligations with its text's bytes.
                let owed = match b {
                    Sym::B(x) => self.pay(&top.owed, x),
                    Sym::T => b"<T>".iter().try_fold(top.owed.clone(), |o, &x| self.pay(&o, x)),
                    Sym::R(_) => Some(top.owed.clone()),
                };
                if let (Some(p), Some(owed)) = (self.take(top, b, spent), owed) {
                    let mut d = c.clone();
                    let l = d.last_mut().unwrap();
                    l.pos = p;
                    l.owed = owed;
                    next.insert(d);
                }
            }
            cur = next.into_iter().collect();
            if cur.is_empty() {
                break;
            }
        }
        cur
    }

    fn complete(&self, configs: &[Config], first: usize, at: usize) -> bool {
        self.closure(configs.to_vec(), None, first, at)
            .iter()
            .any(|c| c.len() == 1 && c[0].waiting.is_none() && self.is_final(&c[0]) && c[0].owed.is_empty())
    }
}

/// The reference's state along a walk.
#[derive(Clone)]
struct RecWalk {
    configs: Vec<Config>,
    token_ends: Vec<usize>,
    pos: usize,
    /// Characters read before each position `0..=pos`.
    chars: Vec<usize>,
}

/// The characters of the token edges' token `<T>`.
const T_CHARS: usize = 3;

impl RecWalk {
    fn new(r: &RecRef) -> RecWalk {
        RecWalk { configs: r.start(), token_ends: Vec::new(), pos: 0, chars: vec![0] }
    }

    fn read(&self, r: &RecRef, bytes: &[u8], token: bool) -> Option<RecWalk> {
        let syms: Vec<Sym> = bytes.iter().map(|&b| Sym::B(b)).collect();
        self.read_syms(r, &syms, token)
    }

    /// Token `t` of `vocab`: `<T>` is the token edge (special: never text), any other its bytes.
    fn read_token(&self, r: &RecRef, vocab: &Vocabulary, t: u32) -> Option<RecWalk> {
        match vocab.token_bytes(t) {
            b"<T>" => self.read_syms(r, &[Sym::T], true),
            bytes => self.read(r, bytes, true),
        }
    }

    fn read_syms(&self, r: &RecRef, syms: &[Sym], token: bool) -> Option<RecWalk> {
        let k = token.then_some(self.token_ends.len());
        let configs = r.read(&self.configs, syms, k, &self.token_ends, &self.chars);
        if configs.is_empty() {
            return None;
        }
        let mut chars = self.chars.clone();
        for s in syms {
            chars.push(chars.last().unwrap() + if *s == Sym::T { T_CHARS } else { 1 });
        }
        let mut w = RecWalk { configs, token_ends: self.token_ends.clone(), pos: self.pos + syms.len(), chars };
        if token {
            w.token_ends.push(w.pos);
        }
        Some(w)
    }
}

const REC_ALPHABET: &[u8] = b"()x+[]yz<>,";

fn rec_vocab(rng: &mut Rng) -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = REC_ALPHABET.iter().map(|&c| vec![c]).collect();
    for _ in 0..50 {
        let len = 2 + rng.below(2) as usize;
        toks.push((0..len).map(|_| REC_ALPHABET[rng.below(REC_ALPHABET.len() as u64) as usize]).collect());
    }
    toks.sort();
    toks.dedup();
    toks.push(b"</s>".to_vec());
    let stop = (toks.len() - 1) as u32;
    // The token edges' token (`Sym::T`): special, so never read as text.
    toks.push(b"<T>".to_vec());
    let opts = VocabularyOptions {
        stop_token_ids: Some(vec![stop]),
        special_token_ids: Some(vec![stop + 1]),
        ..Default::default()
    };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// The recursive grammars, each with the budgets `n` stands for.
fn rec_grammars(n: u32) -> Vec<RecGrammar> {
    vec![
        // Nested expressions.
        RecGrammar::new(&[("E", Some(n), &["( E )", "x", "x + E"])]),
        // Nested brackets, nullable.
        RecGrammar::new(&[("B", Some(n), &["[ B ] B", ""])]),
        // A JSON-like value; the list rule has no budget of its own.
        RecGrammar::new(&[("V", Some(n), &["[ ]", "[ L ]", "x", "( V )"]), ("L", None, &["V", "V , L"])]),
        // Mutual recursion; C is used inside A and outside it.
        RecGrammar::new(&[
            ("S", None, &["A", "< C >"]),
            ("A", Some(n), &["( C )", "y"]),
            ("C", Some(n + 1), &["[ A ]", "z", "z C z"]),
        ]),
        // Left recursion: a sum, and a list inside a budgeted value.
        RecGrammar::new(&[("E", Some(n), &["E + x", "x", "( E )"])]),
        RecGrammar::new(&[("V", Some(n), &["[ L ]", "x"]), ("L", None, &["L , V", "V"])]),
        // Ambiguous (left and right recursive), and nullable.
        RecGrammar::new(&[("E", Some(n), &["E + E", "( E )", "x"])]),
        RecGrammar::new(&[("B", Some(n), &["B [ B ]", ""])]),
        // Left recursion through other rules: a budgeted entry, and an unbudgeted one (a list)
        // inside a budgeted value, with a cycle of three rules.
        RecGrammar::new(&[("A", Some(n), &["q +", "x", "( A )"]), ("q", None, &["A y", "z"])]),
        RecGrammar::new(&[
            ("V", Some(n), &["[ p ]", "x"]),
            ("p", None, &["q , V", "V"]),
            ("q", None, &["r +", "z"]),
            ("r", None, &["p y", "( V )"]),
        ]),
        // A cycle of three whose entry's shortest way runs through the others (`r`, then `q`),
        // and which calls `q` first too, off its shortest ways.
        RecGrammar::new(&[
            ("A", Some(n), &["r ,", "x x x x", "q + + +", "( A )"]),
            ("r", None, &["q >", "< < <"]),
            ("q", None, &["A y", "z"]),
        ]),
        // Nested budgets without recursion: a regular budgeted rule inside another (spent with
        // it or on its own), through a helper rule too.
        RecGrammar::new(&[("A", Some(n + 1), &["< B > B", "y"]), ("B", Some(n), &["x", "x z", "x z z"])]),
        RecGrammar::new(&[
            ("A", Some(n), &["( h )", "h h"]),
            ("h", None, &["B", "B , B"]),
            ("B", Some(n + 1), &["z", "z z", "z z z"]),
        ]),
        // Token edges (`Token(<T>)`) inside recursive and nested budgets: one token weighing one
        // byte on the shortest ways.
        RecGrammar::new(&[("E", Some(n), &["( E )", "T", "x y"])]),
        RecGrammar::new(&[("V", Some(n), &["[ L ]", "x T", "T"]), ("L", None, &["L , V", "V"])]),
        RecGrammar::new(&[("A", Some(n + 1), &["< B > B", "T y"]), ("B", Some(n), &["x", "T z", "x T T"])]),
        RecGrammar::new(&[("B", Some(n), &["[ B ] B", "T B", ""])]),
        // A group of rules left-recursive through each other entered through two of them, the
        // budgeted one and one used outside every budget (`root ::= a | b`).
        RecGrammar::new(&[("R", None, &["A", "b"]), ("A", Some(n), &["b x", "y"]), ("b", None, &["A z", "w"])]),
        RecGrammar::new(&[
            ("R", None, &["A", "b", "( R )"]),
            ("A", Some(n), &["b x", "y", "[ A ]"]),
            ("b", None, &["A z", "w", "b +"]),
        ]),
    ]
}

/// Checks every mask bit of `m` against the reference (and `accept_token` on a copy); returns
/// the allowed tokens that are not the stop token. Counts in `cut` the tokens a budget refused.
fn rec_check_mask(
    m: &mut Matcher,
    r: &RecRef,
    w: &RecWalk,
    vocab: &Vocabulary,
    what: &str,
    cut: &mut usize,
) -> Vec<u32> {
    let mask = m.compute_mask().unwrap().clone();
    let stop = *m.stop_token_ids().first().unwrap();
    let first = w.token_ends.len();
    let mut allowed = Vec::new();
    for t in 0..vocab.vocab_size() as u32 {
        let want = if t == stop { r.complete(&w.configs, first, w.pos) } else { w.read_token(r, vocab, t).is_some() };
        if t != stop && !want && vocab.token_bytes(t) != b"<T>" && w.read(r, vocab.token_bytes(t), false).is_some() {
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

/// Groups of rules left-recursive through each other that hold the root itself: the root's own
/// occurrence is outside every budget (unless the root has one), like a rule used from it.
fn rec_root_groups(n: u32) -> Vec<RecGrammar> {
    vec![
        // Entered through the root and the budgeted rule (inside its own brackets).
        RecGrammar::new(&[("root", None, &["A z", "w"]), ("A", Some(n), &["root x", "y", "( A )"])]),
        // Through a rule between them, the budgeted rule used after a byte of the root too.
        RecGrammar::new(&[
            ("root", None, &["h z", "w", "< A >"]),
            ("h", None, &["A", "A -"]),
            ("A", Some(n), &["root x", "y T", "( A )"]),
        ]),
    ]
}

#[test]
fn recursive_rule_budgets_follow_the_reference_along_random_walks() {
    let (checked, cut, strings) = rec_walks(0x2545_F491_4F6C_DD1D, rec_grammars);
    // The walks met spent budgets (tokens only a budget refused), on every grammar.
    let grammars = rec_grammars(0).len();
    assert!(
        checked == 2 * 4 * grammars * 3 && cut > 100 && strings > 20,
        "{checked} walks, {cut} cut, {strings} strings"
    );
}

/// Groups of rules left-recursive through each other entered through several rules inside
/// budgets, the entry with a budget the group's only budgeted rule: an outer level of another
/// entry may be spent and still takes the entry levels it called (the matcher marks the chains
/// with an entry below).
fn rec_marked_groups(n: u32) -> Vec<RecGrammar> {
    vec![
        // A budget around both entries, one also used outside it.
        RecGrammar::new(&[
            ("S", None, &["C", "< b >"]),
            ("C", Some(n + 2), &["A", "b", "[ C ]"]),
            ("A", Some(n), &["b x", "y"]),
            ("b", None, &["A z", "w"]),
        ]),
        // The other entry used inside the entry's own budget (after a byte).
        RecGrammar::new(&[
            ("R", None, &["A"]),
            ("A", Some(n), &["b x", "y", "( b )"]),
            ("b", None, &["A z", "w", "b +"]),
        ]),
        // The root in the group, used after a byte inside itself (so inside the entry's budget).
        RecGrammar::new(&[("root", None, &["A z", "w", "< root >", "[ A ]"]), ("A", Some(n), &["root x", "y T"])]),
        // A cycle of three rules through both entries.
        RecGrammar::new(&[
            ("R", None, &["C"]),
            ("C", Some(n + 1), &["A", "q", "( C )"]),
            ("A", Some(n), &["r ,", "x"]),
            ("r", None, &["q >", "<"]),
            ("q", None, &["A y", "z"]),
        ]),
    ]
}

/// Groups of rules left-recursive through each other entered through several rules, none of
/// their rules with a budget, inside a budget: each chain is opened by the entry it starts
/// with (the matcher marks the chains with it).
fn rec_unbudgeted_groups(n: u32) -> Vec<RecGrammar> {
    vec![
        // A budget around both entries, one also used outside it.
        RecGrammar::new(&[
            ("S", None, &["C", "< b >"]),
            ("C", Some(n + 1), &["A", "b", "[ C ]"]),
            ("A", None, &["b x", "y"]),
            ("b", None, &["A z", "w"]),
        ]),
        // A cycle of three rules through both entries, and a rule left-recursive through itself.
        RecGrammar::new(&[
            ("R", None, &["C"]),
            ("C", Some(n), &["A", "q", "( C )"]),
            ("A", None, &["r ,", "x", "A +"]),
            ("r", None, &["q >", "<"]),
            ("q", None, &["A y", "z T"]),
        ]),
        // The group apart from the budgeted rule, entered through both its rules.
        RecGrammar::new(&[
            ("R", None, &["e"]),
            ("e", Some(n), &["f +", "( g )", "x"]),
            ("f", None, &["g -", "y"]),
            ("g", None, &["f *", "z T"]),
        ]),
        // The root in the group, entered through `A` too inside a budget.
        RecGrammar::new(&[
            ("root", None, &["A z", "w", "< B >"]),
            ("B", Some(n), &["root", "A", "[ B ]"]),
            ("A", None, &["root x", "y"]),
        ]),
    ]
}

/// Chains opened by the entry they start with: an ended level of one entry completing into a
/// spent level of the group at the same row wraps it only in a chain that entry opened. Fails
/// when every entry's completions are read as wraps (tokens the reference reads are refused) and
/// when none is (spent chains grow).
#[test]
fn groups_without_budgets_entered_through_several_rules_follow_the_reference() {
    let (checked, cut, strings) = rec_walks(0x3C6E_F372_FE94_F82B, rec_unbudgeted_groups);
    assert!(checked == 2 * 4 * 4 * 3 && cut > 20 && strings > 10, "{checked} walks, {cut} cut, {strings} strings");
}

/// [`random_unbudgeted_groups`] follow the reference (every mask bit along random walks).
#[test]
fn random_groups_without_budgets_entered_through_several_rules_follow_the_reference() {
    let (checked, cut, strings) = rec_walks(0xA54F_F53A_5F1D_36F1, random_unbudgeted_groups);
    assert!(checked == 2 * 4 * 8 * 3 && cut > 20 && strings > 10, "{checked} walks, {cut} cut, {strings} strings");
}

/// Entry marks: an ended level of the entry completing into a spent level of another entry at
/// the same row ends the chain there unless an entry level is below that level (then it would
/// wrap it). Fails when the marks are ignored (every such completion read as a wrap: tokens the
/// reference reads are refused) and when every completion is let through (spent chains grow).
#[test]
fn left_recursive_groups_entered_through_several_rules_follow_the_reference() {
    let (checked, cut, strings) = rec_walks(0x51A7_E5EE_D0C0_FFEE, rec_marked_groups);
    assert!(checked == 2 * 4 * 4 * 3 && cut > 20 && strings > 10, "{checked} walks, {cut} cut, {strings} strings");
}

/// [`random_marked_groups`] follow the reference (every mask bit along random walks).
#[test]
fn random_groups_entered_through_several_rules_follow_the_reference() {
    let (checked, cut, strings) = rec_walks(0x7F4A_7C15_51A7_E5EE, random_marked_groups);
    assert!(checked == 2 * 4 * 8 * 3 && cut > 20 && strings > 10, "{checked} walks, {cut} cut, {strings} strings");
}

#[test]
fn left_recursive_groups_holding_the_root_follow_the_reference() {
    let (checked, cut, strings) = rec_walks(0x9E37_79B9_7F4A_7C15, rec_root_groups);
    assert!(checked == 2 * 4 * 2 * 3 && cut > 10 && strings > 5, "{checked} walks, {cut} cut, {strings} strings");
}

/// A string read after tokens that spent a budget may wrap an ended level of a left-recursive
/// group's entry in a chain of the group's levels started at a row built spent (the reference
/// reads strings free): `(`, `x` as tokens, then the string `y` wraps `x` in `q ::= A "y"`.
#[test]
fn strings_after_spent_rows_wrap_left_recursive_groups() {
    let mut rng = Rng(0x51A7_E00D_C0DE_F00D);
    let vocab = rec_vocab(&mut rng);
    let token = |b: &[u8]| (0..vocab.vocab_size() as u32).find(|&t| vocab.token_bytes(t) == b).unwrap();
    let g = RecGrammar::new(&[("A", Some(1), &["q +", "x", "( A )"]), ("q", None, &["A y", "z"])]);
    let text = g.ebnf(&vocab);
    let grammar = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
    let cg = Arc::new(CompiledGrammar::new(&grammar, &vocab).unwrap());
    let r = RecRef::new(&g);
    let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
    let mut w = RecWalk::new(&r);
    let mut cut = 0;
    for t in [&b"("[..], b"x"] {
        assert!(m.accept_token(token(t)).unwrap());
        w = w.read(&r, t, true).unwrap();
    }
    rec_check_mask(&mut m, &r, &w, &vocab, &text, &mut cut);
    let w = w.read(&r, b"y", false).expect("the reference wraps `x` freely");
    assert!(m.accept_bytes(b"y").unwrap(), "the string `y` after `(`, `x`");
    rec_check_mask(&mut m, &r, &w, &vocab, &text, &mut cut);
    // Along random token walks over every grammar with such a group, each one- and two-byte
    // string is accepted exactly when the reference reads it.
    let (mut walks, mut strings) = (0, 0);
    for n in 0..4 {
        for g in rec_grammars(n).into_iter().chain(rec_root_groups(n)).filter(|g| g.group.iter().any(Option::is_some)) {
            let text = g.ebnf(&vocab);
            let grammar = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
            let cg = Arc::new(CompiledGrammar::new(&grammar, &vocab).unwrap());
            let r = RecRef::new(&g);
            for _ in 0..4 {
                let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                let mut w = RecWalk::new(&r);
                let mut seen: Vec<String> = Vec::new();
                for _ in 0..6 {
                    for a in REC_ALPHABET {
                        for b in [None].into_iter().chain(REC_ALPHABET.iter().map(Some)) {
                            let s: Vec<u8> = std::iter::once(*a).chain(b.copied()).collect();
                            let want = w.read(&r, &s, false).is_some();
                            assert_eq!(
                                m.clone().accept_bytes(&s).unwrap(),
                                want,
                                "string {s:?} after {seen:?} ({text})"
                            );
                            strings += usize::from(want);
                        }
                    }
                    let allowed = rec_check_mask(&mut m, &r, &w, &vocab, &text, &mut cut);
                    if allowed.is_empty() {
                        break;
                    }
                    let t = allowed[rng.below(allowed.len() as u64) as usize];
                    assert!(m.accept_token(t).unwrap());
                    w = w.read_token(&r, &vocab, t).unwrap();
                    seen.push(String::from_utf8_lossy(vocab.token_bytes(t)).into_owned());
                }
                walks += 1;
            }
        }
    }
    assert!(walks >= 4 * 4 * 4 && strings > 100, "{walks} walks, {strings} strings");
}

/// Random walks of tokens, strings and rollbacks over `grammars(n)` for `n` in 0..4, every mask
/// bit checked against the reference: (walks, tokens a budget
/// refused, strings read).
fn rec_walks(seed: u64, grammars: fn(u32) -> Vec<RecGrammar>) -> (usize, usize, usize) {
    let mut rng = Rng(seed);
    let (mut cut, mut checked, mut strings) = (0usize, 0usize, 0usize);
    for round in 0..2 {
        let vocab = rec_vocab(&mut rng);
        for n in 0..4 {
            for g in grammars(n) {
                let text = g.ebnf(&vocab);
                let grammar = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
                let cg = Arc::new(CompiledGrammar::new(&grammar, &vocab).unwrap());
                let r = RecRef::new(&g);
                for walk in 0..3 {
                    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                    let mut hist: Vec<RecWalk> = vec![RecWalk::new(&r)];
                    let mut text_so_far: Vec<String> = Vec::new();
                    for _ in 0..12 {
                        let w = hist.last().unwrap().clone();
                        let what = format!("{text}after {text_so_far:?}, round {round} walk {walk}");
                        let allowed = rec_check_mask(&mut m, &r, &w, &vocab, &what, &mut cut);
                        if allowed.is_empty() || w.pos > 24 {
                            break;
                        }
                        match rng.below(8) {
                            // A string (read free of budgets).
                            0 | 2 => {
                                let len = 1 + rng.below(3) as usize;
                                // Mostly a token's bytes the reference reads as a string (often
                                // one a spent budget refuses as a token), else random bytes.
                                let mut b: Vec<u8> = (0..len)
                                    .map(|_| REC_ALPHABET[rng.below(REC_ALPHABET.len() as u64) as usize])
                                    .collect();
                                for _ in 0..12 {
                                    let t = vocab.token_bytes(rng.below(vocab.vocab_size() as u64 - 1) as u32);
                                    if w.read(&r, t, false).is_some() {
                                        b = t.to_vec();
                                        break;
                                    }
                                }
                                let next = w.read(&r, &b, false);
                                assert_eq!(m.accept_bytes(&b).unwrap(), next.is_some(), "string {b:?} ({what})");
                                if let Some(n) = next {
                                    strings += 1;
                                    hist.push(n);
                                    text_so_far.push(format!("s:{}", String::from_utf8_lossy(&b)));
                                }
                            }
                            1 if hist.len() > 1 => {
                                let k = 1 + rng.below(2.min(hist.len() as u64 - 1)) as usize;
                                m.rollback(k).unwrap();
                                hist.truncate(hist.len() - k);
                                text_so_far.truncate(text_so_far.len() - k);
                            }
                            _ => {
                                // The token edge's token half of the time it is allowed.
                                let edge = allowed.iter().copied().find(|&t| vocab.token_bytes(t) == b"<T>");
                                let t = match edge {
                                    Some(e) if rng.below(2) == 0 => e,
                                    _ => allowed[rng.below(allowed.len() as u64) as usize],
                                };
                                assert!(m.accept_token(t).unwrap());
                                hist.push(w.read_token(&r, &vocab, t).unwrap());
                                text_so_far.push(String::from_utf8_lossy(vocab.token_bytes(t)).into_owned());
                            }
                        }
                    }
                    m.reset();
                    rec_check_mask(&mut m, &r, &hist[0], &vocab, &format!("{text}after reset"), &mut cut);
                    checked += 1;
                }
            }
        }
    }
    (checked, cut, strings)
}

/// A spent occurrence ends: sampling only allowed tokens, a budgeted root ends within its
/// budget plus its shortest remaining length, however the tokens are drawn.
#[test]
fn sampled_outputs_of_recursive_budgets_end() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    let vocab = rec_vocab(&mut rng);
    for n in 1..4 {
        for g in rec_grammars(n) {
            if g.bound[0].is_none() {
                continue;
            }
            let grammar = grammask_core::ebnf::parse_ebnf(&g.ebnf(&vocab), "root").unwrap();
            let cg = Arc::new(CompiledGrammar::new(&grammar, &vocab).unwrap());
            let stop = *vocab.stop_token_ids().first().unwrap();
            for _ in 0..20 {
                let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                let mut steps = 0;
                loop {
                    let mask = m.compute_mask().unwrap().clone();
                    let choices: Vec<u32> = (0..vocab.vocab_size() as u32).filter(|&t| mask.get(t as usize)).collect();
                    assert!(!choices.is_empty());
                    let non_stop: Vec<u32> = choices.iter().copied().filter(|&t| t != stop).collect();
                    if non_stop.is_empty() {
                        assert!(m.accept_token(stop).unwrap());
                        break;
                    }
                    assert!(m.accept_token(non_stop[rng.below(non_stop.len() as u64) as usize]).unwrap());
                    steps += 1;
                    // Spent after n tokens, then each open level has a bounded rest.
                    assert!(steps <= n as usize + 40, "{}: no end after {steps} tokens", g.ebnf(&vocab));
                }
            }
        }
    }
}

/// Whether the reference `r` accepts `tokens` (one byte string each) then the free `string`.
fn rec_accepts(r: &RecRef, tokens: &[&str], string: &str) -> bool {
    let mut w = RecWalk::new(r);
    for t in tokens {
        match w.read(r, t.as_bytes(), true) {
            Some(next) => w = next,
            None => return false,
        }
    }
    if !string.is_empty() {
        match w.read(r, string.as_bytes(), false) {
            Some(next) => w = next,
            None => return false,
        }
    }
    r.complete(&w.configs, w.token_ends.len(), w.pos)
}

/// The reference on groups of rules left-recursive through each other entered through two
/// budgeted rules (`<` A `>`, `[` b `]`): each chain's levels are opened by the ended levels of
/// those rules, and a level read before a wrap put a tighter budget around it was read under it.
#[test]
fn the_reference_reads_groups_entered_through_two_budgeted_rules() {
    // A chain `A(b(A(y) z) x)` at `<`: `b` (2 tokens from `y`) is opened when `y`'s `A` ends,
    // and spent at `z`, which ends it on its shortest way; the next `A` around would be opened
    // when the `A` inside ends, spent (3 tokens: it sits inside `b`), so `yzxzx` is refused. At
    // `[`, `b(w)` grows once; then `A` around `b` and `b` are spent: `wxzxz` is refused.
    let g = RecGrammar::new(&[
        ("root", None, &["< A >", "[ b ]"]),
        ("A", Some(3), &["b x", "y"]),
        ("b", Some(2), &["A z", "w"]),
    ]);
    let (r, free) = (RecRef::new(&g), RecRef { tokens: false, ..RecRef::new(&g) });
    let each = |s: &str| s.split("").filter(|c| !c.is_empty()).map(str::to_owned).collect::<Vec<_>>();
    for (text, want) in [
        ("<yzx>", true),
        ("<wx>", true),
        ("<wxzx>", true),
        ("<yzxzx>", false),
        ("[wxz]", true),
        ("[wxzxz]", false),
        ("[w]", true),
    ] {
        let toks = each(text);
        let toks: Vec<&str> = toks.iter().map(String::as_str).collect();
        assert_eq!(rec_accepts(&r, &toks, ""), want, "tokens {text}");
        assert!(rec_accepts(&free, &toks, ""), "tokens {text} without budgets");
    }
    // Guesses: `A` at `<` read `y` before `b` wrapped it, so it reads under `b`'s budget (1
    // token from `y`): after `y` a string wraps it freely, after `yyy` (3 tokens inside `b`'s
    // `A`) it does not; without the wrap, `A`'s own budget (5) holds.
    let g = RecGrammar::new(&[
        ("root", None, &["< A >", "[ b ]"]),
        ("A", Some(5), &["b x", "y", "y y y"]),
        ("b", Some(1), &["A z", "w"]),
    ]);
    let r = RecRef::new(&g);
    assert!(rec_accepts(&r, &["<", "y"], "zx>"));
    assert!(!rec_accepts(&r, &["<", "y", "y", "y"], "zx>"));
    assert!(rec_accepts(&r, &["<", "y", "y", "y", ">"], ""));
    assert!(rec_accepts(&RecRef { tokens: false, ..RecRef::new(&g) }, &["<", "y", "y", "y"], "zx>"));
}

/// Without their budgets, groups entered through several rules read as the engine reads the
/// same grammar without budgets (which it compiles): along random token walks every mask bit
/// equals the reference's, whose chains are opened by the budgeted entries only.
#[test]
fn groups_entered_through_several_rules_read_the_grammar_without_budgets() {
    let mut rng = Rng(0xC0FF_EE15_BAD5_EED5);
    let vocab = rec_vocab(&mut rng);
    let grammars = [
        RecGrammar::new(&[
            ("root", None, &["< A >", "[ b ]"]),
            ("A", Some(3), &["b x", "y"]),
            ("b", Some(2), &["A z", ","]),
        ]),
        RecGrammar::new(&[
            ("root", None, &["< A >", "[ b ]"]),
            ("A", None, &["b x", "y y"]),
            ("b", Some(1), &["A z", ","]),
        ]),
        RecGrammar::new(&[
            ("root", None, &["< A >", "[ b ]", "( c )"]),
            ("A", Some(2), &["c x", "y", "< A >"]),
            ("b", None, &["A z", ","]),
            ("c", Some(1), &["b +", "( c )", "y"]),
        ]),
    ];
    let mut walks = 0;
    for g in &grammars {
        let mut text = g.ebnf(&vocab);
        for n in 0..4 {
            text = text.replace(&format!("[max_tokens={n}]"), "");
        }
        let grammar = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
        let cg = Arc::new(CompiledGrammar::new(&grammar, &vocab).unwrap());
        let r = RecRef { tokens: false, ..RecRef::new(g) };
        for _ in 0..6 {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            let mut w = RecWalk::new(&r);
            let mut cut = 0;
            for _ in 0..8 {
                let allowed = rec_check_mask(&mut m, &r, &w, &vocab, &text, &mut cut);
                if allowed.is_empty() {
                    break;
                }
                let t = allowed[rng.below(allowed.len() as u64) as usize];
                assert!(m.accept_token(t).unwrap());
                w = w.read_token(&r, &vocab, t).unwrap();
            }
            walks += 1;
        }
    }
    assert_eq!(walks, 18);
}

#[test]
fn unsupported_recursive_budgets_name_the_feature() {
    let bad = [
        // A group of rules left-recursive through each other with a cycle of left calls
        // avoiding its entry, with a budget on another rule than its entry.
        (
            "root ::= e\ne[max_tokens=2] ::= f \"+\" | \"x\"\nf[capture] ::= g \"-\" | \"y\"\ng[capture] ::= f \"*\" | h \"*\" | \"z\"\nh[capture] ::= g \"!\" | \"w\"",
            "rule 'g', left-recursive through other rules, is not supported where a cycle of left calls through it avoids its group's entry 'f' (the cycle 'g' -> 'h' -> 'g':",
        ),
        // The refusals name the workaround.
        (
            "root ::= e\ne[max_tokens=2] ::= f \"+\" | \"x\"\nf[capture] ::= g \"-\" | \"y\"\ng[capture] ::= f \"*\" | h \"*\" | \"z\"\nh[capture] ::= g \"!\" | \"w\"",
            "rewrite that left recursion as repetition (`g ::= <its other alternatives> (<what follows the left call>)*`)",
        ),
        (
            "root ::= e\ne[max_tokens=2] ::= f \"+\" | \"x\"\nf[max_tokens=3] ::= e \"-\" | \"y\"",
            "keep one budget in the group, on 'e', or move the budget of 'f' to a rule that calls the group",
        ),
        (
            "root ::= e\ne[max_tokens=2] ::= f \"+\" | \"x\"\nf[capture] ::= g \"-\" | e \"-\" | \"y\"\ng[capture] ::= f \"*\" | \"z\"",
            "rule 'f', left-recursive through other rules",
        ),
        (
            "root ::= e\ne[max_tokens=2] ::= f \"+\" | \"x\"\nf[max_tokens=3] ::= e \"-\" | \"y\"",
            "rule 'f', left-recursive through other rules, is not supported where it has a budget and is not its group's entry 'e'",
        ),
        // Entered through two of its rules inside a budget (`c`), neither with a budget but a
        // third rule of the group, and each with one.
        (
            "root ::= c\nc[max_tokens=5] ::= a | b\na[capture] ::= b \"x\" | \"y\"\nb[capture] ::= m \"z\" | \"w\"\nm[max_tokens=2] ::= a \"v\" | \"u\"",
            "its group of rules is entered through 'a' and 'b' inside a budget",
        ),
        (
            "root ::= c\nc[max_tokens=5] ::= a | b\na[max_tokens=3] ::= b \"x\" | \"y\"\nb[max_tokens=2] ::= a \"z\" | \"w\"",
            "rule 'b', left-recursive through other rules, is not supported where it has a budget and is not its group's entry 'a'",
        ),
        // The root in such a group with a budget of its own, and another rule of it.
        (
            "root[max_tokens=4] ::= a \"x\" | \"y\" | \"(\" a \")\"\na[max_tokens=2] ::= root \"z\" | \"w\"",
            "rule 'a', left-recursive through other rules, is not supported where it has a budget and is not its group's entry 'root'",
        ),
    ];
    for (text, msg) in bad {
        let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
        let e = grammask_core::compiler::Automata::build(&g).unwrap_err();
        assert_eq!(e.kind(), grammask_core::error::ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains(msg), "{text}: {e}");
    }
    // Right recursion, recursion inside brackets, left recursion through the rule itself (also
    // after an empty rule) and max_tokens=0 are supported.
    for text in [
        "root ::= e\ne[max_tokens=2] ::= e \"+\" e | \"x\"",
        "root ::= e\ne[max_tokens=2] ::= \"(\" f \")\" | \"x\"\nf ::= \"\" f \"-\" | e",
        // Left recursion through other rules, the group used from one of its rules only (also
        // after an empty rule).
        "root ::= e\ne[max_tokens=2] ::= f \"+\" | \"x\"\nf[capture] ::= e \"-\" | \"y\"",
        "root ::= e\ne[max_tokens=2] ::= \"(\" f \")\" | \"x\"\nf[capture] ::= \"\" g \"-\" | e\ng[capture] ::= f \"+\" | \"z\"",
        // Entered through two of its rules: the budgeted one, and one used outside every budget
        // (also the root itself).
        "root ::= a | b\na[max_tokens=3] ::= b \"x\" | \"y\"\nb ::= a \"z\" | \"w\"",
        "root ::= a \"x\" | \"y\"\na[max_tokens=2] ::= root \"z\" | \"w\" | \"(\" a \")\"",
        // Entered through two of its rules inside a budget, one of them with a budget, or none
        // of its rules with one.
        "root ::= c\nc[max_tokens=5] ::= a | b\na[max_tokens=3] ::= b \"x\" | \"y\"\nb ::= a \"z\" | \"w\"",
        "root ::= c\nc[max_tokens=5] ::= a | b\na ::= b \"x\" | \"y\"\nb ::= a \"z\" | \"w\"",
        "root ::= e\ne[max_tokens=2] ::= f \"+\" | \"(\" g \")\" | \"x\"\nf[capture] ::= g \"-\" | \"y\"\ng[capture] ::= f \"*\" | \"z\"",
        // Groups whose every level is free or inside a `max_tokens=0` occurrence (spent from its
        // start): a cycle of left calls avoiding the entry, and a second budget in the group.
        "root ::= e\ne[max_tokens=0] ::= f \"+\" | \"x\"\nf[capture] ::= g \"-\" | \"y\"\ng[capture] ::= f \"*\" | h \"*\" | \"z\"\nh[capture] ::= g \"!\" | \"w\"",
        "root[max_tokens=0] ::= a \"x\" | \"y\" | \"(\" a \")\"\na[max_tokens=2] ::= root \"z\" | \"w\"",
        // Token expressions beside recursive and nested budgets.
        "root ::= a \"!\" Token(7)\na[max_tokens=2] ::= b b\nb[max_tokens=1] ::= \"x\"+",
        "root ::= a\na[max_tokens=4] ::= \"(\" a \")\" | Token(7)",
    ] {
        let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
        assert!(grammask_core::compiler::Automata::build(&g).is_ok(), "{text}");
    }
    let g = grammask_core::ebnf::parse_ebnf("root ::= e\ne[max_tokens=0] ::= \"(\" e \")\" | \"x\"", "root").unwrap();
    assert!(grammask_core::compiler::Automata::build(&g).is_ok());
    let g = grammask_core::ebnf::parse_ebnf("root ::= e\ne[max_tokens=2] ::= \"x\" \"+\" e | \"x\"", "root").unwrap();
    assert!(grammask_core::compiler::Automata::build(&g).is_ok());
}

/// Spend points ride in the lookahead fields: items stay 16 bytes.
#[test]
fn items_stay_sixteen_bytes() {
    assert_eq!(std::mem::size_of::<grammask_core::earley::Item>(), 16);
}

/// `max_tokens=0` on a recursive rule: spent from the start, for strings too; nested rules take
/// their shortest ways as well.
#[test]
fn max_tokens_zero_on_a_recursive_rule_takes_a_shortest_way() {
    let mut rng = Rng(7);
    let vocab = rec_vocab(&mut rng);
    let text =
        "root ::= \"<\" e \">\" e\ne[max_tokens=0] ::= \"(\" e \")\" | \"x\" | \"[\" f \"]\"\nf ::= \"y\" f | \"z\"";
    let g = grammask_core::ebnf::parse_ebnf(text, "root").unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
    for (s, ok) in [("<x>x", true), ("<(x)>x", false), ("<x>(", false), ("<[z]>x", false), ("<x>[", false)] {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        let got = m.accept_bytes(s.as_bytes()).unwrap() && m.is_completed();
        assert_eq!(got, ok, "{s}");
    }
    // Token by token: only the shortest way.
    let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(b"<").unwrap());
    let mask = m.compute_mask().unwrap().clone();
    let allowed: Vec<&[u8]> =
        (0..vocab.vocab_size() as u32).filter(|&t| mask.get(t as usize)).map(|t| vocab.token_bytes(t)).collect();
    assert!(allowed.iter().all(|b| b.starts_with(b"x")) && allowed.contains(&&b"x"[..]), "{allowed:?}");
}

/// Grammars with recursive `max_tokens` and `max_chars` budgets together, `n` tokens and `c`
/// characters: on one rule, a recursive `max_chars` rule using a `max_tokens` rule, and each
/// around or beside the other.
fn both_grammars(n: u32, c: u32) -> Vec<RecGrammar> {
    vec![
        // Both on one rule: right recursion, nesting, left recursion, nullable.
        RecGrammar::new(&[("E", Some(n), &["( E )", "x", "x + E"])]).with_chars(&[("E", c)]),
        RecGrammar::new(&[("E", Some(n), &["E + x", "x", "( E )"])]).with_chars(&[("E", c)]),
        RecGrammar::new(&[("B", Some(n), &["[ B ] B", ""])]).with_chars(&[("B", c)]),
        RecGrammar::new(&[("V", Some(n), &["[ ]", "[ L ]", "x", "( V )"]), ("L", None, &["V", "V , L"])])
            .with_chars(&[("V", c)]),
        // A recursive `max_chars` rule using a (regular) `max_tokens` rule.
        RecGrammar::new(&[
            ("V", None, &["[ L ]", "W", "( V )"]),
            ("L", None, &["V", "V , L"]),
            ("W", Some(n), &["x", "x y", "x y z z"]),
        ])
        .with_chars(&[("V", c)]),
        // A recursive `max_tokens` rule around a recursive `max_chars` one, and beside it.
        RecGrammar::new(&[("F", Some(n), &["[ F ]", "E", "E , F"]), ("E", None, &["( E )", "x", "x + E"])])
            .with_chars(&[("E", c)]),
        RecGrammar::new(&[
            ("S", None, &["A", "< C >"]),
            ("A", None, &["( C )", "y", "y + A"]),
            ("C", Some(n), &["[ A ]", "z", "z C z"]),
        ])
        .with_chars(&[("A", c)]),
    ]
}

/// What [`walk_refs`] met: walks, tokens the matcher refuses that each of the two looser
/// references reads, and token edges read (`<T>` accepted).
struct RefWalks {
    checked: usize,
    refused: [usize; 2],
    edges: usize,
}

/// Random walks (four per grammar of `grammars(n, c)` and budgets `(n, c)` of `budgets`) of
/// tokens, strings (the bytes of a token below `strings`) and rollbacks: every mask bit and
/// `accept_token` checked against the grammar's reference; counts the tokens refused that each
/// of the references `looser` makes of the grammar reads. With `<T>` in `vocab`, walks take it
/// half the time it is allowed.
fn walk_refs(
    rng: &mut Rng,
    vocab: &Arc<Vocabulary>,
    budgets: &[(u32, u32)],
    grammars: fn(u32, u32) -> Vec<RecGrammar>,
    looser: fn(&RecGrammar) -> [RecRef<'_>; 2],
    strings: u32,
) -> RefWalks {
    let mut out = RefWalks { checked: 0, refused: [0, 0], edges: 0 };
    let stop = *vocab.stop_token_ids().first().unwrap();
    for &(n, c) in budgets {
        for g in grammars(n, c) {
            let text = g.ebnf(vocab);
            let grammar = grammask_core::ebnf::parse_ebnf(&text, "root").unwrap();
            let cg = Arc::new(CompiledGrammar::new(&grammar, vocab).unwrap_or_else(|e| panic!("{text}: {e}")));
            let r = RecRef::new(&g);
            let [ra, rb] = looser(&g);
            for walk in 0..4 {
                let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                let mut hist = vec![(RecWalk::new(&r), RecWalk::new(&ra), RecWalk::new(&rb))];
                let mut text_so_far: Vec<String> = Vec::new();
                for _ in 0..12 {
                    let (w, wa, wb) = hist.last().unwrap().clone();
                    let what = format!("{text}after {text_so_far:?}, walk {walk}");
                    let allowed = rec_check_mask(&mut m, &r, &w, vocab, &what, &mut 0);
                    for t in (0..vocab.vocab_size() as u32).filter(|&t| t != stop && !allowed.contains(&t)) {
                        out.refused[0] += usize::from(wa.read_token(&ra, vocab, t).is_some());
                        out.refused[1] += usize::from(wb.read_token(&rb, vocab, t).is_some());
                    }
                    if allowed.is_empty() || w.pos > 24 {
                        break;
                    }
                    match rng.below(6) {
                        0 => {
                            // A string: held to max_chars and the lookaheads, free of max_tokens.
                            let t = vocab.token_bytes(rng.below(u64::from(strings)) as u32).to_vec();
                            let next = w.read(&r, &t, false);
                            assert_eq!(m.accept_bytes(&t).unwrap(), next.is_some(), "string {t:?} ({what})");
                            if let Some(nw) = next {
                                let (na, nb) = (wa.read(&ra, &t, false), wb.read(&rb, &t, false));
                                hist.push((nw, na.unwrap(), nb.unwrap()));
                                text_so_far.push(format!("s:{}", String::from_utf8_lossy(&t)));
                            }
                        }
                        1 if hist.len() > 1 => {
                            m.rollback(1).unwrap();
                            hist.pop();
                            text_so_far.pop();
                        }
                        _ => {
                            let edge = allowed.iter().copied().find(|&t| vocab.token_bytes(t) == b"<T>");
                            let t = match edge {
                                Some(e) if rng.below(2) == 0 => e,
                                _ => allowed[rng.below(allowed.len() as u64) as usize],
                            };
                            out.edges += usize::from(Some(t) == edge);
                            assert!(m.accept_token(t).unwrap());
                            let next = (
                                w.read_token(&r, vocab, t).unwrap(),
                                wa.read_token(&ra, vocab, t).unwrap(),
                                wb.read_token(&rb, vocab, t).unwrap(),
                            );
                            hist.push(next);
                            text_so_far.push(String::from_utf8_lossy(vocab.token_bytes(t)).into_owned());
                        }
                    }
                }
                m.reset();
                rec_check_mask(&mut m, &r, &hist[0].0, vocab, &format!("{text}after reset"), &mut 0);
                out.checked += 1;
            }
        }
    }
    out
}

/// What [`walk_both`] met: walks, tokens refused by the `max_tokens` budgets alone and by the
/// `max_chars` ones alone, and token edges read (`<T>` accepted).
struct BothWalks {
    checked: usize,
    by_tokens: usize,
    by_chars: usize,
    edges: usize,
}

/// [`walk_refs`] with both recursive budgets, against the references without one of them:
/// counts the tokens each budget alone refuses. Strings are any token's bytes.
fn walk_both(seed: u64, vocab: &Arc<Vocabulary>, grammars: fn(u32, u32) -> Vec<RecGrammar>) -> BothWalks {
    let budgets = [(1, 3), (3, 2), (4, 3), (6, 2), (5, 4)];
    fn chars_only_tokens_only(g: &RecGrammar) -> [RecRef<'_>; 2] {
        [RecRef { tokens: false, ..RecRef::new(g) }, RecRef { chars: false, ..RecRef::new(g) }]
    }
    let w = walk_refs(&mut Rng(seed), vocab, &budgets, grammars, chars_only_tokens_only, vocab.vocab_size() as u32);
    BothWalks { checked: w.checked, by_tokens: w.refused[0], by_chars: w.refused[1], edges: w.edges }
}

/// Both recursive budgets at once follow the reference holding both; the walks meet tokens
/// refused by each budget alone, so a matcher ignoring either would fail.
#[test]
fn recursive_token_and_char_budgets_together_follow_the_reference() {
    let mut rng = Rng(0x6A09_E667_F3BC_C909);
    let vocab = {
        // No token edges here: drop `<T>`.
        let v = rec_vocab(&mut rng);
        let toks: Vec<Vec<u8>> = (0..v.vocab_size() as u32 - 1).map(|t| v.token_bytes(t).to_vec()).collect();
        let stop = toks.len() as u32 - 1;
        let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
        Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
    };
    let w = walk_both(rng.0, &vocab, both_grammars);
    assert!(
        w.checked == 5 * 7 * 4 && w.by_tokens > 100 && w.by_chars > 40,
        "{} {} {}",
        w.checked,
        w.by_tokens,
        w.by_chars
    );
}

/// [`both_grammars`] with token edges (`Token(<T>)`, three characters, one token weighing one
/// byte on the shortest ways) inside either budget, both, or beside them.
fn both_token_grammars(n: u32, c: u32) -> Vec<RecGrammar> {
    vec![
        // Both on one rule: right recursion, left recursion.
        RecGrammar::new(&[("E", Some(n), &["( E )", "T", "x + E", "T E"])]).with_chars(&[("E", c)]),
        RecGrammar::new(&[("E", Some(n), &["E + T", "x", "( E )"])]).with_chars(&[("E", c)]),
        // A recursive `max_chars` rule using a (regular) `max_tokens` rule holding the token.
        RecGrammar::new(&[
            ("V", None, &["[ L ]", "W", "( V )"]),
            ("L", None, &["V", "V , L"]),
            ("W", Some(n), &["x", "T y", "x T T"]),
        ])
        .with_chars(&[("V", c)]),
        // A recursive `max_tokens` rule around a recursive `max_chars` one, tokens in both.
        RecGrammar::new(&[("F", Some(n), &["[ F ]", "E", "E , F", "T F"]), ("E", None, &["( E )", "x", "T + E"])])
            .with_chars(&[("E", c)]),
        // Each beside the other, the token in the `max_chars` rule only, and in both.
        RecGrammar::new(&[
            ("R", None, &["E", "F"]),
            ("E", None, &["( E )", "T", "x E"]),
            ("F", Some(n), &["[ F ]", "y"]),
        ])
        .with_chars(&[("E", c)]),
        RecGrammar::new(&[
            ("S", None, &["A", "< C >"]),
            ("A", None, &["( C )", "y", "T + A"]),
            ("C", Some(n), &["[ A ]", "z", "z C T"]),
        ])
        .with_chars(&[("A", c)]),
    ]
}

/// Token edges inside and beside both recursive budgets follow the reference holding both
/// (`<T>` counts one token and three characters); the walks read the token edge and meet
/// tokens, `<T>` among them, refused by each budget alone.
#[test]
fn token_edges_with_both_recursive_budgets_follow_the_reference() {
    let mut rng = Rng(0xBB67_AE85_84CA_A73B);
    let vocab = rec_vocab(&mut rng);
    let w = walk_both(rng.0, &vocab, both_token_grammars);
    assert!(
        w.checked == 5 * 6 * 4 && w.by_tokens > 100 && w.by_chars > 40 && w.edges > 100,
        "{} {} {} {}",
        w.checked,
        w.by_tokens,
        w.by_chars,
        w.edges
    );
}

/// Grammars with lookahead assertions beside recursive budgets (`n` tokens, `c` characters):
/// beside a recursive `max_tokens` rule, a recursive `max_chars` one, and both; on the budgeted
/// rule itself, on a rule inside it, and across left recursion.
fn lookahead_grammars(n: u32, c: u32) -> Vec<RecGrammar> {
    const CLOSE: &[&[u8]] = &[b")+,"];
    const BANG: &[&[u8]] = &[b"!)"];
    const PLUS_X: &[&[u8]] = &[b"+", b"x("];
    vec![
        // Inside a recursive `max_tokens` rule: `X` only before ")" "+" ",".
        RecGrammar::new(&[
            ("S", None, &["E", "E !"]),
            ("E", Some(n), &["( E )", "X", "X + E"]),
            ("X", None, &["x", "x y"]),
        ])
        .with_lookahead(&[("X", CLOSE)]),
        // On the recursive `max_tokens` rule itself, and two bytes ahead (left recursion).
        RecGrammar::new(&[("S", None, &["E !", "( S )"]), ("E", Some(n), &["( E )", "x", "x + E"])])
            .with_lookahead(&[("E", BANG)]),
        RecGrammar::new(&[("S", None, &["E !"]), ("E", Some(n), &["E + T", "T", "( E )"]), ("T", None, &["x", "y"])])
            .with_lookahead(&[("T", PLUS_X)]),
        // Beside a recursive `max_chars` rule, on it and inside it.
        RecGrammar::new(&[("S", None, &["E !", "( S )"]), ("E", None, &["( E )", "x", "x + E"])])
            .with_chars(&[("E", c)])
            .with_lookahead(&[("E", BANG)]),
        RecGrammar::new(&[
            ("S", None, &["V", "V !"]),
            ("V", None, &["[ L ]", "x", "( V )"]),
            ("L", None, &["V", "V , L"]),
        ])
        .with_chars(&[("V", c)])
        .with_lookahead(&[("V", CLOSE)]),
        // Both budgets on one rule, with a lookahead inside it.
        RecGrammar::new(&[
            ("S", None, &["E", "E !"]),
            ("E", Some(n), &["( E )", "X", "X + E"]),
            ("X", None, &["x", "x y"]),
        ])
        .with_chars(&[("E", c)])
        .with_lookahead(&[("X", CLOSE)]),
    ]
}

/// Lookahead assertions beside recursive budgets follow the reference holding both: every mask
/// bit and `accept_token` along random walks of tokens, strings and rollbacks; the walks meet
/// tokens refused by the lookaheads alone and by the budgets alone (the reference without them
/// reads those), so a matcher ignoring either would fail.
#[test]
fn lookahead_beside_recursive_budgets_follows_the_reference() {
    let mut rng = Rng(0x3C6E_F372_FE94_F82B);
    let vocab = {
        // No token edges here (refused beside lookahead and recursive budgets): drop `<T>`.
        let v = rec_vocab(&mut rng);
        let mut toks: Vec<Vec<u8>> = (0..v.vocab_size() as u32 - 1).map(|t| v.token_bytes(t).to_vec()).collect();
        toks.insert(toks.len() - 1, b"!".to_vec());
        let stop = toks.len() as u32 - 1;
        let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
        Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
    };
    let stop = vocab.vocab_size() as u32 - 1;
    fn free_unbounded(g: &RecGrammar) -> [RecRef<'_>; 2] {
        [RecRef { lookahead: false, ..RecRef::new(g) }, RecRef { tokens: false, chars: false, ..RecRef::new(g) }]
    }
    let budgets = [(1, 3), (3, 2), (4, 5), (6, 4)];
    let w = walk_refs(&mut rng, &vocab, &budgets, lookahead_grammars, free_unbounded, stop);
    let (checked, [by_la, by_budgets]) = (w.checked, w.refused);
    assert!(checked == 4 * 6 * 4 && by_la > 100 && by_budgets > 100, "{checked} walks, {by_la} {by_budgets}");
}

/// [`lookahead_grammars`]' kinds with token edges (`Token(<T>)`, whose text `<T>` pays pending
/// obligations): an obligation pending at a token edge (`X T`, `X ::= x (= "<")`; and one `<T>`
/// cannot pay), and a token inside a rule with its own lookahead, beside each recursive budget
/// and both.
fn lookahead_token_grammars(n: u32, c: u32) -> Vec<RecGrammar> {
    const LT: &[&[u8]] = &[b"<"];
    const BANG: &[&[u8]] = &[b"!)"];
    vec![
        RecGrammar::new(&[("S", None, &["E !"]), ("E", Some(n), &["( E )", "X T", "x"]), ("X", None, &["x", "y x"])])
            .with_lookahead(&[("X", LT)]),
        RecGrammar::new(&[("S", None, &["E !", "( S )"]), ("E", Some(n), &["( E )", "T", "x + E", "T E"])])
            .with_lookahead(&[("E", BANG)]),
        RecGrammar::new(&[("S", None, &["E !"]), ("E", None, &["( E )", "X T", "x"]), ("X", None, &["x", "y x"])])
            .with_chars(&[("E", c)])
            .with_lookahead(&[("X", LT)]),
        RecGrammar::new(&[("S", None, &["E !", "( S )"]), ("E", None, &["( E )", "T", "x + E", "T E"])])
            .with_chars(&[("E", c)])
            .with_lookahead(&[("E", BANG)]),
        RecGrammar::new(&[
            ("S", None, &["E", "E !"]),
            ("E", Some(n), &["( E )", "X T", "X + E"]),
            ("X", None, &["x", "x y"]),
        ])
        .with_chars(&[("E", c)])
        .with_lookahead(&[("X", LT)]),
        // An obligation pending at a token edge that `<T>` cannot pay: the token is not allowed.
        RecGrammar::new(&[("S", None, &["E !"]), ("E", Some(n), &["( E )", "X T", "X )"]), ("X", None, &["x"])])
            .with_lookahead(&[("X", &[b")"])]),
    ]
}

/// Token edges beside lookahead assertions and recursive budgets follow the reference holding
/// all three (every mask bit and `accept_token` along walks of tokens, strings and rollbacks);
/// the walks read the token edge with obligations pending.
#[test]
fn token_edges_beside_lookahead_and_recursive_budgets_follow_the_reference() {
    let mut rng = Rng(0x510E_527F_ADE6_82D1);
    let vocab = {
        // `rec_vocab` with "!" before its stop token and `<T>`.
        let v = rec_vocab(&mut rng);
        let n = v.vocab_size() as u32;
        let mut toks: Vec<Vec<u8>> = (0..n).map(|t| v.token_bytes(t).to_vec()).collect();
        toks.insert(toks.len() - 2, b"!".to_vec());
        let stop = n - 1;
        let opts = VocabularyOptions {
            stop_token_ids: Some(vec![stop]),
            special_token_ids: Some(vec![stop + 1]),
            ..Default::default()
        };
        Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
    };
    let w = walk_both(rng.0, &vocab, lookahead_token_grammars);
    assert!(
        w.checked == 5 * 6 * 4 && w.by_tokens > 100 && w.by_chars > 50 && w.edges > 100,
        "{} {} {} {}",
        w.checked,
        w.by_tokens,
        w.by_chars,
        w.edges
    );
}

/// A recursive budget's row rebuilt at a new token count: when the rebuild fails (an error, or
/// no row), the chart keeps its rows, items and signature, and builds the same row again later.
#[test]
fn a_failed_row_rebuild_leaves_the_chart_as_it_was() {
    use grammask_core::earley::Chart;
    let toks: Vec<Vec<u8>> = [&b"x"[..], b"y", b"</s>"].iter().map(|t| t.to_vec()).collect();
    let vocab = common::raw_vocab_with_stop(toks);
    let g = grammask_core::ebnf::parse_ebnf("root ::= a\na[max_tokens=3] ::= \"x\" a | \"y\"", "root").unwrap();
    let cg = CompiledGrammar::new(&g, &vocab).unwrap();
    let a = cg.automata();
    assert!(a.rec_budgets().is_some(), "the test needs a recursive budget");
    let mut c = Chart::new(a);
    assert!(c.push_byte(a, b'x').unwrap() && c.push_byte(a, b'x').unwrap());
    c.set_clock(a, 2, false, Some(b'x')).unwrap();
    let snapshot = |c: &Chart| (c.num_rows(), c.last_row().to_vec(), c.last_signature());
    let before = snapshot(&c);
    assert!(before.1.iter().any(|it| it.la != 0), "the last row must carry spend points");
    let limit = || grammask_core::Error::new(grammask_core::ErrorKind::LimitExceeded, "injected");
    // An error after a partial row, an error alone, and a rebuild that appends nothing.
    let err = c.set_clock_with(3, false, |c| {
        c.push_byte(a, b'x')?;
        Err(limit())
    });
    assert_eq!(err.unwrap_err().kind(), grammask_core::ErrorKind::LimitExceeded);
    assert_eq!(snapshot(&c), before);
    assert!(c.set_clock_with(3, true, |_| Err(limit())).is_err());
    assert_eq!(snapshot(&c), before);
    assert!(c.set_clock_with(3, false, |_| Ok(false)).is_err());
    assert_eq!(snapshot(&c), before);
    // The old clock still holds: building the row again at it gives the same row.
    c.set_clock(a, 2, false, Some(b'x')).unwrap();
    assert_eq!(snapshot(&c), before);
}

/// An accept that fails part way (the Earley work budget spent while reading its bytes, or while
/// a recursive budget's row is built again at the new token count) returns the error and leaves
/// the matcher as it was: the same masks, and the same masks after the step taken again. Every
/// work budget up to the one the step needs is tried, for a token, a string and a token edge.
#[test]
fn an_accept_that_fails_part_way_leaves_the_matcher_as_it_was() {
    use grammask_core::earley::with_work_budget;
    let vocab = rec_vocab(&mut Rng(7));
    let id = |t: &[u8]| (0..vocab.vocab_size() as u32).find(|&i| vocab.token_bytes(i) == t).unwrap();
    let edge = id(b"<T>");
    // (grammar, the token opening `a`, the steps tried after it); with `max_tokens=1` the row
    // before the string is spent, so the string reopens it.
    let grammars = [
        ("root ::= a\na[max_tokens=3] ::= \"x\" a | \"y\"".to_string(), id(b"x"), &["token", "string"][..]),
        ("root ::= a\na[max_tokens=1] ::= \"x\" a | \"y\"".to_string(), id(b"x"), &["string"][..]),
        (
            format!("root ::= a\na[max_tokens=3] ::= \"(\" a \")\" | Token({edge}) | \"x\""),
            id(b"("),
            &["token", "string", "edge"][..],
        ),
    ];
    let mask = |m: &mut Matcher| m.compute_mask().unwrap().clone();
    let mut partial = 0;
    for (g, opening, kinds) in &grammars {
        let opening = *opening;
        let g = grammask_core::ebnf::parse_ebnf(g, "root").unwrap();
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        assert!(cg.automata().rec_budgets().is_some(), "the test needs a recursive budget");
        let text = vec![vocab.token_bytes(opening)[0]; 2];
        for &kind in *kinds {
            let step = |m: &mut Matcher| match kind {
                "token" => m.accept_token(opening),
                "string" => m.accept_bytes(&text),
                _ => m.accept_token(edge),
            };
            let mut reference = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            assert!(reference.accept_token(opening).unwrap());
            let before = mask(&mut reference);
            assert!(step(&mut reference).unwrap(), "{kind}: the step must be allowed");
            let after = mask(&mut reference);
            for work in 0.. {
                let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                assert!(m.accept_token(opening).unwrap());
                let _ = mask(&mut m);
                match with_work_budget(work, || step(&mut m)) {
                    Ok(accepted) => {
                        assert!(accepted, "{kind}: allowed with work {work}");
                        break;
                    }
                    Err(e) => assert_eq!(e.kind(), grammask_core::ErrorKind::LimitExceeded, "{kind}"),
                }
                partial += 1;
                assert_eq!(m.num_accepted(), 1, "{kind}, work {work}: the failed step stays out of the history");
                assert_eq!(mask(&mut m), before, "{kind}, work {work}: the mask before the step");
                assert!(step(&mut m).unwrap(), "{kind}, work {work}: the step taken again");
                assert_eq!(mask(&mut m), after, "{kind}, work {work}: the mask after the step");
                m.rollback(1).unwrap();
                assert_eq!(mask(&mut m), before, "{kind}, work {work}: rolled back");
            }
        }
    }
    assert!(partial > 10, "the work budgets must fail steps part way ({partial} failures)");
}
