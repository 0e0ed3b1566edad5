//! The build script of every guest module in this workspace (each guest's
//! `Cargo.toml` points `build` here).
//!
//! It lays out the module's linear memory for a fresh instance per call:
//!
//! ```text
//!   0 ............ 192 KiB ........ ~240 KiB ...................... 512 KiB
//!   | stack (grows down) | static data | heap: the SDK's arena          |
//! ```
//!
//! - 512 KiB of initial memory instead of the default (the stack plus
//!   static data, rounded up to 64 KiB pages), so the SDK's allocator
//!   (`guest/src/arena.rs`) has about 270 KiB of heap in the initial
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
//! pages a call dirtied. A guest crate of your own gets the same with a
//! build script printing these two lines for wasm32:
//! `cargo:rustc-link-arg-cdylib=--initial-memory=524288` and
//! `cargo:rustc-link-arg-cdylib=-zstack-size=196608`.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory={}", 512 << 10);
        println!("cargo:rustc-link-arg-cdylib=-zstack-size={}", 192 << 10);
    }
    println!("cargo:rerun-if-changed=../guest-build.rs");
}
