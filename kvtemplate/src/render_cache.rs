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
use crate::pyvalue::{PyDict, PyList};
use crate::render_split::{AT_VAR, MARK, N_VAR};
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
    /// [`size`] of `messages`, summed.
    message_bytes: usize,
    bytes: usize,
    used: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    map: HashMap<u64, Arc<Entry>>,
    bytes: usize,
    clock: u64,
}

/// Counters of an encoder's render cache ([`crate::Encoder::render_cache_stats`]).
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
/// output and the message texts each entry holds); when full, the least recently used
/// entries are dropped down to seven eighths of it.
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
    // kvexact's own containers (every request's values): compared directly.
    match (
        a.downcast_object_ref::<PyDict>(),
        b.downcast_object_ref::<PyDict>(),
    ) {
        (Some(x), Some(y)) => {
            return x.0.len() == y.0.len()
                && x.0
                    .iter()
                    .zip(y.0.iter())
                    .all(|((ka, va), (kb, vb))| same(ka, kb) && same(va, vb))
        }
        (None, None) => {}
        _ => return false,
    }
    match (
        a.downcast_object_ref::<PyList>(),
        b.downcast_object_ref::<PyList>(),
    ) {
        (Some(x), Some(y)) => {
            return x.0.len() == y.0.len() && x.0.iter().zip(&y.0).all(|(p, q)| same(p, q))
        }
        (None, None) => {}
        _ => return false,
    }
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

/// A request's messages as the render cache reads them: built into template values only
/// where the render needs new ones, compared with a cached render's values without building.
pub(crate) trait MessageSource {
    /// How many messages.
    fn count(&self) -> usize;
    /// Message `i` as the template receives it.
    fn build(&self, i: usize) -> Value;
    /// Whether message `i` would build a value [`same`] as `cached`.
    fn matches(&self, i: usize, cached: &Value) -> bool;
}

impl MessageSource for [Value] {
    fn count(&self) -> usize {
        self.len()
    }

    fn build(&self, i: usize) -> Value {
        self.get(i).cloned().unwrap_or_default()
    }

    fn matches(&self, i: usize, cached: &Value) -> bool {
        self.get(i).is_some_and(|v| same(v, cached))
    }
}

/// Whether `v` is [`same`] as the strict path's message value `{"role": role, "content":
/// content}` (a `PyDict` of two plain strings, in that order), without building it.
pub(crate) fn same_role_content(v: &Value, role: &str, content: &str) -> bool {
    fn plain(v: &Value) -> Option<&str> {
        if v.kind() == ValueKind::String && !v.is_safe() {
            v.as_str()
        } else {
            None
        }
    }
    let Some(d) = v.downcast_object_ref::<PyDict>() else {
        return false;
    };
    let mut it = d.0.iter();
    match (it.next(), it.next(), it.next()) {
        (Some((k1, v1)), Some((k2, v2)), None) => {
            plain(k1) == Some("role")
                && plain(k2) == Some("content")
                && plain(v1) == Some(role)
                && plain(v2) == Some(content)
        }
        _ => false,
    }
}

fn same_pairs(a: &[(Value, Value)], b: &[(Value, Value)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| same(ka, kb) && same(va, vb))
}

/// How many bytes of each string the lookup key takes (the key only narrows the search: a
/// found entry is compared whole with [`same`]).
const KEY_TEXT: usize = 64;

/// Feeds a digest of what [`same`] compares into `h` (each string's length and first
/// [`KEY_TEXT`] bytes).
fn feed(v: &Value, h: &mut impl Hasher) {
    if let Some(d) = v.downcast_object_ref::<PyDict>() {
        d.0.iter().for_each(|(k, v)| {
            feed(k, h);
            feed(v, h);
        });
        return;
    }
    if let Some(l) = v.downcast_object_ref::<PyList>() {
        l.0.iter().for_each(|v| feed(v, h));
        return;
    }
    (v.kind() as u8).hash(h);
    match v.kind() {
        ValueKind::String => {
            let s = v.as_str().unwrap_or("");
            s.len().hash(h);
            s.as_bytes()[..s.len().min(KEY_TEXT)].hash(h);
        }
        ValueKind::Number | ValueKind::Bool => v.to_string().hash(h),
        ValueKind::Seq | ValueKind::Map => {
            if let Ok(it) = v.try_iter() {
                for k in it {
                    feed(&k, h);
                    if v.kind() == ValueKind::Map {
                        feed(&v.get_item(&k).unwrap_or_default(), h);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The bytes a value holds, about (its strings' lengths and a word per item).
fn size(v: &Value) -> usize {
    if let Some(d) = v.downcast_object_ref::<PyDict>() {
        return 16 + d.0.iter().map(|(k, v)| size(k) + size(v)).sum::<usize>();
    }
    if let Some(l) = v.downcast_object_ref::<PyList>() {
        return 16 + l.0.iter().map(size).sum::<usize>();
    }
    match v.kind() {
        ValueKind::String => v.as_str().map_or(0, str::len) + 16,
        ValueKind::Seq | ValueKind::Map => {
            let mut n = 16;
            if let Ok(it) = v.try_iter() {
                for k in it {
                    n += size(&k);
                    if v.kind() == ValueKind::Map {
                        n += size(&v.get_item(&k).unwrap_or_default());
                    }
                }
            }
            n
        }
        _ => 16,
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
    fn find<M: MessageSource + ?Sized>(
        &self,
        path: RenderPath,
        messages: &M,
        rest: &[(Value, Value)],
    ) -> Option<Arc<Entry>> {
        // The longest cached render this request may extend: probed from all its messages
        // down to all but PROBES of them (a key is computed only when probed).
        let found = {
            let mut st = self.state.lock().ok()?;
            st.clock += 1;
            let now = st.clock;
            let found = (1..=messages.count()).rev().take(PROBES).find_map(|j| {
                st.map
                    .get(&key(path, j, &messages.build(j - 1)))
                    .filter(|e| e.messages.len() == j && e.path == path)
                    .cloned()
            })?;
            found.used.store(now, Ordering::Relaxed);
            found
        };
        // Compared whole outside the lock.
        (same_pairs(&found.rest, rest)
            && found
                .messages
                .iter()
                .enumerate()
                .all(|(i, cached)| messages.matches(i, cached)))
        .then_some(found)
    }

    fn insert(
        &self,
        path: RenderPath,
        messages: &[Value],
        rest: &[(Value, Value)],
        bodies: Vec<Arc<str>>,
        replaces: Option<&Entry>,
    ) {
        let Some(last) = messages.last() else {
            return;
        };
        // The replaced entry's messages are this request's first ones (compared whole).
        let (known, message_bytes) = match replaces {
            Some(e) => (e.messages.len(), e.message_bytes),
            None => (0, 0),
        };
        let message_bytes = message_bytes
            + messages
                .get(known..)
                .unwrap_or(&[])
                .iter()
                .map(size)
                .sum::<usize>();
        let text = message_bytes + rest.iter().map(|(_, v)| size(v)).sum::<usize>();
        let bytes = text + bodies.iter().map(|b| b.len() + 32).sum::<usize>() + 128;
        let replaces =
            replaces.and_then(|e| e.messages.last().map(|l| key(e.path, e.messages.len(), l)));
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
        if st.bytes + bytes > self.capacity {
            // Least recently used first, down to seven eighths of the bound: one sort per
            // eviction round instead of one scan per entry dropped.
            let mut by_use: Vec<(u64, u64)> = st
                .map
                .iter()
                .map(|(k, e)| (e.used.load(Ordering::Relaxed), *k))
                .collect();
            by_use.sort_unstable();
            let target = self.capacity / 8 * 7;
            for (_, k) in by_use {
                if st.bytes + bytes <= target {
                    break;
                }
                if let Some(e) = st.map.remove(&k) {
                    st.bytes -= e.bytes;
                }
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
                message_bytes,
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
    pub(crate) fn render<M: MessageSource + ?Sized>(
        &self,
        path: RenderPath,
        source: &M,
        rest: &[(Value, Value)],
        now_unix_ms: Option<i64>,
        max: usize,
        out: &mut String,
    ) -> Option<()> {
        let n = source.count();
        let hit = self.cache.find(path, source, rest);
        // The cached render's values for its messages (equal to this request's), new ones
        // built for the rest.
        let known = hit.as_ref().map_or(0, |e| e.messages.len());
        let mut messages: Vec<Value> = Vec::with_capacity(n);
        if let Some(e) = &hit {
            messages.extend(e.messages.iter().cloned());
        }
        messages.extend((known..n).map(|i| source.build(i)));
        let messages = &messages[..];
        let (from, back) = match &hit {
            Some(e) => {
                let from = e.messages.len().saturating_sub(self.lookahead);
                (from, self.lookbehind.min(from))
            }
            None => (0, 0),
        };
        let rendered: Vec<usize> = (0..n).filter(|&i| i < back || i >= from).collect();
        let mut ctx: Vec<(Value, Value)> = Vec::with_capacity(rest.len() + 2);
        ctx.extend(rest.iter().cloned());
        ctx.push((
            Value::from(AT_VAR),
            Value::from(rendered.iter().map(|&i| Value::from(i)).collect::<Vec<_>>()),
        ));
        ctx.push((Value::from(N_VAR), Value::from(n)));
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
        self.cache
            .insert(path, messages, rest, bodies, hit.as_deref());
        Some(())
    }
}

/// Renders `messages` under `rest` with `template` into `out`: through `reuse` when it is
/// on, else (or when it declines) in full.
pub(crate) fn render_messages<M: MessageSource + ?Sized>(
    template: &ChatTemplate,
    reuse: Option<&RenderReuse>,
    path: RenderPath,
    messages: &M,
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
    let all: Vec<Value> = (0..messages.count()).map(|i| messages.build(i)).collect();
    template.render_into(&context(&all, rest), now_unix_ms, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value(kind: u8, a: &str, b: &str) -> Value {
        match kind {
            0 => map_value([("role", Value::from(a)), ("content", Value::from(b))]),
            1 => map_value([("content", Value::from(b)), ("role", Value::from(a))]),
            2 => map_value([
                ("role", Value::from(a)),
                ("content", Value::from(b)),
                ("name", Value::from(a)),
            ]),
            3 => map_value([
                ("role", Value::from(a)),
                ("content", Value::from_safe_string(b.into())),
            ]),
            4 => map_value([("role", Value::from(a)), ("content", Value::from(b.len()))]),
            _ => Value::from(a),
        }
    }

    proptest! {
        /// The strict path's compare without building equals [`same`] on the built value.
        #[test]
        fn same_role_content_is_same(
            kind in 0u8..6,
            role in "(user|assistant|system|x)",
            content in ".{0,6}",
            r2 in "(user|assistant|system|x)",
            c2 in ".{0,6}",
            copy in 0u8..4,
        ) {
            // Mostly the same texts (the case that matters), else other ones.
            let r2 = if copy & 1 == 0 { role.clone() } else { r2 };
            let c2 = if copy & 2 == 0 { content.clone() } else { c2 };
            let cached = value(kind, &r2, &c2);
            let built = value(0, &role, &content);
            prop_assert_eq!(same_role_content(&cached, &role, &content), same(&built, &cached));
        }
    }
}
