//! The global allocator the `partita` binary, the benchmarks and the load
//! generators use: mimalloc, called the way its fast paths expect.
//!
//! Every write allocates a few dozen small strings and maps (keys, values,
//! system properties, the copy a caller makes of a document it modifies),
//! so the allocator is a visible part of an in-memory transaction. mimalloc
//! cut the instructions of an in-memory createComment by about 15% against
//! glibc's malloc. The `mimalloc` crate's `GlobalAlloc` sends every request
//! through `mi_malloc_aligned`, whose generic path (mimalloc v3) cost
//! another ~1,400 instructions per createComment; like the standard
//! library's own `System`, this one calls plain `mi_malloc` when the
//! alignment is one that `mi_malloc` already guarantees, and mimalloc v2
//! (its long-standing stable line) took ~1,000 fewer still: together ~8%
//! fewer instructions per transaction (callgrind, 27.5k against 29.8k).
//!
//! It is a crate of its own so that every crate's benchmarks can measure
//! with the allocator the binary ships without depending on the facade
//! (`partita::MiMalloc` re-exports it). Library users choose their own
//! allocator; this one is opt-in:
//!
//! ```
//! #[global_allocator]
//! static ALLOCATOR: partita_alloc::MiMalloc = partita_alloc::MiMalloc;
//! ```

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as ffi;

/// The largest alignment `mi_malloc` guarantees for any block at least that
/// large (mimalloc's `MI_MAX_ALIGN_SIZE`, the same as the C `max_align_t`
/// the standard library assumes for `malloc` on 64-bit targets).
const MIN_ALIGN: usize = 16;

/// mimalloc as the global allocator (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct MiMalloc;

/// Whether a plain (unaligned) mimalloc call returns memory aligned enough
/// for `align` and a block of `size` bytes: blocks are aligned to the
/// smaller of 16 and their size class, so the rule is the one `System`
/// uses for `malloc`.
fn plain(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

// SAFETY: every function forwards to mimalloc, which returns null on
// failure and memory aligned as requested: to `align` by `mi_*_aligned`,
// or, when `plain` holds, by mimalloc's guarantee for plain calls. `mi_free`
// accepts pointers from every one of them.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(layout.align(), layout.size()) {
                ffi::mi_malloc(layout.size()).cast()
            } else {
                ffi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(layout.align(), layout.size()) {
                ffi::mi_zalloc(layout.size()).cast()
            } else {
                ffi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: see the impl.
        unsafe { ffi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: see the impl; `ptr` came from this allocator.
        unsafe {
            if plain(layout.align(), new_size) {
                ffi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                ffi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size and alignment a Rust program asks for comes back aligned,
    /// zeroed when asked, and keeps its contents across `realloc`.
    #[test]
    fn alignments_and_reallocation_hold() {
        let a = MiMalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 12, 16, 24, 100, 4096, 100_000] {
                let layout = Layout::from_size_align(size, align).expect("layout");
                // SAFETY: the layout has a non-zero size; every pointer is
                // freed with the layout it was allocated with.
                unsafe {
                    let p = a.alloc_zeroed(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
                    p.write_bytes(0xab, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "realloc size {size} align {align}");
                    assert!(
                        std::slice::from_raw_parts(q, size)
                            .iter()
                            .all(|&b| b == 0xab)
                    );
                    a.dealloc(q, Layout::from_size_align(size * 3, align).expect("layout"));
                }
            }
        }
    }
}
