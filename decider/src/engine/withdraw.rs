//! A host's withdrawal of one call (MCP `notifications/cancelled`, forwarded by its shim as
//! `ShimToBroker::Cancel`).
//!
//! The server runs each call inside [`scope`] with the receiving end of that call's signal;
//! the places where a call waits on something outside the driver — the consent dialog, a host
//! approval, `wait_for` — also wait on [`withdrawn`] and stop there. Nothing else is
//! interrupted: an act that has started sending finishes (nothing half-typed, no key left
//! held), and an act not yet sending checks [`is_withdrawn`] before it starts.
//!
//! Outside a scope (the engine's own tests, terminal commands) a call is never withdrawn.

use std::future::Future;

use nish_proto::errors::{DriverError, ErrorCode};
use tokio::sync::watch;

tokio::task_local! {
    static CALL: watch::Receiver<bool>;
}

/// A withdrawal signal for one call: the server keeps the sender, the call runs with the
/// receiver.
pub fn signal() -> (watch::Sender<bool>, watch::Receiver<bool>) {
    watch::channel(false)
}

/// Runs `call` as a call that `rx` may withdraw.
pub async fn scope<F: Future>(rx: watch::Receiver<bool>, call: F) -> F::Output {
    CALL.scope(rx, call).await
}

/// Resolves when the call being served is withdrawn; never when it is not in a scope, or when
/// its sender is gone without a withdrawal.
pub async fn withdrawn() {
    let rx = CALL.try_with(|rx| rx.clone());
    match rx {
        Ok(mut rx) => {
            if rx.wait_for(|w| *w).await.is_ok() {
                return;
            }
            std::future::pending::<()>().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}

/// True once the call being served was withdrawn.
pub fn is_withdrawn() -> bool {
    CALL.try_with(|rx| *rx.borrow()).unwrap_or(false)
}

/// The error a withdrawn call ends with. The client does not see it (the shim answers no
/// cancelled request); the audit records `call.withdrawn`.
pub fn error() -> DriverError {
    DriverError::new(
        ErrorCode::ConsentDenied,
        "the host withdrew this call; nothing more was done for it",
    )
}

/// Fails once the call being served was withdrawn: checked before anything is sent.
pub fn check() -> Result<(), DriverError> {
    if is_withdrawn() { Err(error()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_call_stops_waiting_when_withdrawn_and_only_then() {
        // Outside a scope: never withdrawn.
        assert!(!is_withdrawn());
        assert!(
            tokio::time::timeout(Duration::from_millis(20), withdrawn())
                .await
                .is_err()
        );
        let (tx, rx) = signal();
        let waited = scope(rx, async {
            assert!(!is_withdrawn());
            let t0 = std::time::Instant::now();
            withdrawn().await;
            assert!(is_withdrawn());
            t0.elapsed()
        });
        let withdraw = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send(true).unwrap();
        };
        let (waited, ()) = tokio::join!(waited, withdraw);
        assert!(waited >= Duration::from_millis(40), "{waited:?}");
        // A sender dropped without a withdrawal withdraws nothing.
        let (tx, rx) = signal();
        drop(tx);
        let r = scope(rx, async {
            tokio::time::timeout(Duration::from_millis(20), withdrawn()).await
        })
        .await;
        assert!(r.is_err());
    }
}
