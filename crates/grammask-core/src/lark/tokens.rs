//! Lark special-token atoms (llguidance syntax): `<|name|>`, a token named by its text (needs a
//! vocabulary), and `<[ids]>`: token ids and ranges (`<[1,5-9]>`), a negated set (`<[^1,2]>`,
//! any text token but those) or any text token (`<[*]>`). They become token elements
//! ([`crate::grammar::Expr::Token`], [`crate::grammar::Expr::ExcludeToken`]), matched by id and
//! never by text.
use crate::grammar::{ExprId, GrammarBuilder};
use crate::vocab::Vocabulary;
use std::cell::RefCell;
use std::collections::HashMap;

/// Most ids one `<[a-b]>` range may name.
const MAX_RANGE_IDS: u64 = 1 << 20;

thread_local! {
    /// The vocabulary's token ids by text while a grammar is lowered with one
    /// ([`with_vocab`]); `None` otherwise.
    static BY_TEXT: RefCell<Option<HashMap<Vec<u8>, u32>>> = const { RefCell::new(None) };
}

/// Runs `f` (a Lark lowering) with `<|name|>` resolved against `vocab`: the special/added token
/// whose text is `<|name|>` first, else any other token with that text, a stop token last (a
/// token element never reads a stop token: stop tokens keep their meaning, the end of output);
/// the lowest id among equals. Only texts of the form `<|...|>` are kept (the only ones looked
/// up), so the map stays small and is built in one pass without copying other tokens.
pub fn with_vocab<T>(vocab: &Vocabulary, f: impl FnOnce() -> T) -> T {
    let mut best: HashMap<Vec<u8>, (u8, u32)> = HashMap::new();
    for id in 0..vocab.num_encoded() as u32 {
        let t = vocab.token_bytes(id);
        if !(t.starts_with(b"<|") && t.ends_with(b"|>")) {
            continue;
        }
        let class = if vocab.is_stop(id) { 2 } else { u8::from(!vocab.is_special(id)) };
        let slot = best.entry(t.to_vec()).or_insert((class, id));
        if class < slot.0 {
            *slot = (class, id);
        }
    }
    let map: HashMap<Vec<u8>, u32> = best.into_iter().map(|(t, (_, id))| (t, id)).collect();
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BY_TEXT.with(|m| *m.borrow_mut() = None);
        }
    }
    BY_TEXT.with(|m| *m.borrow_mut() = Some(map));
    let _reset = Reset;
    f()
}

/// The token element of special atom `s` (`<|...|>` or `<[...]>`), or an error message.
pub(super) fn special_expr(b: &mut GrammarBuilder, s: &str) -> std::result::Result<ExprId, String> {
    if s.starts_with("<|") {
        let id = BY_TEXT.with(|m| m.borrow().as_ref().map(|m| m.get(s.as_bytes()).copied()));
        return match id {
            None => Err(format!(
                "the special token '{s}' is named by its text: it needs the tokenizer (pass tokenizer_info to \
                 Grammar.from_lark, or use GrammarCompiler.compile_lark)"
            )),
            Some(None) => Err(format!("the special token '{s}' is not a token of the vocabulary")),
            Some(Some(id)) => Ok(b.token(&[id], false)),
        };
    }
    let Some(inner) = s.strip_prefix("<[").and_then(|x| x.strip_suffix("]>")) else {
        return Err(format!("'{s}' is not a special token (expected '<|name|>' or '<[ids]>')"));
    };
    let inner = inner.trim();
    if inner == "*" {
        return Ok(b.token(&[], true));
    }
    let (negated, list) = match inner.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, inner),
    };
    let mut ids: Vec<u32> = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        let num = |x: &str| x.trim().parse::<u32>().map_err(|_| format!("bad token id '{}' in '{s}'", x.trim()));
        match item.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (num(lo)?, num(hi)?);
                if lo > hi || u64::from(hi - lo) >= MAX_RANGE_IDS {
                    return Err(format!("bad token id range '{item}' in '{s}'"));
                }
                ids.extend(lo..=hi);
            }
            None => ids.push(num(item)?),
        }
    }
    if ids.is_empty() {
        return Err(format!("no token id in '{s}'"));
    }
    Ok(b.token(&ids, negated))
}
