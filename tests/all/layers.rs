//! ARCHITECTURE.md's layer table, held to the code: every top-level
//! module of `src/` is in the table, and every path into another
//! top-level module (`crate::NAME`, or `ddx::NAME` in the binary) names a
//! module on a lower layer. A module that reaches up, or sideways to its
//! own layer, fails here with the file and line, before the table stops
//! telling the truth.
//!
//! Paths are read from the code, not only its `use` lines: a module can
//! reach up through a path written inline (`crate::progress::Compressed`
//! in a function) as well. Comments, doc comments included, are left out:
//! an intra-doc link is not an import.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layer of each top-level module, as ARCHITECTURE.md's table under
/// "Which layer may import which" gives it (`main.rs` is `main`).
fn layer_table(architecture: &str) -> BTreeMap<String, u32> {
    let section = architecture
        .split("## Which layer may import which")
        .nth(1)
        .expect("ARCHITECTURE.md has the section on layers");
    let mut layers = BTreeMap::new();
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(layer) = cells.get(1).and_then(|c| c.parse::<u32>().ok()) else {
            continue;
        };
        let modules = cells.get(2).expect("a row names its modules");
        for module in modules.split(',') {
            let name = module.trim().trim_matches('`').trim_end_matches(".rs");
            assert!(!name.is_empty(), "an empty module in the row {line:?}");
            let before = layers.insert(name.to_owned(), layer);
            assert!(before.is_none(), "{name} is in the table twice");
        }
    }
    layers
}

/// The top-level modules of `src/` (a file `NAME.rs` or a folder `NAME/`),
/// but the library root, which only names them.
fn modules(src: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(src)
        .expect("src/")
        .map(|entry| entry.expect("an entry of src/").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            match (path.is_dir(), name.strip_suffix(".rs")) {
                (true, _) => Some(name),
                (false, Some(stem)) if stem != "lib" => Some(stem.to_owned()),
                _ => None,
            }
        })
        .collect();
    names.sort();
    names
}

/// Every `.rs` file of a module.
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let folder = src.join(module);
    if !folder.is_dir() {
        return vec![src.join(format!("{module}.rs"))];
    }
    let mut files = Vec::new();
    let mut pending = vec![folder];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a module folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The top-level modules `code` names through `root::` (`crate`, or the
/// library's name in the binary), with their line numbers; comments left
/// out.
fn named_modules(code: &str, root: &str) -> Vec<(usize, String)> {
    let prefix = format!("{root}::");
    let mut named = Vec::new();
    for (index, line) in code.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find(&prefix) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + prefix.len()..];
            // `$crate::` and `other_crate::` are not this crate's root.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                named.push((index + 1, name));
            }
        }
    }
    named
}

/// Every path from a module into one on its own layer or above, as
/// `file:line: module (layer) -> module (layer)`.
fn upward_paths(src: &Path, layers: &BTreeMap<String, u32>) -> Vec<String> {
    let mut found = Vec::new();
    for module in modules(src) {
        let Some(&layer) = layers.get(&module) else {
            continue;
        };
        let root = if module == "main" { "ddx" } else { "crate" };
        for file in files_of(src, &module) {
            let code = std::fs::read_to_string(&file).expect("a source file");
            for (line, target) in named_modules(&code, root) {
                if target == module {
                    continue;
                }
                // Not a module of ddx (`crate::ends` is; a macro the crate
                // exports at its root is not).
                let Some(&target_layer) = layers.get(&target) else {
                    if modules(src).contains(&target) {
                        found.push(format!(
                            "{}:{line}: {module} names {target}, which the table lacks",
                            file.display()
                        ));
                    }
                    continue;
                };
                if target_layer >= layer {
                    found.push(format!(
                        "{}:{line}: {module} (layer {layer}) -> {target} (layer {target_layer})",
                        file.display()
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn every_module_is_in_the_layer_table_and_imports_only_lower_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let layers = layer_table(&architecture);
    let src = root.join("src");
    let missing: Vec<String> = modules(&src)
        .into_iter()
        .filter(|module| !layers.contains_key(module))
        .collect();
    assert!(
        missing.is_empty(),
        "top-level modules missing from ARCHITECTURE.md's layer table: {missing:?}"
    );
    let gone: Vec<&String> = layers
        .keys()
        .filter(|module| !modules(&src).contains(module))
        .collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md's layer table names modules src/ does not have: {gone:?}"
    );
    let upward = upward_paths(&src, &layers);
    assert!(
        upward.is_empty(),
        "imports that do not point down ARCHITECTURE.md's layer table:\n{}",
        upward.join("\n")
    );
}

/// ARCHITECTURE.md's module table: one row per top-level module, each a
/// line a successor reads at a glance (its detail is in the module's own
/// `//!` header, which every module has).
#[test]
fn every_module_has_one_short_row_and_a_header_of_its_own() {
    const MOST_WORDS: usize = 30;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let section = architecture
        .split("## The modules")
        .nth(1)
        .expect("ARCHITECTURE.md has the section on modules");
    let mut rows = BTreeMap::new();
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(module) = cells.get(1).filter(|c| c.starts_with('`')) else {
            continue;
        };
        let name = module
            .trim_matches('`')
            .trim_end_matches('/')
            .trim_end_matches(".rs");
        let words = cells.get(2).map_or(0, |c| c.split_whitespace().count());
        assert!(
            words <= MOST_WORDS,
            "{name}'s row runs to {words} words (at most {MOST_WORDS}): the detail belongs in its header"
        );
        assert!(
            rows.insert(name.to_owned(), words).is_none(),
            "{name} has two rows"
        );
    }
    let src = root.join("src");
    for module in modules(&src) {
        assert!(
            rows.contains_key(&module),
            "{module} has no row in ARCHITECTURE.md's module table"
        );
        let file = if src.join(&module).is_dir() {
            src.join(&module).join("mod.rs")
        } else {
            src.join(format!("{module}.rs"))
        };
        let text = std::fs::read_to_string(&file).expect("a module's file");
        assert!(
            text.starts_with("//!"),
            "{} has no //! header",
            file.display()
        );
    }
}

/// The check itself, on a made-up tree: an import of a module on the
/// same layer and one from below are both reported, a comment and
/// another crate's path are not.
#[test]
fn the_layer_check_reports_imports_that_do_not_point_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::create_dir(src.join("low")).unwrap();
    std::fs::write(
        src.join("low/mod.rs"),
        "//! [`crate::high`] in a comment\nfn f() { crate::high::g() }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("high.rs"),
        "use crate::low::f;\nuse crate::peer;\nuse other_crate::low;\n",
    )
    .unwrap();
    std::fs::write(src.join("peer.rs"), "").unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod high;").unwrap();
    let table = "## Which layer may import which\n\n| layer | modules | imports |\n\
                 |---|---|---|\n| 2 | `high`, `peer` | `low` |\n| 1 | `low` | nothing |\n";
    let layers = layer_table(table);
    assert_eq!(layers.get("high"), Some(&2));
    assert_eq!(layers.get("low"), Some(&1));
    let upward = upward_paths(src, &layers);
    assert_eq!(upward.len(), 2, "{upward:?}");
    assert!(upward[0].ends_with("high.rs:2: high (layer 2) -> peer (layer 2)"));
    assert!(upward[1].ends_with("mod.rs:2: low (layer 1) -> high (layer 2)"));
}
