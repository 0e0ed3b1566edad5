//! The Rust guest modules (`sprocs/wasm`) for tests: builds them with the
//! same command as CI and returns their bytes.
//!
//! `module("create_comment")` runs `cargo build --release --target
//! wasm32-unknown-unknown --manifest-path sprocs/wasm/Cargo.toml` once per
//! test process (quick when nothing changed; cargo's own lock serializes
//! concurrent test processes) and reads
//! `sprocs/wasm/target/wasm32-unknown-unknown/release/create_comment.wasm`.
//! A machine without the wasm32 target gets a panic naming the `rustup`
//! command that installs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Rust target the guest modules are built for.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// Every module of the guest workspace, by file stem, with the export it
/// must have.
pub const MODULES: &[(&str, &str)] = &[
    ("create_comment", host_api::abi::PROCEDURE_EXPORT),
    ("create_like", host_api::abi::PROCEDURE_EXPORT),
    ("update_usernames", host_api::abi::PROCEDURE_EXPORT),
    ("truncate_feed", host_api::abi::TRIGGER_EXPORT),
];

/// The guest workspace, `sprocs/wasm`.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("sprocs")
        .join("wasm")
}

/// Builds the guest workspace (once per process) and returns the directory
/// holding the `.wasm` files.
///
/// # Panics
/// When the build fails, with cargo's output; when the wasm32 target is not
/// installed, naming `rustup target add wasm32-unknown-unknown`.
pub fn build() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(run_build) {
        Ok(dir) => dir,
        Err(message) => panic!("{message}"),
    }
}

fn run_build() -> Result<PathBuf, String> {
    let manifest = workspace().join("Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--release", "--target", TARGET, "--manifest-path"])
        .arg(&manifest)
        // The guest workspace keeps its own target directory.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .map_err(|e| format!("could not run cargo to build the guest modules: {e}"))?;
    if output.status.success() {
        return Ok(workspace().join("target").join(TARGET).join("release"));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("can't find crate for `core`")
        || stderr.contains("can't find crate for `std`")
        || stderr.contains("target may not be installed")
    {
        return Err(format!(
            "the {TARGET} target is not installed; run `rustup target add {TARGET}` \
             (the guest modules in sprocs/wasm are built for it)\n{stderr}"
        ));
    }
    Err(format!(
        "building the guest modules failed: cargo build --release --target {TARGET} \
         --manifest-path {}\n{stderr}",
        manifest.display()
    ))
}

/// The bytes of the guest module `name` (`"create_comment"`), built if
/// needed.
///
/// # Panics
/// As [`build`], and when there is no such module.
pub fn module(name: &str) -> Vec<u8> {
    let path = build().join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the guest modules are {:?})",
            path.display(),
            MODULES.iter().map(|(m, _)| m).collect::<Vec<_>>()
        )
    })
}
