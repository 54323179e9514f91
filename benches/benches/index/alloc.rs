//! A counting global allocator for the bench binary: live heap bytes, counted only while a
//! measurement is on (one relaxed load per allocation otherwise), so every index's memory is
//! measured the same way, whatever its own accounting says.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout, unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if ON.load(Ordering::Relaxed) {
            LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: a block of this allocator with its layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout, unchanged.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: a block of this allocator with its layout, as the caller asked.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Live bytes allocated by `f`'s result (its drop happens after the count, with counting on,
/// so nothing it held leaks into the next measurement).
pub fn live_bytes_of<T>(f: impl FnOnce() -> T) -> (T, isize) {
    LIVE.store(0, Ordering::SeqCst);
    ON.store(true, Ordering::SeqCst);
    let v = f();
    let n = LIVE.load(Ordering::SeqCst);
    (v, n)
}

/// Ends a measurement after the measured value is dropped.
pub fn stop() {
    ON.store(false, Ordering::SeqCst);
}
