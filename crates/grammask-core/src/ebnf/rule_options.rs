//! The option list of an XGrammar-dialect rule: `name[max_tokens=N, max_chars=N, capture,
//! capture="n", lazy, temperature=0.7] ::= ...` (see [`crate::rule_options`]).

use super::cursor::Cursor;
use crate::error::{ErrorKind, Result};
use crate::rule_options::{check_temperature, HiddenStop, RuleOptions};

/// XGrammar's printer-only options grammask has no counterpart for: recognised, and refused as
/// `Unsupported`. (`capture_hidden_stop_bytes=N`, `capture_hidden_suffix_bytes=N`,
/// `capture_hidden_stop_rule`, `capture_hidden_suffix_rule` and `stop_capture="n"`, written for
/// Lark's `stop=`/`suffix=`, are read.)
const INTERNAL: &[&str] = &["capture_hidden_body_rule_id", "capture_hidden_marker_rule_id"];

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
            "capture_hidden_stop_bytes" | "capture_hidden_suffix_bytes" => {
                let d = cur.bytes[vpos..].iter().take_while(|b| b.is_ascii_digit()).count();
                let v: Option<u32> = text[vpos..vpos + d].parse().ok();
                let Some(v) = v.filter(|_| d > 0 && has_value) else {
                    return Err(cur.error_at(ErrorKind::EbnfSyntax, vpos, format!("'{key}' needs a byte count")));
                };
                if o.hidden_suffix.is_some() {
                    return Err(cur.error_at(ErrorKind::EbnfSyntax, start, "only one hidden suffix per rule"));
                }
                cur.pos += d;
                o.hidden_suffix = Some((HiddenStop::Bytes(v), key == "capture_hidden_stop_bytes"));
            }
            "capture_hidden_stop_rule" | "capture_hidden_suffix_rule" => {
                if has_value {
                    return Err(cur.error_at(ErrorKind::EbnfSyntax, vpos, format!("'{key}' takes no value")));
                }
                if o.hidden_suffix.is_some() {
                    return Err(cur.error_at(ErrorKind::EbnfSyntax, start, "only one hidden suffix per rule"));
                }
                o.hidden_suffix = Some((HiddenStop::LastRule, key == "capture_hidden_stop_rule"));
            }
            "stop_capture" => {
                if !has_value || cur.peek() != Some(b'"') {
                    return Err(cur.expected("'=' and a string literal naming the stop capture"));
                }
                let bytes = cur.string_literal()?;
                match String::from_utf8(bytes) {
                    Ok(n) if !n.is_empty() => o.stop_capture = Some(n),
                    _ => return Err(cur.error_at(ErrorKind::EbnfSyntax, vpos, "the stop capture name is empty")),
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
            "excludes" => {
                if !has_value || cur.peek() != Some(b'(') {
                    return Err(cur.expected("'=' and a parenthesized list of string literals after 'excludes'"));
                }
                cur.pos += 1;
                let mut ex = Vec::new();
                loop {
                    cur.skip_blanks();
                    if cur.peek() != Some(b'"') {
                        return Err(cur.expected("a string literal (an excluded string)"));
                    }
                    let at = cur.pos;
                    let bytes = cur.string_literal()?;
                    match String::from_utf8(bytes) {
                        Ok(e) if !e.is_empty() => ex.push(e),
                        _ => return Err(cur.error_at(ErrorKind::EbnfSyntax, at, "an excluded string is empty")),
                    }
                    cur.skip_blanks();
                    match cur.peek() {
                        Some(b',') => cur.pos += 1,
                        Some(b')') => {
                            cur.pos += 1;
                            break;
                        }
                        _ => return Err(cur.expected("',' or ')'")),
                    }
                }
                o.set_excludes(ex);
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
                    format!("unknown rule option '{k}' (expected max_tokens, max_chars, capture, lazy or temperature)"),
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

#[cfg(test)]
mod tests {
    use crate::ebnf::parse_ebnf;
    use crate::error::{ErrorKind, Location};
    use crate::grammar::{Grammar, RuleId};
    use crate::rule_options::RuleOptions;

    fn opts(g: &Grammar, name: &str) -> RuleOptions {
        g.rule_options(g.rule_by_name(name).unwrap()).cloned().unwrap_or_default()
    }

    #[test]
    fn options_parse_print_and_round_trip() {
        let text = "root ::= x\nx[max_tokens=4, max_chars=3, capture, lazy, temperature=0.7] ::= \"a\"+\n\
                    y[ capture = \"n\" ,temperature=1e-1 ] ::= \"b\"\nz[] ::= \"c\"";
        let g = parse_ebnf(text, "root").unwrap();
        let x = opts(&g, "x");
        assert_eq!((x.max_tokens, x.max_chars, x.capture.as_deref(), x.lazy), (Some(4), Some(3), Some("x"), true));
        assert_eq!(x.temperature(), Some(0.7));
        let y = opts(&g, "y");
        assert_eq!((y.capture.as_deref(), y.temperature()), (Some("n"), Some(0.1)));
        assert!(g.rule_options(g.rule_by_name("z").unwrap()).is_none());
        assert!(g.rule_options(RuleId(0)).is_none());
        let printed = g.to_string();
        assert!(printed.contains("x[max_tokens=4, max_chars=3, capture, lazy, temperature=0.7] ::= "), "{printed}");
        assert!(printed.contains("y[capture=\"n\", temperature=0.1] ::= "), "{printed}");
        let back = parse_ebnf(&printed, "root").unwrap();
        assert_eq!(back.to_string(), printed);
        assert_eq!(back.all_rule_options(), g.all_rule_options());
        // Serialization keeps them (format version grammask-2).
        let json = g.to_json();
        assert!(json.contains("\"grammask-2\""), "{json}");
        assert_eq!(Grammar::from_json(&json).unwrap().all_rule_options(), g.all_rule_options());
    }

    #[test]
    fn bad_options_are_typed_errors() {
        let cases: &[(&str, ErrorKind, u32, u32, &str)] = &[
            ("root[nope] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 6, "unknown rule option 'nope'"),
            ("root[max_chars] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 15, "'=' and a count"),
            ("root[max_chars=-1] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 16, "needs a count"),
            ("root[max_chars=99999999999] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 16, "needs a count"),
            ("root[temperature=-1] ::= \"a\"", ErrorKind::InvalidGrammar, 1, 18, ">= 0"),
            ("root[temperature=1e999] ::= \"a\"", ErrorKind::InvalidGrammar, 1, 18, "finite"),
            ("root[temperature=x] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 18, "needs a number"),
            ("root[lazy=1] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 11, "takes no value"),
            ("root[lazy, lazy] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 12, "given twice"),
            ("root[capture=\"\"] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 14, "empty"),
            ("root[capture=n] ::= \"a\"", ErrorKind::EbnfSyntax, 1, 14, "string literal"),
            ("root[lazy ::= \"a\"", ErrorKind::EbnfSyntax, 1, 11, "',' or ']'"),
            ("root[capture_hidden_marker_rule_id=1] ::= \"a\"", ErrorKind::Unsupported, 1, 6, "internal rule option"),
        ];
        for &(text, kind, line, col, needle) in cases {
            let e = parse_ebnf(text, "root").expect_err(text);
            let at = match e.location() {
                Some(Location::Text { line, column }) => (*line, *column),
                _ => (0, 0),
            };
            assert_eq!((e.kind(), at), (kind, (line, col)), "{text}: {e}");
            assert!(e.message().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn serialized_options_are_checked() {
        let g = parse_ebnf("root[capture, temperature=0.5] ::= \"a\"", "root").unwrap();
        let json = g.to_json();
        for (from, to, needle) in [
            ("\"temperature\":0.5", "\"temperature\":-1.0", "finite"),
            ("\"capture\":\"root\"", "\"capture\":3", "'capture'"),
            ("\"capture\":\"root\"", "\"bogus\":1", "unknown option"),
        ] {
            assert!(json.contains(from), "{json}");
            let e = Grammar::from_json(&json.replace(from, to)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Deserialize, "{e}");
            assert!(e.message().contains(needle), "{e}");
        }
    }
}
