//! Handing buffers between the reader and the writer thread without a
//! sleep and a wake-up each time.
//!
//! A thread that blocks on an empty channel is parked, and the other one
//! must wake it; on a virtual machine that wake-up (an interrupt to a
//! halted virtual CPU) takes tens to hundreds of microseconds, and a copy
//! hands over a buffer per request. On a cached 1 GiB copy at 1 MiB per
//! request that cost took the whole gain of overlapping reads and writes
//! (ddx level with dd; with this, about 1.4x faster; see BENCHMARKS.md).
//! Waiting actively for a short while before parking catches the usual
//! case, where the other thread is about to finish its request. std's and
//! crossbeam's channels spin too, but only for a few microseconds, and
//! neither lets the caller choose longer.

use std::sync::mpsc::{Receiver, RecvError, TryRecvError};
use std::time::{Duration, Instant};

/// How long a wait spins before it parks: a few requests' worth at memory
/// speed, a negligible share of a request to a device.
const SPIN: Duration = Duration::from_micros(200);

/// How a thread waits for the other one.
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    spin: Duration,
}

impl Waiting {
    /// Spin first only with another CPU to run the thread being waited
    /// for: on one CPU, spinning would only delay it.
    pub fn for_this_machine() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Waiting {
            spin: if cpus >= 2 { SPIN } else { Duration::ZERO },
        }
    }

    /// `rx.recv()`, spinning for a while before parking.
    pub fn recv<T>(&self, rx: &Receiver<T>) -> Result<T, RecvError> {
        let start = Instant::now();
        let mut round = 0u32;
        loop {
            match rx.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {}
            }
            round = round.wrapping_add(1);
            if round % 64 == 0 {
                if start.elapsed() >= self.spin {
                    return rx.recv();
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn receives_what_was_sent_then_sees_the_sender_gone() {
        let (tx, rx) = channel();
        let waiting = Waiting::for_this_machine();
        let sender = std::thread::spawn(move || {
            for n in 0..1000 {
                tx.send(n).unwrap();
                if n % 100 == 0 {
                    // Long enough for the receiver to park.
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        });
        let got: Vec<i32> = std::iter::from_fn(|| waiting.recv(&rx).ok()).collect();
        sender.join().unwrap();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn without_spinning_it_is_a_plain_recv() {
        let (tx, rx) = channel::<u8>();
        drop(tx);
        let waiting = Waiting {
            spin: Duration::ZERO,
        };
        assert_eq!(waiting.recv(&rx), Err(RecvError));
    }
}
