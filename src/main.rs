//! The `ddx` binary: standard descriptors and signals first (a SIGUSR1 sent
//! right after start must not kill us), then the library does the rest:
//! `ddx bench ...` goes to the bench, anything else to the copy's command
//! line.

/// Runs before Rust's runtime, which would otherwise fill a closed 0/1/2
/// with a read-write /dev/null and so hide a closed stderr (GNU dd exits 1
/// when its statistics cannot be written).
// SAFETY: the constructor runs before main, single-threaded; it only makes
// fcntl/open system calls through rustix, touching no Rust runtime state.
#[ctor::ctor(unsafe)]
fn guard_standard_descriptors() {
    ddx::sys::stdio::guard_standard_descriptors();
}

fn main() {
    let signals = ddx::sys::signals::install();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `ddx bench` and `ddx gc` have their own arguments; everything else
    // is a copy.
    let status = if args.get(1).is_some_and(|a| a == "bench") {
        let program = ddx::cli::program_name(args.first());
        ddx::bench::run(&program, &args[2..], signals)
    } else if args.get(1).is_some_and(|a| a == "gc") {
        let program = ddx::cli::program_name(args.first());
        ddx::cli::gc::run(&program, &args[2..])
    } else {
        ddx::cli::run(args, signals)
    };
    std::process::exit(status);
}
