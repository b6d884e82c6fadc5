//! Running many cases against both programs and reporting every mismatch.
//!
//! The driver owns the environment of a test run (where temporary
//! directories go, whether O_DIRECT works there, the PATH shim for shell
//! cases), runs cases on a few worker threads (process start-up dominates,
//! so this scales with cores), and turns mismatches into a report that lists
//! them all: one run should tell the implementer everything that is wrong.

use std::collections::BTreeMap;
use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Instant;

use super::case::{shell_quote, Case, Stdin};
use super::compare::{compare, signature, Finding};
use super::refusal;
use super::run::{populate, run, Place, Program};

/// Cases above this are reported: the default run has a time budget.
const SLOW_CASE_SECONDS: f64 = 2.0;

pub struct Driver {
    gnu: Program,
    ours: Program,
    place: Place,
    direct_supported: bool,
    /// Failing cases' starting files are saved here for the reproduction
    /// commands; wiped at the start of each run of this test.
    failures: PathBuf,
    /// The shim named in reproduction commands (outlives the run).
    printed_shim: PathBuf,
    jobs: usize,
    // Keeps the base directory alive for the whole run.
    _base: tempfile::TempDir,
}

struct Failure {
    key: usize,
    label: String,
    report: String,
    signature: String,
}

impl Driver {
    /// `test_name` separates the state of tests running at the same time.
    pub fn new(test_name: &str) -> Driver {
        let gnu_path = find_in_path("dd").expect("GNU dd must be on PATH: it is the oracle");
        check_gnu(&gnu_path);
        let ours_path = env::var_os("DDX_DIFF_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ddx")));

        // Failing cases' files and a shim for the printed commands persist
        // under target/tmp. Runs execute with a private shim, so another run
        // of this test wiping target/tmp at its start cannot break this one
        // (at worst it removes the files behind our printed commands).
        let state =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("differential-{test_name}"));
        let _ = fs::remove_dir_all(&state);
        let failures = state.join("failures");
        fs::create_dir_all(&failures).expect("create failures directory");
        let printed_shim = state.join("shim");
        make_shim(&printed_shim, &gnu_path, &ours_path);

        let (base, direct_supported) = pick_base();
        let shim = base.path().join("shim");
        make_shim(&shim, &gnu_path, &ours_path);
        let mut path_var = OsString::from(&shim);
        if let Some(rest) = env::var_os("PATH") {
            path_var.push(":");
            path_var.push(rest);
        }
        Driver {
            gnu: Program {
                name: "dd",
                path: gnu_path,
                leading_args: Vec::new(),
            },
            ours: Program {
                name: "ddx",
                path: ours_path,
                leading_args: env::var("DDX_DIFF_ARGS")
                    .map(|text| text.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default(),
            },
            place: Place {
                base: base.path().to_path_buf(),
                path_var,
            },
            printed_shim,
            direct_supported,
            failures,
            jobs: env_number("DDX_DIFF_JOBS").unwrap_or_else(default_jobs),
            _base: base,
        }
    }

    /// Put `args` before ddx's operands (a backend column of the matrix),
    /// in addition to any from DDX_DIFF_ARGS.
    pub fn with_ddx_args(mut self, args: &[&str]) -> Driver {
        self.ours
            .leading_args
            .extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Run `cases` (keyed by their index or table position) and panic with a
    /// full report if any differ.
    pub fn check_all(&self, what: &str, keys: Vec<usize>, make: impl Fn(usize) -> Case + Sync) {
        let started = Instant::now();
        let next = AtomicUsize::new(0);
        let failures = Mutex::new(Vec::new());
        let skipped = AtomicUsize::new(0);
        // Seconds and case count per label: where the time budget goes.
        let costs: Mutex<BTreeMap<String, (f64, usize)>> = Mutex::new(BTreeMap::new());
        thread::scope(|scope| {
            for _ in 0..self.jobs {
                scope.spawn(|| loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&key) = keys.get(at) else { break };
                    let case = make(key);
                    if case.uses_direct() && !self.direct_supported {
                        skipped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let case_started = Instant::now();
                    if let Some(failure) = self.check(key, &case) {
                        failures.lock().expect("failure list").push(failure);
                    }
                    let seconds = case_started.elapsed().as_secs_f64();
                    if seconds > SLOW_CASE_SECONDS {
                        println!("slow case #{key} [{}]: {seconds:.1} s", case.label);
                    }
                    let mut costs = costs.lock().expect("cost table");
                    let cost = costs.entry(case.label.clone()).or_default();
                    cost.0 += seconds;
                    cost.1 += 1;
                });
            }
        });
        let mut failures = failures.into_inner().expect("failure list");
        failures.sort_by_key(|f| f.key);
        let skipped = skipped.into_inner();
        let summary = format!(
            "{what}: {} cases in {:.1} s with {} jobs, {} skipped (O_DIRECT unsupported), {} mismatches",
            keys.len(),
            started.elapsed().as_secs_f64(),
            self.jobs,
            skipped,
            failures.len()
        );
        let costs = costs.into_inner().expect("cost table");
        if costs.len() <= 20 {
            // Only meaningful for generated cases, whose labels are flavours.
            print_costs(costs);
        }
        if skipped > 0 {
            crate::rigs::skip(&format!(
                "no temporary directory here supports O_DIRECT: {skipped} direct cases of {what} not run"
            ));
        }
        if failures.is_empty() {
            println!("{summary}");
            return;
        }
        for failure in &failures {
            println!("{}", failure.report);
        }
        print_categories(&failures);
        println!(
            "\nstarting files of failing cases are under {}",
            self.failures.display()
        );
        panic!("{summary}");
    }

    fn check(&self, key: usize, case: &Case) -> Option<Failure> {
        let gnu = run(case, &self.gnu, &self.place);
        let ours = run(case, &self.ours, &self.place);
        let mut findings = compare(&gnu, &ours, self.gnu.name, self.ours.name);
        if !findings.is_empty() && refusal::is_self_copy_refusal(case, &ours) {
            findings = refusal::check(case, &gnu, &ours, &self.gnu, &self.ours, &self.place);
        } else if !findings.is_empty() && refusal::is_directory_input_refusal(case, &ours) {
            findings =
                refusal::check_directory_input(case, &gnu, &ours, self.gnu.name, self.ours.name);
        }
        if gnu.status.starts_with("timed out") {
            // Even GNU did not finish: the case itself is broken (endless
            // input, a retry loop), and it costs the whole time limit.
            findings.push(Finding {
                aspect: "harness".to_string(),
                detail: "GNU dd timed out too: this case never ends; fix the generator".to_string(),
            });
        }
        if findings.is_empty() {
            return None;
        }
        let saved = self.failures.join(format!("{key}-{}", slug(&case.label)));
        let mut report = format!("\n--- MISMATCH #{key} [{}]\n", case.label);
        report += &format!("  dd : {}\n", self.reproduce(case, &saved, &self.gnu));
        report += &format!("  ddx: {}\n", self.reproduce(case, &saved, &self.ours));
        for finding in &findings {
            if finding.detail.contains('\n') {
                report += &format!("  {}:\n", finding.aspect);
                for line in finding.detail.lines() {
                    report += &format!("    {line}\n");
                }
            } else {
                report += &format!("  {}: {}\n", finding.aspect, finding.detail);
            }
        }
        Some(Failure {
            key,
            label: case.label.clone(),
            report,
            signature: signature(&findings, &gnu, &ours, self.gnu.name, self.ours.name),
        })
    }

    /// A one-line shell command that replays the case by hand: copy the saved
    /// starting files into a fresh directory and run the same command line.
    fn reproduce(&self, case: &Case, saved: &Path, program: &Program) -> String {
        let work = saved.join("work");
        if !work.exists() {
            fs::create_dir_all(&work).expect("create saved case directory");
            populate(&work, &case.entries);
        }
        let operands: Vec<String> = program
            .leading_args
            .iter()
            .chain(&case.operands)
            .map(|op| shell_quote(op))
            .collect();
        let operands = operands.join(" ");
        let command = match &case.shell {
            Some(script) => format!(
                "DD={} PATH={}:\"$PATH\" sh -c {} sh {operands}",
                program.name,
                shell_quote(&self.printed_shim.to_string_lossy()),
                shell_quote(script)
            ),
            None if program.name == "dd" => format!("dd {operands}"),
            None => format!(
                "{} {operands}",
                shell_quote(&program.path.to_string_lossy())
            ),
        };
        let (before, after) = match &case.stdin {
            Stdin::Null => (String::new(), " < /dev/null".to_string()),
            Stdin::File(name) => (String::new(), format!(" < {}", shell_quote(name))),
            Stdin::Pipe(bytes) | Stdin::Stream(bytes) => {
                let payload = saved.join("stdin");
                fs::write(&payload, bytes).expect("save stdin payload");
                (
                    format!("cat {} | ", shell_quote(&payload.to_string_lossy())),
                    String::new(),
                )
            }
            Stdin::Signalled {
                before,
                signal,
                after,
            } => {
                fs::write(saved.join("before"), before).expect("save stdin before signal");
                fs::write(saved.join("after"), after).expect("save stdin after signal");
                let feed = format!(
                    "cd \"$(dirname \"$0\")\"\ncat before; sleep 0.3\npkill -{} -n -x {}; sleep 0.3\ncat after\n",
                    signal.name(),
                    program.name
                );
                let script = saved.join("feed.sh");
                fs::write(&script, feed).expect("save stdin feeder");
                (
                    format!("sh {} | ", shell_quote(&script.to_string_lossy())),
                    String::new(),
                )
            }
            Stdin::Chunks(chunks) => {
                let mut parts = Vec::new();
                for (i, chunk) in chunks.iter().enumerate() {
                    let payload = saved.join(format!("chunk.{i}"));
                    fs::write(&payload, chunk).expect("save stdin chunk");
                    parts.push(format!("cat {}", shell_quote(&payload.to_string_lossy())));
                }
                (
                    format!("({}) | ", parts.join("; sleep 0.1; ")),
                    String::new(),
                )
            }
        };
        format!(
            "(cd \"$(mktemp -d)\" && cp -a {}/. . && {before}LC_ALL=C {command}{after}; echo \"exit $?\"; ls -l)",
            shell_quote(&work.to_string_lossy())
        )
    }
}

/// The most expensive labels, to keep the default run within its budget.
fn print_costs(costs: BTreeMap<String, (f64, usize)>) {
    let mut costs: Vec<_> = costs.into_iter().collect();
    costs.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
    let top: Vec<String> = costs
        .iter()
        .take(6)
        .map(|(label, (seconds, count))| format!("{label} {seconds:.1} s/{count}"))
        .collect();
    println!("time per label (summed over jobs): {}", top.join(", "));
}

/// One line per kind of mismatch, most frequent first: the list to work
/// through. Labels show which flavours or fixed cases hit it.
fn print_categories(failures: &[Failure]) {
    let mut buckets: BTreeMap<&str, Vec<&Failure>> = BTreeMap::new();
    for failure in failures {
        buckets.entry(&failure.signature).or_default().push(failure);
    }
    let mut buckets: Vec<_> = buckets.into_iter().collect();
    buckets.sort_by_key(|(_, members)| std::cmp::Reverse(members.len()));
    println!("\n==== mismatch categories: count [example keys] (labels) ====");
    for (signature, members) in &buckets {
        let examples: Vec<String> = members.iter().take(5).map(|f| f.key.to_string()).collect();
        let mut labels: Vec<&str> = members.iter().map(|f| f.label.as_str()).collect();
        labels.sort();
        labels.dedup();
        labels.truncate(4);
        println!(
            "{:>5} [{}] ({})\n      {signature}",
            members.len(),
            examples.join(","),
            labels.join("; ")
        );
    }
}

/// Case labels as directory names.
fn slug(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// A directory where `dd` and `ddx` name the two programs, for `sh -c`
/// cases: "$DD" then runs the program under its bare name, like a user would.
fn make_shim(dir: &Path, gnu: &Path, ours: &Path) {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).expect("create shim directory");
    std::os::unix::fs::symlink(gnu, dir.join("dd")).expect("shim dd");
    std::os::unix::fs::symlink(ours, dir.join("ddx")).expect("shim ddx");
}

pub fn find_in_path(name: &str) -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The comparison only means something against GNU dd.
fn check_gnu(path: &Path) {
    let output = Command::new(path)
        .arg("--version")
        .output()
        .expect("run dd --version");
    let version = String::from_utf8_lossy(&output.stdout);
    assert!(
        version.contains("GNU coreutils") || version.contains("(coreutils)"),
        "the dd on PATH ({}) is not GNU dd: {version}",
        path.display()
    );
}

/// A directory for the per-run directories, preferring one whose filesystem
/// supports O_DIRECT (tmpfs may not), judged by GNU dd itself.
fn pick_base() -> (tempfile::TempDir, bool) {
    let candidates = [
        env::temp_dir(),
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
    ];
    for parent in &candidates {
        let Ok(base) = tempfile::Builder::new()
            .prefix("ddx-differential")
            .tempdir_in(parent)
        else {
            continue;
        };
        let works = Command::new("dd")
            .args([
                "if=/dev/zero",
                "of=probe",
                "bs=4096",
                "count=1",
                "oflag=direct",
            ])
            .current_dir(base.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        let _ = fs::remove_file(base.path().join("probe"));
        if works {
            return (base, true);
        }
    }
    let base = tempfile::Builder::new()
        .prefix("ddx-differential")
        .tempdir()
        .expect("create temporary directory");
    (base, false)
}

/// Two jobs per core: each case mostly waits on process start-up and exit.
fn default_jobs() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get() * 2)
}

pub fn env_number(name: &str) -> Option<usize> {
    let text = env::var(name).ok()?;
    Some(
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text} is not a number")),
    )
}
