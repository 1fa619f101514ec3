//! Lark rule options (`name[lazy, max_chars=N, max_tokens=N, capture, capture="n",
//! temperature=x, stop="s", suffix="s", stop_capture="n"]: ...`) to [`RuleOptions`].
//!
//! `stop="s"` and `suffix="s"` (llguidance): the rule is its body followed by `s`, matched lazily
//! (it ends at the first place where the body can end followed by `s`); its capture leaves `s`
//! out, and `stop_capture="n"` captures `s` under `n`. As in XGrammar, options are accepted on
//! rules only (not on uppercase terminals), and a `stop`/`suffix` must be a string literal.

use super::syntax::{err_at, RuleOption};
use crate::error::{ErrorKind, Result};
use crate::rule_options::{check_temperature, RuleOptions};

/// The options of rule `name`, and the `stop`/`suffix` string to append to its body.
pub(super) fn lark_rule_options(
    text: &str,
    name: &str,
    is_terminal: bool,
    opts: &[RuleOption],
) -> Result<(RuleOptions, Option<Vec<u8>>)> {
    let mut o = RuleOptions::default();
    let mut stop: Option<Vec<u8>> = None;
    let mut seen: Vec<&str> = Vec::new();
    for opt in opts {
        let err = |kind, msg: String| err_at(text, kind, opt.pos, msg);
        if is_terminal {
            return Err(err(
                ErrorKind::InvalidGrammar,
                format!("rule options are only supported on rules, not on the terminal '{name}'"),
            ));
        }
        if seen.contains(&opt.name.as_str()) {
            return Err(err(ErrorKind::InvalidGrammar, format!("the rule option '{}' is given twice", opt.name)));
        }
        seen.push(&opt.name);
        let value = opt.value.as_deref();
        let count = || -> Result<u32> {
            value.filter(|_| !opt.value_is_str).and_then(|v| v.parse::<u32>().ok()).ok_or_else(|| {
                err(ErrorKind::InvalidGrammar, format!("the rule option '{}' needs a count (0 to 2^32-1)", opt.name))
            })
        };
        let string = || -> Result<String> {
            match value {
                Some(v) if opt.value_is_str && !v.is_empty() => Ok(v.to_owned()),
                _ => Err(err(
                    ErrorKind::InvalidGrammar,
                    format!("the rule option '{}' needs a non-empty string literal", opt.name),
                )),
            }
        };
        match opt.name.as_str() {
            "lazy" => {
                if value.is_some() {
                    return Err(err(ErrorKind::InvalidGrammar, "the rule option 'lazy' takes no value".to_owned()));
                }
                o.lazy = true;
            }
            "max_tokens" => o.max_tokens = Some(count()?),
            "max_chars" => o.max_chars = Some(count()?),
            "capture" => {
                o.capture = Some(if value.is_some() { string()? } else { name.to_owned() });
            }
            "temperature" => {
                let t = value.filter(|_| !opt.value_is_str).and_then(|v| v.parse::<f64>().ok()).ok_or_else(|| {
                    err(ErrorKind::InvalidGrammar, "the rule option 'temperature' needs a number".to_owned())
                })?;
                o.set_temperature(check_temperature(t).map_err(|m| err(ErrorKind::InvalidGrammar, m))?);
            }
            "stop" | "suffix" => {
                if stop.is_some() {
                    return Err(err(ErrorKind::InvalidGrammar, "'stop' and 'suffix' cannot both be given".to_owned()));
                }
                if value.is_some() && !opt.value_is_str {
                    return Err(err(
                        ErrorKind::Unsupported,
                        format!("the rule option '{}' is only supported with a string literal", opt.name),
                    ));
                }
                let s = string()?;
                let n = u32::try_from(s.len())
                    .map_err(|_| err(ErrorKind::LimitExceeded, "the stop string is too long".to_owned()))?;
                o.hidden_suffix = Some((n, opt.name == "stop"));
                o.lazy = true;
                stop = Some(s.into_bytes());
            }
            "stop_capture" => o.stop_capture = Some(string()?),
            other => return Err(err(ErrorKind::InvalidGrammar, format!("unknown rule option '{other}'"))),
        }
    }
    if o.stop_capture.is_some() && stop.is_none() {
        let pos = opts.iter().find(|x| x.name == "stop_capture").map_or(0, |x| x.pos);
        return Err(err_at(text, ErrorKind::InvalidGrammar, pos, "'stop_capture' needs 'stop' or 'suffix'"));
    }
    Ok((o, stop))
}

#[cfg(test)]
mod tests {
    use crate::lark::lark_to_grammar;
    use crate::matcher::{CompiledGrammar, Matcher, MatcherOptions};
    use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
    use std::sync::Arc;

    fn matcher(lark: &str) -> Matcher {
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let opts = VocabularyOptions { stop_token_ids: Some(vec![]), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        let g = lark_to_grammar(lark).unwrap();
        Matcher::new(Arc::new(CompiledGrammar::new(&g, &vocab).unwrap()), MatcherOptions::default()).unwrap()
    }

    fn run(lark: &str, s: &str) -> Option<Vec<(String, String)>> {
        let mut m = matcher(lark);
        (m.accept_bytes(s.as_bytes()).unwrap() && m.is_completed())
            .then(|| m.captures(true).into_iter().map(|(n, b)| (n, String::from_utf8(b).unwrap())).collect())
    }

    #[allow(clippy::unnecessary_wraps)] // compared with `run`'s result
    fn caps(v: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
        Some(v.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect())
    }

    /// The results XGrammar 0.2.8 gives (checked by hand with its `from_lark`).
    #[test]
    fn options_behave_as_in_xgrammar() {
        let stop = "start: x \"!\"\nx[stop=\"END\", capture]: /[a-zA-Z]*/";
        assert_eq!(run(stop, "abcEND!"), caps(&[("x", "abc")]));
        assert_eq!(run(stop, "abENDcEND!"), None);
        let suffix = "start: x \"!\"\nx[suffix=\"END\", capture]: /[a-zA-Z]*/";
        assert_eq!(run(suffix, "abcEND!"), caps(&[("x", "abc")]));
        let sc = "start: x \"!\"\nx[stop=\"END\", stop_capture=\"s\", capture]: /[a-zA-Z]*/";
        assert_eq!(run(sc, "abcEND!"), caps(&[("s", "END"), ("x", "abc")]));
        assert_eq!(run("start: x\nx[lazy, capture]: /a+/", "aa"), None);
        assert_eq!(run("start: x\nx[lazy, capture]: /a+/", "a"), caps(&[("x", "a")]));
        assert_eq!(run("start: x\nx[max_chars=2, capture, temperature=0.3]: /a+/", "aa"), caps(&[("x", "aa")]));
        assert_eq!(run("start: x\nx[max_chars=2, capture, temperature=0.3]: /a+/", "aaa"), None);
        assert_eq!(
            run("start: x\nx[capture=\"q\"]: \"a\" y\ny[capture]: \"b\"", "ab"),
            caps(&[("y", "b"), ("q", "ab")])
        );
        let m = matcher("start: x\nx[max_chars=2, capture, temperature=0.3]: /a+/");
        assert_eq!(m.rule_temperature(), (Some(0.3), false));
    }

    #[test]
    fn options_print_and_parse_back() {
        let g =
            lark_to_grammar("start: x \"!\"\nx[stop=\"END\", stop_capture=\"s\", capture, temperature=0.5]: /[a-z]*/")
                .unwrap();
        let printed = g.to_string();
        assert!(
            printed.contains("x[capture, capture_hidden_stop_bytes=3, stop_capture=\"s\", lazy, temperature=0.5] ::= "),
            "{printed}"
        );
        let back = crate::ebnf::parse_ebnf(&printed, &g.rule(g.root()).name).unwrap();
        assert_eq!(back.to_string(), printed);
    }

    /// A token budget on a rule (one byte per token here), with a capture: after 2 tokens the
    /// occurrence ends at its first chance; a string does not count.
    #[test]
    fn max_tokens_spends_per_token() {
        let lark = "start: x \"!\"\nx[max_tokens=2, capture]: /a+b?/";
        let mut m = matcher(lark);
        assert!(m.accept_token(u32::from(b'a')).unwrap() && m.accept_token(u32::from(b'a')).unwrap());
        let mask = m.compute_mask().unwrap();
        assert!(mask.get(usize::from(b'!')) && !mask.get(usize::from(b'a')) && !mask.get(usize::from(b'b')));
        assert!(m.accept_bytes(b"!").unwrap() && m.is_completed());
        assert_eq!(m.captures(true), vec![("x".to_owned(), b"aa".to_vec())]);
        let mut m = matcher(lark);
        assert!(m.accept_bytes(b"aaaa").unwrap() && m.accept_token(u32::from(b'a')).unwrap());
        assert!(m.compute_mask().unwrap().get(usize::from(b'a')), "strings are not tokens");
    }
}
