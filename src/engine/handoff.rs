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

/// How long a wait spins at most before it parks: a few requests' worth
/// at memory speed.
const SPIN: Duration = Duration::from_micros(200);

/// How a thread waits for the other one. The spin adapts: a wait that had
/// to park halves the next one's spin, a wait that ended while spinning
/// restores it. Waiting for a slow device (milliseconds per request) thus
/// soon stops spinning, which matters where the device itself needs the
/// CPU (a FUSE or network block device served on the same machine).
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    spin: Duration,
    budget: Duration,
}

impl Waiting {
    /// Spin first only with another CPU to run the thread being waited
    /// for: on one CPU, spinning would only delay it.
    pub fn for_this_machine() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spin = if cpus >= 2 { SPIN } else { Duration::ZERO };
        Waiting { spin, budget: spin }
    }

    /// `rx.recv()`, spinning for a while before parking.
    pub fn recv<T>(&mut self, rx: &Receiver<T>) -> Result<T, RecvError> {
        // The clock is read only once there is something to wait for.
        let mut start = None;
        let mut round = 0u32;
        loop {
            match rx.try_recv() {
                Ok(value) => {
                    self.budget = self.spin;
                    return Ok(value);
                }
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {}
            }
            let start = *start.get_or_insert_with(Instant::now);
            round = round.wrapping_add(1);
            if round % 64 == 0 {
                if start.elapsed() >= self.budget {
                    self.budget /= 2;
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
        let mut waiting = Waiting::for_this_machine();
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
    fn parking_halves_the_next_spin_and_a_quick_answer_restores_it() {
        let (tx, rx) = channel();
        let mut waiting = Waiting {
            spin: SPIN,
            budget: SPIN,
        };
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            tx.send(1).unwrap();
            tx
        });
        assert_eq!(waiting.recv(&rx), Ok(1));
        assert_eq!(waiting.budget, SPIN / 2);
        let tx = late.join().unwrap();
        tx.send(2).unwrap();
        assert_eq!(waiting.recv(&rx), Ok(2));
        assert_eq!(waiting.budget, SPIN);
    }

    #[test]
    fn without_spinning_it_is_a_plain_recv() {
        let (tx, rx) = channel::<u8>();
        drop(tx);
        let mut waiting = Waiting {
            spin: Duration::ZERO,
            budget: Duration::ZERO,
        };
        assert_eq!(waiting.recv(&rx), Err(RecvError));
    }
}
