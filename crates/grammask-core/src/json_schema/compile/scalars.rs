//! Base types: the per-type grammars of a merged goal (null, boolean, numbers, strings), and the
//! dispatch to arrays and objects.
//!
//! Pipeline place: called by `goals.rs` once a goal has no pending applicator; number ranges
//! come from `numeric.rs`, string bodies from `jstr.rs`.
use super::*;

impl Conv<'_> {
    pub(super) fn emit_base(&mut self, g: &Goal, m: &Merged) -> Result<Option<String>> {
        if let Some(vals) = &m.enums {
            let mut alts = Vec::new();
            // Canonical texts of the values seen: `json_eq` duplicates are spelled once.
            let mut seen: HashSet<String> = HashSet::new();
            for v in vals {
                if m.types & value_type(v) == 0 || m.not_values.iter().any(|n| json_eq(n, v)) {
                    continue;
                }
                if !seen.insert(canonical(v)) {
                    continue;
                }
                if self.valid_goal(g, v)? {
                    alts.push(self.spell_value(v, g.depth)?);
                }
            }
            return Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) });
        }
        let mut alts = Vec::new();
        let excluded = |v: &Value| m.not_values.iter().any(|n| json_eq(n, v));
        if m.types & NULL != 0 && !excluded(&Value::Null) {
            alts.push("\"null\"".to_string());
        }
        if m.types & BOOL != 0 {
            for (b, t) in [(true, "\"true\""), (false, "\"false\"")] {
                if !excluded(&Value::Bool(b)) {
                    alts.push(t.to_string());
                }
            }
        }
        let first_ptr: Rc<str> = g.ids.first().map_or_else(|| Rc::from(""), |i| self.doc.node(*i).ptr.clone());
        if m.types & (INT | FRAC) != 0 {
            let excluded: Vec<Dec> =
                m.not_values.iter().filter_map(|v| v.as_number().and_then(Dec::from_number)).collect();
            let n = if excluded.is_empty() {
                self.emit_number(m, &first_ptr)?
            } else {
                self.emit_number_except(m, &excluded, &first_ptr)?
            };
            if let Some(n) = n {
                alts.push(n);
            }
        }
        if m.types & STR != 0 {
            if let Some(s) = self.emit_string(m, &first_ptr)? {
                alts.push(s);
            }
        }
        if m.types & ARR != 0 && g.depth < MAX_INDENT_DEPTH {
            if m.not_values.iter().any(Value::is_array) {
                return Err(unsupported(&first_ptr, "not: excluding array values is not supported"));
            }
            if let Some(a) = self.emit_array(g, m, &first_ptr)? {
                alts.push(a);
            }
        }
        if m.types & OBJ != 0 && g.depth < MAX_INDENT_DEPTH {
            if m.not_values.iter().any(Value::is_object) {
                return Err(unsupported(&first_ptr, "not: excluding object values is not supported"));
            }
            if let Some(o) = self.emit_object(g, m, &first_ptr)? {
                alts.push(o);
            }
        }
        Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) })
    }

    fn emit_number(&mut self, m: &Merged, ptr: &str) -> Result<Option<String>> {
        let integer = m.types & FRAC == 0;
        // Draft 4 integers are spelled without fraction or exponent (`1.0` is a number there);
        // so are all integers under canonical spelling.
        let canonical = self.opts.spelling == Spelling::Canonical;
        let plain_int = integer && (self.doc.draft == Draft::D4 || canonical);
        if canonical {
            if let Some(r) = numeric::emit_canonical_number(
                m.lo.as_ref(),
                m.hi.as_ref(),
                m.types & INT == 0,
                integer,
                !m.mults.is_empty(),
            ) {
                return Ok(r);
            }
        }
        let bounded = m.lo.is_some() || m.hi.is_some();
        if m.types & INT == 0 {
            // Numbers that are not integers: a plain spelling with a non-zero fraction digit
            // (exponent spellings such as 1.5e1 may be integers, so none is taken).
            if bounded || !m.mults.is_empty() {
                let p = m.mults.first().map_or(ptr, |x| x.1.as_str());
                return Err(unsupported(p, "non-integer numbers with bounds or multipleOf are not supported"));
            }
            return Ok(Some("\"-\"? (\"0\" | [1-9] [0-9]*) \".\" [0-9]* [1-9] [0-9]*".to_string()));
        }
        if let Some((_, p)) = m.mults.first() {
            // `minimum: 0` alone (amounts, counts) is exact: the unsigned multiples.
            let nonneg = m.hi.is_none() && m.lo.as_ref().is_some_and(|(d, exclusive)| d.is_zero() && !exclusive);
            if bounded && !nonneg {
                if let Some(r) = self.bounded_multiples(m, ptr)? {
                    return Ok(r);
                }
                return Err(unsupported(
                    p,
                    "multipleOf together with minimum/maximum (other than minimum 0) is not supported",
                ));
            }
            let mut divs = Vec::new();
            for (d, p) in &m.mults {
                divs.push(
                    numeric::divisor(d).ok_or_else(|| unsupported(p, "multipleOf value too large or too precise"))?,
                );
            }
            let Some((pp, s)) = numeric::lcm_divisor(&divs) else {
                return Err(unsupported(p, "multipleOf values whose common multiple is too large"));
            };
            return match numeric::multiple_of(&mut self.e, pp, s, integer, plain_int, nonneg)? {
                Some(r) => Ok(Some(r)),
                None => Err(unsupported(p, "multipleOf needs too many automaton states")),
            };
        }
        if integer {
            if !bounded {
                return Ok(Some(if plain_int {
                    "\"-\"? (\"0\" | [1-9] [0-9]*)".to_string()
                } else {
                    "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" \"0\"+)? ([eE] \"+\"? [0-9]+)?".to_string()
                }));
            }
            let lo = m.lo.as_ref().map(|(d, s)| SInt::ceil(d, *s));
            let hi = m.hi.as_ref().map(|(d, s)| SInt::floor(d, *s));
            let frac = if plain_int { "" } else { " (\".\" \"0\"+)?" };
            return Ok(numeric::int_range(lo.as_ref(), hi.as_ref()).map(|r| format!("{r}{frac}")));
        }
        if !bounded {
            return Ok(Some("\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [+\\-]? [0-9]+)?".to_string()));
        }
        Ok(numeric::number_range(m.lo.as_ref().map(|(d, s)| (d, *s)), m.hi.as_ref().map(|(d, s)| (d, *s))))
    }

    /// Unbounded numbers other than `excluded`, in plain decimal spellings (no exponent: the
    /// spellings of one value with exponents do not form a regular language). Every plain
    /// spelling of an excluded value (`1`, `1.0`, `1.00`, ...) is taken out.
    fn emit_number_except(&mut self, m: &Merged, excluded: &[Dec], ptr: &str) -> Result<Option<String>> {
        if m.lo.is_some() || m.hi.is_some() || !m.mults.is_empty() || m.types & INT == 0 {
            return Err(unsupported(
                ptr,
                "not: excluding numeric values from bounded, multipleOf or non-integer numbers is not supported",
            ));
        }
        let integer = m.types & FRAC == 0;
        // Canonical spelling: integers without fraction, no `-0` (see `crate::spelling`).
        let canonical = self.opts.spelling == Spelling::Canonical;
        let base = match (integer, self.doc.draft == Draft::D4 || canonical) {
            (true, true) if canonical => r"0|-?[1-9][0-9]*",
            (false, _) if canonical => r"0|-?(0\.[0-9]*[1-9]|[1-9][0-9]*(\.([0-9]*[1-9]|0))?)",
            (true, true) => r"-?(0|[1-9][0-9]*)",
            (true, false) => r"-?(0|[1-9][0-9]*)(\.0+)?",
            (false, _) => r"-?(0|[1-9][0-9]*)(\.[0-9]+)?",
        };
        let full = |p: &str| -> Result<CharDfa> {
            CharDfa::from_regex(&Regex::parse(p, RegexFlags::default())?, Anchoring::FullMatch)
        };
        let mut dfa = full(base)?;
        for d in excluded {
            let int: String =
                if d.int.is_empty() { "0".into() } else { d.int.iter().map(|x| char::from(b'0' + x)).collect() };
            let frac: String = d.frac.iter().map(|x| char::from(b'0' + x)).collect();
            let sign = if d.is_zero() {
                "-?"
            } else if d.neg {
                "-"
            } else {
                ""
            };
            let tail = if frac.is_empty() { r"(\.0+)?".to_string() } else { format!(r"\.{frac}0*") };
            dfa = dfa.difference(&full(&format!("{sign}{int}{tail}"))?).map_err(|e| ptr_if_none(e, ptr))?;
        }
        if dfa.is_empty() {
            return Ok(None);
        }
        let prefix = format!("{}.re", self.e.fresh("num"));
        let text = dfa.to_ebnf(&prefix, TextMode::Raw);
        self.e.raw(&text)?;
        Ok(Some(prefix))
    }

    fn emit_string(&mut self, m: &Merged, ptr: &str) -> Result<Option<String>> {
        let excluded: Vec<&str> = m.not_values.iter().filter_map(Value::as_str).collect();
        if let Some(mx) = m.max_len {
            if mx < m.min_len {
                return Ok(None);
            }
        }
        let plain =
            m.patterns.is_empty() && m.formats.is_empty() && m.neg_patterns.is_empty() && m.neg_formats.is_empty();
        if plain && excluded.is_empty() {
            return self.counted_string(m, ptr).map(Some);
        }
        if plain && m.min_len == 0 && m.max_len.is_none() {
            let body = jstr::not_in_for(self.opts.spelling, &mut self.e, &excluded)?;
            return Ok(Some(format!("\"\\\"\" {body} \"\\\"\"")));
        }
        // General case: intersect automata (length last, see below), once per distinct set of
        // string constraints in a conversion (a subschema met in several goals asks again).
        let key = StringKey {
            patterns: m.patterns.iter().map(|(p, _)| p.clone()).collect(),
            formats: m.formats.iter().map(|(f, _)| f.clone()).collect(),
            excluded: excluded.iter().map(|x| (*x).to_string()).collect(),
            neg_patterns: m.neg_patterns.clone(),
            neg_formats: m.neg_formats.clone(),
            len: (m.min_len, m.max_len),
        };
        let dfa = match self.string_dfas.get(&key) {
            Some(d) => d.clone(),
            None => {
                let d = Self::string_dfa(m, &excluded, ptr)?;
                self.string_dfas.insert(key, d.clone());
                d
            }
        };
        // Patterns and formats that every string matches (an unanchored `([A-Z]+)?`) leave the
        // length alone: the plain string's counted run, whose long bounds are blocks, where the
        // automaton below would be a state per character (`str_16.re`: 98k states, o12409).
        let Some(dfa) = dfa else { return self.counted_string(m, ptr).map(Some) };
        if dfa.is_empty() {
            return Ok(None);
        }
        let stem = self.e.fresh("str");
        let prefix = format!("{stem}.re");
        // Printed at the end of the conversion (`Conv::run`), unless a union took it in.
        let body = format!("\"\\\"\" {prefix} \"\\\"\"");
        self.last_string = Some((body.clone(), self.string_texts.len()));
        self.string_texts.push((prefix, dfa));
        Ok(Some(body))
    }

    /// A string of `m.min_len..=m.max_len` characters, any of them.
    fn counted_string(&mut self, m: &Merged, ptr: &str) -> Result<String> {
        if m.min_len > u64::from(MAX_REPEAT_BOUND) || m.max_len.is_some_and(|x| x > u64::from(MAX_REPEAT_BOUND)) {
            if m.max_len.is_some() {
                return Err(Error::limit("maxLength", MAX_REPEAT_BOUND as usize).at_pointer(ptr));
            }
            return Err(Error::limit("minLength", MAX_REPEAT_BOUND as usize).at_pointer(ptr));
        }
        let body = self.counted_chars(m.min_len, m.max_len)?;
        Ok(format!("\"\\\"\" {body}"))
    }

    /// The automaton of the strings (decoded) that satisfy `m`'s string constraints; `None`
    /// when nothing is excluded and the constraints other than the length accept every string.
    fn string_dfa(m: &Merged, excluded: &[&str], ptr: &str) -> Result<Option<CharDfa>> {
        let mut dfa = CharDfa::any_string();
        // `dfa` is still `any_string()`: the first format's product is memoized.
        let mut unconstrained = true;
        for (p, pp) in &m.patterns {
            let re = Regex::parse(p, RegexFlags { ignore_case: false, dot_all: false })
                .map_err(|e| Error::new(e.kind(), format!("pattern {p:?}: {}", e.message())).at_pointer(pp.clone()))?;
            let d = CharDfa::from_regex(&re, Anchoring::Search)
                .map_err(|e| Error::new(e.kind(), format!("pattern {p:?}: {}", e.message())).at_pointer(pp.clone()))?;
            dfa = dfa.intersect(&d).map_err(|e| ptr_if_none(e, pp))?;
            unconstrained = false;
        }
        for (f, fp) in &m.formats {
            dfa = if std::mem::take(&mut unconstrained) {
                format_from_any_string(f).map_err(|e| ptr_if_none(e, fp))?
            } else {
                let d = format_dfa(f).map_err(|e| ptr_if_none(e, fp))?;
                dfa.intersect(&d).map_err(|e| ptr_if_none(e, fp))?
            };
        }
        if !excluded.is_empty() {
            dfa = dfa.minus_words(excluded).map_err(|e| ptr_if_none(e, ptr))?;
        }
        for p in &m.neg_patterns {
            let re = Regex::parse(p, RegexFlags { ignore_case: false, dot_all: false })
                .map_err(|e| Error::new(e.kind(), format!("pattern {p:?}: {}", e.message())).at_pointer(ptr))?;
            let d = CharDfa::from_regex(&re, Anchoring::Search)
                .map_err(|e| Error::new(e.kind(), format!("pattern {p:?}: {}", e.message())).at_pointer(ptr))?;
            dfa = dfa.difference(&d).map_err(|e| ptr_if_none(e, ptr))?;
        }
        for f in &m.neg_formats {
            let d = format_dfa(f).map_err(|e| ptr_if_none(e, ptr))?;
            dfa = dfa.difference(&d).map_err(|e| ptr_if_none(e, ptr))?;
        }
        if excluded.is_empty() && dfa.accepts_every_string() {
            return Ok(None);
        }
        if m.min_len > 0 || m.max_len.is_some() {
            let len = CharDfa::length_between(m.min_len, m.max_len).map_err(|e| ptr_if_none(e, ptr))?;
            // A length counter times a cyclic automaton reaches about the product of their
            // states: refuse at once what would only hit the state limit after a long build.
            if dfa.is_infinite() && len.num_states().saturating_mul(dfa.num_states()) > 4 * crate::regex::MAX_DFA_STATES
            {
                return Err(Error::limit(
                    "automaton states of pattern/format with minLength/maxLength",
                    crate::regex::MAX_DFA_STATES,
                )
                .at_pointer(ptr));
            }
            dfa = dfa.intersect(&len).map_err(|e| ptr_if_none(e, ptr))?;
        }
        Ok(Some(dfa))
    }

    /// A string body of `lo..=hi` characters (`hi` `None`: unbounded) and its closing quote.
    /// Up to [`LONG_RUN`] characters: `json_char{lo,hi} "\""`. Longer bounds are built from
    /// blocks of [`RUN_BLOCK`] (`B`) characters, two rules shared by the whole grammar: `block`
    /// (`B` characters) and `short` (fewer than `B`, then the quote). The rest after a fixed
    /// prefix, at most `n = q*B + r` characters, is `block{0,q-1} short | block{q} char{0,r} "\""`
    /// (every length has one parse: `L = (L div B)` blocks and `L mod B` characters). When
    /// `lo < B` the first `B` characters stay one plain chain of the string's own rule:
    /// `char{lo,B-1} "\"" | char{B} rest(hi - B)`; else `lo = a*B + c` is `block{a} char{c}`.
    /// States: about `(2B + r)` character automata per string and `2B` shared, against `hi`.
    /// PERF: a string's first `B` characters are one chain without rule edges, as an unrolled
    /// bound is: the counted-body shortcuts of kernel classification read them alone, where
    /// with blocks from the start every position had a block and a `short` item (masks p95
    /// about 2x on MaskBench o6251/sp_187). `json_char{0,4096}` was 176k states (sp_72's TTFM
    /// ~90 ms); `json_char{0,32767}` passed the grammar's automaton-size limit.
    fn counted_chars(&mut self, lo: u64, hi: Option<u64>) -> Result<String> {
        let name = self.char_rule.clone();
        if (lo, hi) == (0, None) {
            return Ok(format!("{name}* {QUOTE}"));
        }
        // A counted position: `json_char`'s language, ~10 states instead of ~24 (`counted_char`).
        let c = jstr::counted_char(self.opts.spelling);
        self.e.define_once_fixed(jstr::U_ESCAPE_RULE, jstr::u_escape_body(self.opts.spelling))?;
        if lo <= LONG_RUN && hi.is_none_or(|h| h <= LONG_RUN) {
            return Ok(match hi {
                None => format!("{c}{{{lo}}} {name}* {QUOTE}"),
                Some(hi) => format!("{c}{{{lo},{hi}}} {QUOTE}"),
            });
        }
        let block = format!("{name}.block");
        let short = format!("{name}.short");
        self.e.define_once(&block, &format!("{c}{{{RUN_BLOCK}}}"))?;
        self.e.define_once(&short, &format!("{c}{{0,{}}} {QUOTE}", RUN_BLOCK - 1))?;
        let rest = |n: u64| {
            let (q, r) = (n / RUN_BLOCK, n % RUN_BLOCK);
            match q {
                0 => format!("{c}{{0,{r}}} {QUOTE}"),
                1 => format!("({short} | {block} {c}{{0,{r}}} {QUOTE})"),
                q => format!("({block}{{0,{}}} {short} | {block}{{{q}}} {c}{{0,{r}}} {QUOTE})", q - 1),
            }
        };
        // hi > LONG_RUN >= RUN_BLOCK here.
        if let Some(hi) = hi.filter(|_| lo < RUN_BLOCK) {
            return Ok(format!(
                "({c}{{{lo},{}}} {QUOTE} | {c}{{{RUN_BLOCK}}} {})",
                RUN_BLOCK - 1,
                rest(hi - RUN_BLOCK)
            ));
        }
        let mut parts = Vec::new();
        let (a, rem) = (lo / RUN_BLOCK, lo % RUN_BLOCK);
        if a > 0 {
            parts.push(format!("{block}{{{a}}}"));
        }
        if rem > 0 {
            parts.push(format!("{c}{{{rem}}}"));
        }
        match hi {
            None => parts.push(format!("{name}* {QUOTE}")),
            Some(hi) => parts.push(rest(hi - lo)),
        }
        Ok(parts.join(" "))
    }

    /// `multipleOf` with bounds, in two exact cases (`None`: neither applies): a common divisor
    /// of 1 (the values are the integers of the range: the integer range, and for `number` its
    /// spellings with a zero fraction), or a closed range holding at most [`MAX_LISTED_MULTIPLES`]
    /// multiples (each value as a one-point range, spelled as bounded numbers are). The inner
    /// `Option` is the emitted body (`None`: no value).
    #[allow(clippy::option_option)] // "not applicable" and "no value" are both answers
    fn bounded_multiples(&mut self, m: &Merged, ptr: &str) -> Result<Option<Option<String>>> {
        let mut divs = Vec::new();
        for (d, _) in &m.mults {
            let Some(x) = numeric::divisor(d) else { return Ok(None) };
            divs.push(x);
        }
        let Some((p, scale)) = numeric::lcm_divisor(&divs) else { return Ok(None) };
        let canonical = self.opts.spelling == Spelling::Canonical;
        let fresh = |this: &mut Self| {
            this.merge_uncached(&Goal { ids: vec![], nots: vec![], done: vec![], neg: vec![], depth: 0 })
        };
        if scale < 10 && u64::from(p) == 10u64.pow(scale as u32) {
            let mut mi = fresh(self)?;
            mi.types = INT;
            mi.lo.clone_from(&m.lo);
            mi.hi.clone_from(&m.hi);
            let Some(r) = self.emit_number(&mi, ptr)? else { return Ok(Some(None)) };
            let plain = self.doc.draft == Draft::D4 || canonical;
            let suffix = match (m.types & FRAC != 0 && plain, canonical) {
                (false, _) => "",
                (true, true) => " \".0\"?",
                (true, false) => " (\".\" \"0\"+)?",
            };
            return Ok(Some(Some(format!("({r}){suffix}"))));
        }
        // Bounds and the step as integers over one power of ten.
        let (Some((lo, lo_x)), Some((hi, hi_x))) = (&m.lo, &m.hi) else { return Ok(None) };
        let sc = scale.max(lo.frac.len()).max(hi.frac.len());
        if sc > 18 || lo.int.len() > 18 || hi.int.len() > 18 {
            return Ok(None);
        }
        let scaled = |d: &Dec| -> i128 {
            let mut v: i128 = 0;
            for &x in &d.int {
                v = v * 10 + i128::from(x);
            }
            for i in 0..sc {
                v = v * 10 + i128::from(d.frac.get(i).copied().unwrap_or(0));
            }
            if d.neg {
                -v
            } else {
                v
            }
        };
        let step = i128::from(p) * 10i128.pow((sc - scale) as u32);
        let (lo_n, hi_n) = (scaled(lo), scaled(hi));
        let mut k_lo = lo_n.div_euclid(step) + i128::from(lo_n.rem_euclid(step) != 0);
        if *lo_x && k_lo * step == lo_n {
            k_lo += 1;
        }
        let mut k_hi = hi_n.div_euclid(step);
        if *hi_x && k_hi * step == hi_n {
            k_hi -= 1;
        }
        if k_hi < k_lo {
            return Ok(Some(None));
        }
        if k_hi - k_lo >= MAX_LISTED_MULTIPLES {
            return Ok(None);
        }
        let integer = m.types & FRAC == 0;
        let mut alts = Vec::new();
        for k in k_lo..=k_hi {
            let v = k * step;
            let (neg, a) = (v < 0, v.unsigned_abs());
            let den = 10u128.pow(sc as u32);
            let text = format!("{}{}.{:0width$}", if neg { "-" } else { "" }, a / den, a % den, width = sc);
            let Some(d) = Dec::parse(&text) else { return Ok(None) };
            if integer && !d.is_integer() {
                continue;
            }
            let mut mi = fresh(self)?;
            mi.types = m.types & (INT | FRAC);
            mi.lo = Some((d.clone(), false));
            mi.hi = Some((d, false));
            if let Some(r) = self.emit_number(&mi, ptr)? {
                alts.push(format!("({r})"));
            }
        }
        Ok(Some(if alts.is_empty() { None } else { Some(alts.join(" | ")) }))
    }
}

/// Character runs with a bound above this are built from blocks ([`Conv::counted_chars`]).
/// Above it the blocks' states (at most `4 * RUN_BLOCK` character automata, the two shared
/// rules included) are fewer than the unrolled run's; at 1024 about as many.
const LONG_RUN: u64 = 1024;
/// The closing quote of a string, inside the counted run's rules.
const QUOTE: &str = "\"\\\"\"";
/// Characters in a block of a long run. Invariant for fast masks: `RUN_BLOCK - 1` is at least
/// the longest token's characters (Llama 3: 128 bytes), so `short`'s start and a block's first
/// positions are counted bodies no token outruns (`slice::counted_calls`). Measured at 256:
/// masks on the long-`maxLength` MaskBench schemas as fast as with the unrolled run.
const RUN_BLOCK: u64 = 256;

/// Most values of a bounded `multipleOf` listed one by one ([`Conv::bounded_multiples`]).
const MAX_LISTED_MULTIPLES: i128 = 300;
