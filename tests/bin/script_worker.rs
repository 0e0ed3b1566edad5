//! A script worker process for the isolation tests (`tests/isolation.rs`):
//! what an embedding program's own worker binary looks like. The `partita`
//! binary does the same as `partita script-worker`.

fn main() {
    partita::worker_main()
}
