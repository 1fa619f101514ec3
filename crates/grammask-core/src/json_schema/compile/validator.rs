//! The validator: whether a JSON value satisfies a goal or a subschema, used to filter `enum` and
//! `const` values and to decide disjointness.
//!
//! Pipeline place: called by the writers (`scalars.rs`, `arrays.rs`, `objects.rs`) and
//! `goals.rs`.
use super::*;

impl<'a> Conv<'a> {
    pub(super) fn valid_goal(&mut self, g: &Goal, v: &Value) -> Result<bool> {
        for &id in &g.ids {
            if !self.valid(id, v, 0)? {
                return Ok(false);
            }
        }
        for &id in &g.nots {
            if self.valid(id, v, 0)? {
                return Ok(false);
            }
        }
        let num = v.as_number().and_then(Dec::from_number);
        let text = v.as_str();
        for n in &g.neg {
            // `hit`: the value fails the negation's condition.
            let hit = match n {
                Neg::Types(t) => value_type(v) & t != 0,
                Neg::Values(vs) => vs.iter().any(|s| *s == canonical(v)),
                Neg::Absent(k) => v.as_object().is_none_or(|o| o.contains_key(k)),
                Neg::Below(d, incl) => !num.as_ref().is_some_and(|x| x < d || (*incl && x == d)),
                Neg::Above(d, incl) => !num.as_ref().is_some_and(|x| x > d || (*incl && x == d)),
                Neg::ShortStr(k) => text.is_none_or(|t| t.chars().count() as u64 > *k),
                Neg::LongStr(k) => text.is_none_or(|t| (t.chars().count() as u64) < *k),
                Neg::NoMatch(p) => match text {
                    None => true,
                    Some(t) => {
                        let re = Regex::parse(p, RegexFlags::default())?;
                        CharDfa::from_regex(&re, Anchoring::Search)?.accepts(t)
                    }
                },
                Neg::NoFormat(f) => match text {
                    None => true,
                    Some(t) => format_dfa(f)?.accepts(t),
                },
                Neg::Has(k) => !v.as_object().is_some_and(|o| o.contains_key(k)),
                Neg::PropFails(k, id) => match v.as_object().and_then(|o| o.get(k)) {
                    None => true,
                    Some(x) => self.valid(*id, x, 1)?,
                },
                Neg::FewItems(k) => v.as_array().is_none_or(|a| a.len() as u64 > *k),
                Neg::ManyItems(k) => v.as_array().is_none_or(|a| (a.len() as u64) < *k),
                Neg::NoItemIs(id) => match v.as_array() {
                    None => true,
                    Some(a) => {
                        let mut any = false;
                        for x in a {
                            any |= self.valid(*id, x, 1)?;
                        }
                        any
                    }
                },
                Neg::ItemFails(id) => match v.as_array() {
                    None => true,
                    Some(a) => {
                        let mut all = true;
                        for x in a {
                            all &= self.valid(*id, x, 1)?;
                        }
                        all
                    }
                },
            };
            if hit {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Validates `v` against subschema `id` (all keywords the converter knows).
    /// Whether `v` equals (as JSON values) an element of the schema array `a`.
    pub(super) fn in_enum(&mut self, a: &'a [Value], v: &Value) -> bool {
        if a.len() <= ENUM_SET_MIN {
            return a.iter().any(|x| json_eq(x, v));
        }
        // `json_eq` holds exactly when the canonical texts are equal.
        let set = self.enum_sets.entry(a.as_ptr() as usize).or_insert_with(|| a.iter().map(canonical).collect());
        set.contains(&canonical(v))
    }

    pub(super) fn valid(&mut self, id: SchemaId, v: &Value, depth: usize) -> Result<bool> {
        if depth > MAX_NESTING {
            return Err(Error::limit("validation depth", MAX_NESTING));
        }
        let node = self.doc.node(id);
        let ptr = node.ptr.clone();
        // The schema outlives `self`'s borrow: no copy of it is needed (one per call cost
        // seconds on large schemas).
        let value: &'a Value = node.value;
        let map = match value {
            Value::Bool(b) => return Ok(*b),
            Value::Object(m) => m,
            _ => return Err(invalid(&ptr, "a schema must be an object or a boolean")),
        };
        let draft = self.doc.draft;
        let at = |k: &str| format!("{ptr}/{k}");
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            let t = self.doc.resolve_ref(id, r, "$ref")?;
            if !self.valid(t, v, depth + 1)? {
                return Ok(false);
            }
            if draft <= Draft::D7 {
                return Ok(true);
            }
        }
        let vt = value_type(v);
        for (k, kv) in map {
            let kp = || at(k);
            let ok = match k.as_str() {
                "$dynamicRef" => {
                    let t = self.doc.resolve_dynamic(id, kv.as_str().unwrap_or(""))?;
                    self.valid(t, v, depth + 1)?
                }
                "$recursiveRef" => return Err(unsupported(&kp(), "$recursiveRef is not supported")),
                "type" => {
                    let bits = match kv {
                        Value::String(s) => type_bits(s, &kp)?,
                        Value::Array(a) => {
                            let mut b = 0;
                            for t in a {
                                b |= type_bits(t.as_str().unwrap_or(""), &kp)?;
                            }
                            b
                        }
                        _ => return Err(invalid(&kp(), "bad type")),
                    };
                    bits & vt != 0
                }
                "enum" => kv.as_array().is_some_and(|a| self.in_enum(a, v)),
                "const" => json_eq(kv, v),
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" if vt & (INT | FRAC) != 0 => {
                    if kv.is_boolean() {
                        true
                    } else {
                        let b = as_dec(kv, &kp)?;
                        let x = Dec::from_number(v.as_number().ok_or_else(|| invalid(&kp(), "number"))?)
                            .ok_or_else(|| invalid(&kp(), "number out of range"))?;
                        let is_min = k.contains("inimum");
                        let strict = k.starts_with("exclusive")
                            || (draft == Draft::D4
                                && map.get(if is_min { "exclusiveMinimum" } else { "exclusiveMaximum" })
                                    == Some(&Value::Bool(true)));
                        match (is_min, strict) {
                            (true, false) => x >= b,
                            (true, true) => x > b,
                            (false, false) => x <= b,
                            (false, true) => x < b,
                        }
                    }
                }
                "multipleOf" if vt & (INT | FRAC) != 0 => {
                    let b = as_dec(kv, &kp)?;
                    let x = Dec::from_number(v.as_number().ok_or_else(|| invalid(&kp(), "number"))?)
                        .ok_or_else(|| invalid(&kp(), "number out of range"))?;
                    is_multiple(&x, &b).ok_or_else(|| unsupported(&kp(), "multipleOf check out of range"))?
                }
                "minLength" | "maxLength" if vt == STR => {
                    let n = v.as_str().unwrap_or("").chars().count() as u64;
                    let b = as_count(kv, &kp)?;
                    if k == "minLength" {
                        n >= b
                    } else {
                        n <= b
                    }
                }
                "pattern" if vt == STR => {
                    let re = Regex::parse(kv.as_str().unwrap_or(""), RegexFlags::default())
                        .map_err(|e| ptr_if_none(e, &kp()))?;
                    CharDfa::from_regex(&re, Anchoring::Search)?.accepts(v.as_str().unwrap_or(""))
                }
                "format" if vt == STR && self.doc.format_assertion => {
                    match formats::regex_for(kv.as_str().unwrap_or("")) {
                        Some(_) => format_dfa(kv.as_str().unwrap_or(""))?.accepts(v.as_str().unwrap_or("")),
                        None => true,
                    }
                }
                "allOf" | "anyOf" | "oneOf" => {
                    let a = kv.as_array().map_or(0, Vec::len);
                    let mut hits = 0;
                    for i in 0..a {
                        let c = self.doc.child(id, &[k, &i.to_string()]);
                        if self.valid(c, v, depth + 1)? {
                            hits += 1;
                        }
                    }
                    match k.as_str() {
                        "allOf" => hits == a,
                        "anyOf" => hits >= 1,
                        _ => hits == 1,
                    }
                }
                "not" => {
                    let c = self.doc.child(id, &["not"]);
                    !self.valid(c, v, depth + 1)?
                }
                "if" => {
                    let c = self.doc.child(id, &["if"]);
                    let branch = if self.valid(c, v, depth + 1)? { "then" } else { "else" };
                    if map.contains_key(branch) {
                        let b = self.doc.child(id, &[branch]);
                        self.valid(b, v, depth + 1)?
                    } else {
                        true
                    }
                }
                "minItems" | "maxItems" if vt == ARR => {
                    let n = v.as_array().map_or(0, Vec::len) as u64;
                    let b = as_count(kv, &kp)?;
                    if k == "minItems" {
                        n >= b
                    } else {
                        n <= b
                    }
                }
                "uniqueItems" if vt == ARR && kv == &Value::Bool(true) => {
                    let a = v.as_array().cloned().unwrap_or_default();
                    !(0..a.len()).any(|i| (i + 1..a.len()).any(|j| json_eq(&a[i], &a[j])))
                }
                "items" | "prefixItems" | "additionalItems" if vt == ARR => {
                    let a = v.as_array().cloned().unwrap_or_default();
                    let (prefix, rest): (usize, Option<SchemaId>) = match (k.as_str(), kv) {
                        ("items", Value::Array(p)) => (p.len(), None),
                        ("items", _) => {
                            let pl = if draft >= Draft::D2020 {
                                map.get("prefixItems").and_then(Value::as_array).map_or(0, Vec::len)
                            } else {
                                0
                            };
                            (pl, Some(self.doc.child(id, &["items"])))
                        }
                        ("prefixItems", Value::Array(p)) => {
                            let closed = self.opts.strict_mode
                                && !map.contains_key("items")
                                && !map.contains_key("unevaluatedItems");
                            if closed && a.len() > p.len() {
                                return Ok(false);
                            }
                            (p.len(), None)
                        }
                        ("additionalItems", _) => match map.get("items") {
                            Some(Value::Array(p)) if draft <= Draft::D2019 => {
                                (p.len(), Some(self.doc.child(id, &["additionalItems"])))
                            }
                            _ => (usize::MAX, None),
                        },
                        _ => (0, None),
                    };
                    let mut ok = true;
                    for (i, x) in a.iter().enumerate() {
                        let s = if i < prefix {
                            match (k.as_str(), kv) {
                                ("items" | "prefixItems", Value::Array(_)) => {
                                    Some(self.doc.child(id, &[k, &i.to_string()]))
                                }
                                _ => None,
                            }
                        } else {
                            if k == "items"
                                && kv.is_array()
                                && self.opts.strict_mode
                                && !map.contains_key("additionalItems")
                            {
                                ok = false;
                                break;
                            }
                            rest
                        };
                        if let Some(s) = s {
                            if !self.valid(s, x, depth + 1)? {
                                ok = false;
                                break;
                            }
                        }
                    }
                    ok
                }
                "contains" if vt == ARR => {
                    let c = self.doc.child(id, &["contains"]);
                    let mut hits = 0u64;
                    for x in v.as_array().cloned().unwrap_or_default() {
                        if self.valid(c, &x, depth + 1)? {
                            hits += 1;
                        }
                    }
                    let lo = map.get("minContains").and_then(Value::as_u64).unwrap_or(1);
                    let hi = map.get("maxContains").and_then(Value::as_u64);
                    hits >= lo && hi.is_none_or(|h| hits <= h)
                }
                "required" if vt == OBJ => {
                    let o = v.as_object().cloned().unwrap_or_default();
                    kv.as_array().is_some_and(|a| a.iter().all(|r| r.as_str().is_some_and(|r| o.contains_key(r))))
                }
                "minProperties" | "maxProperties" if vt == OBJ => {
                    let n = v.as_object().map_or(0, serde_json::Map::len) as u64;
                    let b = as_count(kv, &kp)?;
                    if k == "minProperties" {
                        n >= b
                    } else {
                        n <= b
                    }
                }
                "propertyNames" if vt == OBJ => {
                    let c = self.doc.child(id, &["propertyNames"]);
                    let mut ok = true;
                    for key in v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
                        if !self.valid(c, &Value::String(key), depth + 1)? {
                            ok = false;
                            break;
                        }
                    }
                    ok
                }
                "properties" | "patternProperties" | "additionalProperties" if vt == OBJ => {
                    self.valid_props(id, map, k, v, depth)?
                }
                "dependentRequired" | "dependentSchemas" | "dependencies" if vt == OBJ => {
                    let o = v.as_object().cloned().unwrap_or_default();
                    let mut ok = true;
                    for (name, dep) in kv.as_object().cloned().unwrap_or_default() {
                        if !o.contains_key(&name) {
                            continue;
                        }
                        match dep {
                            Value::Array(req) => {
                                if !req.iter().all(|r| r.as_str().is_some_and(|r| o.contains_key(r))) {
                                    ok = false;
                                }
                            }
                            _ => {
                                let c = self.doc.child(id, &[k, &name]);
                                if !self.valid(c, v, depth + 1)? {
                                    ok = false;
                                }
                            }
                        }
                    }
                    ok
                }
                "unevaluatedProperties" | "unevaluatedItems" => {
                    return Err(unsupported(&kp(), format!("{k} inside enum/const validation is not supported")))
                }
                _ => true,
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn valid_props(
        &mut self,
        id: SchemaId,
        map: &serde_json::Map<String, Value>,
        k: &str,
        v: &Value,
        depth: usize,
    ) -> Result<bool> {
        let o = v.as_object().cloned().unwrap_or_default();
        let props = map.get("properties").and_then(Value::as_object);
        let pats = map.get("patternProperties").and_then(Value::as_object);
        for (name, x) in &o {
            let in_props = props.is_some_and(|p| p.contains_key(name));
            let mut matched = false;
            if let Some(pats) = pats {
                for pat in pats.keys() {
                    let re = Regex::parse(pat, RegexFlags::default())?;
                    if CharDfa::from_regex(&re, Anchoring::Search)?.accepts(name) {
                        matched = true;
                        if k == "patternProperties" {
                            let c = self.doc.child(id, &["patternProperties", pat]);
                            if !self.valid(c, x, depth + 1)? {
                                return Ok(false);
                            }
                        }
                    }
                }
            }
            match k {
                "properties" if in_props => {
                    let c = self.doc.child(id, &["properties", name]);
                    if !self.valid(c, x, depth + 1)? {
                        return Ok(false);
                    }
                }
                "properties" if !in_props && !matched => {
                    let closed = self.opts.strict_mode
                        && !map.contains_key("additionalProperties")
                        && !map.contains_key("patternProperties")
                        && !map.contains_key("unevaluatedProperties");
                    if closed {
                        return Ok(false);
                    }
                }
                "additionalProperties" if !in_props && !matched => {
                    let c = self.doc.child(id, &["additionalProperties"]);
                    if !self.valid(c, x, depth + 1)? {
                        return Ok(false);
                    }
                }
                _ => {}
            }
        }
        Ok(true)
    }
}
