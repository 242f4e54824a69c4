//! The one `unsafe` of the fuzz tests: a global allocator that forwards to the system's and,
//! on threads that ask for it, records the largest single allocation and the bytes allocated,
//! so the tests can show that decoding a frame allocates nothing beyond what the frame holds.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The counting allocator.
pub struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static TOTAL: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // Const-initialized thread-locals without destructors: reading them never allocates.
    let _ = ON.try_with(|on| {
        if on.get() {
            LARGEST.with(|m| m.set(m.get().max(size)));
            TOTAL.with(|t| t.set(t.get().saturating_add(size)));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's own arguments, so the
// allocator's contract is `System`'s; the bookkeeping around it does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from this allocator, which is `System`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded unchanged; `ptr` came from this allocator, which is `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the largest single allocation and the total bytes
/// allocated on this thread while it ran.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    LARGEST.with(|m| m.set(0));
    TOTAL.with(|t| t.set(0));
    ON.with(|on| on.set(true));
    let r = f();
    ON.with(|on| on.set(false));
    (r, LARGEST.with(Cell::get), TOTAL.with(Cell::get))
}
