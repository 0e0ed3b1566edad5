//! A script worker process for the isolation tests and bench
//! (`tests/all/isolation.rs`, `benches/isolation.rs`): what an embedding
//! program's own worker binary looks like. The `partita` binary does the
//! same as `partita script-worker`.

/// The `partita` binary's allocator, so workers behave as its do (mimalloc
/// reserves 1 GiB of address space up front, which counts against
/// `WorkerOptions::address_space`).
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

fn main() {
    partita::worker_main()
}
