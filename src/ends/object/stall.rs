//! A part whose answer never comes. object_store bounds no request of a
//! write in time (`config`: a part on a slow link may take minutes, so
//! the whole-request timeout is off), and a server that takes a part's
//! every byte and then says nothing (a SeaweedFS gateway whose volumes
//! filled did) would hold the upload for ever: TCP's keepalive and
//! `TCP_USER_TIMEOUT` see a peer that acknowledges everything.
//!
//! [`Watch`] gives up on a part instead when no part of the upload has
//! been stored for a while: a minute of silence (as the AWS CLI's read
//! timeout allows), plus what the bytes in flight need at an eighth of
//! the rate measured so far (at 64 KiB/s before any part is stored, or
//! where the rate is slower). A link of 512 kbit/s or more that still
//! stores parts never trips it; a silent server does, and the part fails
//! as one the server refused does, named with its number and offset (a
//! map keeps what was stored, for `--resume`).
//! Written by hand: object_store, reqwest and hyper time a request as a
//! whole or from its start, never from its last byte sent.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Silence allowed whatever the bytes in flight.
pub const SILENCE: Duration = Duration::from_secs(60);

/// The rate allowed for before any part is stored, in bytes a second
/// (512 kbit/s).
const SLOWEST: f64 = 64.0 * 1024.0;

/// The parts of one upload in flight, and when one was last stored.
#[derive(Clone)]
pub struct Watch {
    silence: Duration,
    state: Arc<Mutex<State>>,
}

struct State {
    /// When the first part was sent.
    began: Option<Instant>,
    /// Bytes of the parts stored so far.
    stored: u64,
    /// Bytes of the parts in flight.
    in_flight: u64,
    /// When a part was last stored, or the first of those in flight sent.
    last: Instant,
}

impl Watch {
    /// A watch that allows `silence` beyond what the bytes in flight need
    /// ([`SILENCE`], but for tests).
    pub fn new(silence: Duration) -> Watch {
        Watch {
            silence,
            state: Arc::new(Mutex::new(State {
                began: None,
                stored: 0,
                in_flight: 0,
                last: Instant::now(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `request`, the upload of a part of `len` bytes: its answer, or an
    /// error once nothing has been stored for too long.
    pub async fn guard<T>(
        &self,
        len: u64,
        request: impl Future<Output = object_store::Result<T>>,
    ) -> object_store::Result<T> {
        self.begin(len);
        let mut request = std::pin::pin!(request);
        let answer = loop {
            let deadline = self.deadline();
            match tokio::time::timeout_at(deadline, request.as_mut()).await {
                Ok(answer) => break answer,
                Err(_) => {
                    if let Some(silent) = self.silent_for() {
                        break Err(object_store::Error::Generic {
                            store: "S3",
                            source: format!(
                                "no answer from the server: no part was stored for {} s",
                                silent.as_secs()
                            )
                            .into(),
                        });
                    }
                }
            }
        };
        self.end(len, answer.is_ok());
        answer
    }

    fn begin(&self, len: u64) {
        let mut state = self.lock();
        let now = Instant::now();
        state.began.get_or_insert(now);
        if state.in_flight == 0 {
            state.last = now;
        }
        state.in_flight += len;
    }

    fn end(&self, len: u64, stored: bool) {
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(len);
        if stored {
            state.stored += len;
            state.last = Instant::now();
        }
    }

    /// When the parts in flight have waited too long, as things stand.
    fn deadline(&self) -> Instant {
        let state = self.lock();
        let rate = match state.began {
            Some(began) if state.stored > 0 => {
                let took = state.last.duration_since(began).as_secs_f64();
                (state.stored as f64 / took.max(1e-3) / 8.0).max(SLOWEST)
            }
            _ => SLOWEST,
        };
        state.last + self.silence + Duration::from_secs_f64(state.in_flight as f64 / rate)
    }

    /// How long nothing has been stored, if that is too long by now.
    fn silent_for(&self) -> Option<Duration> {
        let deadline = self.deadline();
        let now = Instant::now();
        (now >= deadline).then(|| now.duration_since(self.lock().last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_part_never_answered_fails_once_nothing_is_stored_for_long() {
        let watch = Watch::new(Duration::from_millis(100));
        let began = std::time::Instant::now();
        let answer =
            runtime().block_on(watch.guard(1, std::future::pending::<object_store::Result<()>>()));
        let waited = began.elapsed();
        let error = answer.expect_err("no answer came").to_string();
        assert!(error.contains("no answer from the server"), "{error}");
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    #[test]
    fn parts_stored_meanwhile_keep_a_slow_part_going() {
        // One part takes three times the silence allowed, while others
        // are stored every half of it: it is never given up on.
        let silence = Duration::from_millis(200);
        let watch = Watch::new(silence);
        let answer = runtime().block_on(async {
            let others = watch.clone();
            let quick = tokio::spawn(async move {
                for _ in 0..8 {
                    let part = others.guard(1, async {
                        tokio::time::sleep(silence / 2).await;
                        Ok(())
                    });
                    part.await.expect("stored");
                }
            });
            let slow = watch.guard(1, async {
                tokio::time::sleep(silence * 3).await;
                Ok(())
            });
            let answer = slow.await;
            quick.await.expect("the quick parts");
            answer
        });
        answer.expect("the slow part was waited for");
    }

    #[test]
    fn the_silence_allowed_grows_with_the_bytes_in_flight() {
        let watch = Watch::new(Duration::from_secs(1));
        runtime().block_on(async {
            let idle = watch.deadline();
            watch.begin(64 * 1024 * 10);
            let busy = watch.deadline();
            // Ten seconds at the slowest rate, before any part is stored.
            let more = busy.duration_since(idle).as_secs_f64();
            assert!((9.9..10.1).contains(&more), "{more}");
        });
    }
}
