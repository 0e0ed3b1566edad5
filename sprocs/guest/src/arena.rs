//! The module's memory allocator: a bump arena over the free part of the
//! initial linear memory, then Rust's default allocator.
//!
//! Every call runs in a fresh instance whose memory is the module's initial
//! memory. Rust's default allocator on `wasm32-unknown-unknown` (dlmalloc)
//! never uses the initial memory past the static data: it gets all of its
//! heap from `memory.grow`. So every call grew the memory for its first
//! allocation, and the host's pooled memory slot paid an `mprotect` to grow
//! it and another to shrink it back before the next call (a few
//! microseconds each, with a TLB flush, more than the guest's own work).
//!
//! This allocator first hands out the bytes between `__heap_base` and the
//! end of the initial memory (guests in this workspace are linked with
//! 512 KiB of it, see `partita-guest-build`), bumping a pointer: no
//! `memory.grow`, and an allocation is a few instructions. Freeing the
//! most recent block and growing it in place (a `Vec` or `String` being
//! built) reuse memory; other frees leave a hole until the call ends, which
//! is soon: the instance is dropped after the call. Once the arena is used
//! up, everything goes to the default allocator, exactly as before, so a
//! call that needs more memory still gets it (up to the host's memory
//! limit), and at most the arena is wasted.
//!
//! Memory past the arena's high-water mark has never been written (a fresh
//! instance's memory is zero), so zeroed allocations from there skip the
//! `memset`: the SDK's result buffer then costs no writes and dirties only
//! the pages the host fills.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A bump arena over the addresses `next..end`; `high` is the end of the
/// highest block ever handed out (memory from there on is untouched).
///
/// Addresses are plain numbers so the logic is tested natively; the wasm32
/// global allocator maps them to pointers. (It is installed only without
/// the `atomics` target feature, so there are no threads: the atomics are
/// only a safe way to be `Sync`, and compile to plain loads and stores.)
pub(crate) struct Arena {
    next: AtomicUsize,
    high: AtomicUsize,
    end: AtomicUsize,
}

impl Arena {
    /// An arena with no memory yet (see [`Arena::init`]).
    pub(crate) const fn empty() -> Arena {
        Arena {
            next: AtomicUsize::new(0),
            high: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
        }
    }

    /// Gives the arena `start..end` (untouched, zeroed memory).
    pub(crate) fn init(&self, start: usize, end: usize) {
        self.next.store(start, Relaxed);
        self.high.store(start, Relaxed);
        self.end.store(end.max(start), Relaxed);
    }

    /// Whether `addr` was handed out by this arena: it lies below the
    /// arena's end. Blocks of the default allocator lie past it (that one
    /// only gets memory from `memory.grow`, above the initial memory).
    pub(crate) fn owns(&self, addr: usize) -> bool {
        addr < self.end.load(Relaxed)
    }

    /// A block of `size` bytes aligned to `align` (a power of two), and
    /// whether its bytes are already zero; `None` when the arena is full.
    pub(crate) fn alloc(&self, size: usize, align: usize) -> Option<(usize, bool)> {
        let next = self.next.load(Relaxed);
        let start = next.checked_add(align - 1)? & !(align - 1);
        let stop = start.checked_add(size)?;
        if stop > self.end.load(Relaxed) {
            return None;
        }
        self.next.store(stop, Relaxed);
        let high = self.high.load(Relaxed);
        self.high.store(high.max(stop), Relaxed);
        Some((start, start >= high))
    }

    /// How many leading bytes of the block `addr..addr+size` may hold old
    /// data: those below `high_before`, the high-water mark as it was just
    /// before the block was handed out.
    pub(crate) fn dirty_prefix(high_before: usize, addr: usize, size: usize) -> usize {
        high_before.saturating_sub(addr).min(size)
    }

    /// The high-water mark now.
    pub(crate) fn high(&self) -> usize {
        self.high.load(Relaxed)
    }

    /// Frees the block `addr..addr+size`: reclaimed when it is the most
    /// recent one, otherwise left until the instance goes away.
    pub(crate) fn free(&self, addr: usize, size: usize) {
        if addr.checked_add(size) == Some(self.next.load(Relaxed)) {
            self.next.store(addr, Relaxed);
        }
    }

    /// Resizes the block `addr..addr+old` to `new` bytes in place, when it
    /// is the most recent block and the arena has room (or it shrinks).
    pub(crate) fn resize_in_place(&self, addr: usize, old: usize, new: usize) -> bool {
        let last = addr.checked_add(old) == Some(self.next.load(Relaxed));
        if new <= old {
            if last {
                self.next.store(addr + new, Relaxed);
            }
            return true;
        }
        let Some(stop) = addr.checked_add(new) else {
            return false;
        };
        if !last || stop > self.end.load(Relaxed) {
            return false;
        }
        self.next.store(stop, Relaxed);
        let high = self.high.load(Relaxed);
        self.high.store(high.max(stop), Relaxed);
        true
    }
}

// Not with the `atomics` feature (shared memory and threads): the arena's
// loads and stores would race there, so such a build keeps the default
// allocator.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
mod global {
    use std::alloc::{GlobalAlloc, Layout, System};

    use super::Arena;

    const PAGE: usize = 64 * 1024;

    unsafe extern "C" {
        /// Where the linker put the start of the heap (after the stack and
        /// the static data).
        static __heap_base: u8;
    }

    /// The arena, then [`System`] (dlmalloc).
    struct GuestAlloc(Arena);

    impl GuestAlloc {
        /// The arena, set up on first use: from `__heap_base` to the end of
        /// the initial memory (nothing has grown it yet: every allocation
        /// comes here first).
        fn arena(&self) -> &Arena {
            if self.0.end.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                let start = std::ptr::addr_of!(__heap_base) as usize;
                let end = core::arch::wasm32::memory_size(0) * PAGE;
                self.0.init(start, end);
            }
            &self.0
        }
    }

    // SAFETY: blocks handed out by the arena lie inside linear memory, are
    // aligned as asked and never overlap a live block (the arena only moves
    // forward, except to take back its most recent block once freed);
    // everything else is `System`'s, and a pointer goes back to whichever
    // gave it (`Arena::owns`: the arena's addresses lie below the initial
    // memory's end, `System`'s above it).
    unsafe impl GlobalAlloc for GuestAlloc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            match self.arena().alloc(layout.size(), layout.align()) {
                Some((addr, _)) => addr as *mut u8,
                None => unsafe { System.alloc(layout) },
            }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let arena = self.arena();
            let high = arena.high();
            match arena.alloc(layout.size(), layout.align()) {
                Some((addr, fresh)) => {
                    if !fresh {
                        let dirty = Arena::dirty_prefix(high, addr, layout.size());
                        unsafe { std::ptr::write_bytes(addr as *mut u8, 0, dirty) };
                    }
                    addr as *mut u8
                }
                None => unsafe { System.alloc_zeroed(layout) },
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            let arena = self.arena();
            if arena.owns(ptr as usize) {
                arena.free(ptr as usize, layout.size());
            } else {
                unsafe { System.dealloc(ptr, layout) }
            }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let arena = self.arena();
            if !arena.owns(ptr as usize) {
                return unsafe { System.realloc(ptr, layout, new_size) };
            }
            if arena.resize_in_place(ptr as usize, layout.size(), new_size) {
                return ptr;
            }
            // SAFETY: `new_size` with the old alignment is a valid layout
            // (GlobalAlloc::realloc's contract).
            let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            let new = unsafe { self.alloc(new_layout) };
            if !new.is_null() {
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
            }
            new
        }
    }

    #[global_allocator]
    static ALLOC: GuestAlloc = GuestAlloc(Arena::empty());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena(start: usize, end: usize) -> Arena {
        let a = Arena::empty();
        a.init(start, end);
        a
    }

    #[test]
    fn blocks_are_aligned_disjoint_and_inside() {
        let a = arena(1001, 2000);
        let (x, fresh_x) = a.alloc(10, 8).unwrap();
        let (y, fresh_y) = a.alloc(3, 1).unwrap();
        let (z, _) = a.alloc(16, 16).unwrap();
        assert_eq!((x % 8, z % 16), (0, 0));
        assert!(x >= 1001 && x + 10 <= y && y + 3 <= z && z + 16 <= 2000);
        assert!(fresh_x && fresh_y, "never handed out before: still zero");
        assert!(a.owns(x) && a.owns(z) && !a.owns(2000) && !a.owns(5000));
    }

    #[test]
    fn a_full_arena_says_so() {
        let a = arena(1000, 1100);
        assert!(a.alloc(100, 1).is_some());
        assert_eq!(a.alloc(1, 1), None);
        assert_eq!(arena(1000, 1100).alloc(usize::MAX, 1), None, "no overflow");
        assert_eq!(Arena::empty().alloc(1, 1), None, "no memory before init");
    }

    #[test]
    fn the_last_block_is_reclaimed_and_then_not_fresh() {
        let a = arena(1000, 2000);
        let (x, _) = a.alloc(100, 1).unwrap();
        let (y, _) = a.alloc(50, 1).unwrap();
        a.free(x, 100); // not the last: a hole until the instance goes
        let high = a.high();
        a.free(y, 50);
        let (y2, fresh) = a.alloc(80, 1).unwrap();
        assert_eq!(y2, y, "the last block's memory is reused");
        assert!(!fresh, "and it may hold old bytes");
        assert_eq!(Arena::dirty_prefix(high, y2, 80), 50, "only the old part");
    }

    #[test]
    fn the_last_block_grows_and_shrinks_in_place() {
        let a = arena(1000, 2000);
        let (x, _) = a.alloc(10, 1).unwrap();
        assert!(a.resize_in_place(x, 10, 500));
        assert!(!a.resize_in_place(x, 500, 1001), "past the end");
        assert!(a.resize_in_place(x, 500, 20));
        let (y, _) = a.alloc(1, 1).unwrap();
        assert_eq!(y, x + 20);
        assert!(!a.resize_in_place(x, 20, 30), "no longer the last block");
        assert!(a.resize_in_place(x, 20, 5), "shrinking always fits");
    }
}
