//! The Rust guest modules of `sprocs/samples/rust` (createComment, createLike,
//! updateUsernames, truncateFeed compiled to WebAssembly), found and built
//! from a source checkout.
//!
//! The modules are not inside the binary: they are built by a separate
//! cargo workspace for the `wasm32-unknown-unknown` target. [`build`] runs
//! `cargo build --release --target wasm32-unknown-unknown --manifest-path
//! sprocs/Cargo.toml` (the command CI runs; quick when nothing
//! changed, and cargo's own lock serializes concurrent builds) and returns
//! the directory holding `create_comment.wasm` and the others. The demo,
//! the benchmark harness and the tests all use it, so they load the same
//! bytes. A machine without the wasm32 target gets
//! [`GuestError::TargetMissing`], naming the `rustup` command that
//! installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Why the guest modules are not available.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// The wasm32 target is not installed for the toolchain.
    #[error(
        "the {TARGET} target is not installed; run `rustup target add {TARGET}` (the guest modules in sprocs are built for it)"
    )]
    TargetMissing,
    /// cargo could not be started.
    #[error("could not run cargo to build the guest modules in {}: {source}", .workspace.display())]
    Cargo {
        /// The guest workspace.
        workspace: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The build failed.
    #[error("building the guest modules failed: cargo build --release --target {TARGET} --manifest-path {}\n{stderr}", .manifest.display())]
    Build {
        /// The guest workspace's manifest.
        manifest: PathBuf,
        /// cargo's error output.
        stderr: String,
    },
    /// A module file could not be read.
    #[error("{}: {source} (the guest modules are create_comment, create_like, update_usernames, truncate_feed)", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The guest workspace of this source tree, `sprocs`.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("sprocs")
}

/// Where [`build`] puts the modules:
/// `sprocs/target/wasm32-unknown-unknown/release`.
pub fn release_dir() -> PathBuf {
    workspace().join("target").join(TARGET).join("release")
}

/// Builds the guest workspace and returns the directory holding the
/// `.wasm` files ([`release_dir`]).
///
/// # Errors
/// [`GuestError::TargetMissing`] when the wasm32 target is not installed,
/// [`GuestError::Build`] with cargo's output when the build fails,
/// [`GuestError::Cargo`] when cargo cannot be run.
pub fn build() -> Result<PathBuf, GuestError> {
    let workspace = workspace();
    let manifest = workspace.join("Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--release", "--target", TARGET, "--manifest-path"])
        .arg(&manifest)
        // The guest workspace keeps its own target directory.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .map_err(|source| GuestError::Cargo {
            workspace: workspace.clone(),
            source,
        })?;
    if output.status.success() {
        return Ok(release_dir());
    }
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if target_missing(&stderr) {
        return Err(GuestError::TargetMissing);
    }
    Err(GuestError::Build { manifest, stderr })
}

/// Whether cargo's error output says the wasm32 standard library is
/// missing.
fn target_missing(stderr: &str) -> bool {
    stderr.contains("can't find crate for `core`")
        || stderr.contains("can't find crate for `std`")
        || stderr.contains("target may not be installed")
}

/// Whether every module of [`MODULES`] is in `dir`.
pub fn all_present(dir: &Path) -> bool {
    MODULES
        .iter()
        .all(|(name, _)| dir.join(format!("{name}.wasm")).is_file())
}

/// The bytes of module `name` (`"create_comment"`) in `dir`.
///
/// # Errors
/// [`GuestError::Read`] when the file cannot be read.
pub fn read(dir: &Path, name: &str) -> Result<Vec<u8>, GuestError> {
    let path = dir.join(format!("{name}.wasm"));
    std::fs::read(&path).map_err(|source| GuestError::Read { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_target_is_recognized_in_cargos_output() {
        assert!(target_missing(
            "error[E0463]: can't find crate for `core`\n  = note: the `wasm32-unknown-unknown` target may not be installed"
        ));
        assert!(!target_missing("error: expected `;`, found `}`"));
        assert!(
            GuestError::TargetMissing
                .to_string()
                .contains("rustup target add wasm32-unknown-unknown")
        );
    }

    #[test]
    fn a_directory_without_modules_is_not_complete() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!all_present(dir.path()));
        let err = read(dir.path(), "create_comment").unwrap_err();
        assert!(err.to_string().contains("create_comment.wasm"), "{err}");
    }
}
