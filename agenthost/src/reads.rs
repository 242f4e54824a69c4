//! The reader's calls: the window list, walks (with the held trees of kept walks), the event
//! watch and settle of an act, objects read again, captures.

use std::time::Duration;

use nish_decider::backend::Capture;
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{Node, Tree, WindowInfo};
use nish_proto::wire::reader::{
    BrokerToReader, ReaderToBroker, SettleBounds, SettleReport, SettleWait, WalkLimits,
};

use crate::desktop::{session_type, wayland_capture_unsupported};
use crate::failures::read_failed;
use crate::linux::{LinuxBackend, WATCH_TIMEOUT};
use crate::slot::CallKind;

pub(crate) async fn list_windows(b: &LinuxBackend) -> Result<Vec<WindowInfo>, DriverError> {
    let r = b.reader().await?;
    let id = r.next_id();
    match b
        .reader
        .ask(
            &r,
            id,
            BrokerToReader::ListWindows { id },
            b.read_timeout,
            CallKind::Read,
        )
        .await?
    {
        ReaderToBroker::Windows { windows, .. } => Ok(windows),
        ReaderToBroker::Failed { failure, .. } => Err(read_failed(&failure)),
        _ => Err(DriverError::new(
            ErrorCode::InternalError,
            "the reader answered with something else",
        )),
    }
}

pub(crate) async fn read_tree_kept(
    b: &LinuxBackend,
    window: &WindowInfo,
    limits: WalkLimits,
) -> Result<(Tree, bool), DriverError> {
    let r = b.reader().await?;
    // The window's app was matched to an approved one by the engine: the reader may link
    // to it.
    b.opener.allow_pid(window.pid);
    let wid = window.window_id;
    let mut have = limits
        .keep
        .and(b.kept_trees.lock().ok().and_then(|mut k| k.have(&r, wid)));
    loop {
        let id = r.next_id();
        let msg = BrokerToReader::ReadTree {
            id,
            window: window.clone(),
            limits,
            have,
        };
        match b
            .reader
            .ask(&r, id, msg, b.read_timeout, CallKind::Read)
            .await?
        {
            // A kept tree is taken as kept only when keeping was allowed.
            ReaderToBroker::Tree {
                tree,
                kept,
                toolkit,
                version,
                ..
            } => {
                if let Ok(mut k) = b.kept_trees.lock() {
                    k.hold(&r, wid, version.filter(|_| limits.keep.is_some()), &tree);
                }
                b.note_toolkit(&tree, toolkit);
                return Ok((tree, kept && limits.keep.is_some()));
            }
            // The tree held of that version stands (as kept); one the broker does not
            // hold (any other version) is asked for again, whole.
            ReaderToBroker::Unchanged { version, .. } if have.is_some() => {
                let held = b
                    .kept_trees
                    .lock()
                    .ok()
                    .filter(|_| have == Some(version))
                    .and_then(|mut k| k.tree(&r, wid, version));
                match held {
                    Some(tree) => return Ok((tree, true)),
                    None => have = None,
                }
            }
            ReaderToBroker::Failed { failure, .. } => return Err(read_failed(&failure)),
            _ => {
                return Err(DriverError::new(
                    ErrorCode::InternalError,
                    "the reader answered with something else",
                ));
            }
        }
    }
}

pub(crate) async fn watch_events(
    b: &LinuxBackend,
    window: &WindowInfo,
    element: &str,
) -> Option<u64> {
    let r = b.reader().await.ok()?;
    let id = r.next_id();
    let msg = BrokerToReader::Watch {
        id,
        window: window.clone(),
        element: element.to_string(),
    };
    match b
        .reader
        .ask(&r, id, msg, WATCH_TIMEOUT, CallKind::Read)
        .await
    {
        Ok(ReaderToBroker::Watching { watch, .. }) => Some(watch),
        Ok(ReaderToBroker::Failed { failure, .. }) => {
            tracing::debug!(code = failure.code.as_str(), "no event watch for the act");
            None
        }
        _ => None,
    }
}

pub(crate) async fn settle_events(
    b: &LinuxBackend,
    watch: u64,
    wait: SettleWait,
    bounds: SettleBounds,
) -> Option<SettleReport> {
    let r = b.reader().await.ok()?;
    let id = r.next_id();
    let msg = BrokerToReader::Settle {
        id,
        watch,
        wait,
        bounds,
    };
    let wait = Duration::from_millis(bounds.max_ms) + WATCH_TIMEOUT;
    match b.reader.ask(&r, id, msg, wait, CallKind::Read).await {
        Ok(ReaderToBroker::Settled { report, .. }) => Some(report),
        _ => None,
    }
}

pub(crate) async fn rekeep(b: &LinuxBackend, window: &WindowInfo, from: u64, to: u64) -> bool {
    let Ok(r) = b.reader().await else {
        return false;
    };
    let id = r.next_id();
    let msg = BrokerToReader::Rekeep {
        id,
        window_id: window.window_id,
        from,
        to,
    };
    matches!(
        b.reader
            .ask(&r, id, msg, b.read_timeout, CallKind::Read)
            .await,
        Ok(ReaderToBroker::Rekept { moved: true, .. })
    )
}

pub(crate) async fn read_objects(
    b: &LinuxBackend,
    window: &WindowInfo,
    handles: Vec<String>,
) -> Option<Vec<Option<Node>>> {
    let r = b.reader().await.ok()?;
    b.opener.allow_pid(window.pid);
    let id = r.next_id();
    let msg = BrokerToReader::ReadObjects {
        id,
        window: window.clone(),
        handles,
    };
    match b
        .reader
        .ask(&r, id, msg, b.read_timeout, CallKind::Read)
        .await
    {
        Ok(ReaderToBroker::Objects { nodes, .. }) => Some(nodes),
        Ok(ReaderToBroker::Failed { failure, .. }) => {
            tracing::debug!(code = failure.code.as_str(), "objects not read again");
            None
        }
        _ => None,
    }
}

pub(crate) async fn capture(
    b: &LinuxBackend,
    window: &WindowInfo,
    secure: Vec<String>,
) -> Result<Capture, DriverError> {
    if session_type().0 == "wayland" {
        return Err(wayland_capture_unsupported());
    }
    let r = b.reader().await?;
    b.opener.allow_pid(window.pid);
    let id = r.next_id();
    let msg = BrokerToReader::Capture {
        id,
        window: window.clone(),
        secure,
    };
    match b
        .reader
        .ask(&r, id, msg, b.read_timeout, CallKind::Read)
        .await?
    {
        ReaderToBroker::Png {
            width,
            height,
            redacted,
            data,
            ..
        } => {
            if data.len() < 8 || &data[1..4] != b"PNG" {
                return Err(DriverError::new(
                    ErrorCode::InternalError,
                    "the reader's capture is not a PNG",
                ));
            }
            Ok(Capture {
                width,
                height,
                redacted,
                png: data,
            })
        }
        ReaderToBroker::Failed { failure, .. } => Err(read_failed(&failure)),
        _ => Err(DriverError::new(
            ErrorCode::InternalError,
            "the reader answered with something else",
        )),
    }
}
