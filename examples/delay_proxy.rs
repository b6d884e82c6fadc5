//! `delay_proxy UPSTREAM_PORT DELAY_MS [PORT]`: the test rig's delaying
//! TCP proxy (tests/all/rigs/delay.rs) as a command, for the bench
//! scripts that compare a copy over a link with latency with the same
//! copy without. Listens on 127.0.0.1 (PORT, or a free port), prints the
//! port on standard output, and runs until it is killed.

#[allow(dead_code)]
#[path = "../tests/all/rigs/delay.rs"]
mod delay;

use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let number = |n: usize| -> u64 {
        args.get(n).and_then(|a| a.parse().ok()).unwrap_or_else(|| {
            eprintln!("usage: delay_proxy UPSTREAM_PORT DELAY_MS [PORT]");
            std::process::exit(2)
        })
    };
    let (upstream, delay) = (number(1) as u16, Duration::from_millis(number(2)));
    let port = if args.len() > 3 { number(3) as u16 } else { 0 };
    let proxy = delay::DelayProxy::on_port(port, upstream, delay).unwrap_or_else(|e| {
        eprintln!("delay_proxy: {e}");
        std::process::exit(1)
    });
    println!("{}", proxy.port());
    loop {
        std::thread::park();
    }
}
