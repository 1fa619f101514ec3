//! The option list of an XGrammar-dialect rule: `name[max_tokens=N, max_chars=N, capture,
//! capture="n", lazy, temperature=0.7] ::= ...` (see [`crate::rule_options`]).

use super::cursor::Cursor;
use crate::error::{ErrorKind, Result};
use crate::rule_options::{check_temperature, RuleOptions};

/// XGrammar's printer-only options: recognised, and refused as `Unsupported`.
const INTERNAL: &[&str] = &[
    "capture_hidden_suffix_bytes",
    "capture_hidden_stop_bytes",
    "capture_hidden_body_rule_id",
    "capture_hidden_marker_rule_id",
    "stop_capture",
];

/// Reads `[...]` (the cursor is on `[`) after the rule name `rule_name`.
pub(super) fn parse(cur: &mut Cursor<'_>, rule_name: &str) -> Result<RuleOptions> {
    debug_assert_eq!(cur.peek(), Some(b'['));
    cur.pos += 1;
    let mut o = RuleOptions::default();
    let mut seen: Vec<&str> = Vec::new();
    cur.skip_blanks();
    if cur.peek() == Some(b']') {
        cur.pos += 1;
        return Ok(o);
    }
    loop {
        cur.skip_blanks();
        let start = cur.pos;
        let n = cur.bytes[start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
        if n == 0 {
            return Err(cur.expected("a rule option (max_tokens, max_chars, capture, lazy, temperature)"));
        }
        let text: &str = cur.text;
        let key = &text[start..start + n];
        cur.pos += n;
        if seen.contains(&key) {
            return Err(cur.error_at(ErrorKind::EbnfSyntax, start, format!("the rule option '{key}' is given twice")));
        }
        seen.push(key);
        cur.skip_blanks();
        let has_value = cur.peek() == Some(b'=');
        if has_value {
            cur.pos += 1;
            cur.skip_blanks();
        }
        let vpos = cur.pos;
        match key {
            "max_tokens" | "max_chars" => {
                if !has_value {
                    return Err(cur.expected(&format!("'=' and a count after '{key}'")));
                }
                let d = cur.bytes[vpos..].iter().take_while(|b| b.is_ascii_digit()).count();
                let v: Option<u32> = text[vpos..vpos + d].parse().ok();
                let Some(v) = v.filter(|_| d > 0) else {
                    return Err(cur.error_at(
                        ErrorKind::EbnfSyntax,
                        vpos,
                        format!("'{key}' needs a count from 0 to {}", u32::MAX),
                    ));
                };
                cur.pos += d;
                if key == "max_tokens" {
                    o.max_tokens = Some(v);
                } else {
                    o.max_chars = Some(v);
                }
            }
            "capture" => {
                if has_value {
                    if cur.peek() != Some(b'"') {
                        return Err(cur.expected("a string literal naming the capture"));
                    }
                    let bytes = cur.string_literal()?;
                    let name = String::from_utf8(bytes).map_err(|_| {
                        cur.error_at(ErrorKind::EbnfSyntax, vpos, "the capture name is not valid UTF-8")
                    })?;
                    if name.is_empty() {
                        return Err(cur.error_at(ErrorKind::EbnfSyntax, vpos, "the capture name is empty"));
                    }
                    o.capture = Some(name);
                } else {
                    o.capture = Some(rule_name.to_owned());
                }
            }
            "lazy" => {
                if has_value {
                    return Err(cur.error_at(ErrorKind::EbnfSyntax, vpos, "'lazy' takes no value"));
                }
                o.lazy = true;
            }
            "temperature" => {
                if !has_value {
                    return Err(cur.expected("'=' and a number after 'temperature'"));
                }
                let d = cur.bytes[vpos..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
                    .count();
                let t: Option<f64> = text[vpos..vpos + d].parse().ok();
                let Some(t) = t.filter(|_| d > 0) else {
                    return Err(cur.error_at(ErrorKind::EbnfSyntax, vpos, "'temperature' needs a number"));
                };
                let t = check_temperature(t).map_err(|m| cur.error_at(ErrorKind::InvalidGrammar, vpos, m))?;
                cur.pos += d;
                o.set_temperature(t);
            }
            k if INTERNAL.contains(&k) => {
                return Err(cur.error_at(
                    ErrorKind::Unsupported,
                    start,
                    format!("the internal rule option '{k}' is not supported"),
                ));
            }
            k => {
                return Err(cur.error_at(
                    ErrorKind::EbnfSyntax,
                    start,
                    format!(
                        "unknown rule option '{k}' (expected max_tokens, max_chars, capture, lazy or temperature)"
                    ),
                ));
            }
        }
        cur.skip_blanks();
        match cur.peek() {
            Some(b',') => cur.pos += 1,
            Some(b']') => {
                cur.pos += 1;
                return Ok(o);
            }
            _ => return Err(cur.expected("',' or ']' in the rule options")),
        }
    }
}
