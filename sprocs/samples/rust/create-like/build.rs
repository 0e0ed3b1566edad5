//! Links this module with the guest SDK's memory layout (see
//! `partita-guest-build`).

fn main() {
    partita_guest_build::link_memory_layout();
    println!("cargo:rerun-if-changed=build.rs");
}
