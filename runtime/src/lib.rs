//! The sandboxes that run procedures and triggers: JavaScript on boa and
//! WebAssembly on wasmtime, as thin adapters over the collection API that
//! `host-api` defines.
//!
//! This crate is the only one that will know boa or wasmtime exist. It is
//! empty until the JavaScript-procedures issue lands: the foundation keeps
//! the crate (and its place in the dependency graph) without pulling in
//! either engine, so that builds stay fast until they are needed.
