//! [`Grammar`] -> normalized EBNF text in the XGrammar dialect, the inverse of
//! [`crate::ebnf::parse_ebnf`]: printing, parsing and printing again gives the same text, and the
//! parsed grammar equals the printed one up to expression ids (single-child sequences and choices
//! are printed as their child, and an empty choice as the empty class `[]`).
//!
//! One rule per line, `name ::= body`, then ` (= lookahead)` if any. Parentheses appear only
//! where the parser would otherwise group differently. The walk uses an explicit task stack.
//!
//! Limitation: a byte string that is not valid UTF-8 (possible only through [`crate::grammar::GrammarBuilder`])
//! has no exact spelling in the dialect, whose escapes denote code points; such bytes print as
//! `\xHH`, which parses back as the code point U+00HH.

use crate::grammar::{complement_ranges, normalize_ranges, Expr, ExprId, Grammar};
use std::collections::HashSet;
use std::fmt::{self, Write};

/// Where an expression is printed, which decides whether it needs parentheses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// A whole rule body or lookahead.
    Top,
    /// An item of a sequence.
    SeqItem,
    /// An alternative of a choice.
    ChoiceItem,
    /// The operand of a quantifier.
    Atom,
}

enum Task {
    Expr(ExprId, Ctx),
    Text(&'static str),
    Owned(String),
}

impl fmt::Display for Grammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = printable_names(self);
        let mut out = String::new();
        for (i, (r, name)) in self.rules().iter().zip(&names).enumerate() {
            out.clear();
            out.push_str(name);
            if let Some(o) = self.rule_options(crate::grammar::RuleId(i as u32)) {
                out.push('[');
                out.push_str(&o.to_ebnf(name));
                out.push(']');
            }
            out.push_str(" ::= ");
            write_expr(self, &names, r.body, &mut out);
            if let Some(la) = r.lookahead {
                out.push_str(" (= ");
                write_expr(self, &names, la, &mut out);
                out.push(')');
            }
            out.push('\n');
            f.write_str(&out)?;
        }
        Ok(())
    }
}

/// Appends the expression `root` at top level to `out`.
fn write_expr(g: &Grammar, names: &[String], root: ExprId, out: &mut String) {
    let mut stack = vec![Task::Expr(root, Ctx::Top)];
    while let Some(task) = stack.pop() {
        let (id, ctx) = match task {
            Task::Text(s) => {
                out.push_str(s);
                continue;
            }
            Task::Owned(s) => {
                out.push_str(&s);
                continue;
            }
            Task::Expr(id, ctx) => (id, ctx),
        };
        match g.expr(id) {
            Expr::Bytes(b) => write_bytes(b, out),
            Expr::CharClass(r) => write_class(r, out),
            Expr::RuleRef(r) => out.push_str(&names[r.index()]),
            Expr::JsonStringIn(keys) | Expr::JsonStringExcept(keys) => {
                let except = matches!(g.expr(id), Expr::JsonStringExcept(_));
                out.push_str(if except { "JsonStringExcept(" } else { "JsonStringIn(" });
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_bytes(k.as_bytes(), out);
                }
                out.push(')');
            }
            Expr::Token(ids) | Expr::ExcludeToken(ids) => {
                let exclude = matches!(g.expr(id), Expr::ExcludeToken(_));
                out.push_str(if exclude { "ExcludeToken(" } else { "Token(" });
                for (i, t) in ids.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&t.to_string());
                }
                out.push(')');
            }
            Expr::Seq(xs) | Expr::Choice(xs) if xs.len() == 1 => stack.push(Task::Expr(xs[0], ctx)),
            Expr::Seq(xs) if xs.is_empty() => out.push_str("()"),
            Expr::Choice(xs) if xs.is_empty() => out.push_str("[]"),
            Expr::Seq(xs) | Expr::Choice(xs) => {
                let is_seq = matches!(g.expr(id), Expr::Seq(_));
                let parens = if is_seq { matches!(ctx, Ctx::SeqItem | Ctx::Atom) } else { ctx != Ctx::Top };
                let (sep, item_ctx) = if is_seq { (" ", Ctx::SeqItem) } else { (" | ", Ctx::ChoiceItem) };
                if parens {
                    out.push('(');
                    stack.push(Task::Text(")"));
                }
                for (i, &x) in xs.iter().enumerate().rev() {
                    stack.push(Task::Expr(x, item_ctx));
                    if i > 0 {
                        stack.push(Task::Text(sep));
                    }
                }
            }
            Expr::Repeat { expr, min, max } => {
                let suffix = match (*min, *max) {
                    (0, None) => "*".to_owned(),
                    (1, None) => "+".to_owned(),
                    (0, Some(1)) => "?".to_owned(),
                    (m, None) => format!("{{{m},}}"),
                    (m, Some(n)) if m == n => format!("{{{m}}}"),
                    (m, Some(n)) => format!("{{{m},{n}}}"),
                };
                let parens = ctx == Ctx::Atom;
                if parens {
                    out.push('(');
                    stack.push(Task::Text(")"));
                }
                stack.push(Task::Owned(suffix));
                stack.push(Task::Expr(*expr, Ctx::Atom));
            }
        }
    }
}

/// A string literal for `s` (as printed in rule bodies).
pub(crate) fn quote_str(s: &str) -> String {
    let mut out = String::new();
    write_bytes(s.as_bytes(), &mut out);
    out
}

/// Writes a string literal; every code point round-trips through the parser.
fn write_bytes(bytes: &[u8], out: &mut String) {
    out.push('"');
    let mut rest = bytes;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, None),
            Err(e) => {
                let (v, after) = rest.split_at(e.valid_up_to());
                let n = e.error_len().unwrap_or(after.len());
                (std::str::from_utf8(v).expect("validated prefix"), Some(&after[..n]))
            }
        };
        for c in valid.chars() {
            match c {
                '"' => out.push_str("\\\""),
                c => write_char(c, out),
            }
        }
        rest = &rest[valid.len()..];
        if let Some(bad) = bad {
            for b in bad {
                let _ = write!(out, "\\x{b:02x}");
            }
            rest = &rest[bad.len()..];
        }
    }
    out.push('"');
}

/// Writes one character of a string or class body, escaping `\` and invisible characters.
/// `\u`/`\U` escapes have a fixed length, so they never absorb a following hex digit.
fn write_char(c: char, out: &mut String) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\0' => out.push_str("\\0"),
        c if needs_escape(c) => {
            let v = c as u32;
            if v <= 0xFFFF {
                let _ = write!(out, "\\u{v:04x}");
            } else {
                let _ = write!(out, "\\U{v:08x}");
            }
        }
        c => out.push(c),
    }
}

/// Control, format and separator characters that would be invisible or break lines if raw.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c as u32, 0x2028 | 0x2029 | 0xFEFF | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064)
        || (c.is_whitespace() && c != ' ')
}

fn write_class_char(c: u32, out: &mut String) {
    let c = char::from_u32(c).expect("class ranges hold scalar values");
    match c {
        ']' | '[' | '-' | '^' => {
            out.push('\\');
            out.push(c);
        }
        c => write_char(c, out),
    }
}

/// Writes a class, negated when the complement has fewer ranges.
fn write_class(ranges: &[(u32, u32)], out: &mut String) {
    // Surrogates never match, so adding them all gives the same language and a canonical set.
    let mut canonical = ranges.to_vec();
    canonical.push((0xD800, 0xDFFF));
    let canonical = normalize_ranges(&canonical);
    let positive = snap_to_scalars(&canonical);
    let negative = snap_to_scalars(&complement_ranges(&canonical));
    let (negated, set) = if negative.len() < positive.len() { (true, negative) } else { (false, positive) };
    out.push('[');
    if negated {
        out.push('^');
    }
    for (lo, hi) in set {
        write_class_char(lo, out);
        if hi > lo {
            if hi > lo + 1 {
                out.push('-');
            }
            write_class_char(hi, out);
        }
    }
    out.push(']');
}

/// Moves range ends off the UTF-16 surrogates (which are not characters and cannot be written),
/// dropping ranges made only of surrogates. The set of scalar values is unchanged.
fn snap_to_scalars(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let surrogate = |c: u32| (0xD800..=0xDFFF).contains(&c);
    ranges
        .iter()
        .map(|&(lo, hi)| (if surrogate(lo) { 0xE000 } else { lo }, if surrogate(hi) { 0xD7FF } else { hi }))
        .filter(|&(lo, hi)| lo <= hi)
        .collect()
}

/// Rule names as printed: valid names unchanged, others mapped to fresh valid names.
fn printable_names(g: &Grammar) -> Vec<String> {
    let valid = |n: &str| {
        !n.is_empty()
            && !n.as_bytes()[0].is_ascii_digit()
            && n.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    };
    let mut used: HashSet<String> = g.rules().iter().filter(|r| valid(&r.name)).map(|r| r.name.clone()).collect();
    g.rules()
        .iter()
        .map(|r| {
            if valid(&r.name) {
                return r.name.clone();
            }
            let mut base: String = r
                .name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
                .collect();
            if base.is_empty() || base.as_bytes()[0].is_ascii_digit() {
                base.insert_str(0, "r_");
            }
            let mut name = base.clone();
            let mut i = 1;
            while used.contains(&name) {
                name = format!("{base}_{i}");
                i += 1;
            }
            used.insert(name.clone());
            name
        })
        .collect()
}
