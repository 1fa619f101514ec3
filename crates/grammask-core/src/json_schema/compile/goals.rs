//! Goals: emitting one goal's rule, distributing pending applicators (`anyOf`, `oneOf`, `not`,
//! `if`/`then`/`else`, dependent schemas) into alternative goals, and negations.
//!
//! Pipeline place: called from the worklist of [`Conv::run`] for each distinct goal; hands
//! applicator-free goals to the per-type writers (`scalars.rs`).
use super::*;

/// `true` and `{}`: schemas that every instance satisfies.
fn always_holds(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

impl Conv<'_> {
    /// `m` is `self.merge(g)`.
    pub(super) fn emit_goal(&mut self, g: &Goal, m: &Merged) -> Result<Option<String>> {
        // A goal held to a finite `enum`/`const` is decided value by value by the validator,
        // applicators and negations included (see `emit_base`): exact without distributing them.
        if m.enums.is_some() {
            return self.emit_base(g, m);
        }
        // Negated subschemas first: they become atomic negations.
        if let Some(&x) = g.nots.first() {
            let mut rest = g.clone();
            rest.nots.remove(0);
            return self.emit_negation(&rest, m.types, x, &self.doc.node(x).ptr.clone());
        }
        if let Some((sid, kind, ptr)) = m.pending.first().cloned() {
            let mut base = g.clone();
            base.done.push((sid, kind));
            let n_branches =
                |this: &Self, k: &str| this.doc.node(sid).value.get(k).and_then(Value::as_array).map_or(0, Vec::len);
            match kind {
                Kind::AnyOf => {
                    let mut alts = Vec::new();
                    for i in 0..n_branches(self, "anyOf") {
                        let b = self.doc.child(sid, &["anyOf", &i.to_string()]);
                        if let Some(r) = self.rule_for(base.with_id(b))? {
                            alts.push(r);
                        }
                    }
                    let body = alts.join(" | ");
                    self.last_choice = Some(alts);
                    return Ok(if body.is_empty() { None } else { Some(body) });
                }
                Kind::OneOf => {
                    let n = n_branches(self, "oneOf");
                    let branches: Vec<SchemaId> =
                        (0..n).map(|i| self.doc.child(sid, &["oneOf", &i.to_string()])).collect();
                    let mut merged = Vec::new();
                    for &b in &branches {
                        let gb = base.with_id(b).norm();
                        merged.push(self.merge(&gb)?);
                    }
                    let mut alts = Vec::new();
                    for (i, &b) in branches.iter().enumerate() {
                        let mut gb = base.with_id(b);
                        for (j, &o) in branches.iter().enumerate() {
                            if i != j && !self.disjoint(&merged[i], &merged[j])? {
                                gb.nots.push(o);
                            }
                        }
                        if let Some(r) = self.rule_for(gb)? {
                            alts.push(r);
                        }
                    }
                    let _ = ptr;
                    let body = alts.join(" | ");
                    self.last_choice = Some(alts);
                    return Ok(if body.is_empty() { None } else { Some(body) });
                }
                Kind::Not => {
                    let x = self.doc.child(sid, &["not"]);
                    return self.emit_negation(&base, m.types, x, &ptr);
                }
                Kind::Dep(i) => {
                    // Not an object, an object without the key, or one with it that satisfies
                    // the dependent schema: three disjoint cases.
                    let (name, dep) = self.dep_schemas(sid)[i as usize].clone();
                    let mut alts = Vec::new();
                    for n in [Neg::Types(OBJ), Neg::Absent(name.clone())] {
                        let mut gn = base.clone();
                        gn.neg.push(n);
                        if let Some(r) = self.rule_for(gn)? {
                            alts.push(r);
                        }
                    }
                    let mut yes = base.with_id(dep);
                    yes.neg.push(Neg::Has(name));
                    if let Some(r) = self.rule_for(yes)? {
                        alts.push(r);
                    }
                    return Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) });
                }
                Kind::If => {
                    let (i, then, els) = self.then_else(sid);
                    let mut alts = Vec::new();
                    let mut yes = base.with_id(i);
                    yes.ids.extend(then);
                    if let Some(r) = self.rule_for(yes)? {
                        alts.push(r);
                    }
                    let mut no = base.clone();
                    no.nots.push(i);
                    no.ids.extend(els);
                    if let Some(r) = self.rule_for(no)? {
                        alts.push(r);
                    }
                    return Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) });
                }
            }
        }
        self.emit_base(g, m)
    }

    /// The `if` subschema of node `sid` (which has one) and its `then` and `else` subschemas
    /// (`None` when absent: a missing branch always holds), read in place: the node's keyword
    /// map is not copied (PERF: copying it copied the whole subtree, for every `if` goal).
    fn then_else(&self, sid: SchemaId) -> (SchemaId, Option<SchemaId>, Option<SchemaId>) {
        let value = self.doc.node(sid).value;
        let branch = |k: &str| value.get(k).map(|_| self.doc.child(sid, &[k]));
        (self.doc.child(sid, &["if"]), branch("then"), branch("else"))
    }

    /// The schema-valued entries of `dependentSchemas` and `dependencies` of node `id`, as
    /// (key, subschema), in document order; `true` and `{}` are left out (they always hold).
    pub(super) fn dep_schemas(&self, id: SchemaId) -> Vec<(String, SchemaId)> {
        let mut out = Vec::new();
        let Some(map) = self.doc.node(id).value.as_object() else { return out };
        for k in ["dependencies", "dependentSchemas"] {
            let Some(Value::Object(o)) = map.get(k) else { continue };
            for (name, dep) in o {
                let trivial = matches!(dep, Value::Bool(true) | Value::Array(_))
                    || dep.as_object().is_some_and(serde_json::Map::is_empty);
                if !trivial {
                    out.push((name.clone(), self.doc.child(id, &[k, name])));
                }
            }
        }
        out
    }

    /// Alternatives for `g ∧ ¬x`, when `x`'s negation splits into atomic negations. `gt` is the
    /// types of `g`'s merge: the caller's `m.types`, as `g` differs from the caller's goal only
    /// in `nots` (which a merge does not read) or in one more `Kind::Not` done (which changes
    /// only the merge's pending applicators).
    fn emit_negation(&mut self, g: &Goal, gt: u8, x: SchemaId, ptr: &str) -> Result<Option<String>> {
        let gx = Goal { ids: vec![x], nots: vec![], done: vec![], neg: vec![], depth: g.depth };
        let mx = self.merge(&gx)?;
        let mut alts_of_applicators = Vec::new();
        for (sid, kind, p) in &mx.pending {
            alts_of_applicators.extend(self.negated_applicator(g, *sid, *kind, p, ptr)?);
        }
        let mut negs: Vec<Neg> = Vec::new();
        if mx.types == 0 {
            // ¬false = true
            return self.rule_for(g.clone());
        }
        let refuse = |what: &str| Err(unsupported(ptr, format!("not: cannot negate {what} exactly")));
        // Constraints of a type the goal excludes (`gt`) cannot be what fails: they need no
        // negation.
        if mx.types != ALL {
            negs.push(Neg::Types(mx.types));
        }
        if let Some(vals) = &mx.enums {
            negs.push(Neg::Values(vals.iter().map(canonical).collect()));
        }
        for r in &mx.required {
            negs.push(Neg::Absent(r.clone()));
        }
        if !mx.mults.is_empty() && gt & (INT | FRAC) != 0 {
            return refuse("multipleOf");
        }
        // Bounds restrict numbers only: failing one means "a number on the other side".
        if let Some((d, strict)) = &mx.lo {
            negs.push(Neg::Below(d.clone(), *strict));
        }
        if let Some((d, strict)) = &mx.hi {
            negs.push(Neg::Above(d.clone(), *strict));
        }
        if mx.min_len > 0 {
            negs.push(Neg::ShortStr(mx.min_len - 1));
        }
        if let Some(n) = mx.max_len {
            negs.push(Neg::LongStr(n.saturating_add(1)));
        }
        for (p, _) in &mx.patterns {
            negs.push(Neg::NoMatch(p.clone()));
        }
        for (f, _) in &mx.formats {
            negs.push(Neg::NoFormat(f.clone()));
        }
        if gt & ARR != 0 {
            // Arrays fail on their count or on an item failing `items`; prefix items, `contains` and
            // `uniqueItems` are refused.
            if mx.unique.is_some() || mx.arr.iter().any(|p| !p.prefix.is_empty()) {
                return refuse("array constraints");
            }
            // `contains` (at least once, no maxContains) fails when no item satisfies it.
            for (c, lo, hi, _) in &mx.contains {
                match (lo, hi) {
                    (0, None) => {}
                    (1, None) => negs.push(Neg::NoItemIs(*c)),
                    _ => return refuse("minContains/maxContains"),
                }
            }
            if mx.min_items > 0 {
                negs.push(Neg::FewItems(mx.min_items - 1));
            }
            if let Some(n) = mx.max_items {
                negs.push(Neg::ManyItems(n.saturating_add(1)));
            }
            for p in &mx.arr {
                match p.rest {
                    Rest::Any => {}
                    Rest::Closed => negs.push(Neg::ManyItems(1)),
                    Rest::Schema(x) if *self.doc.node(x).value == Value::Bool(false) => negs.push(Neg::ManyItems(1)),
                    Rest::Schema(x) if always_holds(self.doc.node(x).value) => {}
                    Rest::Schema(x) => negs.push(Neg::ItemFails(x)),
                }
            }
        }
        if gt & OBJ != 0 {
            // `properties` fail when a listed key is present with a value that fails its schema.
            for p in &mx.obj {
                for (name, id) in &p.props {
                    negs.push(Neg::PropFails((*name).to_string(), *id));
                }
            }
            // Key patterns, additional properties and `propertyNames` fail on some key: exact
            // when the goal itself allows finitely many keys (a closed part of its own without
            // patterns), through one witness key each. Schemas `true`/`{}` cannot fail.
            let always = |id: SchemaId| always_holds(self.doc.node(id).value);
            let needs_witness = |p: &ObjPart| {
                p.patterns.iter().any(|(_, id, _)| !always(*id))
                    || match p.additional {
                        Rest::Any => false,
                        Rest::Closed => true,
                        Rest::Schema(x) => !always(x),
                    }
            };
            if mx.min_props > 0 || mx.max_props.is_some() || !mx.dep_req.is_empty() {
                return refuse("object constraints other than required");
            }
            let need = mx.obj.iter().any(needs_witness) || !mx.prop_names.is_empty();
            if need {
                let Some(keys) = self.listed_keys_of_closed(g)? else {
                    return refuse("key patterns, additional properties or propertyNames of an object whose keys are not a listed set");
                };
                let undecided = || unsupported(ptr, "not: a key pattern cannot be decided");
                for k in keys {
                    for p in &mx.obj {
                        if p.props.iter().any(|(n, _)| *n == k) {
                            continue; // covered by `PropFails` above
                        }
                        let mut matched = false;
                        for (pat, id, _) in &p.patterns {
                            if Self::pattern_matches(pat, &k).ok_or_else(undecided)? {
                                matched = true;
                                if !always_holds(self.doc.node(*id).value) {
                                    negs.push(Neg::PropFails(k.clone(), *id));
                                }
                            }
                        }
                        match p.additional {
                            _ if matched => {}
                            Rest::Any => {}
                            Rest::Closed => negs.push(Neg::Has(k.clone())),
                            Rest::Schema(x) if *self.doc.node(x).value == Value::Bool(false) => {
                                negs.push(Neg::Has(k.clone()));
                            }
                            Rest::Schema(x) if always_holds(self.doc.node(x).value) => {}
                            Rest::Schema(x) => negs.push(Neg::PropFails(k.clone(), x)),
                        }
                    }
                    for (names, _) in &mx.prop_names {
                        if !self.valid(*names, &Value::String(k.clone()), 1)? {
                            negs.push(Neg::Has(k.clone()));
                        }
                    }
                }
            }
        }
        let mut alts = Vec::new();
        for gn in alts_of_applicators {
            if let Some(r) = self.rule_for(gn)? {
                alts.push(r);
            }
        }
        // No keyword to fail and no applicator: ¬true = false.
        for n in negs {
            let mut gn = g.clone();
            gn.neg.push(n);
            if let Some(r) = self.rule_for(gn)? {
                alts.push(r);
            }
        }
        Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) })
    }

    /// Goals whose union is `g ∧ ¬A` for the applicator `kind` of node `sid` (`ptr`: the negated
    /// schema, for messages). A negation discards annotations, and the positive subschemas added
    /// here are below `sid`, which no positive part of `g` evaluates in place (else `g` holds
    /// `sid` and its negation: an empty language), so they evaluate nothing for `unevaluated*`.
    fn negated_applicator(&self, g: &Goal, sid: SchemaId, kind: Kind, p: &str, ptr: &str) -> Result<Vec<Goal>> {
        let branches = |k: &str| -> Vec<SchemaId> {
            let n = self.doc.node(sid).value.get(k).and_then(Value::as_array).map_or(0, Vec::len);
            (0..n).map(|i| self.doc.child(sid, &[k, &i.to_string()])).collect()
        };
        let none_of = |bs: &[SchemaId]| {
            let mut gn = g.clone();
            gn.nots.extend_from_slice(bs);
            gn.norm()
        };
        Ok(match kind {
            // ¬anyOf: no branch holds.
            Kind::AnyOf => vec![none_of(&branches("anyOf"))],
            // ¬oneOf: no branch holds, or two (at least) do.
            Kind::OneOf => {
                let bs = branches("oneOf");
                if bs.len() > MAX_NEGATED_ONEOF_BRANCHES {
                    return Err(unsupported(
                        p,
                        format!(
                            "negation (at {ptr}) of a oneOf with more than {MAX_NEGATED_ONEOF_BRANCHES} branches is not supported"
                        ),
                    ));
                }
                let mut out = vec![none_of(&bs)];
                for i in 0..bs.len() {
                    for j in i + 1..bs.len() {
                        out.push(g.with_id(bs[i]).with_id(bs[j]).norm());
                    }
                }
                out
            }
            // ¬¬y = y.
            Kind::Not => vec![g.with_id(self.doc.child(sid, &["not"])).norm()],
            // ¬(if I then T else E) = (I ∧ ¬T) ∨ (¬I ∧ ¬E); a missing then/else always holds.
            Kind::If => {
                let (i, then, els) = self.then_else(sid);
                let mut out = Vec::new();
                if let Some(t) = then {
                    let mut yes = g.with_id(i);
                    yes.nots.push(t);
                    out.push(yes.norm());
                }
                if let Some(e) = els {
                    let mut no = g.clone();
                    no.nots.extend([i, e]);
                    out.push(no.norm());
                }
                out
            }
            // ¬(dependent schema of key k) = an object with k failing the dependent schema.
            Kind::Dep(i) => {
                let (name, dep) = self.dep_schemas(sid)[i as usize].clone();
                let mut gn = g.clone();
                gn.neg.push(Neg::Has(name));
                gn.nots.push(dep);
                vec![gn.norm()]
            }
        })
    }

    /// The keys `g` allows when one of its merged object parts is closed without key patterns
    /// (its listed properties); `None` when no such part bounds the keys.
    fn listed_keys_of_closed(&mut self, g: &Goal) -> Result<Option<Vec<String>>> {
        let m = self.merge(g)?;
        Ok(m.obj
            .iter()
            .filter(|p| p.patterns.is_empty())
            .find(|p| match p.additional {
                Rest::Closed => true,
                Rest::Schema(x) => *self.doc.node(x).value == Value::Bool(false),
                Rest::Any => false,
            })
            .map(|p| p.props.iter().map(|(n, _)| (*n).to_string()).collect()))
    }

    /// Whether key pattern `pat` matches `k` (search semantics); `None` when it cannot be decided.
    fn pattern_matches(pat: &str, k: &str) -> Option<bool> {
        let re = Regex::parse(pat, RegexFlags::default()).ok()?;
        Some(CharDfa::from_regex(&re, Anchoring::Search).ok()?.accepts(k))
    }

    /// Conservative disjointness: `true` only when no instance satisfies both.
    fn disjoint(&mut self, a: &Merged, b: &Merged) -> Result<bool> {
        if a.types & b.types == 0 {
            return Ok(true);
        }
        if let (Some(x), Some(y)) = (&a.enums, &b.enums) {
            if !x.iter().any(|p| y.iter().any(|q| json_eq(p, q))) {
                return Ok(true);
            }
        }
        // Pending `not`s only narrow a branch (and evaluate no properties), so reasoning on the
        // other keywords stays sound beside them; other applicators may evaluate properties.
        let only_nots = |m: &Merged| m.pending.iter().all(|p| p.1 == Kind::Not);
        if only_nots(a) && only_nots(b) && (a.types | b.types) & !OBJ & a.types & b.types == 0 {
            let (absent_a, absent_b) = (self.absent_keys(a), self.absent_keys(b));
            // Both can only meet as objects: a key one requires and the other forbids ...
            for (x, y, absent_y) in [(a, b, &absent_b), (b, a, &absent_a)] {
                for k in &x.required {
                    if y.absent.contains(k) || absent_y.contains(k) {
                        return Ok(true);
                    }
                    match Self::prop_ids(y, k) {
                        None => return Ok(true),
                        Some(ids) if !ids.is_empty() => {
                            let my =
                                self.merge(&Goal { ids, nots: vec![], done: vec![], neg: vec![], depth: 0 }.norm())?;
                            if my.types == 0 {
                                return Ok(true);
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
            // ... or a key required by both with disjoint values ...
            for k in &a.required {
                if !b.required.contains(k) {
                    continue;
                }
                let va = Self::prop_ids(a, k);
                let vb = Self::prop_ids(b, k);
                let (Some(va), Some(vb)) = (va, vb) else { return Ok(true) };
                let ma = self.merge(&Goal { ids: va, nots: vec![], done: vec![], neg: vec![], depth: 0 }.norm())?;
                let mb = self.merge(&Goal { ids: vb, nots: vec![], done: vec![], neg: vec![], depth: 0 }.norm())?;
                if ma.types & mb.types == 0 {
                    return Ok(true);
                }
                if let (Some(x), Some(y)) = (&ma.enums, &mb.enums) {
                    if !x.iter().any(|p| y.iter().any(|q| json_eq(p, q))) {
                        return Ok(true);
                    }
                }
            }
            // ... or an object of both has a key, and no key is allowed by both (closed objects
            // whose listed keys and key patterns do not meet).
            let needs_key = |m: &Merged| m.min_props > 0 || !m.required.is_empty();
            if (needs_key(a) || needs_key(b)) && self.no_key_allowed(&a.obj.iter().chain(&b.obj).collect::<Vec<_>>()) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Keys an object must not have by a pending `not` of a bare `required` of one key.
    fn absent_keys(&self, m: &Merged) -> Vec<String> {
        let mut out = Vec::new();
        for (sid, kind, _) in &m.pending {
            if *kind != Kind::Not {
                continue;
            }
            let x = self.doc.child(*sid, &["not"]);
            let Some(map) = self.doc.node(x).value.as_object() else { continue };
            let annotation = |k: &str| matches!(k, "description" | "title" | "$comment");
            if !map.keys().all(|k| k == "required" || annotation(k)) {
                continue;
            }
            if let Some(Value::Array(r)) = map.get("required") {
                if let [Value::String(k)] = r.as_slice() {
                    out.push(k.clone());
                }
            }
        }
        out
    }

    /// Whether no key is allowed by every one of `parts` (`false` when unknown). Only closed
    /// parts restrict keys (`additionalProperties: false`): their listed properties and the keys
    /// their patterns match.
    fn no_key_allowed(&self, parts: &[&ObjPart]) -> bool {
        let closed = |p: &&&ObjPart| match p.additional {
            Rest::Closed => true,
            Rest::Schema(x) => *self.doc.node(x).value == Value::Bool(false),
            Rest::Any => false,
        };
        let closed: Vec<&ObjPart> = parts.iter().filter(closed).copied().collect();
        if closed.is_empty() {
            return false;
        }
        // Without patterns the allowed keys are the names listed by every part: a set
        // intersection, no automaton. PERF: this test runs for many pairs of branches.
        if closed.iter().all(|p| p.patterns.is_empty()) {
            let (first, rest) = closed.split_first().expect("non-empty");
            let rest: Vec<std::collections::HashSet<&str>> =
                rest.iter().map(|p| p.props.iter().map(|(n, _)| *n).collect()).collect();
            return !first.props.iter().any(|(k, _)| rest.iter().all(|names| names.contains(k)));
        }
        Self::allowed_keys(&closed).is_some_and(|keys| keys.is_empty())
    }

    /// The keys every one of the closed `parts` allows (`None`: unknown): their listed properties
    /// and the keys their patterns match.
    fn allowed_keys(closed: &[&ObjPart]) -> Option<CharDfa> {
        let mut out: Option<CharDfa> = None;
        for p in closed {
            let mut lang = CharDfa::literals(p.props.iter().map(|(name, _)| *name)).ok()?;
            for (pat, _, _) in &p.patterns {
                let re = Regex::parse(pat, RegexFlags::default()).ok()?;
                lang = lang.union(&CharDfa::from_regex(&re, Anchoring::Search).ok()?).ok()?;
            }
            out = Some(match out {
                None => lang,
                Some(o) => o.intersect(&lang).ok()?,
            });
        }
        out
    }

    /// Value schemas for key `k` from `properties`, matching `patternProperties` and
    /// additional properties; `None` if some part forbids the key. A pattern that cannot be
    /// decided here counts as matching with no schema (conservative: nothing is concluded).
    fn prop_ids(m: &Merged, k: &str) -> Option<Vec<SchemaId>> {
        let mut ids = Vec::new();
        for p in &m.obj {
            let mut covered = false;
            if let Some((_, id)) = p.props.iter().find(|(n, _)| *n == k) {
                ids.push(*id);
                covered = true;
            }
            for (pat, id, _) in &p.patterns {
                let matched = Regex::parse(pat, RegexFlags::default())
                    .and_then(|re| CharDfa::from_regex(&re, Anchoring::Search))
                    .map(|d| d.accepts(k));
                match matched {
                    Ok(true) => {
                        ids.push(*id);
                        covered = true;
                    }
                    Ok(false) => {}
                    Err(_) => covered = true,
                }
            }
            if !covered {
                match p.additional {
                    Rest::Schema(x) => ids.push(x),
                    Rest::Closed => return None,
                    Rest::Any => {}
                }
            }
        }
        Some(ids)
    }
}
