//! The Rust guest modules (`sprocs/samples/rust`) keep to the `partita_v1`
//! ABI: each one imports nothing but `partita_v1` functions with exactly
//! the signatures of `host_api::abi::IMPORTS` (no WASI, no `env`), exports
//! its memory and its one entry point as `() -> i32`, ships a name section
//! (symbolized backtraces) without DWARF (size), and starts with 512 KiB
//! of memory (room for the guest SDK's allocator, so a call never grows
//! it, and no more: the host's dirty-page scan after each call walks all
//! of it).

use host_api::abi::{self, IMPORTS, MEMORY_EXPORT};
use wasmparser::{CompositeInnerType, ExternalKind, Parser, Payload, TypeRef, ValType};

use crate::support::{MODULES, guest_module};

/// What a module imports and exports, read with wasmparser.
#[derive(Default)]
struct Shape {
    /// `(params, results)` of every function type, by type index.
    types: Vec<(Vec<ValType>, Vec<ValType>)>,
    /// `(module, name, type index)` of every imported function.
    imports: Vec<(String, String, u32)>,
    /// Imports that are not functions (memories, tables, globals, tags).
    other_imports: Vec<String>,
    /// `(name, kind, index)` of every export.
    exports: Vec<(String, ExternalKind, u32)>,
    /// The type index of every function the module defines.
    functions: Vec<u32>,
    /// Custom section names.
    custom: Vec<String>,
    /// The initial size of each memory the module defines, in 64 KiB pages.
    memories: Vec<u64>,
}

fn shape(bytes: &[u8]) -> Shape {
    let mut shape = Shape::default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.expect("a valid module") {
            Payload::TypeSection(reader) => {
                for group in reader {
                    for ty in group.expect("type").into_types() {
                        match &ty.composite_type.inner {
                            CompositeInnerType::Func(f) => shape
                                .types
                                .push((f.params().to_vec(), f.results().to_vec())),
                            other => panic!("a non-function type {other:?}"),
                        }
                    }
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.expect("import");
                    match import.ty {
                        TypeRef::Func(t) => shape.imports.push((
                            import.module.to_owned(),
                            import.name.to_owned(),
                            t,
                        )),
                        other => shape
                            .other_imports
                            .push(format!("{}.{}: {other:?}", import.module, import.name)),
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for f in reader {
                    shape.functions.push(f.expect("function"));
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.expect("export");
                    shape
                        .exports
                        .push((export.name.to_owned(), export.kind, export.index));
                }
            }
            Payload::CustomSection(section) => shape.custom.push(section.name().to_owned()),
            Payload::MemorySection(reader) => {
                for memory in reader {
                    shape.memories.push(memory.expect("memory").initial);
                }
            }
            _ => {}
        }
    }
    shape
}

#[test]
fn guest_modules_import_only_partita_v1_and_export_their_entry_point() {
    for (name, entry) in MODULES {
        let shape = shape(&guest_module(name));
        assert!(
            shape.other_imports.is_empty(),
            "{name} imports {:?}",
            shape.other_imports
        );
        assert!(!shape.imports.is_empty(), "{name} imports nothing");
        for (module, function, ty) in &shape.imports {
            assert_eq!(module, abi::MODULE, "{name} imports {module}.{function}");
            let expected = IMPORTS
                .iter()
                .find(|i| i.name == function)
                .unwrap_or_else(|| panic!("{name} imports {function}, which partita_v1 lacks"));
            let (params, results) = &shape.types[*ty as usize];
            assert_eq!(
                (params.clone(), results.clone()),
                (
                    vec![ValType::I32; expected.params],
                    if expected.returns {
                        vec![ValType::I32]
                    } else {
                        vec![]
                    }
                ),
                "{name}: signature of {function}"
            );
        }

        let export = |wanted: &str| {
            shape
                .exports
                .iter()
                .find(|(n, _, _)| n == wanted)
                .map(|(_, kind, index)| (*kind, *index))
        };
        assert_eq!(
            export(MEMORY_EXPORT).map(|(k, _)| k),
            Some(ExternalKind::Memory),
            "{name} exports its memory"
        );
        let (kind, index) = export(entry).unwrap_or_else(|| panic!("{name} lacks {entry}"));
        assert_eq!(kind, ExternalKind::Func);
        let defined = index as usize - shape.imports.len();
        let (params, results) = &shape.types[shape.functions[defined] as usize];
        assert!(
            params.is_empty() && results == &[ValType::I32],
            "{name}: {entry} is () -> i32"
        );
        for other in [abi::PROCEDURE_EXPORT, abi::TRIGGER_EXPORT, abi::UDF_EXPORT] {
            assert!(
                other == *entry || export(other).is_none(),
                "{name} exports {other} too"
            );
        }

        assert!(
            shape.custom.iter().any(|s| s == "name"),
            "{name} keeps its name section"
        );
        assert!(
            !shape.custom.iter().any(|s| s.starts_with(".debug")),
            "{name} carries DWARF: {:?}",
            shape.custom
        );
        // Linked by partita-guest-build (sprocs/guest/build): the 192 KiB
        // stack, the static data and the SDK allocator's arena fit in the
        // initial memory.
        assert_eq!(shape.memories, [8], "{name}: 512 KiB of initial memory");
    }
}
