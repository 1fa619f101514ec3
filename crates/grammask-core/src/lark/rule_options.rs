//! Lark rule options (`name[lazy, max_chars=N, max_tokens=N, capture, capture="n",
//! temperature=x, stop=..., suffix=..., stop_capture="n"]: ...`) to [`RuleOptions`].
//!
//! `stop=` and `suffix=` (llguidance; XGrammar agrees): the rule is its body followed by the stop
//! lexeme, matched lazily: an occurrence ends at the first position where body·stop can end. The
//! stop lexeme is a string literal, a `/regex/flags` or an uppercase terminal name. Its capture
//! leaves the stop text out, and `stop_capture="n"` captures it under `n`. A plain string's text
//! is its last bytes; for any other stop lexeme the body and the stop become two rules
//! (`capture_hidden_stop_rule`) and the stop text is the longest suffix of the occurrence that
//! the stop matches with the rest matching the body (XGrammar's split). A `stop` text is left
//! out of the captures around the rule as well, a `suffix` text is not (both peers). As in
//! XGrammar, options are accepted on rules only (not on uppercase terminals).
use super::syntax::{err_at, Atom, RuleOption};
use crate::error::{ErrorKind, Result};
use crate::rule_options::{check_temperature, HiddenStop, RuleOptions};

/// What a `stop`/`suffix` option appends to the rule's body.
#[derive(Clone, Debug)]
pub(super) enum Stop {
    /// A case-sensitive string literal: its bytes.
    Bytes(Vec<u8>),
    /// Any other lexeme (a regex, a case-insensitive string, a terminal name), at its position.
    Lexeme(Atom, usize),
}

/// The options of rule `name`, and the `stop`/`suffix` lexeme to append to its body.
pub(super) fn lark_rule_options(
    text: &str,
    name: &str,
    is_terminal: bool,
    opts: &[RuleOption],
) -> Result<(RuleOptions, Option<Stop>)> {
    let mut o = RuleOptions::default();
    let mut stop: Option<Stop> = None;
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
                let is_stop = opt.name == "stop";
                let (hidden, lexeme) = match &opt.atom {
                    Some(Atom::Str(v, false)) => {
                        if v.is_empty() {
                            return Err(err(
                                ErrorKind::Unsupported,
                                format!("'{}=\"\"' (the end of text as the stop) is not supported", opt.name),
                            ));
                        }
                        let n = u32::try_from(v.len())
                            .map_err(|_| err(ErrorKind::LimitExceeded, "the stop string is too long".to_owned()))?;
                        (HiddenStop::Bytes(n), Stop::Bytes(v.clone().into_bytes()))
                    }
                    Some(Atom::Name(n)) if !n.trim_start_matches('_').starts_with(|c: char| c.is_ascii_uppercase()) => {
                        return Err(err(
                            ErrorKind::InvalidGrammar,
                            format!("the rule option '{}' needs a terminal, not the rule '{n}'", opt.name),
                        ));
                    }
                    Some(a) => (HiddenStop::LastRule, Stop::Lexeme(a.clone(), opt.pos)),
                    None => {
                        return Err(err(
                            ErrorKind::InvalidGrammar,
                            format!("the rule option '{}' needs a string, a regex or a terminal name", opt.name),
                        ))
                    }
                };
                o.hidden_suffix = Some((hidden, is_stop));
                o.lazy = true;
                stop = Some(lexeme);
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

    /// A stop regex: the occurrence ends at the first place where body·stop ends; the capture
    /// leaves out the shortest stop text that leaves a body (llguidance's split).
    #[test]
    fn stop_regex_ends_at_the_first_stop_match() {
        let g = "start: x \"!\"\nx[stop=/\\n\\n|END/, stop_capture=\"s\", capture]: /(.|\\n)*/";
        assert_eq!(run(g, "a\n\n!"), caps(&[("s", "\n\n"), ("x", "a")]));
        assert_eq!(run(g, "a\nbEND!"), caps(&[("s", "END"), ("x", "a\nb")]));
        assert_eq!(run(g, "\n\n!"), caps(&[("s", "\n\n"), ("x", "")]));
        assert_eq!(run(g, "a\n\nbEND!"), None, "the first stop match ends the rule");
        assert_eq!(run(g, "aENDbEND!"), None);
        // Two splits of "xab": body "x" + stop "ab", or body "xa" + stop "b": the longer stop
        // (XGrammar's split).
        let two = "start: x \"!\"\nx[stop=/b|ab/, stop_capture=\"s\", capture]: /[a-z]*/";
        assert_eq!(run(two, "xab!"), caps(&[("s", "ab"), ("x", "x")]));
        let three = "start: x \"!\"\nx[stop=/b|zab/, stop_capture=\"s\", capture]: /q|qza/";
        assert_eq!(run(three, "qzab!"), caps(&[("s", "zab"), ("x", "q")]));
        // Only the longer stop leaves a body: "cb" = "" + "cb" ("c" is no body).
        let only = "start: x \"!\"\nx[stop=/b|cb/, stop_capture=\"s\", capture]: /a*/";
        assert_eq!(run(only, "acb!"), caps(&[("s", "cb"), ("x", "a")]));
        // A terminal name, a case-insensitive string, and suffix= (the same matching).
        let term = "start: x \"!\"\nx[suffix=STOP, capture]: /[a-z]*/\nSTOP: \"E\" /[0-9]+/";
        assert_eq!(run(term, "abE1!"), caps(&[("x", "ab")]));
        assert_eq!(run(term, "abE12!"), None);
        let ci = "start: x \"!\"\nx[stop=\"end\"i, stop_capture=\"s\"]: /[a-z ]*/";
        assert_eq!(run(ci, "a EnD!"), caps(&[("s", "EnD")]));
        assert_eq!(run(ci, "a end b end!"), None);
    }

    /// The results XGrammar 0.2.8 gives: a `stop` text is left out of the captures around the
    /// rule too (wherever it lies in them); a `suffix` text is not.
    #[test]
    fn stop_text_is_hidden_from_enclosing_captures() {
        let at_end = "start: y \"!\"\ny[capture]: x\nx[stop=\"END\", stop_capture=\"s\", capture]: /[a-z]*/";
        assert_eq!(run(at_end, "xEND!"), caps(&[("s", "END"), ("x", "x"), ("y", "x")]));
        let inside = "start: y\ny[capture]: x \"!\"\nx[stop=\"END\", capture]: /[a-z]*/";
        assert_eq!(run(inside, "xEND!"), caps(&[("x", "x"), ("y", "x!")]));
        let nested = "start: z \"!\"\nz[capture]: y\ny[capture]: \"q\" x\nx[stop=/E[0-9]*D/, capture]: /[a-z]*/";
        assert_eq!(run(nested, "qxE12D!"), caps(&[("x", "x"), ("y", "qx"), ("z", "qx")]));
        let suffix = "start: y \"!\"\ny[capture]: x\nx[suffix=/b|ab/, stop_capture=\"s\", capture]: /[a-z]*/";
        assert_eq!(run(suffix, "xab!"), caps(&[("s", "ab"), ("x", "x"), ("y", "xab")]));
    }

    #[test]
    fn stop_options_are_checked() {
        let kind = |t: &str| lark_to_grammar(t).map(|_| ()).map_err(|e| e.kind());
        use crate::error::ErrorKind;
        assert_eq!(kind("start: x\nx[stop=y]: /a*/\ny: \"b\""), Err(ErrorKind::InvalidGrammar));
        assert_eq!(kind("start: x\nx[stop=\"\"]: /a*/"), Err(ErrorKind::Unsupported));
        assert_eq!(kind("start: x\nx[stop=3]: /a*/"), Err(ErrorKind::InvalidGrammar));
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
        let g = lark_to_grammar("start: x \"!\"\nx[stop=/E[0-9]/, stop_capture=\"s\", capture]: /[a-z]*/").unwrap();
        let printed = g.to_string();
        assert!(printed.contains("x[capture, capture_hidden_stop_rule, stop_capture=\"s\", lazy] ::= "), "{printed}");
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
