//! Merging: the keywords of a goal's schemas (sibling keywords, `allOf`, `$ref`) intersected into
//! one [`Merged`], with `unevaluatedProperties`/`unevaluatedItems` applied.
//!
//! Pipeline place: the first step of emitting every goal ([`Conv::rule_for`], `goals.rs`).
use super::*;

impl<'a> Conv<'a> {
    /// [`Conv::merge_uncached`] of `g`, memoized when `g` is one schema with no applicator done
    /// and no atomic negation (PERF: `emit_negation` and the property goals of `emit_base`
    /// merged the same schemas again; goals of several schemas rarely repeat, and keeping their
    /// merges cost more than it saved). Exact: a merge is a function of `g.ids` (in order),
    /// `g.done` and `g.neg` (it never reads `g.nots` or `g.depth`), of the options and
    /// `has_uneval` (fixed for the conversion), and of the document's index, which is unchanged
    /// while `doc.version` is (references resolved before are cached and resolve alike). An
    /// entry is kept only when its merge left the index unchanged, and all are dropped when the
    /// index changes; errors are not kept (they end the conversion).
    pub(super) fn merge(&mut self, g: &Goal) -> Result<Rc<Merged<'a>>> {
        let single = match g.ids.as_slice() {
            [x] if g.done.is_empty() && g.neg.is_empty() => *x,
            _ => return Ok(Rc::new(self.merge_uncached(g)?)),
        };
        if self.merges_version != self.doc.version {
            self.single_merges.clear();
            self.merges_version = self.doc.version;
        }
        if let Some(m) = self.single_merges.get(&single) {
            return Ok(Rc::clone(m));
        }
        let m = Rc::new(self.merge_uncached(g)?);
        if self.merges_version == self.doc.version {
            self.single_merges.insert(single, Rc::clone(&m));
        }
        Ok(m)
    }

    /// The keywords of `g`'s schemas merged (the new value each time: see [`Conv::merge`]).
    pub(super) fn merge_uncached(&mut self, g: &Goal) -> Result<Merged<'a>> {
        let mut m = Merged {
            types: ALL,
            enums: None,
            not_values: Vec::new(),
            lo: None,
            hi: None,
            mults: Vec::new(),
            min_len: 0,
            max_len: None,
            patterns: Vec::new(),
            formats: Vec::new(),
            neg_patterns: Vec::new(),
            neg_formats: Vec::new(),
            prop_nots: Vec::new(),
            arr: Vec::new(),
            min_items: 0,
            max_items: None,
            contains: Vec::new(),
            item_nots: Vec::new(),
            all_item_nots: Vec::new(),
            unique: None,
            obj: Vec::new(),
            required: Vec::new(),
            absent: Vec::new(),
            min_props: 0,
            max_props: None,
            prop_names: Vec::new(),
            dep_req: Vec::new(),
            pending: Vec::new(),
        };
        self.merge_seen.clear();
        let mut stack: Vec<SchemaId> = g.ids.iter().rev().copied().collect();
        let draft = self.doc.draft;
        // In-place applicator edges (parent, child) and unevaluated* keywords, for annotations.
        let mut edges: Vec<(SchemaId, SchemaId)> = Vec::new();
        let mut uneval: Vec<(SchemaId, bool, String)> = Vec::new();
        while let Some(id) = stack.pop() {
            if !self.merge_seen.insert(id) {
                continue;
            }
            if self.merge_seen.len > MAX_NESTING * 4 {
                return Err(Error::limit("subschemas merged into one", MAX_NESTING * 4));
            }
            let node = self.doc.node(id);
            let ptr = node.ptr.clone();
            let map = match node.value {
                Value::Bool(true) => continue,
                Value::Bool(false) => {
                    m.types = 0;
                    continue;
                }
                Value::Object(map) => map,
                _ => return Err(invalid(&ptr, "a schema must be an object or a boolean")),
            };
            let at = |k: &str| format!("{ptr}/{k}");
            if let Some(r) = map.get("$ref") {
                let r = r.as_str().ok_or_else(|| invalid(&at("$ref"), "$ref must be a string"))?;
                let t = self.doc.resolve_ref(id, r, "$ref")?;
                stack.push(t);
                edges.push((id, t));
                if draft <= Draft::D7 {
                    continue;
                }
            }
            let mut arr_part: Option<ArrPart> = None;
            let mut obj_part: Option<ObjPart<'a>> = None;
            for (k, v) in map {
                // The keyword's pointer, formatted only for an error or a kept location.
                let kp = || at(k);
                match k.as_str() {
                    "$dynamicRef" => {
                        let r = v.as_str().ok_or_else(|| invalid(&kp(), "must be a string"))?;
                        let t = self.doc.resolve_dynamic(id, r)?;
                        stack.push(t);
                        edges.push((id, t));
                    }
                    "$recursiveRef" => return Err(unsupported(&kp(), "$recursiveRef is not supported")),
                    "type" => {
                        let bits = match v {
                            Value::String(s) => type_bits(s, &kp)?,
                            Value::Array(a) => {
                                let mut b = 0;
                                for t in a {
                                    b |= type_bits(
                                        t.as_str().ok_or_else(|| invalid(&kp(), "type names are strings"))?,
                                        &kp,
                                    )?;
                                }
                                b
                            }
                            _ => return Err(invalid(&kp(), "type must be a string or an array")),
                        };
                        m.types &= bits;
                    }
                    "enum" | "const" => {
                        let vals: Vec<Value> = if k == "const" {
                            vec![v.clone()]
                        } else {
                            v.as_array().ok_or_else(|| invalid(&kp(), "enum must be an array"))?.clone()
                        };
                        m.enums = Some(match m.enums.take() {
                            None => vals,
                            Some(old) => old.into_iter().filter(|x| vals.iter().any(|y| json_eq(x, y))).collect(),
                        });
                    }
                    "minimum" | "exclusiveMinimum" | "maximum" | "exclusiveMaximum" => {
                        if let Value::Bool(_) = v {
                            if draft > Draft::D4 {
                                return Err(invalid(&kp(), "boolean exclusive bounds are draft 4 only"));
                            }
                            continue;
                        }
                        let d = as_dec(v, &kp)?;
                        let is_min = k.contains("inimum");
                        let strict = k.starts_with("exclusive")
                            || (draft == Draft::D4
                                && map.get(if is_min { "exclusiveMinimum" } else { "exclusiveMaximum" })
                                    == Some(&Value::Bool(true)));
                        if is_min {
                            tighten(&mut m.lo, d, strict, false);
                        } else {
                            tighten(&mut m.hi, d, strict, true);
                        }
                    }
                    "multipleOf" => {
                        let d = as_dec(v, &kp)?;
                        if d.neg || d.is_zero() {
                            return Err(invalid(&kp(), "multipleOf must be positive"));
                        }
                        if !m.mults.iter().any(|(x, _)| *x == d) {
                            m.mults.push((d, kp()));
                        }
                    }
                    "minLength" => m.min_len = m.min_len.max(as_count(v, &kp)?),
                    "maxLength" => {
                        let n = as_count(v, &kp)?;
                        m.max_len = Some(m.max_len.map_or(n, |o| o.min(n)));
                    }
                    "pattern" => {
                        let p = v.as_str().ok_or_else(|| invalid(&kp(), "pattern must be a string"))?;
                        m.patterns.push((p.to_string(), kp()));
                    }
                    "format" => {
                        let f = v.as_str().ok_or_else(|| invalid(&kp(), "format must be a string"))?;
                        if !self.doc.format_assertion {
                            // An annotation only.
                        } else if formats::regex_for(f).is_some() {
                            m.formats.push((f.to_string(), kp()));
                        } else if formats::KNOWN_UNSUPPORTED.contains(&f) {
                            return Err(unsupported(&kp(), format!("format {f:?} is not supported")));
                        }
                    }
                    "items" | "prefixItems" | "additionalItems" | "unevaluatedItems" => {
                        let part = arr_part.get_or_insert(ArrPart { prefix: Vec::new(), rest: Rest::Any });
                        match (k.as_str(), v) {
                            ("items", Value::Array(a)) if draft <= Draft::D2019 => {
                                part.prefix = a
                                    .iter()
                                    .enumerate()
                                    .map(|(i, x)| self.doc.child_at(id, x, &["items", &i.to_string()]))
                                    .collect();
                                if let Some(ai) = map.get("additionalItems") {
                                    part.rest = Rest::Schema(self.doc.child_at(id, ai, &["additionalItems"]));
                                } else if self.opts.strict_mode {
                                    part.rest = Rest::Closed;
                                }
                            }
                            ("items", Value::Array(_)) => {
                                return Err(invalid(&kp(), "items must be a schema in this draft"))
                            }
                            ("items", _) => part.rest = Rest::Schema(self.doc.child_at(id, v, &["items"])),
                            ("prefixItems", Value::Array(a)) if draft >= Draft::D2020 => {
                                part.prefix = a
                                    .iter()
                                    .enumerate()
                                    .map(|(i, x)| self.doc.child_at(id, x, &["prefixItems", &i.to_string()]))
                                    .collect();
                                if !map.contains_key("items")
                                    && self.opts.strict_mode
                                    && !map.contains_key("unevaluatedItems")
                                {
                                    part.rest = Rest::Closed;
                                }
                            }
                            ("unevaluatedItems", _) => uneval.push((id, false, kp())),
                            _ => {}
                        }
                    }
                    "minItems" => m.min_items = m.min_items.max(as_count(v, &kp)?),
                    "maxItems" => {
                        let n = as_count(v, &kp)?;
                        m.max_items = Some(m.max_items.map_or(n, |o| o.min(n)));
                    }
                    "uniqueItems" if v == &Value::Bool(true) => {
                        m.unique = Some(kp());
                    }
                    "contains" => {
                        let lo = match map.get("minContains") {
                            Some(x) if draft >= Draft::D2019 => as_count(x, &|| at("minContains"))?,
                            _ => 1,
                        };
                        let hi = match map.get("maxContains") {
                            Some(x) if draft >= Draft::D2019 => Some(as_count(x, &|| at("maxContains"))?),
                            _ => None,
                        };
                        m.contains.push((self.doc.child_at(id, v, &["contains"]), lo, hi, kp()));
                    }
                    "properties" | "patternProperties" | "additionalProperties" | "unevaluatedProperties" => {
                        let part = obj_part.get_or_insert(ObjPart {
                            props: Vec::new(),
                            patterns: Vec::new(),
                            additional: Rest::Any,
                            says_additional: false,
                        });
                        let mm = || v.as_object().ok_or_else(|| invalid(&kp(), "expected an object"));
                        match k.as_str() {
                            "properties" => {
                                for (name, x) in mm()? {
                                    part.props.push((name.as_str(), self.doc.child_at(id, x, &["properties", name])));
                                }
                            }
                            "patternProperties" => {
                                for (name, x) in mm()? {
                                    let pp = format!("{}/{}", kp(), name.replace('~', "~0").replace('/', "~1"));
                                    part.patterns.push((
                                        name.clone(),
                                        self.doc.child_at(id, x, &["patternProperties", name]),
                                        pp,
                                    ));
                                }
                                part.says_additional = true;
                            }
                            "additionalProperties" => {
                                part.additional = Rest::Schema(self.doc.child_at(id, v, &["additionalProperties"]));
                                part.says_additional = true;
                            }
                            _ => uneval.push((id, true, kp())),
                        }
                    }
                    "required" => {
                        for r in v.as_array().ok_or_else(|| invalid(&kp(), "required must be an array"))? {
                            let r = r.as_str().ok_or_else(|| invalid(&kp(), "required names are strings"))?;
                            if !m.required.iter().any(|x| x == r) {
                                m.required.push(r.to_string());
                            }
                        }
                    }
                    "minProperties" => m.min_props = m.min_props.max(as_count(v, &kp)?),
                    "maxProperties" => {
                        let n = as_count(v, &kp)?;
                        m.max_props = Some(m.max_props.map_or(n, |o| o.min(n)));
                    }
                    "propertyNames" => m.prop_names.push((self.doc.child_at(id, v, &["propertyNames"]), kp())),
                    "dependentRequired" | "dependentSchemas" | "dependencies" => {
                        let o = v.as_object().ok_or_else(|| invalid(&kp(), format!("{k} must be an object")))?;
                        for (name, dep) in o {
                            match dep {
                                Value::Array(a) if k != "dependentSchemas" => {
                                    let mut req = Vec::new();
                                    for r in a {
                                        let r =
                                            r.as_str().ok_or_else(|| invalid(&kp(), "dependent names are strings"))?;
                                        req.push(r.to_string());
                                    }
                                    if !req.is_empty() {
                                        m.dep_req.push((name.clone(), req, kp()));
                                    }
                                }
                                Value::Bool(true) if k != "dependentRequired" => {}
                                Value::Object(x) if x.is_empty() && k != "dependentRequired" => {}
                                _ if k == "dependentRequired" => {
                                    return Err(invalid(&kp(), "dependentRequired values are arrays"))
                                }
                                _ => {}
                            }
                        }
                        if k != "dependentRequired" {
                            for (i, _) in self.dep_schemas(id).iter().enumerate() {
                                let kind = Kind::Dep(i as u32);
                                if !g.done.contains(&(id, kind)) && !m.pending.iter().any(|p| p.0 == id && p.1 == kind)
                                {
                                    m.pending.push((id, kind, kp()));
                                }
                            }
                        }
                    }
                    "allOf" => {
                        let a = v.as_array().ok_or_else(|| invalid(&kp(), "allOf must be an array"))?;
                        // Pushed last to first so the stack merges them in schema order (the
                        // order of their properties when keys follow schema order).
                        for (i, x) in a.iter().enumerate().rev() {
                            let c = self.doc.child_at(id, x, &["allOf", &i.to_string()]);
                            stack.push(c);
                            edges.push((id, c));
                        }
                    }
                    "anyOf" | "oneOf" => {
                        let a = v.as_array().ok_or_else(|| invalid(&kp(), format!("{k} must be an array")))?;
                        if a.is_empty() {
                            return Err(invalid(&kp(), format!("{k} must not be empty")));
                        }
                        let kind = if k == "anyOf" { Kind::AnyOf } else { Kind::OneOf };
                        if !g.done.contains(&(id, kind)) {
                            m.pending.push((id, kind, kp()));
                        }
                    }
                    "not" if !g.done.contains(&(id, Kind::Not)) => {
                        m.pending.push((id, Kind::Not, kp()));
                    }
                    "if" => {
                        let matters = map.contains_key("then") || map.contains_key("else") || self.has_uneval;
                        if matters && !g.done.contains(&(id, Kind::If)) {
                            m.pending.push((id, Kind::If, kp()));
                        }
                    }
                    _ => {}
                }
            }
            if let Some(p) = arr_part {
                m.arr.push(p);
            }
            if let Some(p) = obj_part {
                m.obj.push(p);
            }
        }
        if !uneval.is_empty() {
            self.apply_unevaluated(g, &mut m, &mut edges, &uneval)?;
        }
        for n in &g.neg {
            match n {
                Neg::Types(t) => m.types &= !t,
                Neg::Values(vs) => {
                    for s in vs {
                        if let Ok(v) = serde_json::from_str::<Value>(s) {
                            m.not_values.push(v);
                        }
                    }
                }
                Neg::Absent(k) => {
                    m.types &= OBJ;
                    m.absent.push(k.clone());
                }
                Neg::Below(d, incl) => {
                    m.types &= INT | FRAC;
                    tighten(&mut m.hi, d.clone(), !incl, true);
                }
                Neg::Above(d, incl) => {
                    m.types &= INT | FRAC;
                    tighten(&mut m.lo, d.clone(), !incl, false);
                }
                Neg::ShortStr(n) => {
                    m.types &= STR;
                    m.max_len = Some(m.max_len.map_or(*n, |o| o.min(*n)));
                }
                Neg::LongStr(n) => {
                    m.types &= STR;
                    m.min_len = m.min_len.max(*n);
                }
                Neg::NoMatch(p) => {
                    m.types &= STR;
                    m.neg_patterns.push(p.clone());
                }
                Neg::NoFormat(f) => {
                    m.types &= STR;
                    m.neg_formats.push(f.clone());
                }
                Neg::Has(k) => {
                    m.types &= OBJ;
                    if !m.required.contains(k) {
                        m.required.push(k.clone());
                    }
                }
                Neg::PropFails(k, id) => {
                    m.types &= OBJ;
                    if !m.required.contains(k) {
                        m.required.push(k.clone());
                    }
                    m.prop_nots.push((k.clone(), *id));
                }
                Neg::FewItems(n) => {
                    m.types &= ARR;
                    m.max_items = Some(m.max_items.map_or(*n, |o| o.min(*n)));
                }
                Neg::ManyItems(n) => {
                    m.types &= ARR;
                    m.min_items = m.min_items.max(*n);
                }
                Neg::NoItemIs(id) => {
                    m.types &= ARR;
                    m.all_item_nots.push(*id);
                }
                Neg::ItemFails(id) => {
                    m.types &= ARR;
                    m.min_items = m.min_items.max(1);
                    m.item_nots.push(*id);
                }
            }
        }
        if m.required.iter().any(|r| m.absent.contains(r)) {
            m.types &= !OBJ;
        }
        if let Some(vals) = &m.enums {
            let mut t = 0;
            for v in vals {
                t |= value_type(v);
            }
            m.types &= t;
        }
        Ok(m)
    }

    /// Turns each `unevaluatedProperties`/`unevaluatedItems` of a merged node X into one more
    /// object/array part: what X's successful in-place subschemas (itself, `allOf`, `$ref`, and
    /// the branches this goal chose for `oneOf`, `if`, `dependentSchemas`) did not evaluate must
    /// satisfy the keyword's schema. Exact because every schema of the goal holds; an `anyOf`
    /// with several branches (others may hold and evaluate more) or `contains` is refused.
    /// Reads `merge_seen`, the schemas this merge visited.
    fn apply_unevaluated(
        &mut self,
        g: &Goal,
        m: &mut Merged<'a>,
        edges: &mut Vec<(SchemaId, SchemaId)>,
        uneval: &[(SchemaId, bool, String)],
    ) -> Result<()> {
        // Branches chosen by distribution are goal ids below their applicator's node.
        for &id in &g.ids {
            let ptr = self.doc.node(id).ptr.clone();
            let segs: Vec<&str> = ptr.rsplitn(3, '/').collect();
            let parent = match segs.as_slice() {
                [last, rest, ..] if ["then", "else", "if"].contains(last) => {
                    Some(format!("{}{}", segs.get(2).map_or(String::new(), |p| format!("{p}/")), rest))
                }
                [_, kw, parent] if ["anyOf", "oneOf", "dependentSchemas", "dependencies"].contains(kw) => {
                    Some((*parent).to_string())
                }
                _ => None,
            };
            if let Some(pid) = parent.and_then(|p| self.doc.id_of(&p)) {
                if self.merge_seen.contains(pid) && pid != id {
                    edges.push((pid, id));
                }
            }
        }
        for (x, props, kp) in uneval {
            // The in-place subtree of x.
            let mut sub = vec![*x];
            let mut i = 0;
            while i < sub.len() {
                let n = sub[i];
                for &(p, c) in edges.iter() {
                    if p == n && !sub.contains(&c) {
                        sub.push(c);
                    }
                }
                i += 1;
            }
            for &(sid, kind) in &g.done {
                let branches = self.doc.node(sid).value.get("anyOf").and_then(Value::as_array).map_or(0, Vec::len);
                if kind == Kind::AnyOf && branches > 1 && sub.contains(&sid) {
                    return Err(unsupported(
                        kp,
                        "unevaluated keywords over an anyOf with several branches are not supported",
                    ));
                }
            }
            let key = if *props { "unevaluatedProperties" } else { "unevaluatedItems" };
            let schema = self.doc.child(*x, &[key]);
            let draft = self.doc.draft;
            if *props {
                let mut part = ObjPart {
                    props: Vec::new(),
                    patterns: Vec::new(),
                    additional: Rest::Schema(schema),
                    says_additional: true,
                };
                let mut all = false;
                for &n in &sub {
                    let Some(map) = self.doc.node(n).value.as_object() else { continue };
                    all |= map.contains_key("additionalProperties")
                        || (n != *x && map.contains_key("unevaluatedProperties"));
                    if let Some(Value::Object(o)) = map.get("properties") {
                        for name in o.keys() {
                            part.props.push((name.as_str(), self.doc.child(n, &["properties", name])));
                        }
                    }
                    if let Some(Value::Object(o)) = map.get("patternProperties") {
                        let base = format!("{}/patternProperties", self.doc.node(n).ptr);
                        for name in o.keys() {
                            let pp = format!("{base}/{}", name.replace('~', "~0").replace('/', "~1"));
                            part.patterns.push((name.clone(), self.doc.child(n, &["patternProperties", name]), pp));
                        }
                    }
                }
                if !all {
                    m.obj.push(part);
                }
            } else {
                let mut all = false;
                let mut prefix: Vec<SchemaId> = Vec::new();
                for &n in &sub {
                    let Some(map) = self.doc.node(n).value.as_object() else { continue };
                    if map.contains_key("contains") {
                        return Err(unsupported(kp, "unevaluatedItems beside contains is not supported"));
                    }
                    let items_array = map.get("items").is_some_and(Value::is_array);
                    all |= (map.contains_key("items") && (draft >= Draft::D2020 || !items_array))
                        || (map.contains_key("additionalItems") && items_array)
                        || (n != *x && map.contains_key("unevaluatedItems"));
                    let (kw, arr) = match (map.get("prefixItems"), map.get("items")) {
                        (Some(Value::Array(a)), _) if draft >= Draft::D2020 => ("prefixItems", a),
                        (_, Some(Value::Array(a))) if draft <= Draft::D2019 => ("items", a),
                        _ => continue,
                    };
                    if arr.len() > prefix.len() {
                        prefix = (0..arr.len()).map(|i| self.doc.child(n, &[kw, &i.to_string()])).collect();
                    }
                }
                if !all {
                    m.arr.push(ArrPart { prefix, rest: Rest::Schema(schema) });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_set_generations() {
        let mut s = SeenSet::default();
        s.clear();
        assert!(s.insert(SchemaId(5)) && !s.insert(SchemaId(5)));
        assert!(s.contains(SchemaId(5)) && !s.contains(SchemaId(4)) && !s.contains(SchemaId(99)));
        assert_eq!(s.len, 1);
        s.clear();
        assert!(!s.contains(SchemaId(5)) && s.len == 0);
        assert!(s.insert(SchemaId(2)));
        // The generation wraps: stamps of earlier generations must not read as present.
        s.generation = u32::MAX;
        s.clear();
        assert!((0..8).all(|i| !s.contains(SchemaId(i))));
        assert!(s.insert(SchemaId(0)) && s.contains(SchemaId(0)) && !s.contains(SchemaId(1)));
    }

    const SCHEMA: &str = r##"{
        "$defs": {
            "a": {"type": "object", "properties": {"x": {"not": {"type": "string"}}}, "required": ["x"]},
            "b": {"oneOf": [{"$ref": "#/$defs/a"}, {"type": "integer", "minimum": 3}]}
        },
        "allOf": [{"$ref": "#/$defs/b"}],
        "not": {"$ref": "#/$defs/a"},
        "if": {"required": ["y"]}, "then": {"minProperties": 2},
        "dependentSchemas": {"k": {"required": ["z"]}},
        "properties": {"r": {"$ref": "http://e.com/r.json"}}
    }"##;

    fn goal(ids: Vec<SchemaId>) -> Goal {
        Goal { ids, nots: vec![], done: vec![], neg: vec![], depth: 0 }
    }

    /// Runs `f` on a converter of `SCHEMA`, with its remote `r.json` registered (not yet walked).
    fn with_conv(f: impl FnOnce(&mut Conv)) {
        let value: Value = serde_json::from_str(SCHEMA).unwrap();
        let remote: Value = serde_json::from_str(r#"{"type": "string"}"#).unwrap();
        let doc = Doc::with_registry(&value, [("http://e.com/r.json".to_string(), &remote)].into()).unwrap();
        let opts = JsonSchemaOptions::default();
        f(&mut Conv::new(doc, &opts));
    }

    /// A memoized merge reads as a fresh one, for goals that hit the memo (one schema, any
    /// `nots` and `depth`) and goals that must not (applicators done, atomic negations).
    #[test]
    fn memoized_merges_equal_fresh_merges() {
        with_conv(|c| {
            let root = c.doc.root_id();
            for round in 0..2 {
                for i in 0..c.doc.nodes.len() as u32 {
                    let id = SchemaId(i);
                    let mut with_nots = goal(vec![id]);
                    with_nots.nots.push(root);
                    with_nots.depth = 3;
                    let mut done = goal(vec![id]);
                    done.done.push((id, Kind::Not));
                    let mut neg = goal(vec![id]);
                    neg.neg.push(Neg::Types(STR));
                    for g in [goal(vec![id]), with_nots, done, neg, goal(vec![root, id])] {
                        let memo = c.merge(&g).map(|m| format!("{m:?}"));
                        let fresh = c.merge_uncached(&g).map(|m| format!("{m:?}"));
                        assert_eq!(memo.ok(), fresh.ok(), "round {round}, goal {g:?}");
                    }
                }
            }
        });
    }

    /// The memo is dropped when the document's index grows (a remote document walked).
    #[test]
    fn single_merges_dropped_when_the_index_changes() {
        with_conv(|c| {
            let root = c.doc.root_id();
            let _ = c.merge(&goal(vec![root])).unwrap();
            assert_eq!(c.single_merges.len(), 1);
            let before = c.doc.nodes.len();
            let r = c.doc.child(root, &["properties", "r"]);
            let _ = c.doc.resolve_ref(r, "http://e.com/r.json", "$ref").unwrap();
            assert!(c.doc.nodes.len() > before, "the remote document is indexed on its first reference");
            let a = c.doc.id_of("/$defs/a").unwrap();
            let _ = c.merge(&goal(vec![a])).unwrap();
            assert_eq!(c.single_merges.len(), 1, "entries from before the walk are dropped");
        });
    }
}
