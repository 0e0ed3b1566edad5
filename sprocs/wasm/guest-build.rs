//! The build script of every guest module in this workspace (each guest's
//! `Cargo.toml` points `build` here).
//!
//! It links the module with 2 MiB of initial linear memory instead of the
//! default (the 1 MiB stack plus static data, rounded up to 64 KiB pages),
//! so the SDK's allocator (`guest/src/arena.rs`) has about 900 KiB of heap
//! in the initial memory. A call starts from a fresh instance with the
//! initial memory; without room there, every call grew the memory for its
//! first allocation, and the host's pooled memory slot paid an `mprotect`
//! to grow it and another to shrink it back for the next call (a few
//! microseconds each, with a TLB flush). Pages a call never touches cost
//! nothing, and the host resets only the pages a call dirtied.
//!
//! A guest crate of your own gets the same with a build script printing
//! `cargo:rustc-link-arg-cdylib=--initial-memory=2097152` for wasm32.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory={}", 2 << 20);
    }
    println!("cargo:rerun-if-changed=../guest-build.rs");
}
