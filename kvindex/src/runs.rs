//! Run-compressed chains: the prediction walk's fast path for an index of one
//! full-attention group.
//!
//! A holder table answers "who holds this key" with one hash-map probe per block, so a request
//! of a few hundred blocks costs a few hundred cache misses. The chains keep the same facts in
//! the shape a prefix walk reads, and are the only record of them (a chain key has no table
//! entry; copies past the first, vLLM's duplicate stores, are counted in the writers'
//! extra-copies map): every GPU key that some slot holds sits at one position of one
//! *run*, a stretch of blocks each chained on the one before it (the engine's parent hash).
//! A run's holders are its *cover* (a bitset of the slots holding every position) and its
//! *partial holders* (slots holding a leading stretch of it only: `(slot, end)`). The walk
//! ([`crate::Index::predict`]) looks up the run and position of the request's block once per
//! run (in the places array, [`crate::locator`], without a lock), compares the request's next
//! hashes against the run's array, ANDs the candidates with the cover once and ends each
//! partial holder's hit at its end: one probe per run instead of one per block.
//!
//! Exactness does not depend on the shape. A position's holders (the cover and the partial
//! holders reaching past it) always equal the set of slots holding its key
//! ([`crate::Index::self_check`] tests this against a twin table that counts every copy), and
//! the walk reaches a position only by the request's own hash, so any partition into runs
//! gives the twin's answer. The shape only buys
//! speed: a store that extends a slot's own leaf appends to its run; a slot storing a shared
//! chain block by block, or evicting it tail first, moves its partial end by one in place (no
//! key moves); any other change of one position's holders splits the run into runs without
//! partial holders, isolates the position (moving the shorter side of its run) and joins it with
//! a neighbour of the same cover (moving the shorter run), so splits and joins cost the smaller
//! half.
//!
//! Concurrency: writers (event application) hold one mutex for a batch ([`Runs::session`]),
//! and the write lock of the run shard they last read or changed until an op needs another
//! shard or the batch's ops end (a batch mostly changes one run: one lock instead of one per
//! op); readers read the places without a lock, then take the read lock of each run shard
//! they visit, one at a time. Every writer step changes the holders of one slot only — the
//! slot of the rank being written, whose prediction is redone under its endpoint's lock (the
//! seqlock in `endpoint.rs`) — and moves positions by copy, redirect, shrink: a reader that
//! follows a stale place finds either the key under a cover that is right for every other
//! slot, or another hash (then it reads again: [`crate::walk`]).

use crate::blocks::Blocks;
use crate::cover::Cover;
use crate::locator::Loc;
use crate::locator::{new_places, Places, PlacesWriter};
use crate::table::{Key, Table};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;
/// Partial holders' room a freed run keeps for the next run made in its place.
const KEPT_PARTIAL: usize = 8;

/// The table key of a chain position (group 0, GPU).
#[inline]
pub(crate) fn chain_key(hash: u64) -> Key {
    Key {
        hash,
        group: 0,
        medium: 0,
    }
}

/// One run: consecutive chained blocks with one holder set.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// The blocks' hashes in chain order; `hashes[i + 1]` was stored with parent `hashes[i]`.
    hashes: Blocks,
    /// Logical position of `hashes[0]`: a key's place names a logical position, which stays
    /// put when the run grows or shrinks at either end.
    base: u32,
    /// Slots holding every block of the run.
    cover: Cover,
    /// Slots holding a leading stretch of the run only: `(slot, end)` holds the logical
    /// positions `base..end`, with `base < end < end_pos` and `slot` outside the cover (at most
    /// one entry per slot). A slot storing a shared chain block by block, or evicting it tail
    /// first, moves its end by one instead of splitting the run.
    part: Vec<(u32, u32)>,
    /// The chain parent of `hashes[0]`, as its store named it.
    parent: Option<u64>,
    live: bool,
}

impl Run {
    /// The array index of a logical position.
    #[inline]
    pub fn index_of(&self, pos: u32) -> Option<usize> {
        let i = pos.wrapping_sub(self.base) as usize;
        (self.live && i < self.hashes.len()).then_some(i)
    }

    /// The blocks' hashes.
    #[inline]
    pub fn hashes(&self) -> &[u64] {
        &self.hashes
    }

    /// Word `w` of the cover.
    #[inline]
    pub fn cover_word(&self, w: usize) -> u64 {
        self.cover.word(w)
    }

    /// The partial holders: `(slot, held)` where `slot` holds the array indices `..held`
    /// (`0 < held < len`; `slot` is outside the cover).
    #[inline]
    pub fn partial(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        let base = self.base;
        self.part
            .iter()
            .map(move |&(s, e)| (s, e.wrapping_sub(base) as usize))
    }

    /// Whether the run has partial holders.
    #[inline]
    pub fn has_partial(&self) -> bool {
        !self.part.is_empty()
    }

    /// Whether a slot other than `slot` holds array index `i`.
    #[inline]
    fn others_at(&self, i: usize, slot: u32) -> bool {
        !(self.cover.is_empty() || self.cover.is_only(slot))
            || self.partial().any(|(s, held)| s != slot && held > i)
    }

    /// The slots holding array index `i`: the cover and the partial holders reaching past it.
    pub fn holders_at(&self, i: usize) -> Cover {
        self.partial()
            .filter(|&(_, held)| held > i)
            .fold(self.cover.clone(), |c, (s, _)| c.with(s, true))
    }

    fn end_pos(&self) -> u32 {
        self.base.wrapping_add(self.hashes.len() as u32)
    }

    /// Partial holders that reach the end (after the run shrank at its tail) join the cover.
    fn promote(&mut self) {
        let end = self.end_pos().wrapping_sub(self.base);
        let base = self.base;
        let mut k = 0;
        while k < self.part.len() {
            let (s, e) = self.part[k];
            if e.wrapping_sub(base) >= end {
                self.cover = self.cover.with(s, true);
                self.part.swap_remove(k);
            } else {
                k += 1;
            }
        }
    }

    /// [`Run::try_partial_at`] for logical position `pos`, finding where `slot` stands (the
    /// proptest's entry point).
    #[cfg(test)]
    fn try_partial(&mut self, pos: u32, slot: u32, on: bool) -> bool {
        let Some(i) = self.index_of(pos) else {
            return false;
        };
        let st = self.stand(i, slot);
        self.try_partial_at(i, pos, slot, on, st)
    }

    /// Where `slot` stands at array index `i`: in the cover or its partial entry (one pass
    /// over the partial holders), and whether it holds `i` (in the cover, or a partial holder
    /// reaching past `i`).
    #[inline]
    fn stand(&self, i: usize, slot: u32) -> Stand {
        self.stand_near(i, slot, usize::MAX)
    }

    /// [`Run::stand`], trying entry `hint` of the partial holders first (the slot's entry in
    /// the run an earlier op of the batch changed, or any index: an entry naming `slot` is its
    /// entry, a slot has at most one, so a wrong hint only costs the pass).
    #[inline]
    fn stand_near(&self, i: usize, slot: u32, hint: usize) -> Stand {
        let in_cover = self.cover.has(slot);
        // A slot in the cover has no partial entry.
        let k = if in_cover {
            None
        } else if self.part.get(hint).is_some_and(|&(s, _)| s == slot) {
            Some(hint)
        } else {
            self.part.iter().position(|&(s, _)| s == slot)
        };
        let holds =
            in_cover || k.is_some_and(|k| self.part[k].1.wrapping_sub(self.base) as usize > i);
        Stand { in_cover, k, holds }
    }

    /// The fast holder changes: `slot` now holds (`on`) or no longer holds array index `i`
    /// (logical position `pos`), which other slots hold before and after the change, and
    /// stands there as `st` says ([`Run::stand`]). Done in place when the slot's held stretch
    /// stays a leading one: a store at the front of the run or right after the slot's partial
    /// end, an eviction at the run's tail by a covering slot or at the slot's partial end.
    /// False when the change needs the general path.
    fn try_partial_at(&mut self, i: usize, pos: u32, slot: u32, on: bool, st: Stand) -> bool {
        let n = self.hashes.len();
        if n < 2 {
            return false;
        }
        let Stand { in_cover, k, .. } = st;
        match (on, in_cover, k) {
            (true, false, Some(k)) if self.part[k].1 == pos => {
                let e = pos.wrapping_add(1);
                if e == self.end_pos() {
                    self.part.swap_remove(k);
                    self.cover = self.cover.with(slot, true);
                } else {
                    self.part[k].1 = e;
                }
                true
            }
            (true, false, None) if i == 0 => {
                self.part.push((slot, pos.wrapping_add(1)));
                true
            }
            (false, true, None) if i + 1 == n => {
                self.cover = self.cover.with(slot, false);
                self.part.push((slot, pos));
                true
            }
            (false, false, Some(k)) if self.part[k].1 == pos.wrapping_add(1) => {
                if i == 0 {
                    self.part.swap_remove(k);
                } else {
                    self.part[k].1 = pos;
                }
                true
            }
            _ => false,
        }
    }
}

impl Run {
    /// A removal's change of `slot` (which holds array index `i`, logical position `pos`, one
    /// copy, standing as `st` says) when made in place, or the general path's, with whether
    /// other slots hold the position.
    fn remove_step(&mut self, i: usize, pos: u32, slot: u32, st: Stand) -> (Step, bool) {
        let others = self.others_at(i, slot);
        let n = self.hashes.len();
        if others && self.try_partial_at(i, pos, slot, false, st) {
            (Step::Done, true)
        } else if !others && i + 1 == n && n > 1 {
            // Nobody else holds the position, so no partial holder reaches it: the tail
            // shrinks, and partial holders that now reach the end join the cover.
            self.hashes.pop();
            self.promote();
            (Step::Done, false)
        } else {
            (Step::General, others)
        }
    }
}

/// Where a slot stands at one position of a run ([`Run::stand`]).
#[derive(Debug, Clone, Copy)]
struct Stand {
    in_cover: bool,
    /// Its entry among the partial holders.
    k: Option<usize>,
    /// It holds the position.
    holds: bool,
}

/// Hashes a block hash (a digest, or anything a hostile stream sends) for the child map.
#[derive(Default, Clone, Copy)]
pub(crate) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        let x = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^ (x >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
}

/// Builds [`MixHasher`]s.
#[derive(Default, Clone, Copy)]
pub(crate) struct BuildMix;

impl BuildHasher for BuildMix {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(0)
    }
}

/// The runs starting after one parent (most parents have one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kids {
    One(u32),
    Many(Vec<u32>),
}

impl Kids {
    fn add(&mut self, id: u32) {
        match self {
            Kids::One(a) => *self = Kids::Many(vec![*a, id]),
            Kids::Many(v) => v.push(id),
        }
    }

    /// Drops `id`; true when none is left.
    fn remove(&mut self, id: u32) -> bool {
        match self {
            Kids::One(a) => *a == id,
            Kids::Many(v) => {
                v.retain(|&c| c != id);
                match v.len() {
                    0 => true,
                    1 => {
                        *self = Kids::One(v[0]);
                        false
                    }
                    _ => false,
                }
            }
        }
    }

    fn as_slice(&self) -> &[u32] {
        match self {
            Kids::One(a) => std::slice::from_ref(a),
            Kids::Many(v) => v,
        }
    }
}

/// The writers' side: free run ids, the runs by the parent of their first block (to join a
/// run with the one that continues it), the writer's side of the places and the extra copies.
pub(crate) struct Writer {
    /// Where the last store or removal found its slot among its run's partial holders (a
    /// batch stores or evicts one slot's chain, mostly in one run: the next op tries there
    /// first, [`Run::stand_near`]).
    part_hint: usize,
    free: Vec<u32>,
    next: u32,
    children: HashMap<u64, Kids, BuildMix>,
    places: PlacesWriter,
    /// Copies past the first, per (chain key, slot) holding more than one (vLLM stores one
    /// hash in two physical blocks and removes them one by one): the chains say which slots
    /// hold a key, this map how many copies beyond one. Rare, so SipHash (a hostile stream
    /// chooses the hashes) and no probe while it is empty.
    extra: HashMap<(u64, u32), u32>,
}

/// The writers' mutex held for a batch ([`Runs::session`]), with the write lock of the run
/// shard the last op read or changed kept until an op needs another shard: a batch's ops
/// mostly read and change one run (a chain stored block by block, evicted tail first), so
/// most take no lock of their own. Readers wait for that shard until the session moves on or
/// ends (a batch); one shard lock at a time, taken after the mutex, as the readers that take
/// the mutex do.
pub(crate) struct Session<'a> {
    runs: &'a Runs,
    w: MutexGuard<'a, Writer>,
    held: Option<(usize, RwLockWriteGuard<'a, Vec<Run>>)>,
}

impl Session<'_> {
    /// Lets go of the shard lock the session holds (the mutex stays held).
    pub fn release(&mut self) {
        self.held = None;
    }

    /// Shard `s`, its write lock taken unless the session holds it (another shard's is
    /// let go first).
    #[inline]
    fn shard(&mut self, s: usize) -> &mut Vec<Run> {
        if self.held.as_ref().is_some_and(|(h, _)| *h != s) {
            self.held = None;
        }
        let runs = self.runs;
        &mut self.held.get_or_insert_with(|| (s, runs.lock_shard(s))).1
    }
}

impl std::ops::Deref for Session<'_> {
    type Target = Writer;
    fn deref(&self) -> &Writer {
        &self.w
    }
}

impl std::ops::DerefMut for Session<'_> {
    fn deref_mut(&mut self) -> &mut Writer {
        &mut self.w
    }
}

/// What a store or a removal of a chain key did ([`Runs::store`], [`Runs::remove`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Change {
    /// The key's place after a store (before a removal).
    pub loc: Loc,
    /// A store: the slot held no copy before; a removal: the slot holds none now.
    pub first: bool,
    /// A removal: no slot holds the key now.
    pub gone: bool,
    /// A store: no slot held the key before.
    pub new_key: bool,
}

/// The change a store or removal makes under its run's write lock.
enum Step {
    /// A copy past the slot's first is counted (or taken back).
    Held,
    /// Made in place.
    Done,
    /// The general path's.
    General,
}

/// A chain key as the writers see it ([`Runs::holding`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holding {
    /// Its place.
    pub loc: Loc,
    /// The slot asked about holds a copy.
    pub holds: bool,
}

impl Writer {
    /// One more copy of `hash` in `slot`, which holds one or more already.
    pub fn add_copy(&mut self, hash: u64, slot: u32) {
        *self.extra.entry((hash, slot)).or_insert(0) += 1;
    }

    /// One copy fewer of `hash` in `slot` when it holds more than one; nothing when the slot
    /// holds one copy (the one a removal takes from the chains).
    pub fn drop_copy(&mut self, hash: u64, slot: u32) {
        if let std::collections::hash_map::Entry::Occupied(mut e) = self.extra.entry((hash, slot)) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }

    /// The copies `slot` holds beyond one of `hash`.
    pub fn extra_copies(&self, hash: u64, slot: u32) -> u32 {
        if self.extra.is_empty() {
            return 0;
        }
        self.extra.get(&(hash, slot)).copied().unwrap_or(0)
    }

    fn link(&mut self, parent: u64, id: u32) {
        match self.children.entry(parent) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().add(id),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Kids::One(id));
            }
        }
    }

    fn unlink(&mut self, parent: u64, id: u32) {
        if let Some(k) = self.children.get_mut(&parent) {
            if k.remove(id) {
                self.children.remove(&parent);
            }
        }
    }

    /// The runs starting after `parent`.
    fn kids(&self, parent: u64) -> Option<Kids> {
        self.children.get(&parent).cloned()
    }
}

/// The run store: runs sharded by id, each shard behind its own `RwLock`, and every chain
/// key's place for the walk ([`crate::locator`]).
pub(crate) struct Runs {
    shards: Box<[RwLock<Vec<Run>>]>,
    writer: Mutex<Writer>,
    /// Every chain key's place: the walk reads them without a lock, the writers through their
    /// side ([`Runs::place`]).
    pub places: Places,
}

impl Runs {
    pub fn new() -> Self {
        let (places, writer) = new_places();
        Runs {
            shards: (0..SHARDS).map(|_| RwLock::new(Vec::new())).collect(),
            writer: Mutex::new(Writer {
                part_hint: 0,
                free: Vec::new(),
                next: 0,
                children: HashMap::default(),
                places: writer,
                extra: HashMap::new(),
            }),
            places,
        }
    }

    /// A chain key's place (the one the walk reads and the writers find).
    fn set_place(&self, w: &mut Session<'_>, hash: u64, loc: Loc) {
        w.places.set(&self.places, hash, loc);
    }

    /// Brings the chain keys' entries of the places into the CPU's cache ahead of their
    /// probes.
    #[inline]
    pub fn prefetch(&self, w: &Session<'_>, hashes: impl Iterator<Item = u64>) {
        w.places.prefetch(hashes);
    }

    /// A chain key's place now (the writers' view).
    pub fn place(&self, w: &Session<'_>, hash: u64) -> Option<Loc> {
        w.places.find(hash)
    }

    /// Chain key `hash` as the writers see it: `None` when no slot holds it, else its place
    /// and whether `slot` holds it (one probe of the places and a read of the run; the chains
    /// are the holders of a chain key, no table entry is kept).
    pub fn holding(&self, w: &mut Session<'_>, hash: u64, slot: u32) -> Option<Holding> {
        let loc = w.places.find(hash)?;
        let hint = w.part_hint;
        let (holds, k) = self
            .run(w, loc.run, |r| {
                let i = r.index_of(loc.pos)?;
                debug_assert_eq!(r.hashes[i], hash, "a writer's place is never stale");
                let st = r.stand_near(i, slot, hint);
                Some((st.holds, st.k))
            })
            .flatten()?;
        if let Some(k) = k {
            w.part_hint = k;
        }
        Some(Holding { loc, holds })
    }

    /// One more copy of chain key `hash` in `slot`, stored after `parent` (whose place the
    /// caller may know). One probe of the places and, for a key some slot holds, one write
    /// lock of its run that sees its holders and makes the usual change in place: a copy the
    /// slot holds already (counted in the extra copies), a slot storing a shared chain block
    /// by block ([`Run::try_partial_at`]); other changes take the general path.
    pub fn store(
        &self,
        w: &mut Session<'_>,
        hash: u64,
        slot: u32,
        parent: Option<u64>,
        parent_loc: Option<Loc>,
    ) -> Change {
        let Some(loc) = w.places.find(hash) else {
            let loc = self.place_new(w, hash, parent, parent_loc, slot);
            return Change {
                loc,
                first: true,
                gone: false,
                new_key: true,
            };
        };
        let hint = w.part_hint;
        let step = self
            .run_mut(w, loc.run, |r| {
                let i = r.index_of(loc.pos)?;
                let st = r.stand_near(i, slot, hint);
                let step = if st.holds {
                    Step::Held
                } else if r.try_partial_at(i, loc.pos, slot, true, st) {
                    Step::Done
                } else {
                    Step::General
                };
                // A new partial entry is the last.
                Some((step, st.k.unwrap_or(r.part.len().wrapping_sub(1))))
            })
            .flatten()
            .map(|(step, k)| {
                w.part_hint = k;
                step
            });
        let (loc, first) = match step {
            Some(Step::Held) => {
                w.add_copy(hash, slot);
                (loc, false)
            }
            Some(Step::Done) => (loc, true),
            _ => (self.change(w, hash, loc, slot, true, parent_loc), true),
        };
        Change {
            loc,
            first,
            gone: false,
            new_key: false,
        }
    }

    /// One copy fewer of chain key `hash` in `slot`; `None` when the slot holds none. One
    /// probe of the places and one write lock of the key's run that sees its holders and
    /// makes the usual change in place: a copy past the slot's first (the extra copies), a
    /// slot evicting a shared chain tail first ([`Run::try_partial_at`]), the last holder
    /// evicting a run's last position (the tail shrinks); other changes take the general
    /// path.
    pub fn remove(&self, w: &mut Session<'_>, hash: u64, slot: u32) -> Option<Change> {
        let loc = w.places.find(hash)?;
        // A copy past the slot's first is counted in the extra copies (a map probe only when
        // some slot holds a second copy of some key); one pass over the run sees whether the
        // slot holds the key and makes the change.
        let extra = w.extra_copies(hash, slot) > 0;
        let hint = w.part_hint;
        let (step, k) = self
            .run_mut(w, loc.run, |r| {
                let i = r.index_of(loc.pos)?;
                let st = r.stand_near(i, slot, hint);
                if !st.holds {
                    return None;
                }
                let step = if extra {
                    (Step::Held, true)
                } else {
                    r.remove_step(i, loc.pos, slot, st)
                };
                // A new partial entry is the last.
                Some((step, st.k.unwrap_or(r.part.len().wrapping_sub(1))))
            })
            .flatten()?;
        w.part_hint = k;
        if extra {
            w.drop_copy(hash, slot);
        }
        let (first, gone) = match step {
            (Step::Held, _) => (false, false),
            (Step::Done, true) => (true, false),
            (Step::Done, false) => {
                w.places.remove(&self.places, hash);
                (true, true)
            }
            (_, true) => {
                self.change(w, hash, loc, slot, false, None);
                (true, false)
            }
            (_, false) => {
                self.drop_key(w, hash, loc);
                (true, true)
            }
        };
        Some(Change {
            loc,
            first,
            gone,
            new_key: false,
        })
    }

    /// Whether `slot` holds chain key `hash`, read without the writers' mutex (the per-slot
    /// answers): `None` when the place read was being moved by a writer (read it again). A
    /// key the slot holds keeps its place while the slot's own rank is not written (the
    /// caller's seqlock or endpoint lock sees to that); other slots' changes only move it.
    pub fn holds_now(&self, hash: u64, slot: u32) -> Option<bool> {
        #[cfg(test)]
        if stale::take() {
            return None;
        }
        let Some(loc) = self.places.find(hash) else {
            return Some(false);
        };
        self.read(loc.run, |r| {
            let i = r.index_of(loc.pos)?;
            (r.hashes[i] == hash).then(|| r.stand(i, slot).holds)
        })
        .flatten()
    }

    /// The writers' mutex alone: what a reader takes to read while nothing moves.
    pub fn writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writers' mutex, held by whoever changes the table's chain keys, for a whole batch,
    /// with a run shard's write lock kept between ops ([`Session`]).
    pub fn session(&self) -> Session<'_> {
        Session {
            runs: self,
            w: self.writer(),
            held: None,
        }
    }

    #[inline]
    fn at(id: u32) -> (usize, usize) {
        ((id as usize) & (SHARDS - 1), (id as usize) >> SHARD_BITS)
    }

    #[inline]
    fn shard_read(&self, s: usize) -> RwLockReadGuard<'_, Vec<Run>> {
        self.shards[s].read().unwrap_or_else(|e| e.into_inner())
    }

    /// A session's shard lock (taken when it moves to another shard: out of line).
    #[cold]
    #[inline(never)]
    fn lock_shard(&self, s: usize) -> RwLockWriteGuard<'_, Vec<Run>> {
        self.shard_write(s)
    }

    #[inline]
    fn shard_write(&self, s: usize) -> RwLockWriteGuard<'_, Vec<Run>> {
        self.shards[s].write().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `id`'s shard under its read lock, and the run's index in it (the shard has no run
    /// there for an id never made).
    #[inline]
    pub fn shard_of(&self, id: u32) -> (RwLockReadGuard<'_, Vec<Run>>, usize) {
        let (s, i) = Self::at(id);
        (self.shard_read(s), i)
    }

    /// Calls `f` with run `id` under its shard's read lock (`None` for an id never made).
    #[inline]
    pub fn read<R>(&self, id: u32, f: impl FnOnce(&Run) -> R) -> Option<R> {
        let (s, i) = Self::at(id);
        self.shard_read(s).get(i).map(f)
    }

    /// Calls `f` with run `id`, a writer's read (under the session's shard lock).
    #[inline]
    fn run<R>(&self, w: &mut Session<'_>, id: u32, f: impl FnOnce(&Run) -> R) -> Option<R> {
        let (s, i) = Self::at(id);
        w.shard(s).get(i).map(f)
    }

    /// Calls `f` with run `id` to change it (under the session's shard lock).
    #[inline]
    fn run_mut<R>(&self, w: &mut Session<'_>, id: u32, f: impl FnOnce(&mut Run) -> R) -> Option<R> {
        let (s, i) = Self::at(id);
        w.shard(s).get_mut(i).map(f)
    }

    /// A new run of `hashes` (no partial holders), in a freed run's place when there is one:
    /// its arrays, kept when it was freed, are reused (no allocation).
    fn alloc(&self, w: &mut Session<'_>, hashes: &[u64], cover: Cover, parent: Option<u64>) -> u32 {
        let id = w.free.pop().unwrap_or_else(|| {
            let id = w.next;
            w.next += 1;
            id
        });
        if let Some(p) = parent {
            w.link(p, id);
        }
        let (s, i) = Self::at(id);
        let g = w.shard(s);
        if i == g.len() {
            g.push(Run {
                hashes: Blocks::from_slice(hashes),
                base: 0,
                cover,
                part: Vec::new(),
                parent,
                live: true,
            });
        } else {
            let r = &mut g[i];
            r.hashes.reset(hashes);
            r.base = 0;
            r.cover = cover;
            r.part.clear();
            r.parent = parent;
            r.live = true;
        }
        id
    }

    /// A run no longer used: its id is free, and its arrays are kept for the next run made in
    /// its place when they are small ([`Blocks::shed`], at most [`KEPT_PARTIAL`] partial
    /// holders' room).
    fn free(&self, w: &mut Session<'_>, id: u32) {
        let parent = self
            .run_mut(w, id, |r| {
                r.live = false;
                r.hashes.shed();
                r.cover = Cover::default();
                r.part.clear();
                if r.part.capacity() > KEPT_PARTIAL {
                    r.part = Vec::new();
                }
                r.parent.take()
            })
            .flatten();
        if let Some(p) = parent {
            w.unlink(p, id);
        }
        w.free.push(id);
    }

    fn set_parent(&self, w: &mut Session<'_>, id: u32, parent: Option<u64>) {
        let old = self
            .run_mut(w, id, |r| std::mem::replace(&mut r.parent, parent))
            .flatten();
        Self::relink(w, id, old, parent);
    }

    /// Moves run `id` in the child lists from parent `old` to parent `new`.
    fn relink(w: &mut Session<'_>, id: u32, old: Option<u64>, new: Option<u64>) {
        if old == new {
            return;
        }
        if let Some(p) = old {
            w.unlink(p, id);
        }
        if let Some(p) = new {
            w.link(p, id);
        }
    }

    fn redirect(&self, w: &mut Session<'_>, run: u32, first: u32, hashes: &[u64]) {
        for (k, &h) in hashes.iter().enumerate() {
            let loc = Loc {
                run,
                pos: first.wrapping_add(k as u32),
            };
            self.set_place(w, h, loc);
        }
    }

    /// The place of a key nobody held, stored by `slot` after `parent` (whose place the
    /// caller knows).
    pub fn place_new(
        &self,
        w: &mut Session<'_>,
        hash: u64,
        parent: Option<u64>,
        parent_loc: Option<Loc>,
        slot: u32,
    ) -> Loc {
        if let (Some(p), Some(pl)) = (parent, parent_loc) {
            let appended = self
                .run_mut(w, pl.run, |x| {
                    let at_end = x
                        .index_of(pl.pos)
                        .is_some_and(|i| i + 1 == x.hashes.len() && x.hashes[i] == p);
                    (at_end && x.cover.is_only(slot)).then(|| {
                        let pos = x.end_pos();
                        x.hashes.push(hash);
                        pos
                    })
                })
                .flatten();
            if let Some(pos) = appended {
                let loc = Loc { run: pl.run, pos };
                w.places.set(&self.places, hash, loc);
                return loc;
            }
        }
        let run = self.alloc(w, &[hash], Cover::default().with(slot, true), parent);
        let loc = Loc { run, pos: 0 };
        w.places.set(&self.places, hash, loc);
        loc
    }

    /// `slot` now holds (`on`) or no longer holds a key at `loc` that other slots still hold.
    /// The position takes its new cover: in place when it is its run's only block; moved to
    /// the end of the run before it or the front of a run after it when that run has the new
    /// cover (a slot storing or evicting a shared chain block by block); else isolated in a
    /// run of its own and joined with neighbours of the same cover. `parent_hint`: where the
    /// block's parent sits, when the caller knows (checked before use). Returns the key's
    /// new place.
    ///
    /// The in-place change ([`Run::try_partial_at`]) is the caller's, under the write lock it
    /// took to see the holders: this is the general path, which moves positions between
    /// partial-free runs.
    fn change(
        &self,
        w: &mut Session<'_>,
        hash: u64,
        loc: Loc,
        slot: u32,
        on: bool,
        parent_hint: Option<Loc>,
    ) -> Loc {
        let loc = self.materialize(w, loc);
        let Some((n, i, cover, parent)) = self
            .run(w, loc.run, |r| {
                r.index_of(loc.pos).map(|i| {
                    let parent = if i == 0 {
                        r.parent
                    } else {
                        Some(r.hashes[i - 1])
                    };
                    (r.hashes.len(), i, r.cover.with(slot, on), parent)
                })
            })
            .flatten()
        else {
            return loc;
        };
        if n == 1 {
            self.run_mut(w, loc.run, |r| r.cover = cover);
            let s = self.join_prev(w, loc.run, parent_hint);
            self.join_next(w, s);
            return w.places.find(hash).unwrap_or(Loc::NONE);
        }
        if i == 0 {
            if let Some(p) = parent {
                let pl = parent_hint.or_else(|| w.places.find(p));
                if let Some(pl) = pl.filter(|pl| pl.run != loc.run) {
                    let moved = self
                        .run_mut(w, pl.run, |x| {
                            let ends = x
                                .index_of(pl.pos)
                                .is_some_and(|k| k + 1 == x.hashes.len() && x.hashes[k] == p);
                            (ends && x.cover == cover).then(|| {
                                let pos = x.end_pos();
                                x.hashes.push(hash);
                                pos
                            })
                        })
                        .flatten();
                    if let Some(pos) = moved {
                        let to = Loc { run: pl.run, pos };
                        self.set_place(w, hash, to);
                        let old = self
                            .run_mut(w, loc.run, |r| {
                                r.hashes.drain_front(1);
                                r.base = r.base.wrapping_add(1);
                                r.parent.replace(hash)
                            })
                            .flatten();
                        Self::relink(w, loc.run, old, Some(hash));
                        return to;
                    }
                }
            }
        }
        if i + 1 == n {
            if let Some(kids) = w.kids(hash) {
                for &y in kids.as_slice() {
                    if y == loc.run {
                        continue;
                    }
                    let moved = self
                        .run_mut(w, y, |r| {
                            (r.live
                                && r.parent == Some(hash)
                                && r.cover == cover
                                && r.part.is_empty())
                            .then(|| {
                                r.hashes.prepend(&[hash]);
                                r.base = r.base.wrapping_sub(1);
                                r.base
                            })
                        })
                        .flatten();
                    if let Some(pos) = moved {
                        let to = Loc { run: y, pos };
                        self.set_place(w, hash, to);
                        self.run_mut(w, loc.run, |r| r.hashes.pop());
                        self.set_parent(w, y, parent);
                        return to;
                    }
                }
            }
        }
        let s = self.alloc(w, &[hash], cover, parent);
        self.set_place(w, hash, Loc { run: s, pos: 0 });
        self.cut(w, loc.run, i);
        let s = self.join_prev(w, s, None);
        self.join_next(w, s);
        w.places.find(hash).unwrap_or(Loc::NONE)
    }

    /// Nobody holds `hash`, at `loc`, any more: its position goes (the in-place removal of a
    /// run's last position is the caller's, [`Runs::remove`]), then its place.
    fn drop_key(&self, w: &mut Session<'_>, hash: u64, loc: Loc) {
        let loc = self.materialize(w, loc);
        if let Some(i) = self.run(w, loc.run, |r| r.index_of(loc.pos)).flatten() {
            self.cut(w, loc.run, i);
        }
        // Last: moving the run's other positions may have named this one's place again.
        w.places.remove(&self.places, hash);
    }

    /// Splits run `loc.run` into runs without partial holders, one per stretch of positions
    /// with one holder set (copy, redirect, shrink: a reader on a stale place still finds
    /// right holders or another hash). Returns where logical position `loc.pos` went.
    fn materialize(&self, w: &mut Session<'_>, loc: Loc) -> Loc {
        let Some((hashes, cover, part)) = self
            .run(w, loc.run, |r| {
                (r.live && r.has_partial()).then(|| {
                    let mut part: Vec<(u32, usize)> = r.partial().collect();
                    part.sort_unstable_by_key(|&(_, held)| held);
                    (r.hashes.to_vec(), r.cover.clone(), part)
                })
            })
            .flatten()
        else {
            return loc;
        };
        let at = self
            .run(w, loc.run, |r| r.index_of(loc.pos))
            .flatten()
            .unwrap_or(usize::MAX);
        let mut out = loc;
        // Stretch boundaries: the partial holders' ends; the stretch from a boundary on is
        // held by the cover and every partial holder reaching past it.
        let mut bounds: Vec<usize> = part.iter().map(|&(_, held)| held).collect();
        bounds.dedup();
        let first = bounds[0];
        for (t, &from) in bounds.iter().enumerate() {
            let to = bounds.get(t + 1).copied().unwrap_or(hashes.len());
            let c = part
                .iter()
                .filter(|&&(_, held)| held > from)
                .fold(cover.clone(), |c, &(s, _)| c.with(s, true));
            let id = self.alloc(w, &hashes[from..to], c, Some(hashes[from - 1]));
            self.redirect(w, id, 0, &hashes[from..to]);
            if (from..to).contains(&at) {
                out = Loc {
                    run: id,
                    pos: (at - from) as u32,
                };
            }
        }
        self.run_mut(w, loc.run, |r| {
            r.hashes.truncate(first);
            r.cover = part
                .iter()
                .fold(r.cover.clone(), |c, &(s, _)| c.with(s, true));
            r.part = Vec::new();
        });
        out
    }

    /// Takes array index `i` out of run `id` (its key has been moved or dropped): the run
    /// shrinks at an end or splits, moving its shorter side to a new run.
    fn cut(&self, w: &mut Session<'_>, id: u32, i: usize) {
        let Some(n) = self.run(w, id, |r| r.hashes.len()) else {
            return;
        };
        if n <= 1 {
            self.free(w, id);
        } else if i + 1 == n {
            self.run_mut(w, id, |r| r.hashes.pop());
        } else if i == 0 {
            let h = self
                .run_mut(w, id, |r| {
                    let h = r.hashes[0];
                    r.base = r.base.wrapping_add(1);
                    r.hashes.drain_front(1);
                    h
                })
                .unwrap_or_default();
            self.set_parent(w, id, Some(h));
        } else if n - i - 1 <= i {
            // Move the suffix.
            let Some((suffix, cover, at)) = self.run(w, id, |r| {
                (r.hashes[i + 1..].to_vec(), r.cover.clone(), r.hashes[i])
            }) else {
                return;
            };
            let t = self.alloc(w, &suffix, cover, Some(at));
            self.redirect(w, t, 0, &suffix);
            self.run_mut(w, id, |r| r.hashes.truncate(i));
        } else {
            // Move the prefix.
            let Some((prefix, cover, at, parent)) = self.run(w, id, |r| {
                (
                    r.hashes[..i].to_vec(),
                    r.cover.clone(),
                    r.hashes[i],
                    r.parent,
                )
            }) else {
                return;
            };
            let t = self.alloc(w, &prefix, cover, parent);
            self.redirect(w, t, 0, &prefix);
            self.run_mut(w, id, |r| {
                r.hashes.drain_front(i + 1);
                r.base = r.base.wrapping_add(i as u32 + 1);
            });
            self.set_parent(w, id, Some(at));
        }
    }

    /// Joins run `s` with the run it continues, when that run ends at `s`'s parent under the
    /// same cover. Returns the run holding `s`'s blocks.
    fn join_prev(&self, w: &mut Session<'_>, s: u32, hint: Option<Loc>) -> u32 {
        let Some((Some(p), cover)) = self
            .run(w, s, |r| {
                (r.live && r.part.is_empty()).then(|| (r.parent, r.cover.clone()))
            })
            .flatten()
        else {
            return s;
        };
        let Some(pl) = hint.or_else(|| w.places.find(p)) else {
            return s;
        };
        if pl.run == s {
            return s;
        }
        let fits = self
            .run(w, pl.run, |x| {
                x.index_of(pl.pos)
                    .is_some_and(|i| i + 1 == x.hashes.len() && x.hashes[i] == p)
                    && x.cover == cover
                    && x.part.is_empty()
            })
            .unwrap_or(false);
        if fits {
            self.join(w, pl.run, s)
        } else {
            s
        }
    }

    /// Joins run `s` with a run that continues it under the same cover, if any.
    fn join_next(&self, w: &mut Session<'_>, s: u32) -> u32 {
        let Some((last, cover)) = self
            .run(w, s, |r| {
                (r.live && !r.hashes.is_empty() && r.part.is_empty())
                    .then(|| (r.hashes[r.hashes.len() - 1], r.cover.clone()))
            })
            .flatten()
        else {
            return s;
        };
        let Some(kids) = w.kids(last) else {
            return s;
        };
        for &y in kids.as_slice() {
            let fits = y != s
                && self
                    .run(w, y, |r| {
                        r.live && r.parent == Some(last) && r.cover == cover && r.part.is_empty()
                    })
                    .unwrap_or(false);
            if fits {
                return self.join(w, s, y);
            }
        }
        s
    }

    /// Joins `y` onto `x` (`y` continues `x`, same cover), moving the shorter run's blocks.
    fn join(&self, w: &mut Session<'_>, x: u32, y: u32) -> u32 {
        let lx = self.run(w, x, |r| r.hashes.len()).unwrap_or(0);
        let ly = self.run(w, y, |r| r.hashes.len()).unwrap_or(0);
        if ly <= lx {
            let ys = self.run(w, y, |r| r.hashes.to_vec()).unwrap_or_default();
            let Some(first) = self.run_mut(w, x, |r| {
                let first = r.end_pos();
                r.hashes.extend(&ys);
                first
            }) else {
                return y;
            };
            self.redirect(w, x, first, &ys);
            self.free(w, y);
            x
        } else {
            let Some((xs, parent)) = self.run(w, x, |r| (r.hashes.to_vec(), r.parent)) else {
                return y;
            };
            let Some(first) = self.run_mut(w, y, |r| {
                r.hashes.prepend(&xs);
                r.base = r.base.wrapping_sub(xs.len() as u32);
                r.base
            }) else {
                return y;
            };
            self.redirect(w, y, first, &xs);
            self.free(w, x);
            self.set_parent(w, y, parent);
            y
        }
    }

    /// Drops `slot` from every cover; runs nobody holds any more go (their keys' table
    /// entries are gone with the slot's).
    pub fn clear_slot(&self, w: &mut Session<'_>, slot: u32) {
        let mut dead = Vec::new();
        // The keys that left the table with the slot: every position of a run it alone held.
        let mut gone: Vec<u64> = Vec::new();
        for s in 0..SHARDS {
            let g = w.shard(s);
            for (i, r) in g.iter_mut().enumerate() {
                if !r.live {
                    continue;
                }
                let had = r.part.len();
                r.part.retain(|&(x, _)| x != slot);
                if !r.cover.has(slot) && had == r.part.len() {
                    continue;
                }
                r.cover = r.cover.with(slot, false);
                if r.cover.is_empty() {
                    // Positions past the farthest partial holder's end were the slot's alone
                    // (their keys left the table with it).
                    match r.partial().map(|(_, held)| held).max() {
                        None => {
                            gone.extend_from_slice(&r.hashes);
                            dead.push((i << SHARD_BITS | s) as u32);
                        }
                        Some(held) => {
                            gone.extend_from_slice(&r.hashes[held..]);
                            r.hashes.truncate(held);
                            r.promote();
                        }
                    }
                }
            }
        }
        for id in dead {
            self.free(w, id);
        }
        for h in gone {
            w.places.remove(&self.places, h);
        }
        if !w.extra.is_empty() {
            w.extra.retain(|&(_, s), _| s != slot);
        }
    }

    /// (live runs, positions (the chain keys held), position × holder pairs, approximate
    /// bytes: arrays, covers, run headers, the writers' child lists, places and extra copies).
    pub fn sizes(&self) -> (usize, usize, usize, usize) {
        let (mut runs, mut positions, mut pairs, mut bytes) = (0, 0, 0, 0);
        for s in 0..SHARDS {
            let g = self.shard_read(s);
            bytes += g.capacity() * std::mem::size_of::<Run>();
            for r in g.iter() {
                // A freed run's kept arrays count too.
                bytes += r.hashes.heap_bytes() + r.cover.heap_bytes() + r.part.capacity() * 8;
                if !r.live {
                    continue;
                }
                runs += 1;
                positions += r.hashes.len();
                pairs += r.cover.len() * r.hashes.len()
                    + r.partial().map(|(_, held)| held).sum::<usize>();
            }
        }
        let w = self.writer();
        // Key, value and control byte per bucket of the extra copies' map.
        bytes += w.extra.capacity() * (std::mem::size_of::<((u64, u32), u32)>() + 1);
        bytes += w.children.capacity() * (8 + std::mem::size_of::<Kids>() + 1)
            + w.children
                .values()
                .map(|k| match k {
                    Kids::One(_) => 0,
                    Kids::Many(v) => v.capacity() * 4,
                })
                .sum::<usize>()
            + w.free.capacity() * 4
            + w.places.bytes();
        (runs, positions, pairs, bytes)
    }

    /// Checks the chains against the twin table (every chain key's copies per slot, kept by
    /// an index made with [`crate::Index::with_twin`]): every chain key sits at exactly one
    /// position whose holders are its holder set, with the extra copies the twin counts (and
    /// no others), every position is its key's place (the readers' and the writers' places
    /// agree, and name no other key), and the child lists name exactly the live runs by their
    /// parents.
    pub fn check(&self, table: &Table) -> Result<(), String> {
        let w = self.writer();
        let mut keys = 0usize;
        let mut multi = 0usize;
        let mut err = None;
        table.for_each(|k, holders| {
            if err.is_some() || k.group != 0 || k.medium != 0 {
                return;
            }
            keys += 1;
            let loc = w.places.find(k.hash);
            if loc.is_none() || self.places.find(k.hash) != loc {
                err = Some(format!(
                    "key {:#x}: no place, or the walk's {:?} is not the writers' {loc:?}",
                    k.hash,
                    self.places.find(k.hash)
                ));
                return;
            }
            let loc = loc.unwrap_or(Loc::NONE);
            let found = self
                .read(loc.run, |r| {
                    let i = r.index_of(loc.pos)?;
                    (r.hashes[i] == k.hash).then(|| r.holders_at(i))
                })
                .flatten();
            let Some(cover) = found else {
                err = Some(format!("key {:#x}: place {loc:?} does not hold it", k.hash));
                return;
            };
            let want = holders
                .iter()
                .fold(Cover::default(), |c, (s, _)| c.with(s, true));
            if want != cover {
                err = Some(format!(
                    "key {:#x}: cover {cover:?}, holders {holders:?}",
                    k.hash
                ));
                return;
            }
            for (s, n) in holders.iter() {
                if w.extra_copies(k.hash, s) != n - 1 {
                    err = Some(format!(
                        "key {:#x}: slot {s} holds {n} copies, the chains count {}",
                        k.hash,
                        1 + w.extra_copies(k.hash, s)
                    ));
                    return;
                }
                multi += usize::from(n > 1);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        if w.extra.len() != multi {
            return Err(format!(
                "{} extra-copy entries for {multi} slots holding more than one copy",
                w.extra.len()
            ));
        }
        let mut positions = 0usize;
        let mut by_parent: HashMap<u64, Vec<u32>> = HashMap::new();
        for s in 0..SHARDS {
            let g = self.shard_read(s);
            for (i, r) in g.iter().enumerate().filter(|(_, r)| r.live) {
                let id = (i << SHARD_BITS | s) as u32;
                if r.hashes.is_empty() || r.holders_at(r.hashes.len() - 1).is_empty() {
                    return Err(format!("run {id}: no blocks or no holder"));
                }
                let n = r.hashes.len();
                for (k, &(s, held)) in r.partial().collect::<Vec<_>>().iter().enumerate() {
                    if held == 0 || held >= n || r.cover.has(s) {
                        return Err(format!("run {id}: partial holder {s} holds {held} of {n}"));
                    }
                    if r.part[..k].iter().any(|&(x, _)| x == s) {
                        return Err(format!("run {id}: slot {s} is partial twice"));
                    }
                }
                for (k, &h) in r.hashes.iter().enumerate() {
                    let want = Loc {
                        run: id,
                        pos: r.base.wrapping_add(k as u32),
                    };
                    if w.places.find(h) != Some(want) {
                        return Err(format!("run {id}: block {h:#x} is placed elsewhere"));
                    }
                }
                positions += r.hashes.len();
                if let Some(p) = r.parent {
                    by_parent.entry(p).or_default().push(id);
                }
            }
        }
        if positions != keys {
            return Err(format!("{positions} positions for {keys} chain keys"));
        }
        if w.places.len() != keys {
            let mut extra = None;
            w.places.for_each(|h, loc| {
                if extra.is_none() && !table.holds_any(&chain_key(h)) {
                    extra = Some((h, loc));
                }
            });
            return Err(format!(
                "{} places for {keys} chain keys (one not in the table: {extra:?})",
                w.places.len()
            ));
        }
        let mut have: HashMap<u64, Vec<u32>> = w
            .children
            .iter()
            .map(|(&p, k)| (p, k.as_slice().to_vec()))
            .collect();
        for v in have.values_mut().chain(by_parent.values_mut()) {
            v.sort_unstable();
        }
        if have != by_parent {
            return Err("the child lists differ from the runs' parents".into());
        }
        Ok(())
    }
}

/// Unit tests' stand-in for a writer moving a place under a reader: the next `n` chain reads
/// of this thread (walks, [`crate::runs::Runs::holds_now`]) fail as a stale place makes them.
#[cfg(test)]
pub(crate) mod stale {
    use std::cell::Cell;

    thread_local! {
        static FORCED: Cell<u32> = const { Cell::new(0) };
    }

    /// The next `n` reads fail.
    pub fn force(n: u32) {
        FORCED.with(|f| f.set(n));
    }

    /// Reads still to fail.
    pub fn left() -> u32 {
        FORCED.with(Cell::get)
    }

    /// Whether this read fails (one fewer to fail).
    pub fn take() -> bool {
        FORCED.with(|f| {
            let n = f.get();
            f.set(n.saturating_sub(1));
            n > 0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_stated_run_size_holds() {
        // lib.rs: about 160 bytes per run = this header and the writers' child-list entry.
        assert_eq!(std::mem::size_of::<Run>(), 112);
    }

    proptest! {
        /// The in-place holder changes against a plain set per position: whenever
        /// `try_partial` takes a change (a slot that held the position stops, one that did not
        /// starts; other slots hold it before and after), every position's holders equal the
        /// model's and the partial holders stay canonical; the tail shrinking promotes the
        /// partial holders that reach the new end.
        #[test]
        fn partial_holders_equal_sets_per_position(
            len in 2..7usize,
            base in any::<u32>(),
            cover in prop::collection::btree_set(prop_oneof![0..4u32, 130..132u32], 1..3),
            ops in prop::collection::vec((0..7usize, prop_oneof![0..4u32, 130..132u32], any::<bool>()), 1..120),
        ) {
            let mut run = Run {
                hashes: Blocks::from_slice(&(0..len as u64).collect::<Vec<_>>()),
                base,
                cover: cover.iter().fold(Cover::default(), |c, &s| c.with(s, true)),
                part: Vec::new(),
                parent: None,
                live: true,
            };
            let mut model: Vec<BTreeSet<u32>> = vec![cover.clone(); len];
            for (i, slot, on) in ops {
                let i = i % model.len();
                let held = model[i].contains(&slot);
                if held == on {
                    continue;
                }
                // Other slots hold the position before and after.
                if model[i].iter().all(|&s| s == slot) {
                    continue;
                }
                if run.try_partial(base.wrapping_add(i as u32), slot, on) {
                    if on { model[i].insert(slot); } else { model[i].remove(&slot); }
                }
                for (k, m) in model.iter().enumerate() {
                    let want = m.iter().fold(Cover::default(), |c, &s| c.with(s, true));
                    prop_assert_eq!(run.holders_at(k), want, "position {}", k);
                    // One slot's view of the position: what the writers read.
                    for s in [0, 1, 2, 3, 130, 131] {
                        prop_assert_eq!(run.stand(k, s).holds, m.contains(&s));
                        // Any hint (right, wrong, past the end) gives the same answer.
                        let st = run.stand(k, s);
                        for hint in 0..run.part.len() + 2 {
                            let near = run.stand_near(k, s, hint);
                            prop_assert_eq!(
                                (near.in_cover, near.k, near.holds),
                                (st.in_cover, st.k, st.holds)
                            );
                        }
                        prop_assert_eq!(run.others_at(k, s), m.iter().any(|&x| x != s));
                    }
                }
                let n = run.hashes.len();
                for (k, &(s, held)) in run.partial().collect::<Vec<_>>().iter().enumerate() {
                    prop_assert!(held > 0 && held < n && !run.cover.has(s));
                    prop_assert!(run.part[..k].iter().all(|&(x, _)| x != s));
                }
            }
            // Shrinking at the tail: positions nobody but the cover holds go; partial holders
            // reaching the new end join the cover.
            while run.hashes.len() > 1 {
                run.hashes.pop();
                model.pop();
                run.promote();
                for (k, m) in model.iter().enumerate() {
                    let want = m.iter().fold(Cover::default(), |c, &s| c.with(s, true));
                    prop_assert_eq!(run.holders_at(k), want, "position {} after shrinking", k);
                }
                prop_assert!(run.partial().all(|(_, held)| held < run.hashes.len()));
            }
        }
    }
}
