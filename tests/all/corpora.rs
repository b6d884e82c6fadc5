//! Every input stored for the fuzz targets, replayed through the same
//! entry points the fuzzer calls (`ddx::fuzzing`), in an ordinary build
//! without a sanitizer: the corpora in `fuzz/corpus/<target>/` (inputs
//! that reached new code) and `fuzz/regressions/<target>/` (inputs that
//! once crashed, hung or allocated without bound, kept whatever a
//! minimisation of the corpus drops). An input that made it through its
//! target once must go on doing so; the fuzzing itself runs outside the
//! suite (bench/fuzz.sh).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ddx::fuzzing::{Target, TARGETS};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files directly in `dir`, sorted; none if it does not exist.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("reading a corpus directory").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// The names of the directories in `dir`.
fn directories_in(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .map(|e| e.expect("reading the fuzz directory"))
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_target_has_its_fuzzer_binary_and_a_seeded_corpus() {
    let fuzz = fuzz_dir();
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for target in TARGETS {
        let name = target.name;
        let source = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source)
            .unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(
            text.contains(&format!("ddx::fuzzing::{name}(data)")),
            "{} does not call ddx::fuzzing::{name}",
            source.display()
        );
        assert!(
            manifest.contains(&format!(
                "name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "fuzz/Cargo.toml has no [[bin]] for {name}"
        );
        assert!(
            !files_in(&fuzz.join("corpus").join(name)).is_empty(),
            "fuzz/corpus/{name}/ holds no input"
        );
    }
    // Every directory of inputs belongs to a target (a renamed target
    // would leave its inputs unreplayed).
    if cfg!(all(feature = "nbd", feature = "object")) {
        let known: BTreeSet<String> = TARGETS.iter().map(|t| t.name.to_owned()).collect();
        for kind in ["corpus", "regressions"] {
            for dir in directories_in(&fuzz.join(kind)) {
                assert!(known.contains(&dir), "fuzz/{kind}/{dir}/ names no target");
            }
        }
    }
}

#[test]
fn every_stored_fuzz_input_passes_its_target_again() {
    let fuzz = fuzz_dir();
    let failures = Mutex::new(Vec::new());
    let replayed = Mutex::new(0usize);
    // One thread per target: the decoders' targets start threads of their
    // own, the rest are quick.
    std::thread::scope(|scope| {
        for target in TARGETS {
            let (fuzz, failures, replayed) = (&fuzz, &failures, &replayed);
            scope.spawn(move || {
                let inputs = ["corpus", "regressions"]
                    .iter()
                    .flat_map(|kind| files_in(&fuzz.join(kind).join(target.name)));
                for input in inputs {
                    if let Err(why) = replay(target, &input) {
                        failures.lock().unwrap().push(why);
                    }
                    *replayed.lock().unwrap() += 1;
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} stored inputs fail their target:\n{}",
        failures.len(),
        replayed.into_inner().unwrap(),
        failures.join("\n")
    );
}

/// Run `target` on the file `input`; Err says which input failed and how
/// (the replay command included).
fn replay(target: &Target, input: &Path) -> Result<(), String> {
    let data = std::fs::read(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let run = target.run;
    std::panic::catch_unwind(|| run(&data)).map_err(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        format!(
            "{}: {why} (again: cd fuzz && cargo +nightly fuzz run {} {})",
            input.display(),
            target.name,
            input.strip_prefix(fuzz_dir()).unwrap_or(input).display()
        )
    })
}
