//! Arrays: `items`/`prefixItems`, counts, `contains` with `minContains`/`maxContains`, and
//! `uniqueItems` over finite value sets.
//!
//! Pipeline place: called from `scalars.rs` ([`Conv::emit_base`]) for the array type.
use super::*;

impl Conv<'_> {
    pub(super) fn emit_array(&mut self, g: &Goal, m: &Merged, ptr: &str) -> Result<Option<String>> {
        // `contains` with minContains 0 and no maxContains holds for every array.
        let counted: Vec<&(SchemaId, u64, Option<u64>, String)> =
            m.contains.iter().filter(|(_, lo, hi, _)| *lo > 0 || hi.is_some()).collect();
        // Several conditions "some item satisfies c" (`contains` at least once, or an item
        // failing a negated `items`): one automaton over the set of conditions met.
        if counted.len() + m.item_nots.len() > 1 && counted.iter().all(|c| c.1 == 1 && c.2.is_none()) {
            let conds: Vec<(SchemaId, bool)> =
                counted.iter().map(|c| (c.0, false)).chain(m.item_nots.iter().map(|&x| (x, true))).collect();
            return self.emit_array_exists(g, m, &conds, counted.first().map_or(ptr, |c| c.3.as_str()));
        }
        if let Some(c) = counted.get(1) {
            return Err(unsupported(&c.3, "several contains keywords on one array are not supported"));
        }
        if !m.item_nots.is_empty() {
            // An item failing `x`: `contains` of "not x", at least once.
            if m.item_nots.len() > 1 || !counted.is_empty() {
                return Err(unsupported(
                    ptr,
                    "not: several item conditions (negated items, contains) on one array are not supported",
                ));
            }
            return self.emit_array_contains(g, m, (m.item_nots[0], true), 1, None, ptr);
        }
        if let Some(&&(c, lo, hi, ref p)) = counted.first() {
            return self.emit_array_contains(g, m, (c, false), lo, hi, p);
        }
        let min = m.min_items;
        let max = m.max_items;
        if max.is_some_and(|x| x < min) {
            return Ok(None);
        }
        let plen = m.arr.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
        if let Some(p) = &m.unique {
            if max.is_none_or(|x| x > 1) {
                return self.emit_unique_array(g, m, p);
            }
        }
        let d = self.child_depth(g.depth);
        let item_rule = |this: &mut Self, i: Option<usize>| -> Result<Option<String>> {
            let mut ids = Vec::new();
            for p in &m.arr {
                match i {
                    Some(i) if i < p.prefix.len() => ids.push(p.prefix[i]),
                    _ => match p.rest {
                        Rest::Any => {}
                        Rest::Closed => return Ok(None),
                        Rest::Schema(x) => ids.push(x),
                    },
                }
            }
            this.rule_for(Goal { ids, nots: m.all_item_nots.clone(), done: vec![], neg: vec![], depth: d })
        };
        let cap = max.map_or(plen, |x| (x as usize).min(plen));
        let mut items: Vec<Option<String>> = Vec::new();
        for i in 0..cap {
            items.push(item_rule(self, Some(i))?);
        }
        let rest = if max.is_none_or(|x| x as usize > plen) { item_rule(self, None)? } else { None };
        let sep = self.sep_item(g.depth);
        let bound = |x: u64| -> Result<u64> {
            if x > u64::from(MAX_REPEAT_BOUND) {
                Err(Error::limit("minItems/maxItems", MAX_REPEAT_BOUND as usize).at_pointer(ptr))
            } else {
                Ok(x)
            }
        };
        // Tail after the prefix (i = plen items emitted, plen >= 1): k more rest items.
        let rep = |lo: u64, hi: Option<u64>| match hi {
            Some(h) => format!("{{{lo},{h}}}"),
            None => format!("{{{lo},}}"),
        };
        let nonempty: Option<String> = if cap == 0 {
            // No prefix: rest (sep rest){min-1, max-1}.
            match &rest {
                Some(r) if max.is_none_or(|x| x >= 1) => {
                    let lo = bound(min.saturating_sub(1))?;
                    let hi = max.map(|x| bound(x - 1)).transpose()?;
                    Some(format!("{r} ({sep} {r}){}", rep(lo, hi)))
                }
                _ => None,
            }
        } else {
            // Chain N_i (i items emitted) from the back.
            let mut next: Option<String> = {
                let i = cap as u64;
                if (cap < plen) || rest.is_none() {
                    if i >= min {
                        Some("\"\"".to_string())
                    } else {
                        None
                    }
                } else {
                    let lo = bound(min.saturating_sub(i))?;
                    let hi = max.map(|x| bound(x - i)).transpose()?;
                    let r = rest.clone().unwrap_or_default();
                    Some(format!("({sep} {r}){}", rep(lo, hi)))
                }
            };
            for i in (1..cap).rev() {
                let mut alts = Vec::new();
                if i as u64 >= min {
                    alts.push("\"\"".to_string());
                }
                if let (Some(it), Some(nx)) = (&items[i], &next) {
                    alts.push(format!("{sep} {it} {nx}"));
                }
                next = if alts.is_empty() {
                    None
                } else {
                    let name = self.e.fresh("arr_tail");
                    self.e.define(&name, &alts.join(" | "))?;
                    Some(name)
                };
            }
            match (&items[0], next) {
                (Some(it), Some(nx)) => Some(format!("{it} {nx}")),
                _ => None,
            }
        };
        let mut alts = Vec::new();
        if min == 0 {
            alts.push(self.empty('[', ']'));
        }
        if let Some(ne) = nonempty {
            alts.push(format!("{} {ne} {}", self.open('[', g.depth), self.close(']', g.depth)));
        }
        Ok(if alts.is_empty() { None } else { Some(emit::alt(&alts)) })
    }

    /// `uniqueItems` arrays whose items come from a finite set of at most
    /// [`MAX_UNIQUE_VALUES`] distinct values (an `enum`/`const`, or `null`/booleans): rules track
    /// the set of values used so far, so each comes at most once, and the item count is that
    /// set's size. Any other item language (infinite, or a `prefixItems` tuple) is refused.
    fn emit_unique_array(&mut self, g: &Goal, m: &Merged, ptr: &str) -> Result<Option<String>> {
        if m.arr.iter().any(|p| !p.prefix.is_empty()) {
            return Err(unsupported(ptr, "uniqueItems with prefixItems is not supported"));
        }
        let d = self.child_depth(g.depth);
        let mut ids = Vec::new();
        for p in &m.arr {
            match p.rest {
                Rest::Any => {}
                Rest::Closed => return Ok((m.min_items == 0).then(|| self.empty('[', ']'))),
                Rest::Schema(x) => ids.push(x),
            }
        }
        let goal = Goal { ids, nots: m.all_item_nots.clone(), done: vec![], neg: vec![], depth: d }.norm();
        let mx = self.merge(&goal)?;
        let candidates: Vec<Value> = match &mx.enums {
            Some(vals) => vals.clone(),
            None if mx.types & !(NULL | BOOL) == 0 => vec![Value::Null, Value::Bool(true), Value::Bool(false)],
            None => return Err(unsupported(
                ptr,
                "uniqueItems is only supported when the items take finitely many values (enum, const, boolean, null)",
            )),
        };
        let mut values: Vec<Value> = Vec::new();
        for v in candidates {
            if mx.types & value_type(&v) != 0 && !values.iter().any(|k| json_eq(k, &v)) && self.valid_goal(&goal, &v)? {
                values.push(v);
            }
        }
        if values.len() > MAX_UNIQUE_VALUES {
            return Err(unsupported(
                ptr,
                format!("uniqueItems over more than {MAX_UNIQUE_VALUES} distinct item values is not supported"),
            ));
        }
        let spelled: Vec<String> = values.iter().map(|v| self.spell_value(v, d)).collect::<Result<_>>()?;
        let (min, max) = (m.min_items, m.max_items.unwrap_or(u64::MAX));
        let sep = self.sep_item(g.depth);
        let base = self.e.fresh("uniq");
        // Rule for the non-empty set `used` of value indexes already emitted.
        let name = |used: u32| format!("{base}.{used:x}");
        let mut todo: Vec<u32> = Vec::new();
        let mut first = Vec::new();
        for (i, sp) in spelled.iter().enumerate() {
            if max >= 1 {
                first.push(format!("{sp} {}", name(1 << i)));
                todo.push(1 << i);
            }
        }
        let mut defined: HashSet<u32> = HashSet::new();
        while let Some(used) = todo.pop() {
            if !defined.insert(used) {
                continue;
            }
            let count = u64::from(used.count_ones());
            let mut alts = Vec::new();
            if count >= min {
                alts.push("\"\"".to_string());
            }
            if count < max {
                for (i, sp) in spelled.iter().enumerate() {
                    if used & (1 << i) == 0 {
                        alts.push(format!("{sep} {sp} {}", name(used | 1 << i)));
                        todo.push(used | 1 << i);
                    }
                }
            }
            let body = if alts.is_empty() { self.nothing() } else { alts.join(" | ") };
            self.e.define(&name(used), &body)?;
        }
        let mut alts = Vec::new();
        if min == 0 {
            alts.push(self.empty('[', ']'));
        }
        if !first.is_empty() {
            alts.push(format!("{} {} {}", self.open('[', g.depth), emit::alt(&first), self.close(']', g.depth)));
        }
        Ok(if alts.is_empty() { None } else { Some(emit::alt(&alts)) })
    }

    /// Arrays whose items all satisfy the rest schema and where, for each condition `(c, negated)`,
    /// some item satisfies `c` (with `negated`: fails it). States are the sets of conditions met;
    /// an item meeting the conditions T (the intersection of their schemas) moves C to C | T.
    /// Items are "any" or "meets T" for T disjoint from C: an ambiguous but exact union.
    fn emit_array_exists(
        &mut self,
        g: &Goal,
        m: &Merged,
        conds: &[(SchemaId, bool)],
        p: &str,
    ) -> Result<Option<String>> {
        const MAX_EXISTS_CONDITIONS: usize = 4;
        if conds.len() > MAX_EXISTS_CONDITIONS {
            return Err(unsupported(
                p,
                format!("more than {MAX_EXISTS_CONDITIONS} item conditions (negated items, contains) on one array"),
            ));
        }
        if m.arr.iter().any(|a| !a.prefix.is_empty()) {
            return Err(unsupported(p, "contains together with prefix items is not supported"));
        }
        // Every array meeting a condition has an item, so minItems 1 holds.
        if m.max_items.is_some() || m.min_items > 1 {
            return Err(unsupported(
                p,
                "contains together with minItems above minContains or maxItems is not supported",
            ));
        }
        if m.unique.is_some() {
            return Err(unsupported(p, "contains together with uniqueItems is not supported"));
        }
        let mut ids = Vec::new();
        for a in &m.arr {
            match a.rest {
                Rest::Any => {}
                Rest::Closed => return Ok(None),
                Rest::Schema(x) => ids.push(x),
            }
        }
        let d = self.child_depth(g.depth);
        let goal = |set: usize| {
            let mut gids = ids.clone();
            let mut nots = m.all_item_nots.clone();
            for (j, &(c, negated)) in conds.iter().enumerate() {
                if set & (1 << j) != 0 {
                    if negated {
                        nots.push(c);
                    } else {
                        gids.push(c);
                    }
                }
            }
            Goal { ids: gids, nots, done: vec![], neg: vec![], depth: d }
        };
        let full = (1usize << conds.len()) - 1;
        // meets[t]: an item meeting (at least) the conditions in t; meets[0] is any item.
        let mut meets: Vec<Option<String>> = Vec::with_capacity(full + 1);
        for t in 0..=full {
            meets.push(self.rule_for(goal(t))?);
        }
        let sep = self.sep_item(g.depth);
        let stay = meets[0].as_ref().map(|o| format!("({sep} {o})*")).unwrap_or_default();
        // after[c]: the rest of the array after its first item, conditions c met. c | t > c for
        // t disjoint from c and non-empty, so the loop from `full` down defines after[c | t] first.
        let mut after: Vec<Option<String>> = vec![None; full + 1];
        for c in (0..=full).rev() {
            let mut alts = Vec::new();
            if c == full {
                alts.push(if stay.is_empty() { "\"\"".to_string() } else { stay.clone() });
            }
            for t in 1..=full {
                if t & c == 0 {
                    if let (Some(h), Some(nx)) = (&meets[t], &after[c | t]) {
                        alts.push(format!("{stay} {sep} {h} {nx}"));
                    }
                }
            }
            after[c] = if alts.is_empty() {
                None
            } else {
                let name = self.e.fresh("exists_tail");
                self.e.define(&name, &alts.join(" | "))?;
                Some(name)
            };
        }
        let mut first = Vec::new();
        for t in 0..=full {
            if let (Some(h), Some(nx)) = (&meets[t], &after[t]) {
                first.push(format!("{h} {nx}"));
            }
        }
        if first.is_empty() {
            return Ok(None);
        }
        Ok(Some(format!("{} ({}) {}", self.open('[', g.depth), first.join(" | "), self.close(']', g.depth))))
    }

    /// Arrays whose items all satisfy the rest schema and of which between `lo` and `hi` satisfy
    /// `c` (with `negated`: fail `c`) as well. Without `hi`, items are "any" or "any and c" (an ambiguous but exact union);
    /// with `hi`, every item is either "c" or "not c", so counting them is exact.
    fn emit_array_contains(
        &mut self,
        g: &Goal,
        m: &Merged,
        (c, negated): (SchemaId, bool),
        lo: u64,
        hi: Option<u64>,
        p: &str,
    ) -> Result<Option<String>> {
        const MAX_CONTAINS_COUNT: u64 = 64;
        if m.arr.iter().any(|a| !a.prefix.is_empty()) {
            return Err(unsupported(p, "contains together with prefix items is not supported"));
        }
        if m.max_items.is_some() || m.min_items > lo {
            return Err(unsupported(
                p,
                "contains together with minItems above minContains or maxItems is not supported",
            ));
        }
        if m.unique.is_some() {
            return Err(unsupported(p, "contains together with uniqueItems is not supported"));
        }
        if hi.is_some_and(|h| h < lo) {
            return Ok(None);
        }
        if lo.max(hi.unwrap_or(0)) > MAX_CONTAINS_COUNT {
            return Err(Error::limit("minContains/maxContains", MAX_CONTAINS_COUNT as usize).at_pointer(p));
        }
        let mut ids = Vec::new();
        for a in &m.arr {
            match a.rest {
                Rest::Any => {}
                Rest::Closed => {
                    // Only the empty array is left.
                    return Ok((lo == 0).then(|| self.empty('[', ']')));
                }
                Rest::Schema(x) => ids.push(x),
            }
        }
        let d = self.child_depth(g.depth);
        // Every item also fails the negated `contains` schemas.
        let goal = |ids: Vec<SchemaId>, nots: Vec<SchemaId>| Goal {
            ids,
            nots: [nots, m.all_item_nots.clone()].concat(),
            done: vec![],
            neg: vec![],
            depth: d,
        };
        let with_c = goal([ids.clone(), vec![c]].concat(), vec![]);
        let without_c = goal(ids.clone(), vec![c]);
        let (hit, miss) = if negated { (without_c, with_c) } else { (with_c, without_c) };
        let hit = self.rule_for(hit)?;
        // Items that may or may not be hits (unbounded count), or that must not (bounded).
        let other = match hi {
            None => self.rule_for(goal(ids.clone(), vec![]))?,
            Some(_) => self.rule_for(miss)?,
        };
        let sep = self.sep_item(g.depth);
        let top = hi.unwrap_or(lo);
        // after[k]: the rest of the array after its first item, k hits so far (k <= top).
        let mut after: Vec<Option<String>> = vec![None; top as usize + 1];
        for k in (0..=top).rev() {
            let mut alts = Vec::new();
            let stay = other.as_ref().map(|o| format!("({sep} {o})*")).unwrap_or_default();
            if k >= lo {
                alts.push(if stay.is_empty() { "\"\"".to_string() } else { stay.clone() });
            }
            if k < top {
                if let (Some(h), Some(nx)) = (&hit, &after[k as usize + 1]) {
                    alts.push(format!("{stay} {sep} {h} {nx}"));
                }
            }
            after[k as usize] = if alts.is_empty() {
                None
            } else {
                let name = self.e.fresh("contains_tail");
                self.e.define(&name, &alts.join(" | "))?;
                Some(name)
            };
        }
        let mut first = Vec::new();
        if let (Some(o), Some(nx)) = (&other, &after[0]) {
            first.push(format!("{o} {nx}"));
        }
        if top >= 1 {
            if let (Some(h), Some(nx)) = (&hit, &after[1]) {
                first.push(format!("{h} {nx}"));
            }
        }
        let mut alts = Vec::new();
        if lo == 0 {
            alts.push(self.empty('[', ']'));
        }
        if !first.is_empty() {
            alts.push(format!("{} ({}) {}", self.open('[', g.depth), first.join(" | "), self.close(']', g.depth)));
        }
        Ok(if alts.is_empty() { None } else { Some(emit::alt(&alts)) })
    }
}
