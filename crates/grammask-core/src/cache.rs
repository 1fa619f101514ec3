//! A thread-safe cache of compiled grammars keyed by their source (kind, text, options), bounded
//! by total memory with least-recently-used eviction.
//!
//! Invariant: `bytes` is the sum of the sizes recorded for the entries present. A compiled
//! grammar's kernel and mask memos grow while matchers use it, so every insert re-measures the
//! entries before evicting: right after an insert (and in [`GrammarCache::size_bytes`]) the cache
//! holds at most `limit_bytes`, counting that growth. Concurrent misses on the same key may
//! compile twice; the first insert wins.

use crate::matcher::CompiledGrammar;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, (Arc<CompiledGrammar>, usize, u64)>,
    bytes: usize,
    clock: u64,
}

/// Compiled grammars by key. `limit_bytes < 0` means unlimited.
#[derive(Debug)]
pub struct GrammarCache {
    inner: Mutex<Inner>,
    limit_bytes: i64,
}

impl GrammarCache {
    pub fn new(limit_bytes: i64) -> GrammarCache {
        GrammarCache { inner: Mutex::new(Inner::default()), limit_bytes }
    }

    pub fn limit_bytes(&self) -> i64 {
        self.limit_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn get(&self, key: &str) -> Option<Arc<CompiledGrammar>> {
        let mut g = self.lock();
        g.clock += 1;
        let now = g.clock;
        g.map.get_mut(key).map(|e| {
            e.2 = now;
            e.0.clone()
        })
    }

    /// Inserts `value` unless the key is present; returns the cached value.
    pub fn insert(&self, key: String, value: Arc<CompiledGrammar>) -> Arc<CompiledGrammar> {
        let size = value.memory_size() + key.len();
        let mut g = self.lock();
        g.clock += 1;
        let now = g.clock;
        if let Some(e) = g.map.get_mut(&key) {
            e.2 = now;
            return e.0.clone();
        }
        g.map.insert(key, (value.clone(), size, now));
        Self::remeasure(&mut g);
        if self.limit_bytes >= 0 {
            let limit = usize::try_from(self.limit_bytes).unwrap_or(usize::MAX);
            while g.bytes > limit && !g.map.is_empty() {
                let oldest = g.map.iter().min_by_key(|(_, e)| e.2).map(|(k, _)| k.clone()).unwrap();
                let (_, sz, _) = g.map.remove(&oldest).unwrap();
                g.bytes -= sz;
            }
        }
        value
    }

    pub fn clear(&self) {
        let mut g = self.lock();
        g.map.clear();
        g.bytes = 0;
    }

    /// The bytes held now (entries re-measured).
    pub fn size_bytes(&self) -> usize {
        let mut g = self.lock();
        Self::remeasure(&mut g);
        g.bytes
    }

    /// Refreshes every entry's size (memos grow after insertion) and the total.
    fn remeasure(g: &mut Inner) {
        let mut total = 0;
        for (k, e) in &mut g.map {
            e.1 = e.0.memory_size() + k.len();
            total += e.1;
        }
        g.bytes = total;
    }
}
