//! Render once per conversation (issue #58): a bounded cache of the message-loop bodies of
//! recent renders, and the render that reuses them (docs/architecture.md, "Render reuse").
//!
//! A template with a [`LoopSplit`](crate::render_split::LoopSplit) renders its messages in one
//! loop whose iteration `i` depends only on the messages `i − lookbehind ..= i + lookahead`,
//! its position and the rest of the context. A request whose messages start with the `p`
//! messages of a cached render (compared value for value, strictly: kind, integer or float,
//! text, key order) under an equal rest of the context takes the cached bodies of iterations
//! `lookbehind ≤ i < p − lookahead` and renders the split template with those iterations
//! skipped: the header, the other iterations and the footer run as in a full render. The
//! output is then `header · bodies · footer`, each body from the cache or from this render.
//!
//! Anything unexpected gives the full render instead, whose result (text or error) is the
//! answer: an error of the split render (a raise, the budget, the byte bound), a marker
//! count other than the one emitted (a message holding the marker), an output over the
//! template's byte bound. The split render never runs more of the template than the full
//! render would; the execution budget bounds what it does run.

use crate::env::{ChatTemplate, RenderFailure};
use crate::json::map_value;
use crate::render_split::{BACK_VAR, FROM_VAR, MARK};
use minijinja::value::{Value, ValueKind};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How many trailing messages a request may add to a cached render and still find it (an
/// agent turn adds an assistant message and its tool results).
const PROBES: usize = 16;

/// Which caller's contexts an entry holds (the strict path and the engine path build their
/// message values differently; their entries never mix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RenderPath {
    /// The strict render (`role` and joined `content` only).
    Strict,
    /// The engine's own render (lifted requests, `engine_chat`).
    Engine,
}

/// One cached render: its context and the output of each iteration of the message loop.
#[derive(Debug)]
struct Entry {
    path: RenderPath,
    rest: Vec<(Value, Value)>,
    messages: Vec<Value>,
    bodies: Vec<Arc<str>>,
    bytes: usize,
    used: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    map: HashMap<u64, Arc<Entry>>,
    bytes: usize,
    clock: u64,
}

/// Counters of a [`RenderCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderCacheStats {
    /// Renders that reused a cached render's iterations.
    pub hits: u64,
    /// Renders through the split template that found nothing to reuse.
    pub misses: u64,
    /// Renders that fell back to the full render (an error, a marker in a message, the bound).
    pub fallbacks: u64,
    /// Entries held.
    pub entries: u64,
    /// Bytes held (about).
    pub bytes: u64,
    /// The bound on `bytes` (`0`: the cache is off).
    pub capacity: u64,
}

/// The render cache of one encoder: bounded to `capacity` bytes (about: the iterations'
/// output and the message texts each entry holds), least recently used entries dropped first.
#[derive(Debug, Default)]
pub(crate) struct RenderCache {
    capacity: usize,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    fallbacks: AtomicU64,
}

/// A template's split twin and the cache its renders fill.
#[derive(Debug)]
pub(crate) struct RenderReuse {
    template: ChatTemplate,
    lookahead: usize,
    lookbehind: usize,
    cache: RenderCache,
}

/// The template context: `messages` first, then `rest` in its order (as the full render
/// builds it).
pub(crate) fn context(messages: &[Value], rest: &[(Value, Value)]) -> Value {
    let mut ctx: Vec<(Value, Value)> = Vec::with_capacity(rest.len() + 3);
    ctx.push((Value::from("messages"), Value::from(messages.to_vec())));
    ctx.extend(rest.iter().cloned());
    map_value(ctx)
}

/// Strict equality of template values: the same kind, integer or float, text, items and key
/// order (minijinja's `==` takes `1 == 1.0 == true`, which print differently).
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    if a.kind() != b.kind() {
        return false;
    }
    match a.kind() {
        ValueKind::Undefined | ValueKind::None => true,
        ValueKind::Bool => a.is_true() == b.is_true(),
        ValueKind::String => a.as_str() == b.as_str() && a.is_safe() == b.is_safe(),
        ValueKind::Bytes => a.as_bytes() == b.as_bytes(),
        ValueKind::Number => a.is_integer() == b.is_integer() && a.to_string() == b.to_string(),
        ValueKind::Seq => match (a.len(), b.len(), a.try_iter(), b.try_iter()) {
            (Some(x), Some(y), Ok(ia), Ok(ib)) => x == y && ia.zip(ib).all(|(p, q)| same(&p, &q)),
            _ => false,
        },
        ValueKind::Map => match (a.len(), b.len(), a.try_iter(), b.try_iter()) {
            (Some(x), Some(y), Ok(ia), Ok(ib)) => {
                x == y
                    && ia.zip(ib).all(|(ka, kb)| {
                        same(&ka, &kb)
                            && match (a.get_item(&ka), b.get_item(&kb)) {
                                (Ok(va), Ok(vb)) => same(&va, &vb),
                                _ => false,
                            }
                    })
            }
            _ => false,
        },
        _ => false,
    }
}

fn same_pairs(a: &[(Value, Value)], b: &[(Value, Value)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| same(ka, kb) && same(va, vb))
}

/// Feeds what [`same`] compares into `h`; returns the bytes of text seen.
fn feed(v: &Value, h: &mut impl Hasher) -> usize {
    (v.kind() as u8).hash(h);
    match v.kind() {
        ValueKind::String => {
            let s = v.as_str().unwrap_or("");
            s.hash(h);
            s.len()
        }
        ValueKind::Number | ValueKind::Bool => {
            v.to_string().hash(h);
            8
        }
        ValueKind::Seq | ValueKind::Map => {
            let mut n = 16;
            if let Ok(it) = v.try_iter() {
                for k in it {
                    n += feed(&k, h);
                    if v.kind() == ValueKind::Map {
                        n += feed(&v.get_item(&k).unwrap_or_default(), h);
                    }
                }
            }
            n
        }
        _ => 8,
    }
}

fn key(path: RenderPath, count: usize, last: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut h);
    count.hash(&mut h);
    feed(last, &mut h);
    h.finish()
}

impl RenderCache {
    fn find(
        &self,
        path: RenderPath,
        messages: &[Value],
        rest: &[(Value, Value)],
    ) -> Option<Arc<Entry>> {
        let n = messages.len();
        let keys: Vec<(usize, u64)> = (1..=n)
            .rev()
            .take(PROBES)
            .map(|j| (j, key(path, j, &messages[j - 1])))
            .collect();
        let found: Vec<Arc<Entry>> = {
            let mut st = self.state.lock().ok()?;
            st.clock += 1;
            let now = st.clock;
            let found: Vec<Arc<Entry>> = keys
                .iter()
                .filter_map(|(j, k)| st.map.get(k).filter(|e| e.messages.len() == *j).cloned())
                .collect();
            for e in &found {
                e.used.store(now, Ordering::Relaxed);
            }
            found
        };
        // Compared outside the lock; the longest match wins (probes go longest first).
        found.into_iter().find(|e| {
            e.path == path
                && same_pairs(&e.rest, rest)
                && e.messages.iter().zip(messages).all(|(a, b)| same(a, b))
        })
    }

    fn insert(
        &self,
        path: RenderPath,
        messages: &[Value],
        rest: &[(Value, Value)],
        bodies: Vec<Arc<str>>,
        replaces: Option<u64>,
    ) {
        let Some(last) = messages.last() else {
            return;
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let text: usize = messages.iter().map(|m| feed(m, &mut h)).sum::<usize>()
            + rest.iter().map(|(_, v)| feed(v, &mut h)).sum::<usize>();
        let bytes = text + bodies.iter().map(|b| b.len() + 32).sum::<usize>() + 128;
        if bytes > self.capacity / 4 {
            return;
        }
        let k = key(path, messages.len(), last);
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        st.clock += 1;
        let now = st.clock;
        for old in [replaces, Some(k)].into_iter().flatten() {
            if let Some(e) = st.map.remove(&old) {
                st.bytes -= e.bytes;
            }
        }
        while st.bytes + bytes > self.capacity {
            let Some(oldest) = st
                .map
                .iter()
                .min_by_key(|(_, e)| e.used.load(Ordering::Relaxed))
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some(e) = st.map.remove(&oldest) {
                st.bytes -= e.bytes;
            }
        }
        st.bytes += bytes;
        st.map.insert(
            k,
            Arc::new(Entry {
                path,
                rest: rest.to_vec(),
                messages: messages.to_vec(),
                bodies,
                bytes,
                used: AtomicU64::new(now),
            }),
        );
    }
}

impl RenderReuse {
    /// The split twin of `template`, or why it has none ([`crate::render_split::split`]).
    pub(crate) fn new(template: &ChatTemplate) -> Result<RenderReuse, String> {
        let split = crate::render_split::split(template.compiled_source())?;
        Ok(RenderReuse {
            template: template.split_twin(split.source)?,
            lookahead: split.lookahead,
            lookbehind: split.lookbehind,
            cache: RenderCache::default(),
        })
    }

    /// Sets the cache's bound (`0`: off, every render full) and empties it.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.cache = RenderCache {
            capacity,
            ..RenderCache::default()
        };
    }

    /// Whether renders go through the cache.
    pub(crate) fn enabled(&self) -> bool {
        self.cache.capacity > 0
    }

    /// Empties the cache (counters kept).
    pub(crate) fn clear(&self) {
        if let Ok(mut st) = self.cache.state.lock() {
            st.map.clear();
            st.bytes = 0;
        }
    }

    /// The cache's counters.
    pub(crate) fn stats(&self) -> RenderCacheStats {
        let (entries, bytes) = self
            .cache
            .state
            .lock()
            .map(|st| (st.map.len() as u64, st.bytes as u64))
            .unwrap_or_default();
        RenderCacheStats {
            hits: self.cache.hits.load(Ordering::Relaxed),
            misses: self.cache.misses.load(Ordering::Relaxed),
            fallbacks: self.cache.fallbacks.load(Ordering::Relaxed),
            entries,
            bytes,
            capacity: self.cache.capacity as u64,
        }
    }

    /// What the lookahead and lookbehind of the split are.
    pub(crate) fn window(&self) -> (usize, usize) {
        (self.lookbehind, self.lookahead)
    }

    /// Renders `messages` under `rest` into `out` reusing a cached render of the same
    /// conversation, and caches this one. `None`: the caller renders in full (see the module
    /// doc); `max` is the full render's byte bound.
    pub(crate) fn render(
        &self,
        path: RenderPath,
        messages: &[Value],
        rest: &[(Value, Value)],
        now_unix_ms: Option<i64>,
        max: usize,
        out: &mut String,
    ) -> Option<()> {
        let n = messages.len();
        let hit = self.cache.find(path, messages, rest);
        let (from, back, replaces) = match &hit {
            Some(e) => {
                let p = e.messages.len();
                let from = p.saturating_sub(self.lookahead);
                let last = e.messages.last()?;
                (from, self.lookbehind.min(from), Some(key(path, p, last)))
            }
            None => (0, 0, None),
        };
        let rendered: Vec<usize> = (0..n).filter(|&i| i < back || i >= from).collect();
        let mut ctx: Vec<(Value, Value)> = Vec::with_capacity(rest.len() + 2);
        ctx.extend(rest.iter().cloned());
        ctx.push((Value::from(FROM_VAR), Value::from(from)));
        ctx.push((Value::from(BACK_VAR), Value::from(back)));
        let marks = (rendered.len() + 1).saturating_mul(MARK.len());
        let mut split_out = String::new();
        let ok = self.template.render_into_bounded(
            &context(messages, &ctx),
            now_unix_ms,
            &mut split_out,
            max.saturating_add(marks),
        );
        let fallback = || {
            self.cache.fallbacks.fetch_add(1, Ordering::Relaxed);
            None
        };
        if ok.is_err() {
            return fallback();
        }
        let at: Vec<usize> = split_out.match_indices(MARK).map(|(i, _)| i).collect();
        if at.len() != rendered.len() + 1 {
            return fallback();
        }
        let (Some(&first), Some(&end)) = (at.first(), at.last()) else {
            return fallback();
        };
        let mut fresh = at
            .windows(2)
            .map(|w| split_out.get(w[0] + MARK.len()..w[1]).unwrap_or(""));
        let mut bodies: Vec<Arc<str>> = Vec::with_capacity(n);
        for i in 0..n {
            if i < back || i >= from {
                bodies.push(Arc::from(fresh.next()?));
            } else {
                bodies.push(hit.as_ref()?.bodies.get(i)?.clone());
            }
        }
        let head = split_out.get(..first)?;
        let foot = split_out.get(end + MARK.len()..)?;
        let total = head.len() + foot.len() + bodies.iter().map(|b| b.len()).sum::<usize>();
        if total > max {
            return fallback();
        }
        out.clear();
        out.reserve(total);
        out.push_str(head);
        bodies.iter().for_each(|b| out.push_str(b));
        out.push_str(foot);
        if hit.is_some() {
            self.cache.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.cache.misses.fetch_add(1, Ordering::Relaxed);
        }
        self.cache.insert(path, messages, rest, bodies, replaces);
        Some(())
    }
}

/// Renders `messages` under `rest` with `template` into `out`: through `reuse` when it is
/// on, else (or when it declines) in full.
pub(crate) fn render_messages(
    template: &ChatTemplate,
    reuse: Option<&RenderReuse>,
    path: RenderPath,
    messages: &[Value],
    rest: &[(Value, Value)],
    now_unix_ms: Option<i64>,
    out: &mut String,
) -> Result<(), RenderFailure> {
    if let Some(r) = reuse.filter(|r| r.enabled()) {
        if r.render(
            path,
            messages,
            rest,
            now_unix_ms,
            template.max_output(),
            out,
        )
        .is_some()
        {
            return Ok(());
        }
    }
    template.render_into(&context(messages, rest), now_unix_ms, out)
}
