//! Any-order key-set rules written as grammar IR instead of EBNF text.
//!
//! Pipeline place: `compile/objects.rs` (`object_any_order`) records each any-order object's
//! key-set states here when the converter runs for [`super::json_schema_to_grammar`]; the EBNF
//! parser then defines them ([`crate::ebnf::parse_ebnf_with`]) after reading the rest of the
//! text. [`super::json_schema_to_ebnf`] still writes them as text.
//!
//! PERF: an object with n keys has up to 2^n such rules (o44208: ~21k, 75% of a 2.9 MB text);
//! parsing their text was ~60% of the conversion.
//!
//! Invariant: [`build`] makes, for each state, the expression the parser makes of the text
//! `object_any_order` writes for it (same node kinds, children and order), so the grammar is the
//! text's but for rule numbering (these rules come after the text's).
use crate::error::Result;
use crate::fasthash::FastMap;
use crate::grammar::{Expr, ExprId, GrammarBuilder, RuleId};

/// The separator written before a state's next entry.
pub enum Sep {
    /// `ws "," ws` (`any_whitespace`), with the whitespace rule's name.
    Ws(String),
    /// One literal.
    Lit(String),
}

/// One key-set state's rule (see `object_any_order`).
pub struct KeyState {
    pub mask: u64,
    pub c: u64,
    pub s: bool,
    /// The object may end here (`""` first).
    pub empty: bool,
    /// The count of the states the entries lead to, when entries are offered.
    pub next: Option<u64>,
}

impl KeyState {
    /// The object's start state `(0, 0, false)`, the one its body (`"{" ws R ws "}"`) calls.
    pub fn is_start(&self) -> bool {
        self.mask == 0 && self.c == 0 && !self.s
    }
}

/// The key-set rules of one any-order object.
pub struct KeySetObject {
    pub base: String,
    /// The entry rules, by key bit.
    pub entries: Vec<String>,
    /// The additional-entry rule.
    pub addl: Option<String>,
    pub sep: Sep,
    /// The rule matching nothing, for states offering nothing (written in the text).
    pub nothing: Option<String>,
    pub states: Vec<KeyState>,
}

impl KeySetObject {
    /// The states of the automaton the compiler builds for `st`'s rule when no entry is inlined
    /// into it (`json_schema_to_grammar` keeps the key-set rules, so successors are rule edges):
    /// the separator's chain (one state per symbol, when `s`), the choice of entries, one state
    /// per entry whose successor is another rule, and the end state unless every entry loops back
    /// to the rule itself (`extra` at an unchanged count: a tail-group loop to the start,
    /// `compiler/tail.rs`). A state offering nothing is one state: `""`, or the rule matching
    /// nothing inlined (a dead start). The closed form a build on first prediction reserves ids
    /// by (docs/architecture.md, "Key-set rules built on first prediction: design").
    #[cfg(test)]
    pub(crate) fn automaton_states(&self, st: &KeyState) -> usize {
        let offered = match st.next {
            Some(_) => self.offered(st).count(),
            None => 0,
        };
        if offered == 0 {
            return 1;
        }
        let sep = match (&self.sep, st.s) {
            (_, false) => 0,
            (Sep::Ws(_), true) => 3,
            (Sep::Lit(l), true) => l.len(),
        };
        let loops = usize::from(self.addl.is_some() && st.s && st.next == Some(st.c));
        sep + 1 + (offered - loops) + usize::from(offered > loops)
    }

    /// The entry rules (by name) `st` offers when it offers entries: the keys not in its mask,
    /// then the additional entry.
    #[cfg(test)]
    pub(crate) fn offered<'a>(&'a self, st: &'a KeyState) -> impl Iterator<Item = &'a str> + 'a {
        let keys = self.entries.iter().enumerate().filter(|(i, _)| st.mask & (1u64 << i) == 0);
        keys.map(|(_, e)| e.as_str()).chain(self.addl.as_deref())
    }
}

/// Appends the name of the rule of state (mask, c, s) of the object `base` to `out`:
/// `{base}.{mask:x}_{c}_{s as u8}`. PERF: digit by digit, without the formatting machinery
/// (two names per state in IR mode).
pub(super) fn push_state_name(out: &mut String, base: &str, (mask, c, s): (u64, u64, bool)) {
    out.push_str(base);
    out.push('.');
    push_digits(out, mask, 16);
    out.push('_');
    push_digits(out, c, 10);
    out.push_str(if s { "_1" } else { "_0" });
}

/// Appends `v` in `radix` (10 or 16, lowercase).
fn push_digits(out: &mut String, mut v: u64, radix: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b"0123456789abcdef"[(v % radix) as usize];
        v /= radix;
        if v == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

/// The length of the name [`push_state_name`] appends for a base name of length `base`.
pub(super) fn state_name_len(base: usize, (mask, c, _): (u64, u64, bool)) -> usize {
    let hex = if mask == 0 { 1 } else { (64 - mask.leading_zeros() as usize).div_ceil(4) };
    let dec = c.checked_ilog10().map_or(1, |l| l as usize + 1);
    base + 1 + hex + 1 + dec + 2
}

#[cfg(test)]
thread_local! {
    /// Key-set rules [`build`] defined on this thread.
    pub(super) static BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// `name.len() + body.len()` of each key-set rule on this thread, in state order: as written
    /// ([`super::json_schema_to_ebnf`]) or as counted without writing it (IR mode).
    pub(super) static RULE_BYTES: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Defines the rules of `objects` in `b`; returns their ids.
pub(crate) fn build(objects: &[KeySetObject], b: &mut GrammarBuilder) -> Result<Vec<RuleId>> {
    let mut defined = Vec::with_capacity(objects.iter().map(|o| o.states.len()).sum());
    #[cfg(test)]
    BUILT.with(|n| n.set(n.get() + defined.capacity()));
    let mut name = String::new();
    for o in objects {
        let entries: Vec<RuleId> = o.entries.iter().map(|e| b.rule_id(e)).collect();
        let addl = o.addl.as_deref().map(|a| b.rule_id(a));
        let ws = match &o.sep {
            Sep::Ws(w) => Some(b.rule_id(w)),
            Sep::Lit(_) => None,
        };
        let mut ids: FastMap<(u64, u64, bool), RuleId> = FastMap::default();
        let mut key_name = String::new();
        let mut id_of = |b: &mut GrammarBuilder, key: (u64, u64, bool)| -> RuleId {
            *ids.entry(key).or_insert_with(|| {
                key_name.clear();
                push_state_name(&mut key_name, &o.base, key);
                b.rule_id(&key_name)
            })
        };
        for st in &o.states {
            let me = id_of(b, (st.mask, st.c, st.s));
            // `entry next` per entry offered, as `(e0 n0 | e1 n1 | ...)` or one `e0 n0`.
            let mut pairs: Vec<[ExprId; 2]> = Vec::new();
            if let Some(c2) = st.next {
                let offered = (0..entries.len())
                    .filter(|i| st.mask & (1u64 << i) == 0)
                    .map(|i| (entries[i], st.mask | (1u64 << i)))
                    .chain(addl.map(|a| (a, st.mask)));
                for (e, next_mask) in offered {
                    let next = id_of(b, (next_mask, c2, true));
                    let er = b.rule_ref(e);
                    let nr = b.rule_ref(next);
                    pairs.push([er, nr]);
                }
            }
            let mut alts: Vec<ExprId> = Vec::with_capacity(2);
            if st.empty {
                alts.push(b.empty());
            }
            if !pairs.is_empty() {
                let mut items: Vec<ExprId> = Vec::with_capacity(5);
                if st.s {
                    match (&o.sep, ws) {
                        (Sep::Ws(_), Some(w)) => {
                            let w1 = b.rule_ref(w);
                            let comma = b.bytes(b",");
                            let w2 = b.rule_ref(w);
                            items.extend([w1, comma, w2]);
                        }
                        (Sep::Lit(l), _) => items.push(b.bytes(l.as_bytes())),
                        (Sep::Ws(_), None) => unreachable!("a Ws separator has its rule"),
                    }
                }
                if pairs.len() == 1 {
                    // `sep e n`: one sequence (`e n` alone without a separator).
                    items.extend(pairs[0]);
                } else {
                    let choice: Vec<ExprId> = pairs.iter().map(|p| b.add(Expr::Seq(p[..].into()))).collect();
                    items.push(b.add(Expr::Choice(choice.into())));
                }
                alts.push(b.seq(items));
            }
            let body = match alts.len() {
                0 => {
                    let nothing = o.nothing.as_deref().expect("a state offering nothing names the nothing rule");
                    let r = b.rule_id(nothing);
                    b.rule_ref(r)
                }
                _ => b.choice(alts),
            };
            name.clear();
            push_state_name(&mut name, &o.base, (st.mask, st.c, st.s));
            b.define(&name, body, None)?;
            defined.push(me);
        }
    }
    Ok(defined)
}
