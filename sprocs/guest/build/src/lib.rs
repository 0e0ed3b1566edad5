//! The link settings of a `partita-guest` module, for its build script.
//!
//! A guest crate adds this crate as a build-dependency and calls
//! [`link_memory_layout`] from its `build.rs`:
//!
//! ```no_run
//! // The `main` of build.rs:
//! partita_guest_build::link_memory_layout();
//! println!("cargo:rerun-if-changed=build.rs");
//! ```
//!
//! A dependency cannot pass link arguments to the crates that use it, so
//! each module's own build script has to print them; this crate keeps the
//! numbers in one place, next to the SDK whose allocator depends on them.
//!
//! The layout of the module's linear memory, for a fresh instance per call:
//!
//! ```text
//!   0 ............ 192 KiB ........ ~240 KiB ...................... 512 KiB
//!   | stack (grows down) | static data | heap: the SDK's arena          |
//! ```
//!
//! - 512 KiB of initial memory instead of the default (the stack plus
//!   static data, rounded up to 64 KiB pages), so the SDK's allocator
//!   (`sprocs/guest/src/arena.rs`) has about 270 KiB of heap in the initial
//!   memory. Without room there, every call grew the memory for its first
//!   allocation, and the host's pooled memory slot paid an `mprotect` to
//!   grow it and another to shrink it back for the next call (a few
//!   microseconds each, with a TLB flush).
//! - A 192 KiB stack instead of Rust's default 1 MiB. After every call the
//!   host finds the pages it dirtied with one `PAGEMAP_SCAN` ioctl over the
//!   whole initial memory, and the kernel's walk costs about 0.7 ns per
//!   4 KiB page whether or not the call touched it: with the 1 MiB stack
//!   the memory had to be 2 MiB (512 pages), about 0.3 µs per call more
//!   than 512 KiB (128 pages; the hand-written WAT createComment has 16).
//!   The stack comes first (Rust's `--stack-first`), so a guest that
//!   overflows it runs below address 0 and traps (out of bounds)
//!   instead of overwriting its data. Parsing, serializing and parsing
//!   again a value nested as deep as serde_json accepts (126 levels) needs
//!   between 64 and 80 KiB of it.
//!
//! Pages a call never touches cost no memory, and the host resets only the
//! pages a call dirtied.

/// The module's initial linear memory, in bytes.
const INITIAL_MEMORY: u32 = 512 << 10;
/// The module's stack, in bytes, at the start of its memory.
const STACK_SIZE: u32 = 192 << 10;

/// Links the crate's `cdylib` with the memory layout above when it is
/// built for wasm32, by printing two `cargo:rustc-link-arg-cdylib`
/// instructions; prints nothing for any other target (the host-target
/// builds of `cargo test`).
///
/// Call it from a build script: it reads `CARGO_CFG_TARGET_ARCH`, which
/// cargo sets only there.
pub fn link_memory_layout() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory={INITIAL_MEMORY}");
        println!("cargo:rustc-link-arg-cdylib=-zstack-size={STACK_SIZE}");
    }
}
