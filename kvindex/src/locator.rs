//! The chain locator: for every chain key (a GPU block of the full-attention group that sits
//! in the run-compressed chains, [`crate::runs`]), its place, read by the prediction walk
//! without a lock.
//!
//! The walk and the writers read the places here: one open-addressed array of 16-byte entries
//! (hash, place) probed linearly, four entries to a cache line, with no lock to take and no
//! holder data to pass over (a chain key's holders are its run's, [`crate::runs`]). Writers
//! are the one writer of the chains (they hold the runs' writer mutex), so the array has one
//! writer and any number of readers:
//!
//! * An entry goes from empty to held (hash written, then the place with release ordering;
//!   a reader loads the place with acquire ordering, then the hash), from held to another
//!   place of the same hash, from held to gone, and from gone to held again. An empty entry
//!   stays empty until the array is rebuilt, so a reader's probe for a hash that is held ends
//!   at it, not before (an entry goes empty only in a new array).
//! * The array is rebuilt (grown, shrunk, or cleared of gone entries) into a new array that
//!   replaces it in one atomic swap ([`arc_swap`]); a reader still on the old one finds every
//!   key held at the swap, at a place that was right then, and the old array is freed when its
//!   last reader lets go. The swapped value carries the endpoint list too ([`View`]), so a
//!   prediction loads both at once; a rebuild and an endpoint coming or going each swap in
//!   their part and keep the other's (a compare-and-swap loop, `rcu`).
//!
//! A place read here may be stale by the time the walk reads the run (a writer moved the key
//! meanwhile): the walk checks that the run holds the hash at that place, and walks again when
//! it does not (after a few such walks, under the writers' mutex: [`crate::walk`]).

use crate::endpoint::Endpoints;
use arc_swap::cache::Cache;
use arc_swap::{ArcSwap, Guard};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where a chain key sits in the run-compressed chains: run id and logical position
/// ([`crate::runs`]); [`Loc::NONE`] for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub run: u32,
    pub pos: u32,
}

impl Loc {
    /// No place in the chains.
    pub const NONE: Loc = Loc {
        run: u32::MAX,
        pos: 0,
    };
}

/// The place word of an entry never held.
const EMPTY: u64 = u64::MAX;
/// The place word of an entry whose key went.
const GONE: u64 = u64::MAX - 1;
/// The smallest array (entries).
const MIN_ENTRIES: usize = 16;

#[inline]
fn pack(loc: Loc) -> u64 {
    u64::from(loc.run) << 32 | u64::from(loc.pos)
}

#[inline]
fn unpack(v: u64) -> Loc {
    Loc {
        run: (v >> 32) as u32,
        pos: v as u32,
    }
}

/// The block hashes are digests, but a hostile stream chooses them: mix before probing.
#[inline]
fn home(hash: u64, mask: usize) -> usize {
    let x = (hash ^ (hash >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x ^ (x >> 29)) as usize & mask
}

/// One array: entry `i` is the hash at word `2i` and the place at word `2i + 1`.
pub(crate) struct Slots {
    words: Box<[AtomicU64]>,
    mask: usize,
}

impl Slots {
    fn new(entries: usize) -> Self {
        debug_assert!(entries.is_power_of_two());
        let words = (0..entries * 2)
            .map(|i| AtomicU64::new(if i % 2 == 1 { EMPTY } else { 0 }))
            .collect();
        Slots {
            words,
            mask: entries - 1,
        }
    }

    fn entries(&self) -> usize {
        self.mask + 1
    }

    /// The place of `hash`, when held.
    #[inline]
    pub fn find(&self, hash: u64) -> Option<Loc> {
        let mut i = home(hash, self.mask);
        loop {
            let v = self.words[2 * i + 1].load(Ordering::Acquire);
            if v == EMPTY {
                return None;
            }
            if v != GONE && self.words[2 * i].load(Ordering::Relaxed) == hash {
                return Some(unpack(v));
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Asks the CPU to bring each hash's home entry into its cache, for probes soon to come
    /// (a hint: nothing is read, nothing can fault; a no-op where no prefetch instruction is
    /// wired up).
    #[inline]
    pub fn prefetch(&self, hashes: impl Iterator<Item = u64>) {
        #[cfg(target_arch = "x86_64")]
        {
            // The array's address and mask read once (a prefetch is a call LLVM does not move
            // loads across); each address is an entry's (masked index), computed without a
            // bounds check.
            let (words, mask) = (self.words.as_ptr(), self.mask);
            for hash in hashes {
                let at = words.wrapping_add(2 * home(hash, mask));
                // SAFETY: a prefetch is a hint that reads no memory and never faults.
                unsafe {
                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                    _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
                }
            }
        }
        // Elsewhere the iterator is dropped unread (it is lazy: nothing is computed).
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hashes;
    }

    /// The writer's probe: the entry holding `hash`, or where it goes (the first gone or
    /// empty entry on its probe path), and whether that entry was gone.
    fn slot_for(&self, hash: u64) -> (usize, bool, bool) {
        let mut i = home(hash, self.mask);
        let mut free: Option<usize> = None;
        loop {
            let v = self.words[2 * i + 1].load(Ordering::Relaxed);
            if v == EMPTY {
                return match free {
                    Some(f) => (f, false, true),
                    None => (i, false, false),
                };
            }
            if v == GONE {
                free.get_or_insert(i);
            } else if self.words[2 * i].load(Ordering::Relaxed) == hash {
                return (i, true, false);
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// What one atomic load gives a prediction: the current places array and the endpoint list
/// (one load per prediction instead of one for each).
pub(crate) struct View {
    /// The places.
    pub slots: Arc<Slots>,
    /// The endpoint list.
    pub endpoints: Arc<Endpoints>,
}

/// The readers' side: the current array, swapped whole on a rebuild, with the endpoint list
/// (swapped whole when an endpoint comes or goes).
pub(crate) struct Places {
    /// Shared with the threads' view caches ([`ViewCache`]).
    cur: Arc<ArcSwap<View>>,
}

/// A thread's copy of the view it last read ([`Places::cached`]): a prediction checks that it
/// is still the current one with one plain atomic load, where a load through the `ArcSwap`
/// takes and gives back a slot (two read-modify-writes). The copy keeps that view alive (its
/// places array and endpoint list) until the thread reads another index or a newer view: after
/// a rebuild or an endpoint change the old array is freed when the last thread that read it
/// predicts again, or ends.
#[derive(Default)]
pub(crate) struct ViewCache(Option<Cache<Arc<ArcSwap<View>>, Arc<View>>>);

impl Places {
    /// The current array, for a walk's reads (held for the walk: one atomic load per walk).
    #[inline]
    pub fn read(&self) -> Guard<Arc<View>> {
        self.cur.load()
    }

    /// The current view through the thread's cache `c` (filled with this index's view when it
    /// held another index's, or none).
    #[inline]
    pub fn cached<'c>(&self, c: &'c mut ViewCache) -> &'c Arc<View> {
        if !c
            .0
            .as_ref()
            .is_some_and(|k| std::ptr::eq(k.arc_swap(), &*self.cur))
        {
            c.0 = None;
        }
        c.0.get_or_insert_with(|| Cache::new(self.cur.clone()))
            .load()
    }

    /// The place of `hash` now.
    pub fn find(&self, hash: u64) -> Option<Loc> {
        self.cur.load().slots.find(hash)
    }

    /// The endpoint list is `endpoints` from now on (the places stay whatever they are: a
    /// rebuild swapping them meanwhile is kept).
    pub fn set_endpoints(&self, endpoints: Arc<Endpoints>) {
        self.cur.rcu(|v| View {
            slots: v.slots.clone(),
            endpoints: endpoints.clone(),
        });
    }
}

/// The writer's side (kept with the chains' writer, under its mutex): the same array, held
/// without an atomic load per change, and its counts.
pub(crate) struct PlacesWriter {
    slots: Arc<Slots>,
    /// Held keys.
    live: usize,
    /// Gone entries in the current array.
    gone: usize,
}

/// A new, empty locator: the readers' side and the writer's.
pub(crate) fn new_places() -> (Places, PlacesWriter) {
    let slots = Arc::new(Slots::new(MIN_ENTRIES));
    (
        Places {
            cur: Arc::new(ArcSwap::from_pointee(View {
                slots: slots.clone(),
                endpoints: Arc::default(),
            })),
        },
        PlacesWriter {
            slots,
            live: 0,
            gone: 0,
        },
    )
}

impl PlacesWriter {
    /// Held keys.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Bytes of the current array.
    pub fn bytes(&self) -> usize {
        self.slots.entries() * 16
    }

    /// The place of `hash` now.
    pub fn find(&self, hash: u64) -> Option<Loc> {
        self.slots.find(hash)
    }

    /// [`Slots::prefetch`] on the current array.
    #[inline]
    pub fn prefetch(&self, hashes: impl Iterator<Item = u64>) {
        self.slots.prefetch(hashes);
    }

    /// `hash` is at `loc` now (held before or not); `p` is the readers' side of this locator.
    pub fn set(&mut self, p: &Places, hash: u64, loc: Loc) {
        debug_assert!(pack(loc) < GONE, "a place is never a marker");
        // Room for one more: empty entries never below a quarter (every probe ends). The new
        // array is at most a quarter full: a stream that stores and removes (a cache under
        // eviction) fills an array with gone entries, and one rebuilt half full took the next
        // rebuild after about as many ops as it holds keys (the rebuilds were 5 % of the
        // profile of applying the bench's stream at N = 32, 1.3 % after this, and the sparser
        // array shortens every probe).
        if (self.live + self.gone + 1) * 4 > self.slots.entries() * 3 {
            self.rebuild(p, (self.live + 1) * 2);
        }
        let (i, held, was_gone) = self.slots.slot_for(hash);
        if !held {
            // The hash first, then the place that makes the entry held.
            self.slots.words[2 * i].store(hash, Ordering::Relaxed);
            self.live += 1;
            if was_gone {
                self.gone -= 1;
            }
        }
        self.slots.words[2 * i + 1].store(pack(loc), Ordering::Release);
    }

    /// `hash` is held no more.
    pub fn remove(&mut self, p: &Places, hash: u64) {
        let (i, held, _) = self.slots.slot_for(hash);
        if !held {
            return;
        }
        self.slots.words[2 * i + 1].store(GONE, Ordering::Release);
        self.live -= 1;
        self.gone += 1;
        // Shrink when an eighth or less is held.
        if self.slots.entries() > MIN_ENTRIES && self.live * 8 <= self.slots.entries() {
            self.rebuild(p, self.live);
        }
    }

    /// A new array for `want` keys (at most half full), with every held entry of the current
    /// one, swapped in.
    fn rebuild(&mut self, p: &Places, want: usize) {
        let entries = (want * 2).next_power_of_two().max(MIN_ENTRIES);
        let new = Slots::new(entries);
        let old = &self.slots;
        // The held entries are gathered a chunk at a time, each entry written at the next
        // place and kept by moving on or not (no branch: one on whether each entry is held
        // went the wrong way about every other entry, a third of a rebuild's time), then put
        // in the new array.
        const CHUNK: usize = 256;
        let mut held = [(0u64, 0u64); CHUNK];
        let mut moved = 0usize;
        for first in (0..old.entries()).step_by(CHUNK) {
            let mut k = 0usize;
            for i in first..(first + CHUNK).min(old.entries()) {
                let v = old.words[2 * i + 1].load(Ordering::Relaxed);
                let h = old.words[2 * i].load(Ordering::Relaxed);
                // `k` is at most `i - first`, below `CHUNK`.
                held[k] = (h, v);
                k += usize::from(v != EMPTY && v != GONE);
            }
            for &(h, v) in &held[..k] {
                // A new array holds each key once and no gone entry: the key's entry is the
                // first empty one from its home.
                let mut j = home(h, new.mask);
                while new.words[2 * j + 1].load(Ordering::Relaxed) != EMPTY {
                    j = (j + 1) & new.mask;
                }
                new.words[2 * j].store(h, Ordering::Relaxed);
                new.words[2 * j + 1].store(v, Ordering::Relaxed);
            }
            moved += k;
        }
        debug_assert_eq!(moved, self.live, "the held count is the array's");
        self.slots = Arc::new(new);
        // The endpoint list stays whatever it is (one swapped in meanwhile is kept).
        p.cur.rcu(|v| View {
            slots: self.slots.clone(),
            endpoints: v.endpoints.clone(),
        });
        self.gone = 0;
    }

    /// Every held key with its place.
    pub fn for_each(&self, mut f: impl FnMut(u64, Loc)) {
        let s = &self.slots;
        for i in 0..s.entries() {
            let v = s.words[2 * i + 1].load(Ordering::Relaxed);
            if v != EMPTY && v != GONE {
                f(s.words[2 * i].load(Ordering::Relaxed), unpack(v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Sets and removals equal a plain map, through growth, shrinking and the gone
        /// entries' clean-up; hashes collide on purpose (a narrow range, the markers' values).
        #[test]
        fn equals_a_map(
            ops in prop::collection::vec(
                (prop_oneof![0..40u64, (u64::MAX - 3)..=u64::MAX, any::<u64>()], 0..6u32, any::<bool>()),
                1..600,
            ),
        ) {
            let (p, mut l) = new_places();
            let mut m: HashMap<u64, Loc> = HashMap::new();
            for (k, (h, run, set)) in ops.into_iter().enumerate() {
                if set {
                    let loc = Loc { run, pos: k as u32 };
                    l.set(&p, h, loc);
                    m.insert(h, loc);
                } else {
                    l.remove(&p, h);
                    m.remove(&h);
                }
                prop_assert_eq!(l.find(h), m.get(&h).copied());
                // The readers see what the writer sees.
                prop_assert_eq!(p.find(h), m.get(&h).copied());
                prop_assert_eq!(l.len(), m.len());
            }
            for (&h, &loc) in &m {
                prop_assert_eq!(l.find(h), Some(loc));
            }
            let mut seen = HashMap::new();
            l.for_each(|h, loc| { seen.insert(h, loc); });
            prop_assert_eq!(seen, m);
        }
    }

    /// Readers racing the writer: a key held the whole time is always found at its place,
    /// through the writer's sets and removals of other keys, the gone entries they leave and
    /// every rebuild (growing, shrinking, clearing gone entries) they cause; a key the writer
    /// moves is found at one of the places it had.
    #[test]
    fn readers_never_miss_a_key_held_while_the_writer_churns() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        let (p, mut l) = new_places();
        let p = Arc::new(p);
        let steady: Vec<u64> = (0..64).map(|k| k * 0x9E37_79B9 + 1).collect();
        let at = |h: u64| Loc {
            run: (h % 1000) as u32,
            pos: 7,
        };
        for &h in &steady {
            l.set(&p, h, at(h));
        }
        let moved = 5u64;
        l.set(&p, moved, Loc { run: 1, pos: 0 });
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (p, stop, steady) = (p.clone(), stop.clone(), steady.clone());
                let reads = reads.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let view = p.read();
                        let slots = &view.slots;
                        for &h in &steady {
                            assert_eq!(slots.find(h), Some(at(h)), "key {h:#x}");
                        }
                        let m = slots.find(moved).expect("the moved key is held throughout");
                        assert!(m.run == 1 || m.run == 2, "{m:?}");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        // Both readers under way before the churn (a loaded machine may start them late; a
        // reader that failed already ends the wait).
        while reads.load(Ordering::Relaxed) < 2 && !readers.iter().any(|r| r.is_finished()) {
            std::thread::yield_now();
        }
        // Churn: waves of keys stored then removed (growing to thousands and back), the moved
        // key flipping between two places; at least 40 waves, and more (up to 2000) until the
        // readers have read through some of them.
        let mut x = 0x1234_5678_u64;
        let started = reads.load(Ordering::Relaxed);
        let mut wave = 0u64;
        while wave < 40 || (wave < 2000 && reads.load(Ordering::Relaxed) < started + 20) {
            wave += 1;
            let n = 200 + (wave % 7) * 400;
            let keys: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x | 1 << 63
                })
                .collect();
            for (i, &h) in keys.iter().enumerate() {
                l.set(
                    &p,
                    h,
                    Loc {
                        run: 3,
                        pos: i as u32,
                    },
                );
                if i % 97 == 0 {
                    let run = 1 + (i as u32 / 97) % 2;
                    l.set(&p, moved, Loc { run, pos: 0 });
                }
            }
            for &h in &keys {
                l.remove(&p, h);
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("reader");
        }
        assert_eq!(l.len(), steady.len() + 1);
    }

    #[test]
    fn a_reader_keeps_its_array_across_a_rebuild() {
        let (p, mut l) = new_places();
        let at = |pos| Loc { run: 1, pos };
        l.set(&p, 7, at(0));
        let old = p.read();
        let eps = Arc::new(Endpoints::default());
        p.set_endpoints(eps.clone());
        for h in 100..200 {
            l.set(&p, h, at(h as u32));
        }
        // The reader's array still answers what was held when it read it.
        assert_eq!(old.slots.find(7), Some(at(0)));
        assert_eq!(old.slots.find(150), None);
        assert_eq!(p.read().slots.find(150), Some(at(150)));
        // The rebuilds kept the endpoint list swapped in before them, and a new list keeps
        // the places.
        assert!(Arc::ptr_eq(&p.read().endpoints, &eps));
        p.set_endpoints(Arc::new(Endpoints::default()));
        assert!(!Arc::ptr_eq(&p.read().endpoints, &eps));
        assert!(Arc::ptr_eq(&p.read().slots, &l.slots));
        assert!(l.bytes() >= 101 * 16 * 4 / 3);
        // Emptied, it shrinks back.
        for h in 100..200 {
            l.remove(&p, h);
        }
        assert_eq!(l.len(), 1);
        assert!(l.bytes() <= 16 * 16);
        assert_eq!(p.find(7), Some(at(0)));
    }

    /// A thread's cached view is the current one after every swap (a rebuild, a new endpoint
    /// list), and a cache used with two indexes in turn gives each its own.
    #[test]
    fn a_cached_view_follows_every_swap_and_each_index() {
        let (p, mut l) = new_places();
        let (q, mut m) = new_places();
        let mut c = ViewCache::default();
        let same = |c: &mut ViewCache, p: &Places| Arc::ptr_eq(p.cached(c), &p.read());
        assert!(same(&mut c, &p));
        let before = p.cached(&mut c).clone();
        // Growth rebuilds the array: the next read through the cache sees the new one.
        for h in 1..100 {
            l.set(
                &p,
                h,
                Loc {
                    run: 2,
                    pos: h as u32,
                },
            );
        }
        assert!(!Arc::ptr_eq(&before.slots, &p.read().slots));
        assert!(same(&mut c, &p));
        assert_eq!(
            p.cached(&mut c).slots.find(50),
            Some(Loc { run: 2, pos: 50 })
        );
        // A new endpoint list.
        let eps = Arc::new(Endpoints::default());
        p.set_endpoints(eps.clone());
        assert!(Arc::ptr_eq(&p.cached(&mut c).endpoints, &eps));
        // Another index through the same cache, then back.
        m.set(&q, 50, Loc { run: 9, pos: 0 });
        assert_eq!(
            q.cached(&mut c).slots.find(50),
            Some(Loc { run: 9, pos: 0 })
        );
        assert!(same(&mut c, &q));
        assert_eq!(
            p.cached(&mut c).slots.find(50),
            Some(Loc { run: 2, pos: 50 })
        );
        assert!(same(&mut c, &p));
        // The view an old cache held is freed once the cache moves on.
        let weak = Arc::downgrade(&p.cached(&mut c).slots);
        for h in 100..300 {
            l.set(&p, h, Loc { run: 3, pos: 0 });
        }
        assert!(
            weak.upgrade().is_some(),
            "held by the cache until its next read"
        );
        assert!(same(&mut c, &p));
        assert!(
            weak.upgrade().is_none(),
            "freed once the cache read the new view"
        );
    }
}
