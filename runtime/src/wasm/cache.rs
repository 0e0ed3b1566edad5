//! Compiled modules: checked against the ABI once, cached in memory by
//! content, and persisted as precompiled artifacts so a restart does not
//! recompile.
//!
//! ```text
//!   bytes ──sha256──► memory cache ──hit──► Compiled (Module + InstancePre)
//!                          │ miss
//!                          ▼
//!          {data dir}/wasm-cache/{sha256}.cwasm ──valid──► Module::deserialize
//!                          │ missing, torn, foreign or stale
//!                          ▼
//!          wat → wasm, Cranelift compile, ABI check ──► write temp file, rename
//! ```
//!
//! An artifact file is `MAGIC`, the module's SHA-256, the SHA-256 of the
//! payload, then the payload (`Module::serialize`). It is trusted, and handed
//! to `unsafe Module::deserialize`, only when all three match: the name and
//! the first hash say it belongs to this module, the second that it is the
//! whole payload this process family wrote (a torn or bit-flipped file is
//! detected, deleted and recompiled). wasmtime itself refuses an artifact of
//! another version or engine configuration, which is then recompiled too.
//! Files are written to a temporary name and renamed, so a reader never sees
//! half a file. The data directory is trusted as the database file is: a
//! process that can write it can change the data anyway.
//!
//! Failing to write an artifact (read-only directory, full disk) costs only
//! the next process a compile; it is counted, not reported.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use host_api::ScriptKind;
use host_api::abi;
use sha2::{Digest, Sha256};
use wasmtime::{ExternType, InstancePre, Module, ModuleExport, ValType};

use super::host::HostState;
use super::sandbox::Sandbox;
use crate::Error;

/// The directory under the data directory that holds artifacts.
pub const ARTIFACT_DIR: &str = "wasm-cache";

const MAGIC: &[u8; 16] = b"partita-cwasm-1\n";

/// Modules kept in memory; past this the cache forgets one at random.
const MAX_CACHED: usize = 1024;

/// Body addresses remembered in `WasmCache::seen`; past this it starts over.
const MAX_SEEN: usize = 64;

type Hash = [u8; 32];

/// A module body remembered at an address: a copy of its bytes, its hash.
type Seen = (Arc<[u8]>, Hash);

/// A module ready to instantiate.
pub(crate) struct Compiled {
    pub(crate) module: Module,
    pub(crate) pre: InstancePre<HostState>,
    /// Per kind (procedure, trigger, UDF): the exports a call uses, or why
    /// the module cannot run as that kind ([`check_exports`]'s message).
    /// Found once, so a call neither looks them up by name nor checks
    /// their types again.
    exports: [Result<Exports, String>; 3],
}

/// The exports of a module that a call of one kind uses.
pub(crate) struct Exports {
    /// The linear memory.
    pub(crate) memory: ModuleExport,
    /// The entry point, checked to be `() -> i32`.
    pub(crate) entry: ModuleExport,
}

impl Compiled {
    fn new(module: Module, pre: InstancePre<HostState>) -> Compiled {
        let exports = [
            ScriptKind::StoredProcedure,
            ScriptKind::Trigger,
            ScriptKind::UserDefinedFunction,
        ]
        .map(|kind| exports_of(&module, kind));
        Compiled {
            module,
            pre,
            exports,
        }
    }

    /// The exports a call of `kind` uses.
    ///
    /// # Errors
    /// [`Error::Compile`] as [`check_exports`].
    pub(crate) fn exports(&self, kind: ScriptKind) -> Result<&Exports, Error> {
        let i = match kind {
            ScriptKind::StoredProcedure => 0,
            ScriptKind::Trigger => 1,
            ScriptKind::UserDefinedFunction => 2,
        };
        self.exports[i]
            .as_ref()
            .map_err(|message| Error::Compile(message.clone()))
    }
}

fn exports_of(module: &Module, kind: ScriptKind) -> Result<Exports, String> {
    check_exports(module, kind).map_err(|e| match e {
        Error::Compile(message) => message,
        other => other.to_string(),
    })?;
    let index = |name: &str| {
        module
            .get_export_index(name)
            .ok_or_else(|| format!("the module's export {name:?} cannot be found"))
    };
    Ok(Exports {
        memory: index(abi::MEMORY_EXPORT)?,
        entry: index(entry_point(kind))?,
    })
}

/// Compiled WebAssembly modules, by content. One per process
/// ([`WasmCache::global`]) is what the facade uses; tests build their own to
/// play a freshly started process.
#[derive(Default)]
pub struct WasmCache {
    modules: Mutex<HashMap<Hash, Arc<Compiled>>>,
    /// The hash of module bodies seen recently, by address and length, with
    /// their bytes: a body found at the same place with the same bytes has
    /// the same hash. Hashing a 150 KB module costs about 75 µs per call,
    /// more than the rest of a call. The bytes are the caller's own `Arc`
    /// when it gave one ([`WasmScript::shared`](super::WasmScript::shared)):
    /// kept alive here, that allocation cannot be freed and reused, so a
    /// body at its address *is* those bytes and nothing is compared.
    /// Otherwise they are a copy, compared with the body (one `memcmp`).
    seen: Mutex<HashMap<(usize, usize), Seen>>,
    compiled: AtomicU64,
    loaded: AtomicU64,
    hits: AtomicU64,
    rejected: AtomicU64,
    write_failures: AtomicU64,
}

/// What a [`WasmCache`] has done since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WasmCacheStats {
    /// Modules compiled with Cranelift.
    pub compiled: u64,
    /// Modules loaded from a precompiled artifact.
    pub loaded: u64,
    /// Lookups answered from memory.
    pub hits: u64,
    /// Artifacts found torn, corrupted, foreign or stale (then recompiled).
    pub rejected: u64,
    /// Artifacts that could not be written.
    pub write_failures: u64,
}

impl WasmCache {
    /// An empty cache.
    pub fn new() -> WasmCache {
        WasmCache::default()
    }

    /// The process's cache.
    pub fn global() -> &'static WasmCache {
        static GLOBAL: OnceLock<WasmCache> = OnceLock::new();
        GLOBAL.get_or_init(WasmCache::new)
    }

    /// What this cache has done.
    pub fn stats(&self) -> WasmCacheStats {
        WasmCacheStats {
            compiled: self.compiled.load(Ordering::Relaxed),
            loaded: self.loaded.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            write_failures: self.write_failures.load(Ordering::Relaxed),
        }
    }

    /// The compiled form of `body` (`.wasm` bytes or `.wat` text), from
    /// memory, from an artifact under `data_dir`, or compiled now (and
    /// persisted there). Also returns the module's binary bytes when it had
    /// to convert text.
    ///
    /// # Errors
    /// [`Error::Compile`] naming what is wrong when the body is neither, does
    /// not validate, or imports anything outside the ABI.
    pub(crate) fn get(
        &self,
        sandbox: &Sandbox,
        body: &[u8],
        shared: Option<&Arc<[u8]>>,
        data_dir: Option<&Path>,
    ) -> Result<Arc<Compiled>, Error> {
        let hash = self.hash(body, shared);
        if let Some(found) = self.lock().get(&hash) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(found.clone());
        }
        let path = data_dir.map(|dir| artifact_path(dir, &hash));
        let loaded = path.as_deref().and_then(|p| self.load(sandbox, p, &hash));
        let fresh = loaded.is_none();
        let module = match loaded {
            Some(module) => module,
            None => {
                let wasm = to_binary(body)?;
                self.compiled.fetch_add(1, Ordering::Relaxed);
                Module::new(&sandbox.engine, &*wasm)
                    .map_err(|e| Error::Compile(format!("the module does not validate: {e:#}")))?
            }
        };
        check_imports(&module)?;
        if fresh
            && let Some(path) = &path
            && store(path, &hash, &module).is_err()
        {
            self.write_failures.fetch_add(1, Ordering::Relaxed);
        }
        let pre = sandbox.linker.instantiate_pre(&module).map_err(|e| {
            Error::Compile(format!("the module cannot link to {}: {e:#}", abi::MODULE))
        })?;
        let compiled = Arc::new(Compiled::new(module, pre));
        let mut modules = self.lock();
        if modules.len() >= MAX_CACHED
            && let Some(victim) = modules.keys().next().copied()
        {
            modules.remove(&victim);
        }
        modules.insert(hash, compiled.clone());
        Ok(compiled)
    }

    /// The SHA-256 of `body`, from `seen` when the same bytes were at the
    /// same address before. `shared`, when it holds exactly `body`, is what
    /// `seen` keeps (see there).
    fn hash(&self, body: &[u8], shared: Option<&Arc<[u8]>>) -> Hash {
        let key = (body.as_ptr() as usize, body.len());
        let seen = || self.seen.lock().unwrap_or_else(|e| e.into_inner());
        // Compared and hashed outside the lock: concurrent calls do not wait
        // for each other's `memcmp`.
        let known = seen().get(&key).cloned();
        if let Some((bytes, hash)) = known
            // The same live allocation (held by `seen`), or equal bytes.
            && (std::ptr::eq(bytes.as_ptr(), body.as_ptr()) || *bytes == *body)
        {
            return hash;
        }
        let hash: Hash = Sha256::digest(body).into();
        let bytes = match shared {
            Some(arc) if std::ptr::eq(arc.as_ptr(), body.as_ptr()) && arc.len() == body.len() => {
                arc.clone()
            }
            _ => body.into(),
        };
        let mut seen = seen();
        if seen.len() >= MAX_SEEN {
            seen.clear();
        }
        seen.insert(key, (bytes, hash));
        hash
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Hash, Arc<Compiled>>> {
        // The map is only inserted into and read; a panic elsewhere cannot
        // leave it half-changed.
        self.modules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The module in the artifact at `path`, if there is one that is whole,
    /// belongs to `hash` and suits this engine. A bad one is deleted.
    fn load(&self, sandbox: &Sandbox, path: &Path, hash: &Hash) -> Option<Module> {
        let bytes = std::fs::read(path).ok()?;
        let payload = bytes
            .strip_prefix(MAGIC.as_slice())
            .and_then(|rest| rest.strip_prefix(hash.as_slice()))
            .filter(|rest| rest.len() >= 32)
            .map(|rest| rest.split_at(32))
            .filter(|(sum, payload)| Sha256::digest(payload).as_slice() == *sum)
            .map(|(_, payload)| payload);
        // SAFETY: `payload` is exactly what `store` wrote for this module
        // (its checksum matches), i.e. the output of `Module::serialize` of
        // this wasmtime; wasmtime checks its version and configuration.
        let module = payload.and_then(|p| unsafe { Module::deserialize(&sandbox.engine, p) }.ok());
        if module.is_none() {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            let _ = std::fs::remove_file(path);
            return None;
        }
        self.loaded.fetch_add(1, Ordering::Relaxed);
        module
    }
}

fn artifact_path(dir: &Path, hash: &Hash) -> PathBuf {
    let mut name = String::with_capacity(70);
    for b in hash {
        let _ = write!(name, "{b:02x}");
    }
    name.push_str(".cwasm");
    dir.join(ARTIFACT_DIR).join(name)
}

/// Writes the artifact of `module` to `path` atomically (temp file, rename).
fn store(path: &Path, hash: &Hash, module: &Module) -> Result<(), Box<dyn std::error::Error>> {
    let payload = module.serialize()?;
    let mut bytes = Vec::with_capacity(MAGIC.len() + 64 + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(hash);
    bytes.extend_from_slice(&Sha256::digest(&payload));
    bytes.extend_from_slice(&payload);
    let dir = path.parent().ok_or("artifact path without a directory")?;
    std::fs::create_dir_all(dir)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    Ok(())
}

/// `.wasm` bytes as they are; `.wat` text compiled to them.
///
/// # Errors
/// [`Error::Compile`] for text that does not parse, or bytes that are
/// neither.
pub(crate) fn to_binary(body: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, Error> {
    if body.starts_with(b"\0asm") {
        return Ok(body.into());
    }
    let text = std::str::from_utf8(body).map_err(|_| {
        Error::Compile(
            "the module is neither WebAssembly bytes (they start with \\0asm) nor WAT text (UTF-8)"
                .to_owned(),
        )
    })?;
    wat::parse_str(text)
        .map(Into::into)
        .map_err(|e| Error::Compile(format!("the module text does not parse: {e}")))
}

fn describe(ty: &ExternType) -> String {
    match ty {
        ExternType::Func(f) => format!("a function {f}"),
        ExternType::Global(_) => "a global".to_owned(),
        ExternType::Table(_) => "a table".to_owned(),
        ExternType::Memory(_) => "a memory".to_owned(),
        ExternType::Tag(_) => "a tag".to_owned(),
    }
}

fn all_i32(types: impl ExactSizeIterator<Item = ValType>, n: usize) -> bool {
    types.len() == n && types.into_iter().all(|t| matches!(t, ValType::I32))
}

/// Refuses any import that is not a function of the ABI with its exact
/// signature.
fn check_imports(module: &Module) -> Result<(), Error> {
    for import in module.imports() {
        let (from, name, ty) = (import.module(), import.name(), import.ty());
        let wanted = (from == abi::MODULE)
            .then(|| abi::find_import(name))
            .flatten();
        let Some(wanted) = wanted else {
            return Err(Error::Compile(format!(
                "the module imports {from}.{name} ({}), which is not part of the {} ABI \
                 (no WASI or other host modules; see host_api::abi)",
                describe(&ty),
                abi::MODULE
            )));
        };
        let ok = match &ty {
            ExternType::Func(f) => {
                all_i32(f.params(), wanted.params)
                    && all_i32(f.results(), usize::from(wanted.returns))
            }
            _ => false,
        };
        if !ok {
            let sig = format!(
                "(func{}{})",
                if wanted.params > 0 {
                    format!(" (param{})", " i32".repeat(wanted.params))
                } else {
                    String::new()
                },
                if wanted.returns { " (result i32)" } else { "" }
            );
            return Err(Error::Compile(format!(
                "the module imports {from}.{name} as {}, but the ABI's {name} is {sig}",
                describe(&ty)
            )));
        }
    }
    Ok(())
}

/// The export a script of `kind` must have.
pub(crate) fn entry_point(kind: ScriptKind) -> &'static str {
    match kind {
        ScriptKind::StoredProcedure => abi::PROCEDURE_EXPORT,
        ScriptKind::Trigger => abi::TRIGGER_EXPORT,
        ScriptKind::UserDefinedFunction => abi::UDF_EXPORT,
    }
}

/// Refuses a module without the memory export or the entry point of `kind`
/// with type `() -> i32`.
pub(crate) fn check_exports(module: &Module, kind: ScriptKind) -> Result<(), Error> {
    match module.get_export(abi::MEMORY_EXPORT) {
        Some(ExternType::Memory(_)) => {}
        Some(other) => {
            return Err(Error::Compile(format!(
                "the module exports {:?} as {}, not as its linear memory",
                abi::MEMORY_EXPORT,
                describe(&other)
            )));
        }
        None => {
            return Err(Error::Compile(format!(
                "the module does not export its memory as {:?}",
                abi::MEMORY_EXPORT
            )));
        }
    }
    let entry = entry_point(kind);
    match module.get_export(entry) {
        Some(ExternType::Func(f)) if f.params().len() == 0 && all_i32(f.results(), 1) => Ok(()),
        Some(other) => Err(Error::Compile(format!(
            "the module exports {entry:?} as {}, but the entry point must be (func (result i32))",
            describe(&other)
        ))),
        None => Err(Error::Compile(format!(
            "the module does not export {entry:?}, the entry point of a {}",
            match kind {
                ScriptKind::StoredProcedure => "stored procedure",
                ScriptKind::Trigger => "trigger",
                ScriptKind::UserDefinedFunction => "user-defined function",
            }
        ))),
    }
}
