//! The partition cache's estimate of a loaded partition
//! (`PartitionState::footprint`) against the heap the partition really
//! takes, counted by this test's allocator: an estimate that is low lets
//! the process grow past `--cache-size` by the same factor. It counts what
//! is allocated, not what the allocator keeps from the OS (see
//! docs/benchmarks.md on resident memory at 10 M documents).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use engine::{Database, Options};
use serde_json::json;

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counter only records the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as the caller's contract for `alloc`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as the caller's contract for `dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as the caller's contract for `realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Documents in the partition: enough that the maps' nodes count as they
/// do in a large store.
const DOCS: usize = 10_000;

/// Two shapes of about 210 bytes of JSON: the store bench's (ten members,
/// fifteen with the system properties: one past a doubling of serde_json's
/// map, which left room for 28) and one with fewer, nested members.
fn document(shape: usize, i: usize) -> serde_json::Value {
    match shape {
        0 => json!({
            "id": format!("d{i}"), "pk": "p", "n": i, "g": i / 100,
            "type": "reading", "name": format!("sensor {:05}", i % 50_000),
            "score": (i % 997) as f64 / 10.0, "active": !i.is_multiple_of(3),
            "tags": ["blue", format!("t{}", i % 17)],
            "note": "a steady reading, nothing unusual here, kept for the monthly report",
        }),
        _ => json!({
            "id": format!("d{i}"), "pk": "p", "n": i, "g": i / 100,
            "text": "lorem ipsum dolor sit amet ".repeat(4),
            "tags": ["a", "b", "c"], "nested": {"x": i % 7, "y": "z"},
        }),
    }
}

#[test]
fn the_cache_counts_what_a_loaded_partition_takes() {
    for shape in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Database::open_with(dir.path(), Options::default()).unwrap();
            let docs = db.create_container("docs", "/pk").unwrap();
            for chunk in 0..DOCS / 500 {
                let mut txn = docs.begin("p").unwrap();
                for i in chunk * 500..(chunk + 1) * 500 {
                    txn.create_item(document(shape, i)).unwrap();
                }
                txn.commit().unwrap();
            }
        }
        let db = Database::open_with(dir.path(), Options::default()).unwrap();
        let docs = db.container("docs").unwrap();
        let before_used = db.cache_stats().used;
        let before = LIVE.load(Ordering::Relaxed);
        // Point reads load the partition at the fourth.
        for i in 0..4 {
            docs.read_item("p", &format!("d{i}")).unwrap();
        }
        let taken = LIVE.load(Ordering::Relaxed) - before;
        let counted = db.cache_stats().used - before_used;
        let ratio = counted as f64 / taken as f64;
        eprintln!(
            "shape {shape}, {DOCS} documents: the cache counts {counted} bytes, the heap grew by {taken} ({ratio:.2})"
        );
        assert!(
            (0.9..=1.5).contains(&ratio),
            "shape {shape}: the cache counts {counted} bytes for a partition that took {taken} ({ratio:.2}x)"
        );
    }
}
