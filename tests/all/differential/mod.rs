//! Differential test: ddx must behave exactly like the system's GNU dd.
//!
//! Both programs run the same cases (generated from a seed, plus a table of
//! hand-written ones) in separate but identical directories, with
//! `LC_ALL=C`, and must agree on the output bytes, stderr (program name, time
//! and rate aside), exit status, and the final state of every file. Every
//! mismatch is printed with a one-line command reproducing it for each
//! program; the test fails once, at the end, with the count.
//!
//! Knobs (environment variables):
//! - `DDX_DIFF_SEED`  seed of the generated cases (decimal or 0x-hex)
//! - `DDX_DIFF_CASES` number of generated cases
//! - `DDX_DIFF_ONLY`  comma-separated case indices to run alone
//! - `DDX_DIFF_JOBS`  worker threads (default: two per core)
//! - `DDX_DIFF_BIN`   program to compare instead of the built ddx (pointing
//!   it at GNU dd itself checks that the harness is deterministic)
//! - `DDX_DIFF_ARGS`  whitespace-separated arguments put before the operands
//!   of ddx only, e.g. `--backend=threads`, to hold each backend to GNU
//!
//! Failing cases print commands that replay them by hand; their starting
//! files are kept under `target/tmp/differential-*/failures`.

mod case;
mod compare;
mod content;
mod driver;
mod fixed;
mod flavours;
mod generate;
#[cfg(feature = "nbd")]
mod nbd;
pub mod prng;
mod refusal;
mod run;

use driver::{env_number, Driver};

/// Fixed so that every run, on every machine, checks the same cases.
const DEFAULT_SEED: u64 = 0x0dd0_2024_5eed;

/// About a minute on two cores in release mode (see the crate's notes on
/// test timing); raise it locally for a deeper search.
const DEFAULT_CASES: usize = 10_000;

#[test]
fn generated_cases_match_gnu_dd() {
    let seed = seed();
    let keys: Vec<usize> = match std::env::var("DDX_DIFF_ONLY") {
        Ok(list) => list
            .split(',')
            .map(|key| {
                key.trim()
                    .parse()
                    .expect("DDX_DIFF_ONLY holds case indices")
            })
            .collect(),
        Err(_) => (0..env_number("DDX_DIFF_CASES").unwrap_or(DEFAULT_CASES)).collect(),
    };
    let driver = Driver::new("generated");
    driver.check_all(
        &format!("generated cases (DDX_DIFF_SEED={seed:#x})"),
        keys,
        |index| generate::case(seed, index as u64),
    );
}

/// Generated cases per backend column; the default column above runs the
/// full set, these hold every explicit backend to the same oracle.
const MATRIX_CASES: usize = 2_000;

/// One case table, every backend: adding a backend adds a column here.
const BACKENDS: &[(&str, &[&str])] = &[
    ("sync", &["--backend=sync"]),
    ("threads-qd1", &["--backend=threads", "--queue-depth=1"]),
    ("threads-qd8", &["--backend=threads", "--queue-depth=8"]),
    // The kernel's copy wherever it takes the files, also on filesystems
    // where auto prefers ddx's own (the temporary directory's, often).
    ("offload", &["--offload"]),
    // Small requests, so that the small files of the cases span many of
    // them, and no offload, which would otherwise take the copy first.
    (
        "uring-qd4",
        &[
            "--backend=uring",
            "--queue-depth=4",
            "--no-offload",
            "--request-size=4k",
        ],
    ),
];

#[test]
fn every_backend_matches_gnu_dd() {
    // A different stretch of the same seed than the default column's.
    let seed = seed() ^ 0xbacc_e4d5;
    let cases = env_number("DDX_DIFF_MATRIX_CASES").unwrap_or(MATRIX_CASES);
    for (name, args) in BACKENDS {
        if args.contains(&"--backend=uring") {
            match uring_copies_with(args) {
                Ok(()) => {}
                Err(Missing::Ring(why)) => {
                    crate::rigs::skip(&format!("the {name} column: {why}"));
                    continue;
                }
                Err(Missing::Use(why)) => panic!(
                    "the {name} column would not hold io_uring to GNU dd, since io_uring \
                     did not copy: {why}"
                ),
            }
        }
        let driver = Driver::new(&format!("backend-{name}")).with_ddx_args(args);
        driver.check_all(
            &format!("backend {name} (seed {seed:#x})"),
            (0..cases).collect(),
            |index| generate::case(seed, index as u64),
        );
        let fixed = fixed::cases();
        let driver = Driver::new(&format!("backend-{name}-fixed")).with_ddx_args(args);
        driver.check_all(
            &format!("backend {name}, fixed cases"),
            (0..fixed.len()).collect(),
            |index| fixed[index].clone(),
        );
    }
}

#[test]
fn fixed_cases_match_gnu_dd() {
    let table = fixed::cases();
    let driver = Driver::new("fixed");
    driver.check_all("fixed cases", (0..table.len()).collect(), |index| {
        table[index].clone()
    });
}

/// The io_uring column's options make ddx copy with its ring: what the
/// column checks first, alone.
#[test]
fn the_uring_column_copies_with_io_uring() {
    let (_, args) = BACKENDS
        .iter()
        .find(|(_, args)| args.contains(&"--backend=uring"))
        .expect("an io_uring column");
    match uring_copies_with(args) {
        Ok(()) => {}
        Err(Missing::Ring(why)) => crate::rigs::skip(&why),
        Err(Missing::Use(why)) => panic!("io_uring did not copy: {why}"),
    }
}

/// Why the io_uring column would not run io_uring.
enum Missing {
    /// No ring can be set up here (the kernel, a seccomp filter): a
    /// facility missing, as for any rig.
    Ring(String),
    /// A ring can be had, and ddx did not use it.
    Use(String),
}

/// Whether ddx with the io_uring column's options copies a plain file
/// with its ring, as `--verbose` says: where it cannot, the backend falls
/// back to threads (as documented), and the column would hold the threads
/// backend to GNU dd a second time under io_uring's name.
fn uring_copies_with(args: &[&str]) -> Result<(), Missing> {
    if std::env::var_os("DDX_DIFF_BIN").is_some() {
        // Another program is compared: it says nothing of io_uring.
        return Ok(());
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("in"), vec![0x5a; 256 << 10]).expect("input");
    let out = crate::rigs::cmd::ddx()
        .current_dir(dir.path())
        .args(args)
        .args(["--verbose", "if=in", "of=out", "bs=4k"])
        .output()
        .expect("run ddx");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr
        .lines()
        .find_map(|line| line.strip_prefix("ddx: io_uring: "))
        .unwrap_or("(no io_uring line)")
        .to_owned();
    if !out.status.success() {
        return Err(Missing::Use(format!("the copy failed: {stderr}")));
    }
    match said.strip_prefix("the ring copied ") {
        Some(bytes) if bytes == format!("{} bytes", 256 << 10) => Ok(()),
        _ if said.starts_with("no ring could be set up") => Err(Missing::Ring(said)),
        _ => Err(Missing::Use(said)),
    }
}

fn seed() -> u64 {
    let Ok(text) = std::env::var("DDX_DIFF_SEED") else {
        return DEFAULT_SEED;
    };
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|_| panic!("DDX_DIFF_SEED={text} is not a number"))
}
