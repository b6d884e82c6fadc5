//! The `ddx` binary: signals first (a SIGUSR1 sent right after start must
//! not kill us), then the library does everything else.

fn main() {
    let signals = ddx::sys::signals::install();
    let status = ddx::cli::run(std::env::args_os().collect(), signals);
    std::process::exit(status);
}
