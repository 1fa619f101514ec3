//! Versioned JSON form of a [`Grammar`], for the Python API's `serialize_json` /
//! `deserialize_json`. Deserialization trusts nothing: every id, range and bound is checked before
//! the grammar is rebuilt through [`GrammarBuilder`], which checks the IR invariants again.
//!
//! Format (`"__VERSION__": "grammask-2"`; `grammask-1`, the same format without token
//! expressions, is still read):
//! `{"__VERSION__", "root": rule index, "rules": [{"name", "body": expr, "lookahead": expr|null}],
//! "exprs": [expr...]}` where an expression is one of `["bytes", "<hex>"]`,
//! `["class", [[lo, hi], ...]]`, `["seq", [ids]]`, `["choice", [ids]]`,
//! `["repeat", id, min, max|null]`, `["rule", rule index]`, `["json_string_in", [strings]]`,
//! `["json_string_except", [strings]]`, `["token", [ids]]`, `["exclude_token", [ids]]` (version
//! 2); children precede parents.
//!
//! Rules may carry `"options": {"max_tokens", "max_chars", "capture", "lazy", "temperature"}`
//! (each key optional; [`crate::rule_options`], version 2). A grammar in version 1 has neither
//! token expressions nor options.
//!
//! A compiled grammar (`"__VERSION__": "grammask-compiled-2"`, `-1` still read) is stored as
//! `{"__VERSION__", "grammar": <the grammar's form above>, "tokenizer_metadata": <the vocabulary's
//! metadata JSON>}`: the automata and caches are rebuilt on load, and the vocabulary (whose
//! metadata must match) is supplied by the caller.

use crate::compiled::CompiledGrammar;
use crate::error::{Error, ErrorKind, Result};
use crate::grammar::{Expr, ExprId, Grammar, GrammarBuilder, RuleId};
use crate::limits;
use crate::vocab::Vocabulary;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::fmt::Write;
use std::sync::Arc;

/// The format version written and accepted.
/// Version 2 added token expressions (`Token(...)`, `ExcludeToken(...)`).
pub const SERIALIZATION_VERSION: &str = "grammask-2";

/// Older versions this build still reads (their formats are subsets of the current one).
const OLDER_VERSIONS: &[&str] = &["grammask-1"];

const VERSION_MISMATCH: &str = "serialization version mismatch";

/// True if `e` came from [`Grammar::from_json`] reading another format version (Python maps it
/// to `DeserializeVersionError`; other `Deserialize` errors are `DeserializeFormatError`).
#[must_use]
pub fn is_version_mismatch(e: &Error) -> bool {
    e.kind() == ErrorKind::Deserialize && e.message().starts_with(VERSION_MISMATCH)
}

impl Grammar {
    /// The grammar as versioned JSON (see the module doc).
    #[must_use]
    pub fn to_json(&self) -> String {
        let exprs: Vec<Value> = self
            .exprs()
            .iter()
            .map(|e| match e {
                Expr::Bytes(b) => {
                    let mut hex = String::with_capacity(b.len() * 2);
                    for x in &**b {
                        let _ = write!(hex, "{x:02x}");
                    }
                    json!(["bytes", hex])
                }
                Expr::CharClass(r) => json!(["class", r.iter().map(|&(a, b)| json!([a, b])).collect::<Vec<_>>()]),
                Expr::Seq(xs) => json!(["seq", xs.iter().map(|x| x.0).collect::<Vec<_>>()]),
                Expr::Choice(xs) => json!(["choice", xs.iter().map(|x| x.0).collect::<Vec<_>>()]),
                Expr::Repeat { expr, min, max } => json!(["repeat", expr.0, min, max]),
                Expr::RuleRef(r) => json!(["rule", r.0]),
                Expr::JsonStringIn(keys) => json!(["json_string_in", keys]),
                Expr::JsonStringExcept(keys) => json!(["json_string_except", keys]),
                Expr::Token(ids) => json!(["token", ids]),
                Expr::ExcludeToken(ids) => json!(["exclude_token", ids]),
            })
            .collect();
        let rules: Vec<Value> = self
            .rules()
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut v = json!({"name": r.name, "body": r.body.0, "lookahead": r.lookahead.map(|l| l.0)});
                if let Some(o) = self.rule_options(RuleId(i as u32)) {
                    v["options"] = crate::rule_options::options_to_json(o);
                }
                v
            })
            .collect();
        json!({"__VERSION__": SERIALIZATION_VERSION, "root": self.root().0, "rules": rules, "exprs": exprs}).to_string()
    }

    /// Reads the output of [`Grammar::to_json`]. Text that is not JSON is `InvalidJson`; a wrong
    /// version or structure is `Deserialize`, with a message naming the offending field.
    pub fn from_json(s: &str) -> Result<Grammar> {
        let v: Value =
            serde_json::from_str(s).map_err(|e| Error::new(ErrorKind::InvalidJson, format!("invalid JSON: {e}")))?;
        let obj = v.as_object().ok_or_else(|| bad("the serialized grammar is not a JSON object"))?;
        match obj.get("__VERSION__") {
            Some(Value::String(ver)) if ver == SERIALIZATION_VERSION || OLDER_VERSIONS.contains(&ver.as_str()) => {}
            Some(Value::String(ver)) => {
                return Err(bad(format!(
                    "{VERSION_MISMATCH}: found '{ver}', this build reads '{SERIALIZATION_VERSION}'"
                )))
            }
            _ => return Err(bad("missing '__VERSION__' string: not a serialized grammask grammar")),
        }
        let rules = field(obj, "rules")?.as_array().ok_or_else(|| bad("'rules' is not an array"))?;
        let exprs = field(obj, "exprs")?.as_array().ok_or_else(|| bad("'exprs' is not an array"))?;
        let n_rules = rules.len();
        let root = index(field(obj, "root")?, n_rules, "'root'")?;

        let mut b = GrammarBuilder::new();
        let mut names = Vec::with_capacity(n_rules);
        let mut seen = HashSet::with_capacity(n_rules);
        for (i, r) in rules.iter().enumerate() {
            let name =
                r.get("name").and_then(Value::as_str).ok_or_else(|| bad(format!("rules[{i}].name is not a string")))?;
            if !seen.insert(name) {
                return Err(bad(format!("rules[{i}]: rule name '{name}' is used twice")));
            }
            let id = b.rule_id(name);
            debug_assert_eq!(id, RuleId(i as u32));
            names.push(name);
        }
        for (i, e) in exprs.iter().enumerate() {
            let expr = read_expr(e, i, n_rules).map_err(|m| bad(format!("exprs[{i}]: {m}")))?;
            b.add(expr);
        }
        for (i, r) in rules.iter().enumerate() {
            let body =
                ExprId(index(r.get("body").unwrap_or(&Value::Null), exprs.len(), &format!("rules[{i}].body"))? as u32);
            let lookahead = match r.get("lookahead") {
                None | Some(Value::Null) => None,
                Some(l) => Some(ExprId(index(l, exprs.len(), &format!("rules[{i}].lookahead"))? as u32)),
            };
            let id = b.define(names[i], body, lookahead)?;
            if let Some(o) = r.get("options") {
                let o =
                    crate::rule_options::options_from_json(o).map_err(|m| bad(format!("rules[{i}].options: {m}")))?;
                b.set_rule_options(id, o);
            }
        }
        b.build(names[root]).map_err(|e| match e.kind() {
            ErrorKind::LimitExceeded => e,
            _ => bad(format!("malformed grammar: {}", e.message())),
        })
    }
}

fn bad(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Deserialize, message)
}

fn field<'v>(obj: &'v serde_json::Map<String, Value>, key: &str) -> Result<&'v Value> {
    obj.get(key).ok_or_else(|| bad(format!("missing field '{key}'")))
}

/// A JSON number that is an index below `len`.
fn index(v: &Value, len: usize, what: &str) -> Result<usize> {
    match v.as_u64() {
        Some(i) if usize::try_from(i).is_ok_and(|i| i < len) && u32::try_from(i).is_ok() => Ok(i as usize),
        Some(i) => Err(bad(format!("{what} = {i} is out of range (0..{len})"))),
        None => Err(bad(format!("{what} is not a non-negative integer"))),
    }
}

fn u32_of(v: &Value, what: &str) -> Result<u32, String> {
    v.as_u64().and_then(|x| u32::try_from(x).ok()).ok_or_else(|| format!("{what} is not a 32-bit non-negative integer"))
}

/// Children must precede expression `i`; rule references must be below `n_rules`.
fn read_expr(e: &Value, i: usize, n_rules: usize) -> Result<Expr, String> {
    let a = e.as_array().ok_or("not an array")?;
    let tag = a.first().and_then(Value::as_str).ok_or("missing tag string")?;
    let arg = |k: usize| a.get(k).ok_or_else(|| format!("'{tag}' is missing argument {k}"));
    let child = |v: &Value| -> Result<ExprId, String> {
        let c = u32_of(v, "child id")?;
        if (c as usize) < i {
            Ok(ExprId(c))
        } else {
            Err(format!("child {c} does not precede expression {i}"))
        }
    };
    let children = |v: &Value| -> Result<Box<[ExprId]>, String> {
        v.as_array().ok_or("children are not an array")?.iter().map(child).collect()
    };
    Ok(match tag {
        "bytes" => {
            let hex = arg(1)?.as_str().ok_or("bytes are not a hex string")?;
            if hex.len() % 2 != 0 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err("bytes are not a hex string".into());
            }
            let bytes: Vec<u8> =
                (0..hex.len()).step_by(2).map(|k| u8::from_str_radix(&hex[k..k + 2], 16).unwrap()).collect();
            Expr::Bytes(bytes.into())
        }
        "class" => {
            let mut ranges = Vec::new();
            for r in arg(1)?.as_array().ok_or("ranges are not an array")? {
                let p = r.as_array().filter(|p| p.len() == 2).ok_or("a range is not a [lo, hi] pair")?;
                ranges.push((u32_of(&p[0], "range start")?, u32_of(&p[1], "range end")?));
            }
            let ok = ranges.iter().all(|&(lo, hi)| lo <= hi && hi <= 0x10_FFFF)
                && ranges.windows(2).all(|w| w[0].1.saturating_add(1) < w[1].0);
            if !ok {
                return Err("class ranges are not sorted, disjoint, non-adjacent ranges within U+0000..U+10FFFF".into());
            }
            Expr::CharClass(ranges.into())
        }
        "seq" => Expr::Seq(children(arg(1)?)?),
        "choice" => Expr::Choice(children(arg(1)?)?),
        "repeat" => {
            let expr = child(arg(1)?)?;
            let min = u32_of(arg(2)?, "repeat min")?;
            let max = match arg(3)? {
                Value::Null => None,
                v => Some(u32_of(v, "repeat max")?),
            };
            if min > limits::MAX_REPEAT_BOUND || max.is_some_and(|m| m > limits::MAX_REPEAT_BOUND || m < min) {
                return Err(format!("repeat bounds {min}..{max:?} are invalid or above {}", limits::MAX_REPEAT_BOUND));
            }
            Expr::Repeat { expr, min, max }
        }
        "rule" => {
            let r = u32_of(arg(1)?, "rule id")?;
            if r as usize >= n_rules {
                return Err(format!("rule id {r} is out of range (0..{n_rules})"));
            }
            Expr::RuleRef(RuleId(r))
        }
        "json_string_in" | "json_string_except" => {
            let mut keys: Vec<Box<str>> = Vec::new();
            for k in arg(1)?.as_array().ok_or("excluded strings are not an array")? {
                keys.push(k.as_str().ok_or("an excluded string is not a string")?.into());
            }
            if !keys.windows(2).all(|w| w[0] < w[1]) {
                return Err("excluded strings are not sorted and distinct".into());
            }
            if tag == "json_string_in" {
                Expr::JsonStringIn(keys.into())
            } else {
                Expr::JsonStringExcept(keys.into())
            }
        }
        "token" | "exclude_token" => {
            let mut ids: Vec<u32> = Vec::new();
            for k in arg(1)?.as_array().ok_or("token ids are not an array")? {
                ids.push(u32_of(k, "token id")?);
            }
            if !ids.windows(2).all(|w| w[0] < w[1]) {
                return Err("token ids are not sorted and distinct".into());
            }
            if tag == "token" {
                Expr::Token(ids.into())
            } else {
                Expr::ExcludeToken(ids.into())
            }
        }
        t => return Err(format!("unknown expression tag '{t}'")),
    })
}

/// Serialization format version of compiled grammars.
pub const COMPILED_VERSION: &str = "grammask-compiled-2";

/// Older compiled-grammar versions this build still reads.
const OLDER_COMPILED_VERSIONS: &[&str] = &["grammask-compiled-1"];

impl CompiledGrammar {
    /// JSON with the grammar and the tokenizer metadata (not the vocabulary).
    #[must_use]
    pub fn serialize_json(&self) -> String {
        let g: Value = serde_json::from_str(&self.grammar().to_json()).unwrap_or_default();
        let meta: Value = serde_json::from_str(&self.vocab().metadata_json()).unwrap_or_default();
        json!({"grammar": g, "tokenizer_metadata": meta, "__VERSION__": COMPILED_VERSION}).to_string()
    }

    /// Rebuilds a compiled grammar from [`CompiledGrammar::serialize_json`]'s output for `vocab`,
    /// which must have the metadata it was compiled with.
    pub fn deserialize_json(text: &str, vocab: &Arc<Vocabulary>) -> Result<CompiledGrammar> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| Error::new(ErrorKind::InvalidJson, format!("invalid JSON: {e}")))?;
        let version = v.get("__VERSION__").and_then(|x| x.as_str()).unwrap_or("");
        if version != COMPILED_VERSION && !OLDER_COMPILED_VERSIONS.contains(&version) {
            return Err(Error::new(
                ErrorKind::Deserialize,
                format!("wrong version of serialized compiled grammar: got '{version}', expected '{COMPILED_VERSION}'"),
            ));
        }
        let meta = v.get("tokenizer_metadata").map(ToString::to_string).unwrap_or_default();
        let want: Value = serde_json::from_str(&vocab.metadata_json()).unwrap_or_default();
        let got: Value = serde_json::from_str(&meta).unwrap_or_default();
        if want != got {
            return Err(Error::new(
                ErrorKind::Deserialize,
                format!("tokenizer metadata mismatch: the grammar was compiled for {got}, this tokenizer is {want}"),
            ));
        }
        let g = v.get("grammar").map(ToString::to_string).unwrap_or_default();
        CompiledGrammar::new(&Grammar::from_json(&g)?, vocab)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::builtin_json_grammar;
    use crate::ebnf::parse_ebnf;

    #[test]
    fn round_trip() {
        for g in [
            builtin_json_grammar(),
            parse_ebnf("root ::= a (= [^x])\na ::= \"é\\x00\" a? | [a-z]{2,5} | () | []\n", "root").unwrap(),
            parse_ebnf("x ::= \"a\"\nroot ::= x* x+ x{0,3} x{7,}", "root").unwrap(),
        ] {
            let s = g.to_json();
            assert!(s.contains("\"__VERSION__\":\"grammask-2\""));
            assert_eq!(Grammar::from_json(&s).unwrap(), g);
        }
        // Raw bytes (not UTF-8) survive too.
        let mut b = GrammarBuilder::new();
        let e = b.bytes(&[0xff, 0x00, 0x80]);
        b.define("root", e, None).unwrap();
        let g = b.build("root").unwrap();
        assert_eq!(Grammar::from_json(&g.to_json()).unwrap(), g);
    }

    fn err(s: &str) -> Error {
        Grammar::from_json(s).unwrap_err()
    }

    #[test]
    fn rejects_malformed_input() {
        assert_eq!(err("{").kind(), ErrorKind::InvalidJson);
        assert_eq!(err(&"[".repeat(100_000)).kind(), ErrorKind::InvalidJson);
        let cases = [
            ("[]", "not a JSON object"),
            ("{}", "missing '__VERSION__'"),
            (r#"{"__VERSION__": "v16"}"#, "version mismatch: found 'v16'"),
            (r#"{"__VERSION__": "grammask-1"}"#, "missing field 'rules'"),
            (r#"{"__VERSION__": "grammask-1", "rules": [], "exprs": [], "root": 0}"#, "'root' = 0 is out of range"),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 1}], "exprs": [["bytes", ""]], "root": 0}"#,
                "rules[0].body = 1 is out of range",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 0}], "exprs": [["seq", [0]]], "root": 0}"#,
                "exprs[0]: child 0 does not precede",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 0}], "exprs": [["rule", 3]], "root": 0}"#,
                "rule id 3 is out of range",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 0}], "exprs": [["class", [[5, 3]]]], "root": 0}"#,
                "class ranges",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 0}], "exprs": [["class", [[0, 3], [4, 5]]]], "root": 0}"#,
                "class ranges",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 0}], "exprs": [["bytes", "abc"]], "root": 0}"#,
                "hex string",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 1}], "exprs": [["bytes", ""], ["repeat", 0, 3, 2]], "root": 0}"#,
                "repeat bounds",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 1}], "exprs": [["bytes", ""], ["repeat", 0, 0, 4294967296]], "root": 0}"#,
                "32-bit",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "a", "body": 0}, {"name": "a", "body": 0}], "exprs": [["bytes", ""]], "root": 0}"#,
                "used twice",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 0}], "exprs": [["nope"]], "root": 0}"#,
                "unknown expression tag 'nope'",
            ),
            (
                r#"{"__VERSION__": "grammask-1", "rules": [{"name": "root", "body": 0}], "exprs": [["repeat"]], "root": 0}"#,
                "missing argument 1",
            ),
        ];
        assert!(is_version_mismatch(&err(r#"{"__VERSION__": "v16"}"#)));
        assert!(!is_version_mismatch(&err("{}")));
        for (s, needle) in cases {
            let e = err(s);
            assert_eq!(e.kind(), ErrorKind::Deserialize, "{s}: {e}");
            assert!(e.message().contains(needle), "{s}: {e}");
        }
    }
}
