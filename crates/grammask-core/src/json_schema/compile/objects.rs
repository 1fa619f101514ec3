//! Objects: properties, required keys, `additionalProperties`/`patternProperties`, property
//! counts, dependencies and any-order key layouts.
//!
//! Pipeline place: called from `scalars.rs` ([`Conv::emit_base`]) for the object type.
use super::*;
use crate::json_schema::key_sets::{self, KeyState};
use std::fmt::Write as _;

impl Conv<'_> {
    pub(super) fn emit_object(&mut self, g: &Goal, m: &Merged, ptr: &str) -> Result<Option<String>> {
        let d = self.child_depth(g.depth);
        let closed_by_strict = self.opts.strict_mode
            && m.obj.iter().any(|p| !p.props.is_empty())
            && !m.obj.iter().any(|p| p.says_additional);
        // Known keys in schema order, then required keys not listed.
        let mut names: Vec<String> = Vec::new();
        for p in &m.obj {
            for &(n, _) in &p.props {
                if !names.iter().any(|x| x == n) {
                    names.push(n.to_string());
                }
            }
        }
        for r in &m.required {
            if !names.contains(r) {
                names.push(r.clone());
            }
        }
        // Keys named by dependentRequired are tracked like listed ones (any-order states).
        for (k, req, _) in &m.dep_req {
            for x in std::iter::once(k).chain(req) {
                if !names.contains(x) {
                    names.push(x.clone());
                }
            }
        }
        // Pattern properties: exact via automata on key strings.
        let mut pattern_dfas: Vec<(Rc<CharDfa>, SchemaId)> = Vec::new();
        for p in &m.obj {
            for (pat, id, pp) in &p.patterns {
                let dfa = match self.pattern_dfas.get(pat) {
                    Some(d) => d.clone(),
                    None => {
                        let re = Regex::parse(pat, RegexFlags::default()).map_err(|e| ptr_if_none(e, pp))?;
                        let d = Rc::new(CharDfa::from_regex(&re, Anchoring::Search).map_err(|e| ptr_if_none(e, pp))?);
                        self.pattern_dfas.insert(pat.clone(), d.clone());
                        d
                    }
                };
                pattern_dfas.push((dfa, *id));
            }
        }
        // Value schemas for a key: None = key not allowed.
        let key_ids = |name: &str| -> Option<Vec<SchemaId>> {
            let mut ids = Vec::new();
            let mut in_props_any = false;
            for p in &m.obj {
                let mut matched = false;
                if let Some((_, id)) = p.props.iter().find(|(n, _)| *n == name) {
                    ids.push(*id);
                    in_props_any = true;
                    matched = true;
                }
                for (pat, id, _) in &p.patterns {
                    let _ = pat;
                    if let Some((dfa, _)) = pattern_dfas.iter().find(|(_, i)| i == id) {
                        if dfa.accepts(name) {
                            ids.push(*id);
                            matched = true;
                        }
                    }
                }
                if matched {
                    continue;
                }
                match p.additional {
                    Rest::Any => {}
                    Rest::Closed => return None,
                    Rest::Schema(x) => ids.push(x),
                }
            }
            if closed_by_strict && !in_props_any {
                return None;
            }
            Some(ids)
        };
        struct Key {
            name: String,
            required: bool,
            value: Option<String>,
        }
        let mut keys: Vec<Key> = Vec::new();
        for n in &names {
            let required = m.required.contains(n);
            let mut value = None;
            if !m.absent.contains(n) && self.key_name_ok(m, n)? {
                if let Some(ids) = key_ids(n) {
                    let nots = m.prop_nots.iter().filter(|(k, _)| k == n).map(|(_, id)| *id).collect();
                    value = self.rule_for(Goal { ids, nots, done: vec![], neg: vec![], depth: d })?;
                }
            }
            if required && value.is_none() {
                return Ok(None);
            }
            keys.push(Key { name: n.clone(), required, value });
        }
        keys.retain(|k| k.value.is_some());
        // Additional keys: any string not among `names` (nor absent keys).
        let additional_allowed =
            !closed_by_strict && !m.obj.iter().any(|p| p.additional == Rest::Closed && p.patterns.is_empty());
        let mut addl: Option<String> = None;
        if additional_allowed || !pattern_dfas.is_empty() {
            let mut excluded: Vec<&str> = names.iter().map(String::as_str).collect();
            excluded.extend(m.absent.iter().map(String::as_str));
            addl = self.additional_entry(g, m, &excluded, &pattern_dfas, closed_by_strict, ptr)?;
        }
        let kv = self.sep_kv();
        let sep = self.sep_item(g.depth);
        let entries: Vec<(String, bool)> = keys
            .iter()
            .map(|k| {
                (
                    format!(
                        "\"\\\"\" {} \"\\\"\" {kv} {}",
                        jstr::spell_str_in(self.opts.spelling, &k.name),
                        k.value.clone().unwrap_or_default()
                    ),
                    k.required,
                )
            })
            .collect();
        let n = entries.len();
        let n_req = entries.iter().filter(|e| e.1).count() as u64;
        let max_total = if addl.is_some() { None } else { Some(n as u64) };
        let need_count = m.min_props > n_req || m.max_props.is_some_and(|x| max_total.is_none_or(|t| x < t));
        if m.max_props.is_some_and(|x| x < n_req) || max_total.is_some_and(|t| t < m.min_props) {
            return Ok(None);
        }
        // Key order: free unless strict_mode keeps XGrammar's schema order (any_order frees it).
        let free_order = self.opts.any_order || !self.opts.strict_mode;
        if free_order && (n > 1 || (n == 1 && addl.is_some()) || !m.dep_req.is_empty()) {
            let levels = if need_count { m.max_props.map_or(m.min_props, |x| x + 1) + 1 } else { 1 };
            let states = (1u64 << n.min(40)).saturating_mul(levels);
            let key_bytes: u64 = keys.iter().map(|k| k.name.len() as u64 + 4).sum();
            let cost = states.saturating_mul(key_bytes) / 2;
            let small = states <= MAX_ANY_ORDER_STATES;
            let large = !small
                && states <= MAX_LARGE_ANY_ORDER_STATES
                && self.large_any_order_cost + cost <= ANY_ORDER_KEY_BUDGET;
            if n <= 40 && (small || large) {
                if large {
                    self.large_any_order_cost += cost;
                }
                let key_names: Vec<String> = keys.iter().map(|k| k.name.clone()).collect();
                return self.object_any_order(g, m, &entries, &key_names, addl.as_deref(), need_count).map(Some);
            }
            if self.opts.any_order {
                return Err(unsupported(
                    ptr,
                    format!(
                        "any_order: {n} properties need {states} key-set states (at most {MAX_LARGE_ANY_ORDER_STATES} \
                         per object past {MAX_ANY_ORDER_STATES}, within a schema's key budget of {ANY_ORDER_KEY_BUDGET})"
                    ),
                ));
            }
            // strict_mode=false beyond the bound: schema order (documented restriction).
        }
        // dependentRequired beyond the any-order bound (strict_mode=false): schema order, with
        // the presence of the keys that dependencies name tracked along the chain and checked
        // at its end (exact for objects in schema order; other orders are rejected, as for any
        // object past the bound). Under strict_mode without any_order: still refused.
        let key_names: Vec<String> = keys.iter().map(|k| k.name.clone()).collect();
        // `dep_bit[i]`: the bit of key i in the tracked mask, for keys that dependencies name.
        let mut dep_bit: Vec<Option<u32>> = vec![None; n];
        let mut tracked: u32 = 0;
        if let Some((_, _, p)) = m.dep_req.first() {
            if !free_order {
                return Err(unsupported(p, "dependentRequired: needs any key order (strict_mode=false or any_order)"));
            }
            for (k, req, _) in &m.dep_req {
                for x in std::iter::once(k).chain(req) {
                    if let Some(i) = key_names.iter().position(|nm| nm == x) {
                        if dep_bit[i].is_none() {
                            dep_bit[i] = Some(tracked);
                            tracked += 1;
                        }
                    }
                }
            }
            if tracked > MAX_DEP_TRACKED_KEYS {
                return Err(unsupported(p, "dependentRequired: too many properties for key-set states"));
            }
        }
        let deps_hold = |mask: u64| {
            let has = |k: &str| {
                key_names
                    .iter()
                    .position(|nm| nm == k)
                    .and_then(|i| dep_bit[i])
                    .is_some_and(|b| mask & (1u64 << b) != 0)
            };
            m.dep_req.iter().all(|(k, req, _)| !has(k) || req.iter().all(|r| has(r)))
        };
        let cap: u64 = if need_count { m.max_props.unwrap_or(m.min_props).max(m.min_props) } else { 0 };
        if (cap as usize + 1) * (n + 1) * 2 * (1usize << tracked) > 20_000 {
            if let Some((_, _, p)) = m.dep_req.first() {
                return Err(unsupported(p, "dependentRequired: too many properties for key-set states"));
            }
            return Err(unsupported(ptr, "minProperties/maxProperties over too many properties"));
        }
        // Rules R[i][c][started][mask]: the rest of the object from key i, c keys emitted
        // (capped), `mask` the dependency-named keys present so far (a subset of `dep_mask`).
        // Past the any-order bound (strict_mode=false), additional entries may also come before
        // each listed key taken (`(addl sep)*`), not only after the last. Unambiguous: a run of
        // additional entries belongs to the next listed key taken, or to the tail if none is.
        // Not with a tracked entry count, whose states the run would have to step.
        let extras_before = match &addl {
            Some(a) if free_order && !need_count => Some(format!("({a} {sep})* ")),
            _ => None,
        };
        let base = self.e.fresh("obj");
        let rname = |i: usize, c: u64, s: bool, mask: u64| {
            if mask == 0 {
                format!("{base}.{i}_{c}_{}", u8::from(s))
            } else {
                format!("{base}.{i}_{c}_{}_{mask:x}", u8::from(s))
            }
        };
        let mut defined: HashSet<String> = HashSet::new();
        let mut todo: Vec<(usize, u64, bool, u64)> = vec![(0, 0, false, 0)];
        let mut bodies: Vec<(String, String)> = Vec::new();
        while let Some((i, c, s, mask)) = todo.pop() {
            let name = rname(i, c, s, mask);
            if !defined.insert(name.clone()) {
                continue;
            }
            let mut alts = Vec::new();
            if i == n && !deps_hold(mask) {
                // A dependency fails: no continuation (the rule matches nothing).
            } else if i == n {
                // Additional entries: k more with min_props <= c + k <= max_props.
                let lo = if need_count { m.min_props.saturating_sub(c) } else { 0 };
                let hi = if need_count { m.max_props.map(|x| x.saturating_sub(c)) } else { None };
                let fits_max = !need_count || m.max_props.is_none_or(|x| c <= x);
                if fits_max {
                    if lo == 0 && s {
                        alts.push("\"\"".to_string());
                    }
                    if let Some(a) = &addl {
                        if hi.is_none_or(|h| h >= 1) {
                            let first = if s { format!("{sep} {a}") } else { a.clone() };
                            let lo2 = lo.saturating_sub(1);
                            let hi2 = hi.map(|h| h - 1);
                            if lo2 > u64::from(MAX_REPEAT_BOUND) || hi2.is_some_and(|h| h > u64::from(MAX_REPEAT_BOUND))
                            {
                                return Err(Error::limit("minProperties/maxProperties", MAX_REPEAT_BOUND as usize)
                                    .at_pointer(ptr));
                            }
                            let rep = match hi2 {
                                Some(h) => format!("{{{lo2},{h}}}"),
                                None => format!("{{{lo2},}}"),
                            };
                            alts.push(format!("{first} ({sep} {a}){rep}"));
                        }
                    } else if lo == 0 && !s {
                        // Not started, nothing left: only the empty object (handled outside).
                    }
                }
            } else {
                let (entry, required) = &entries[i];
                let c2 = if need_count { c + 1 } else { 0 };
                let over = need_count && m.max_props.is_some_and(|x| c2 > x);
                if !over {
                    let c2 = c2.min(cap);
                    let c2 = if need_count && m.max_props.is_none() { c2.min(m.min_props) } else { c2 };
                    let pre = if s { format!("{sep} ") } else { String::new() };
                    let mask2 = dep_bit[i].map_or(mask, |b| mask | (1u64 << b));
                    alts.push(format!(
                        "{pre}{}{entry} {}",
                        extras_before.as_deref().unwrap_or(""),
                        rname(i + 1, c2, true, mask2)
                    ));
                    todo.push((i + 1, c2, true, mask2));
                }
                if !required {
                    alts.push(rname(i + 1, c, s, mask));
                    todo.push((i + 1, c, s, mask));
                }
            }
            bodies.push((name, alts.join(" | ")));
        }
        // A rule with no alternatives matches nothing.
        for (name, body) in bodies {
            let body = if body.is_empty() { self.nothing() } else { body };
            #[cfg(test)]
            key_sets::RULE_BYTES.with(|v| v.borrow_mut().push(name.len() + body.len()));
            self.e.define(&name, &body)?;
        }
        let mut alts = Vec::new();
        let empty_ok = n_req == 0 && m.min_props == 0 && deps_hold(0);
        if empty_ok {
            alts.push(self.empty('{', '}'));
        }
        alts.push(format!("{} {} {}", self.open('{', g.depth), rname(0, 0, false, 0), self.close('}', g.depth)));
        Ok(Some(emit::alt(&alts)))
    }

    /// An object whose known entries come in any order, each at most once, with additional
    /// entries (`addl`) anywhere. States are (set of known keys seen, entries so far capped for
    /// min/maxProperties, started); the caller bounds their number by [`MAX_ANY_ORDER_STATES`].
    /// Unambiguous: `addl`'s key language excludes every known key.
    fn object_any_order(
        &mut self,
        g: &Goal,
        m: &Merged,
        entries: &[(String, bool)],
        names: &[String],
        addl: Option<&str>,
        need_count: bool,
    ) -> Result<String> {
        let n = entries.len();
        let base = self.e.fresh("obj");
        let mut erules = Vec::with_capacity(n);
        for (i, (e, _)) in entries.iter().enumerate() {
            let name = format!("{base}.e{i}");
            self.e.define(&name, e)?;
            erules.push(name);
        }
        let req_mask: u64 = entries.iter().enumerate().filter(|(_, e)| e.1).fold(0, |a, (i, _)| a | (1u64 << i));
        let top = m.max_props.map_or(m.min_props, |x| x + 1);
        let sep = self.sep_item(g.depth);
        // An earlier object with the same key-set language: its rules serve this one. This
        // object's rules are still counted against `MAX_OUTPUT_BYTES` (names and lengths as if
        // written), so that sharing changes no conversion's outcome.
        // PERF: o13029 wrote 254 any-order objects, 56 of them distinct (84% of its key-set rules).
        let key = AnyOrderKey {
            entries: entries.to_vec(),
            names: names.to_vec(),
            addl: addl.map(|a| self.e.canonical(a).to_string()),
            sep: sep.clone(),
            need_count,
            props: (m.min_props, m.max_props),
            deps: m.dep_req.iter().map(|(k, req, _)| (k.clone(), req.clone())).collect(),
        };
        let shared = self.any_order_objects.get(&key).cloned();
        if shared.is_none() {
            self.any_order_objects.insert(key, base.clone());
        }
        // Appends the name of the rule for state (mask, c, s) to `out`.
        let push_name = |out: &mut String, (mask, c, s): (u64, u64, bool)| {
            let _ = write!(out, "{base}.{mask:x}_{c}_{}", u8::from(s));
        };
        let mut defined: HashSet<(u64, u64, bool), crate::fasthash::FastState> = HashSet::default();
        let mut todo: Vec<(u64, u64, bool)> = vec![(0, 0, false)];
        let mut bodies: Vec<(String, String)> = Vec::new();
        // With `direct_key_sets`: the states, their text's length only computed (`super::key_sets`).
        let mut states: Vec<KeyState> = Vec::new();
        let direct = self.direct_key_sets;
        // Only the lengths of the rules' text: written apart, or not at all (`shared`).
        let count_only = direct || shared.is_some();
        // PERF: one body and one choice buffer for every rule instead of a string per entry
        // (formatting was half of o3626's conversion). The text is the same as joining
        // `entry next` alternatives with " | ". In IR mode only its length is summed (formatting
        // it was ~25% of o44208's conversion).
        let (mut body, mut choice) = (String::new(), String::new());
        while let Some((mask, c, s)) = todo.pop() {
            if !defined.insert((mask, c, s)) {
                continue;
            }
            let empty = s
                && mask & req_mask == req_mask
                && (!need_count || c >= m.min_props)
                && Self::deps_hold(m, names, mask);
            let c2 = if need_count { (c + 1).min(top) } else { 0 };
            let over = need_count && m.max_props.is_some_and(|x| c2 > x);
            let (mut n_entries, mut choice_len) = (0, 0);
            choice.clear();
            if !over {
                let nexts = (0..n).filter(|i| mask & (1u64 << i) == 0).map(|i| (Some(i), mask | (1u64 << i)));
                for (i, next_mask) in nexts.chain(addl.map(|_| (None, mask))) {
                    let entry = i.map_or_else(|| addl.unwrap_or_default(), |i| erules[i].as_str());
                    let next = (next_mask, c2, true);
                    if count_only {
                        // `" | "`, `entry`, `' '`, next's name.
                        let bar = if n_entries > 0 { 3 } else { 0 };
                        choice_len += bar + entry.len() + 1 + key_sets::state_name_len(base.len(), next);
                    } else {
                        if n_entries > 0 {
                            choice.push_str(" | ");
                        }
                        choice.push_str(entry);
                        choice.push(' ');
                        push_name(&mut choice, next);
                    }
                    todo.push(next);
                    n_entries += 1;
                }
            }
            if count_only {
                // The length of the body text written below in text mode.
                let sep_len = match (s, n_entries) {
                    (_, 0) | (false, _) => 0,
                    (true, 1) => sep.len() + 1,
                    (true, _) => sep.len() + 3,
                };
                let alts_len = if empty { 2 } else { 0 } + if empty && n_entries > 0 { 3 } else { 0 };
                let mut len = alts_len + sep_len + choice_len;
                if len == 0 {
                    len = self.nothing().len();
                }
                let name_len = key_sets::state_name_len(base.len(), (mask, c, s));
                #[cfg(test)]
                key_sets::RULE_BYTES.with(|v| v.borrow_mut().push(name_len + len));
                self.e.defer(name_len, len)?;
                if shared.is_none() {
                    let next = (n_entries > 0).then_some(c2);
                    states.push(KeyState { mask, c, s, empty, next });
                }
                continue;
            }
            body.clear();
            if empty {
                body.push_str("\"\"");
            }
            if n_entries > 0 && !body.is_empty() {
                body.push_str(" | ");
            }
            // The separator is written once before the choice of the next entry.
            // PERF: one copy of `ws "," ws` per rule instead of one per entry.
            match (s, n_entries) {
                (_, 0) => {}
                (true, 1) => {
                    let _ = write!(body, "{sep} {choice}");
                }
                (true, _) => {
                    let _ = write!(body, "{sep} ({choice})");
                }
                (false, _) => body.push_str(&choice),
            }
            let mut name = String::new();
            push_name(&mut name, (mask, c, s));
            bodies.push((name, body.clone()));
        }
        if self.direct_key_sets && shared.is_none() {
            let sep_ir = if self.opts.any_whitespace {
                key_sets::Sep::Ws(self.ws.clone())
            } else {
                key_sets::Sep::Lit(self.sep_item_text(g.depth))
            };
            debug_assert_eq!(
                match &sep_ir {
                    key_sets::Sep::Ws(w) => format!("{w} \",\" {w}"),
                    key_sets::Sep::Lit(l) => emit::lit(l),
                },
                sep
            );
            let nothing = states.iter().any(|st| !st.empty && st.next.is_none()).then(|| self.nothing());
            self.e.key_sets.push(key_sets::KeySetObject {
                base: base.clone(),
                entries: erules,
                addl: addl.map(str::to_string),
                sep: sep_ir,
                nothing,
                states,
            });
        }
        for (name, body) in bodies {
            let body = if body.is_empty() { self.nothing() } else { body };
            #[cfg(test)]
            key_sets::RULE_BYTES.with(|v| v.borrow_mut().push(name.len() + body.len()));
            self.e.define(&name, &body)?;
        }
        let mut alts = Vec::new();
        if req_mask == 0 && m.min_props == 0 && Self::deps_hold(m, names, 0) {
            alts.push(self.empty('{', '}'));
        }
        let mut first = String::new();
        key_sets::push_state_name(&mut first, shared.as_deref().unwrap_or(&base), (0, 0, false));
        alts.push(format!("{} {first} {}", self.open('{', g.depth), self.close('}', g.depth)));
        Ok(emit::alt(&alts))
    }

    /// Whether `dependentRequired` holds for the known keys in `mask` (entries in key order).
    fn deps_hold(m: &Merged, names: &[String], mask: u64) -> bool {
        let has = |k: &str| names.iter().position(|n| n == k).is_some_and(|i| mask & (1u64 << i) != 0);
        m.dep_req.iter().all(|(k, req, _)| !has(k) || req.iter().all(|r| has(r)))
    }

    /// Whether a known key passes `propertyNames`.
    fn key_name_ok(&mut self, m: &Merged, name: &str) -> Result<bool> {
        let v = Value::String(name.to_string());
        for (id, _) in &m.prop_names {
            if !self.valid(*id, &v, 0)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `key kv value` for keys outside `excluded`, split by which patternProperties they match.
    fn additional_entry(
        &mut self,
        g: &Goal,
        m: &Merged,
        excluded: &[&str],
        pattern_dfas: &[(Rc<CharDfa>, SchemaId)],
        closed_by_strict: bool,
        ptr: &str,
    ) -> Result<Option<String>> {
        let d = self.child_depth(g.depth);
        let kv = self.sep_kv();
        // Plain keys (no propertyNames, no patterns): every string but the excluded ones, a
        // language that is never empty, spelled by `jstr::not_in` without building its DFA.
        // PERF: the DFA difference took a third of a typical schema's compile time.
        let plain = m.prop_names.is_empty() && pattern_dfas.is_empty();
        if pattern_dfas.len() > 6 {
            return Err(unsupported(ptr, "more than 6 patternProperties"));
        }
        // Value schemas of the keys matching exactly the patterns of each subset (mask) of
        // `pattern_dfas`: those patterns' per part, else that part's additionalProperties; None
        // when some part refuses such keys.
        let values: Vec<Option<Vec<SchemaId>>> = (0u32..1 << pattern_dfas.len())
            .map(|mask| {
                let mut ids: Vec<SchemaId> =
                    (0..pattern_dfas.len()).filter(|j| mask & (1 << j) != 0).map(|j| pattern_dfas[j].1).collect();
                if closed_by_strict && mask == 0 {
                    return None;
                }
                for p in &m.obj {
                    if p.patterns.iter().any(|(_, id, _)| ids.contains(id)) {
                        continue;
                    }
                    match p.additional {
                        Rest::Any if !closed_by_strict => {}
                        Rest::Any | Rest::Closed => return None,
                        Rest::Schema(x) => ids.push(x),
                    }
                }
                Some(ids)
            })
            .collect();
        // Key languages are built once per conversion for each distinct key (objects with the
        // same keys and patterns, or one object met in several goals, ask again).
        let langs_key = KeyLangsKey {
            excluded: if plain { vec![] } else { excluded.iter().map(|x| (*x).to_string()).collect() },
            patterns: m.obj.iter().flat_map(|p| p.patterns.iter().map(|(pat, _, _)| pat.clone())).collect(),
            prop_names: m.prop_names.iter().map(|(id, _)| *id).collect(),
        };
        let langs = match self.key_langs.get(&langs_key) {
            Some(l) => l.clone(),
            None => {
                // The partition by patterns (and propertyNames) first, then the listed keys
                // out of each part: a part narrowed by a pattern meets few of them.
                let parts_key = KeyLangsKey { excluded: vec![], ..langs_key.clone() };
                let parts = match self.key_langs.get(&parts_key) {
                    Some(p) => p.clone(),
                    None => {
                        let p = Rc::new(self.key_parts(m, pattern_dfas)?);
                        self.key_langs.insert(parts_key, p.clone());
                        p
                    }
                };
                let l = if langs_key.excluded.is_empty() {
                    parts
                } else {
                    let mut l = Vec::with_capacity(parts.len());
                    for part in parts.iter() {
                        l.push(match part {
                            Some(p) => Some(p.minus_words(excluded)?).filter(|d| !d.is_empty()),
                            None => None,
                        });
                    }
                    Rc::new(l)
                };
                self.key_langs.insert(langs_key, l.clone());
                l
            }
        };
        let mut alts = Vec::new();
        let mut parts: Vec<(&CharDfa, String)> = Vec::new();
        for (ids, lang) in values.into_iter().zip(langs.iter()) {
            let (Some(ids), Some(lang)) = (ids, lang) else { continue };
            let Some(val) = self.rule_for(Goal { ids, nots: vec![], done: vec![], neg: vec![], depth: d })? else {
                continue;
            };
            if plain {
                let key = jstr::not_in_for(self.opts.spelling, &mut self.e, excluded)?;
                alts.push(format!("\"\\\"\" {key} \"\\\"\" {kv} {val}"));
            } else {
                parts.push((lang, val));
            }
        }
        let joined = self.split_keys(&parts, excluded.is_empty(), &kv, &mut alts)?;
        if alts.is_empty() {
            return Ok(None);
        }
        let mut name = self.e.fresh("obj_extra");
        if joined {
            // Kept as a rule (`json_schema_to_grammar`): one key automaton for every caller.
            name.push_str(super::super::SPLIT_KEYS_SUFFIX);
        }
        self.e.define(&name, &alts.join(" | "))?;
        Ok(Some(name))
    }

    /// `key kv value` entries for keys split into languages by their values, `(keys, value rule)`
    /// (disjoint languages). Several parts print as one automaton whose final states read the
    /// closing quote into their part's value: a key's text reads alike in every part until it
    /// ends, so no position holds one item per part (a counted key pattern's start would be
    /// two partial languages, each refusing texts the other reads, walked token by token).
    /// Separate alternatives when that automaton is over the state limit, or when the parts
    /// exclude listed keys (`join` false): their tries made the joined automaton and its build
    /// 10-20% slower to compile (MaskBench o65325, clang-format), and a part that is every text
    /// but some words or a pattern reads every text on its own. Pushes onto `alts`; whether the
    /// parts were joined.
    fn split_keys(
        &mut self,
        parts: &[(&CharDfa, String)],
        join: bool,
        kv: &str,
        alts: &mut Vec<String>,
    ) -> Result<bool> {
        let mode = jstr::text_mode(self.opts.spelling);
        let entry_end = |val: &str| format!("\"\\\"\" {kv} {val}");
        let mut joined = (join && parts.len() > 1).then(CharDfa::empty);
        for (j, (lang, _)) in parts.iter().enumerate() {
            joined = joined.and_then(|u| u.union(&lang.then_exit(j as u32)).ok());
        }
        if let Some(keys) = joined {
            let exits: Vec<String> = parts.iter().map(|(_, val)| entry_end(val)).collect();
            let prefix = format!("{}.re", self.e.fresh("key"));
            self.e.raw(&keys.to_ebnf_with_exits(&prefix, mode, &exits))?;
            alts.push(format!("\"\\\"\" {prefix}"));
            return Ok(true);
        }
        for (lang, val) in parts {
            let prefix = format!("{}.re", self.e.fresh("key"));
            self.e.raw(&lang.to_ebnf(&prefix, mode))?;
            alts.push(format!("\"\\\"\" {prefix} {}", entry_end(val)));
        }
        Ok(false)
    }

    /// The language of keys inside `propertyNames` that match exactly the patterns of each subset
    /// of `pattern_dfas` (index: bit j = pattern j), None when empty.
    fn key_parts(&mut self, m: &Merged, pattern_dfas: &[(Rc<CharDfa>, SchemaId)]) -> Result<Vec<Option<CharDfa>>> {
        // Key language restrictions from propertyNames (string keywords only).
        let mut names_dfa: Option<CharDfa> = None;
        for (id, p) in &m.prop_names {
            let gx = Goal { ids: vec![*id], nots: vec![], done: vec![], neg: vec![], depth: 0 };
            let mx = self.merge(&gx)?;
            if !mx.pending.is_empty() || mx.enums.is_some() || !mx.not_values.is_empty() {
                return Err(unsupported(p, "propertyNames with applicators or enum is not supported"));
            }
            if mx.types & STR == 0 {
                names_dfa = Some(CharDfa::empty());
                continue;
            }
            let mut dfa = CharDfa::length_between(mx.min_len, mx.max_len).map_err(|e| ptr_if_none(e, p))?;
            for (pat, pp) in &mx.patterns {
                let re = Regex::parse(pat, RegexFlags::default()).map_err(|e| ptr_if_none(e, pp))?;
                dfa = dfa.intersect(&CharDfa::from_regex(&re, Anchoring::Search).map_err(|e| ptr_if_none(e, pp))?)?;
            }
            for (f, fp) in &mx.formats {
                dfa = dfa.intersect(&format_dfa(f).map_err(|e| ptr_if_none(e, fp))?)?;
            }
            names_dfa = Some(match names_dfa {
                None => dfa,
                Some(o) => o.intersect(&dfa)?,
            });
        }
        let mut base = CharDfa::any_string();
        if let Some(nd) = &names_dfa {
            base = base.intersect(nd)?;
        }
        let mut langs = Vec::with_capacity(1 << pattern_dfas.len());
        for mask in 0u32..(1 << pattern_dfas.len()) {
            let mut lang = base.clone();
            for (j, (dfa, _)) in pattern_dfas.iter().enumerate() {
                lang = if mask & (1 << j) != 0 { lang.intersect(dfa)? } else { lang.difference(dfa)? };
                if lang.is_empty() {
                    break;
                }
            }
            langs.push((!lang.is_empty()).then_some(lang));
        }
        Ok(langs)
    }
}
