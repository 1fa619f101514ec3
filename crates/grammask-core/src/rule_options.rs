//! Rule options: `name[max_chars=N, max_tokens=N, capture, capture="n", lazy, temperature=x] ::= ...`.
//!
//! Pipeline place: part of the grammar IR ([`crate::grammar::Grammar::rule_options`]), written by
//! the EBNF and Lark front ends, printed by [`crate::print`], serialized by [`crate::serialize`].
//! What they do:
//! - `lazy` and `max_chars` change the rule's own automaton (`compiler/bounded.rs`): the rule must
//!   be regular (its body, with every rule it uses inlined, is not recursive; for `max_chars` see
//!   below). `lazy`: the rule ends
//!   at the first position where its body can end (committed-shortest match). `max_chars=N`: the
//!   rule's strings of at most N characters, and a longer one only when the rule could not end at
//!   or after the N-th character before its own end ("relax to the earliest valid end", as in
//!   XGrammar): once N characters are read, the rule ends at the first position where it can.
//!   Token expressions inside it stay token edges of its automaton, counting one character each
//!   (XGrammar counts the token's decoded characters; the automaton is built before the
//!   vocabulary is known; a recursive `max_chars` rule, below, counts them as XGrammar does).
//! - `stop`/`suffix` (Lark) set [`RuleOptions::hidden_suffix`]: the hidden end of an occurrence is
//!   its last N bytes or, for `capture_hidden_stop_rule`, what the second of the rule's two rule
//!   references matches ([`crate::compiler::Automata::hidden_stop_cut`]).
//! - `capture` and `temperature` keep the rule's identity in the automata (it is never inlined):
//!   captures are read off the chart by [`crate::captures`], the temperature of the innermost
//!   active rule by [`crate::captures::temperature`].
//! - `max_tokens=N` is a per-occurrence token budget that relaxes to the earliest valid end, like
//!   `max_chars`, counted in tokens accepted with `accept_token`. An occurrence started at chart
//!   row `o` has used `K - first(o)` tokens while the token after the `K` accepted ones is read,
//!   where `first(o)` is the number of tokens that ended at or before `o` (a token read across
//!   `o` is the occurrence's first). Once it has used `N`, the next tokens may only read bytes
//!   along a shortest way (in bytes) to an end of the rule, and in a state where it can end it
//!   ends: it finishes within its shortest remaining length. Strings (`accept_string`) neither
//!   count nor are held to a spent budget, as in XGrammar. `max_tokens=0` is spent from the
//!   start: the rule is built exhausted (for strings too). A regular rule gets its own automaton
//!   and an exhausted twin (`compiler/token_budget.rs`), and [`crate::matcher::Matcher`] moves
//!   spent occurrences to the twin between tokens. Token expressions inside it stay token edges
//!   of its automaton (weighing one byte on the twin's shortest ways); the matcher then drops
//!   token-edge items no spent item waits on. Inside a `max_chars` or non-recursive `lazy` rule
//!   a `max_tokens` rule keeps its occurrences: that rule keeps its rule edges, like a recursive
//!   `max_chars` one (below; `lazy` as `max_chars=0`).
//! - `max_tokens=N` on a recursive rule: every rule it reaches gets an exhausted twin that keeps
//!   its rule edges ([`crate::compiler::RecBudgets`]); Earley items carry the spend point of the
//!   innermost-spending occurrence around them ([`crate::earley::Item`]), so once spent, each open
//!   level of the occurrence follows its own rule's shortest ways to its end. `max_tokens=0`:
//!   spent from the start (for strings too): its occurrences start in their twins. A rule
//!   left-recursive through itself: once spent, an occurrence that ends does not complete into a
//!   level of its own rule started at the same row ([`crate::earley`]); it ends. Rules
//!   left-recursive through each other, in a group entered through one rule only, or whose
//!   only budgeted rule is one of its entries (the root's own occurrence is an entry, outside
//!   every budget unless the root has one): once spent, a finished level of that rule (the
//!   entry) does not complete into a level of the group started at the same row that has a
//!   level of the entry below it in its chain (it would wrap it; items carry that mark where
//!   another entry is used inside a budget, [`crate::compiler::RecBudgets::mark_of`]); it
//!   completes into the level that called it. In a group none of whose rules has a budget,
//!   entered through several rules, each chain is read as if the group were entered through
//!   the rule it starts with only (items carry that rule as their chain's mark). A string read later (free)
//!   may still wrap it, through shadows of the group's chain predicted at rows built spent
//!   ([`crate::compiler::RecBudgets::chain`]). A string goes on free from the positions the
//!   tokens before it reached (its row is built again from the twins' steps). `Unsupported`: a rule
//!   reaching another such group (no bounded end), lookahead in the grammar, and a matcher
//!   `max_tokens` budget.
//! - `max_chars=N` on a recursive rule (XGrammar's semantics): an occurrence not nested in another
//!   bounded occurrence, once it has read `N` characters (UTF-8 lead bytes), ends at the first
//!   position where its rule can end; nested occurrences are not bounded on their own. Earley
//!   items carry the outermost bounded occurrence around them ([`crate::compiler::CharBudgets`]),
//!   and no byte is read inside an occurrence from a row where it has read its budget and one of
//!   its own items is final. Strings are held to it too. A token edge (`Token(...)`,
//!   `ExcludeToken(...)`) inside it reads no token from such a row, and counts its token's
//!   characters (UTF-8 lead bytes of its bytes, a special token's text included, as XGrammar
//!   0.2.8 counts decoded characters) whether the token's bytes are read as text too or its
//!   completions form a row of their own ([`crate::token_edges::push_token`]). A `max_chars`
//!   (or non-recursive `lazy`) rule using a `max_tokens` rule is built the same way.
//! - Both: `max_tokens` on such a rule too (its token budget is then a recursive one, whatever the
//!   rule's shape), or a recursive `max_chars` rule beside recursive or nesting `max_tokens` rules.
//!   Each budget holds as alone: the token budget spends (then shortest ways, strings free), the
//!   character budget ends its outermost occurrence at its earliest valid end (strings held).
//!   Items then carry both per-item values as one index into a per-chart table of (spend point,
//!   occurrence) pairs ([`crate::earley::Item`]: still 16 bytes; grammars without both budgets
//!   run the code they ran before). Token edges there read through the same pairs: their parents
//!   keep their own index, so no pair is made. `Unsupported` with a recursive `max_chars` rule:
//!   lookahead in the grammar and a matcher `max_tokens` budget.

/// The options of one rule; the default is no option.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RuleOptions {
    /// Per-occurrence token budget (tokens accepted with `accept_token`).
    pub max_tokens: Option<u32>,
    /// Per-occurrence character budget.
    pub max_chars: Option<u32>,
    /// The capture name of the rule's occurrences (`capture` alone: the rule's name).
    pub capture: Option<String>,
    /// Committed-shortest matching.
    pub lazy: bool,
    /// The sampling temperature while this rule is the innermost active one, as `f32` bits
    /// (finite, `>= 0`).
    pub temperature_bits: Option<u32>,
    /// The end of an occurrence that its capture leaves out, from a Lark `stop=` (`true`) or
    /// `suffix=` (`false`).
    pub hidden_suffix: Option<(HiddenStop, bool)>,
    /// The capture name of those hidden last bytes (Lark's `stop_capture`).
    pub stop_capture: Option<String>,
    /// Strings no occurrence contains (`excludes=("s", ...)`; non-empty, sorted, distinct). The
    /// rule must be regular: its DFA loses every edge that would complete one of them.
    pub excludes: Vec<String>,
}

/// How the hidden end of an occurrence is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HiddenStop {
    /// Its last `n` bytes (a stop string; `capture_hidden_stop_bytes=n`).
    Bytes(u32),
    /// The rule's body is `body_rule stop_rule` (two rule references) and the hidden end is the
    /// longest suffix of the occurrence that `stop_rule` matches with the rest matching
    /// `body_rule` (a stop regex or terminal; `capture_hidden_stop_rule`).
    LastRule,
}

impl RuleOptions {
    pub fn is_empty(&self) -> bool {
        *self == RuleOptions::default()
    }

    pub fn temperature(&self) -> Option<f32> {
        self.temperature_bits.map(f32::from_bits)
    }

    pub fn set_temperature(&mut self, t: f32) {
        self.temperature_bits = Some(t.to_bits());
    }

    /// Sets the excluded strings (sorted, deduplicated).
    pub fn set_excludes(&mut self, mut ex: Vec<String>) {
        ex.sort();
        ex.dedup();
        self.excludes = ex;
    }

    /// The options in EBNF form, without the brackets (`max_chars=3, capture="x", lazy`).
    /// `rule_name` is the rule's printed name: a capture named after it prints as `capture`.
    pub fn to_ebnf(&self, rule_name: &str) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(n) = self.max_tokens {
            parts.push(format!("max_tokens={n}"));
        }
        if let Some(n) = self.max_chars {
            parts.push(format!("max_chars={n}"));
        }
        if let Some(c) = &self.capture {
            if c == rule_name {
                parts.push("capture".to_owned());
            } else {
                parts.push(format!("capture={}", crate::print::quote_str(c)));
            }
        }
        if let Some((h, stop)) = self.hidden_suffix {
            let kind = if stop { "stop" } else { "suffix" };
            parts.push(match h {
                HiddenStop::Bytes(n) => format!("capture_hidden_{kind}_bytes={n}"),
                HiddenStop::LastRule => format!("capture_hidden_{kind}_rule"),
            });
        }
        if let Some(c) = &self.stop_capture {
            parts.push(format!("stop_capture={}", crate::print::quote_str(c)));
        }
        if !self.excludes.is_empty() {
            // Brackets escaped: the rule head's option list ends at the first `]`.
            let items: Vec<String> = self
                .excludes
                .iter()
                .map(|e| crate::print::quote_str(e).replace('[', "\\x5b").replace(']', "\\x5d"))
                .collect();
            parts.push(format!("excludes=({})", items.join(", ")));
        }
        if self.lazy {
            parts.push("lazy".to_owned());
        }
        if let Some(t) = self.temperature() {
            parts.push(format!("temperature={}", format_temperature(t)));
        }
        parts.join(", ")
    }
}

/// The shortest decimal that parses back to the same `f32` (Rust's `Display` of `f32`), always
/// with a decimal point or exponent so it reads as a number of the option's type.
pub fn format_temperature(t: f32) -> String {
    let s = format!("{t}");
    if s.contains(['.', 'e', 'E']) {
        s
    } else {
        format!("{s}.0")
    }
}

/// A temperature value checked: finite and `>= 0`.
pub fn check_temperature(t: f64) -> std::result::Result<f32, String> {
    if !t.is_finite() || t < 0.0 {
        return Err(format!("temperature must be finite and >= 0, got {t}"));
    }
    let f = t as f32;
    if !f.is_finite() {
        return Err(format!("temperature {t} is out of the float32 range"));
    }
    Ok(f)
}

/// The JSON object of `o` for [`crate::serialize`].
pub(crate) fn options_to_json(o: &RuleOptions) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    if let Some(n) = o.max_tokens {
        m.insert("max_tokens".into(), n.into());
    }
    if let Some(n) = o.max_chars {
        m.insert("max_chars".into(), n.into());
    }
    if let Some(c) = &o.capture {
        m.insert("capture".into(), c.clone().into());
    }
    match o.hidden_suffix {
        Some((HiddenStop::Bytes(n), stop)) => {
            m.insert(if stop { "hidden_stop_bytes" } else { "hidden_suffix_bytes" }.into(), n.into());
        }
        Some((HiddenStop::LastRule, stop)) => {
            m.insert(if stop { "hidden_stop_rule" } else { "hidden_suffix_rule" }.into(), true.into());
        }
        None => {}
    }
    if let Some(c) = &o.stop_capture {
        m.insert("stop_capture".into(), c.clone().into());
    }
    if !o.excludes.is_empty() {
        m.insert("excludes".into(), o.excludes.clone().into());
    }
    if o.lazy {
        m.insert("lazy".into(), true.into());
    }
    if let Some(t) = o.temperature() {
        m.insert("temperature".into(), f64::from(t).into());
    }
    serde_json::Value::Object(m)
}

/// Reads [`options_to_json`]'s output, checking every value.
pub(crate) fn options_from_json(v: &serde_json::Value) -> std::result::Result<RuleOptions, String> {
    let obj = v.as_object().ok_or("not a JSON object")?;
    let mut o = RuleOptions::default();
    let count = |k: &str, x: &serde_json::Value| -> std::result::Result<u32, String> {
        x.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| format!("'{k}' is not a count below 2^32"))
    };
    for (k, x) in obj {
        match k.as_str() {
            "max_tokens" => o.max_tokens = Some(count(k, x)?),
            "max_chars" => o.max_chars = Some(count(k, x)?),
            "capture" => {
                let c = x.as_str().filter(|c| !c.is_empty()).ok_or("'capture' is not a non-empty string")?;
                o.capture = Some(c.to_owned());
            }
            "lazy" => o.lazy = x.as_bool().ok_or("'lazy' is not a boolean")?,
            "hidden_stop_bytes" => o.hidden_suffix = Some((HiddenStop::Bytes(count(k, x)?), true)),
            "hidden_suffix_bytes" => o.hidden_suffix = Some((HiddenStop::Bytes(count(k, x)?), false)),
            "hidden_stop_rule" | "hidden_suffix_rule" => {
                if x.as_bool() != Some(true) {
                    return Err(format!("'{k}' is not true"));
                }
                o.hidden_suffix = Some((HiddenStop::LastRule, k == "hidden_stop_rule"));
            }
            "stop_capture" => {
                let c = x.as_str().filter(|c| !c.is_empty()).ok_or("'stop_capture' is not a non-empty string")?;
                o.stop_capture = Some(c.to_owned());
            }
            "excludes" => {
                let items = x.as_array().ok_or("'excludes' is not an array")?;
                let mut ex = Vec::new();
                for it in items {
                    ex.push(
                        it.as_str().filter(|e| !e.is_empty()).ok_or("an exclude is not a non-empty string")?.to_owned(),
                    );
                }
                o.set_excludes(ex);
            }
            "temperature" => {
                let t = x.as_f64().ok_or("'temperature' is not a number")?;
                o.set_temperature(check_temperature(t)?);
            }
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_stops_round_trip_through_json_and_ebnf() {
        for h in [(HiddenStop::Bytes(3), true), (HiddenStop::LastRule, true), (HiddenStop::LastRule, false)] {
            let o = RuleOptions { hidden_suffix: Some(h), lazy: true, ..Default::default() };
            assert_eq!(options_from_json(&options_to_json(&o)), Ok(o.clone()));
            let text = format!("root ::= x\nx[{}] ::= a b\na ::= \"a\"\nb ::= \"b\"", o.to_ebnf("x"));
            let g = crate::ebnf::parse_ebnf(&text, "root").unwrap();
            assert_eq!(g.all_rule_options()[0].1, o, "{text}");
        }
        assert!(options_from_json(&serde_json::json!({"hidden_stop_rule": false})).is_err());
        let mut o = RuleOptions::default();
        o.set_excludes(vec!["b]\"x".to_owned(), "a\n".to_owned(), "a\n".to_owned()]);
        assert_eq!(o.excludes, ["a\n", "b]\"x"]);
        assert_eq!(options_from_json(&options_to_json(&o)), Ok(o.clone()));
        let text = format!("root ::= x\nx[{}] ::= [a-z]*", o.to_ebnf("x"));
        let g = crate::ebnf::parse_ebnf(&text, "root").unwrap();
        assert_eq!(g.all_rule_options()[0].1, o, "{text}");
        assert!(options_from_json(&serde_json::json!({"excludes": [""]})).is_err());
        // The flag needs the body `a b` of two rule references.
        let g = crate::ebnf::parse_ebnf("root ::= x\nx[capture_hidden_stop_rule, lazy] ::= \"ab\"", "root").unwrap();
        let e = crate::compiler::Automata::build(&g).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::InvalidGrammar, "{e}");
    }
}
