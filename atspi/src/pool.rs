//! A bounded pool of requests in flight.

use std::future::Future;

use tokio::task::JoinSet;

/// Runs `f` on every item with at most `width` futures in flight, and returns the outputs in
/// the items' order (`None` for a task that panicked).
pub async fn run<I, F, Fut, R>(items: Vec<I>, width: usize, f: F) -> Vec<Option<R>>
where
    F: Fn(I) -> Fut,
    Fut: Future<Output = R> + Send + 'static,
    R: Send + 'static,
{
    let n = items.len();
    let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
    let mut set = JoinSet::new();
    let mut it = items.into_iter().enumerate();
    for (i, x) in it.by_ref().take(width.max(1)) {
        let fut = f(x);
        set.spawn(async move { (i, fut.await) });
    }
    while let Some(done) = set.join_next().await {
        if let Ok((i, r)) = done {
            out[i] = Some(r);
        }
        if let Some((i, x)) = it.next() {
            let fut = f(x);
            set.spawn(async move { (i, fut.await) });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn keeps_order_and_bounds_in_flight() {
        let live = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let items: Vec<u64> = (0..50).collect();
        let out = run(items, 8, |x| {
            let live = live.clone();
            let peak = peak.clone();
            async move {
                let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50 - x)).await;
                live.fetch_sub(1, Ordering::SeqCst);
                x * 2
            }
        })
        .await;
        assert_eq!(out, (0..50).map(|x| Some(x * 2)).collect::<Vec<_>>());
        assert_eq!(peak.load(Ordering::SeqCst), 8);
    }
}
