//! Token edges at run time: masks and `accept_token` for grammar elements that match one whole
//! token by id (`Token(...)`, `ExcludeToken(...)`; see `compiler/token_edges.rs` for how they are
//! compiled).
//!
//! An item of the last chart row in a token rule's start state is a token edge. A mask allows
//! every token its set names (ORed after the text mask, which never sees them: the state reads no
//! byte). Accepting a token `t` whose id some token edge names advances the parents waiting on
//! the token rule as one step, and merges them into the row the token's bytes reach through the
//! other items; when the bytes are not readable as text (or the token is special), the parents
//! form a row of their own. Either way the token is one rollback step. Grammars without token
//! edges never reach this module (one branch on `Automata::has_token_edges`).
use crate::bitset::Bitset;
use crate::compiler::{Automata, TokenSet, LA_NONE};
use crate::earley::{Chart, Item};
use crate::error::{Error, ErrorKind, Result};
use crate::grammar::RuleId;
use crate::vocab::Vocabulary;

/// Per token set of a compiled grammar, the ids it allows as a bitset over the vocabulary.
#[derive(Debug, Default)]
pub struct TokenMasks {
    masks: Vec<Bitset>,
}

/// Whether a token edge can read token `id` at all: it is a real token (in the encoded vocabulary,
/// non-empty) and not a stop token (stop tokens keep their meaning: the end of the output).
#[inline]
pub fn readable(vocab: &Vocabulary, id: u32) -> bool {
    (id as usize) < vocab.num_encoded() && !vocab.is_stop(id) && !vocab.token_bytes(id).is_empty()
}

/// Whether `set` allows token `id` of `vocab`: `Token` sets any readable token they name (added
/// and special tokens included: naming one is how a grammar asks for it); `ExcludeToken` sets
/// every text token (not special, not stop) they do not name.
#[inline]
pub fn allows(set: &TokenSet, vocab: &Vocabulary, id: u32) -> bool {
    readable(vocab, id) && set.names(id) && !(set.exclude && vocab.is_special(id))
}

impl TokenMasks {
    /// The masks of `a`'s token sets. Errors (`InvalidGrammar`) when a set names an id outside the
    /// vocabulary.
    pub fn new(a: &Automata, vocab: &Vocabulary) -> Result<TokenMasks> {
        let n = vocab.vocab_size();
        let mut masks = Vec::with_capacity(a.tokens().sets().len());
        for set in a.tokens().sets() {
            if let Some(&bad) = set.ids.iter().find(|&&t| t as usize >= n) {
                let what = if set.exclude { "ExcludeToken" } else { "Token" };
                return Err(Error::new(
                    ErrorKind::InvalidGrammar,
                    format!("{what}({bad}): token id {bad} is out of range for vocabulary size {n}"),
                ));
            }
            let mut m = Bitset::new(n);
            if set.exclude {
                for id in 0..n as u32 {
                    if allows(set, vocab, id) {
                        m.set(id as usize);
                    }
                }
            } else {
                for &id in &*set.ids {
                    if allows(set, vocab, id) {
                        m.set(id as usize);
                    }
                }
            }
            masks.push(m);
        }
        Ok(TokenMasks { masks })
    }

    /// ORs into `out` the tokens of every token edge of the chart's last row; of an edge with
    /// pending lookahead obligations, only the tokens whose bytes they read.
    pub fn or_into(&self, a: &Automata, chart: &Chart, vocab: &Vocabulary, out: &mut Bitset) {
        let mut seen: Vec<u32> = Vec::new();
        let ended = ended_occurrences(a, chart, chart.last_row_index());
        let budgets = a.rec_budgets().is_some() || a.char_budgets().is_some();
        for it in chart.last_row() {
            if ended.contains(&chart.occ_of(it.la)) {
                continue;
            }
            let Some(k) = a.tokens().set_of(a, it.state) else { continue };
            let owed = if budgets { chart.obligations_of(it.la) } else { it.la };
            if owed != LA_NONE {
                for id in self.masks[k as usize].iter_ones() {
                    if vocab.token_bytes(id as u32).iter().try_fold(owed, |l, &b| a.la_step(l, b)).is_some() {
                        out.set(id);
                    }
                }
            } else if !seen.contains(&k) {
                seen.push(k);
                out.or_assign(&self.masks[k as usize]);
            }
        }
    }

    /// The allowed tokens of token set `k`.
    #[inline]
    pub fn mask(&self, k: u32) -> &Bitset {
        &self.masks[k as usize]
    }

    pub fn memory_size(&self) -> usize {
        self.masks.iter().map(Bitset::memory_size).sum()
    }
}

/// The items a token edge reading token `id` leaves (the parents of the matching token rules,
/// advanced over them, their lookahead obligations stepped over the token's bytes), to be merged
/// into the row after the token. Empty when no token edge of the last row allows `id`.
pub fn token_completions(a: &Automata, chart: &mut Chart, masks: &TokenMasks, id: u32, bytes: &[u8]) -> Vec<Item> {
    let r0 = chart.last_row_index();
    token_completions_at(a, chart, masks, id, bytes, r0)
}

/// [`token_completions`] for the token edges of row `r0` (a recursive `max_tokens` grammar
/// builds a token's last row again at the new token count, from the row before the token).
pub fn token_completions_at(
    a: &Automata,
    chart: &mut Chart,
    masks: &TokenMasks,
    id: u32,
    bytes: &[u8],
    r0: usize,
) -> Vec<Item> {
    let ended = ended_occurrences(a, chart, r0);
    let rb = a.rec_budgets();
    // Items' `la` fields hold spend points or occurrence numbers (or an index of their triples
    // with obligations: `Chart::occ_of`) with recursive budgets, and lookahead obligations
    // otherwise.
    let budgets = rb.is_some() || a.char_budgets().is_some();
    // The token edges reading `id`, with the `la` their parents resume with (`la_origin`
    // selects the parents): their obligations stepped over the token's bytes, the token rule's
    // lookahead added; with budgets without lookahead, the parents' own (as `Chart::advance`
    // keeps it, so no new triple is made).
    let mut edges: Vec<(Item, RuleId, u32)> = Vec::new();
    for i in 0..chart.row(r0).len() {
        let it = chart.row(r0)[i];
        let Some(k) = a.tokens().set_of(a, it.state) else { continue };
        if !masks.mask(k).get(id as usize) || ended.contains(&chart.occ_of(it.la)) {
            continue;
        }
        let rule = a.state(it.state).rule;
        let la = if budgets {
            chart.token_resumed_la(a, &it, rule, bytes)
        } else {
            let mut la = Some(it.la);
            for &b in bytes {
                la = la.and_then(|l| a.la_step(l, b));
            }
            la.map(|la| a.la_add(la, rule))
        };
        if let Some(la) = la {
            edges.push((it, rule, la));
        }
    }
    let mut out: Vec<Item> = Vec::new();
    let row = chart.row(r0);
    for (it, rule, la) in edges {
        // Spend points: a parent moves to its twin state once spent, as `Chart::advance` does.
        for p in row.iter().filter(|p| p.la == it.la_origin) {
            for &(rr, t) in a.rule_edges(p.state) {
                if rr == rule {
                    let state = rb.map_or(t, |rb| chart.target(rb, p.la, t));
                    let item = Item { state, la, ..*p };
                    if !out.contains(&item) {
                        out.push(item);
                    }
                }
            }
        }
    }
    out
}

/// Pushes the rows of one token read both ways: its bytes through the last row's items (when
/// `text` and they read it) and `completions` (from [`token_completions`], non-empty) merged into
/// the row they reach; or, when the bytes are not read whole, one row of `completions` alone,
/// which recursive `max_chars` budgets count as the token's characters (as the bytes' row would).
/// On error the chart is as before.
/// Returns whether the bytes were read (else the completions form a row of their own).
pub fn push_token(a: &Automata, chart: &mut Chart, bytes: &[u8], text: bool, completions: &[Item]) -> Result<bool> {
    let rows = chart.num_rows();
    let res = (|| {
        if text {
            if let Some((&last, head)) = bytes.split_last() {
                let mut ok = true;
                for &b in head {
                    if !chart.push_byte(a, b)? {
                        ok = false;
                        break;
                    }
                }
                if ok && chart.push_byte_with(a, last, completions)? {
                    return Ok(true);
                }
                chart.truncate_rows(rows);
            }
        }
        chart.push_items_reading(a, completions, characters(bytes))?;
        Ok(false)
    })();
    if res.is_err() {
        chart.truncate_rows(rows);
    }
    res
}

/// The occurrences of recursive `max_chars` rules that end at row `r` (their items, token edges
/// included, read nothing more; empty without such rules).
fn ended_occurrences(a: &Automata, chart: &Chart, r: usize) -> Vec<u32> {
    a.char_budgets().map_or_else(Vec::new, |cb| chart.ended_occurrences(a, cb, r))
}

/// The characters of a token's bytes (UTF-8 lead bytes), which recursive `max_chars` budgets
/// count for a token edge, as XGrammar 0.2.8 counts its decoded characters (a special token's
/// text included; a lone partial sequence byte that leads one counts one).
pub(crate) fn characters(bytes: &[u8]) -> u32 {
    bytes.iter().filter(|b| !(0x80..=0xBF).contains(*b)).count() as u32
}
