//! The reader's calls: the window list, walks (with the trees of the reader's kept walks held
//! by version), the event watch and settle of an act, objects read again, captures.

use std::time::Duration;

use nish_decider::backend::Capture;
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{Node, Tree, WindowInfo};
use nish_proto::wire::reader::{
    self, Freshness, ListWindows, ReadObjects, ReadTree, Rekeep, Settle, SettleBounds,
    SettleReport, SettleWait, TreeAnswer, TreeFreshness, WalkLimits, Watch,
};

use crate::desktop::{session_type, wayland_capture_unsupported};
use crate::failures::read_failed;
use crate::linux::{LinuxBackend, WATCH_TIMEOUT};
use crate::slot::CallKind;

/// The windows, bottom to top.
pub(crate) async fn list_windows(b: &LinuxBackend) -> Result<Vec<WindowInfo>, DriverError> {
    let r = b.reader().await?;
    b.reader
        .call(&r, ListWindows, b.read_timeout, CallKind::Read)
        .await?
        .map_err(|f| read_failed(&f))
}

/// A window's tree and how fresh it is. When the read may reuse the reader's kept walk, the
/// version of it the agent host holds is named, and the reader answers that it stands instead
/// of sending it again.
pub(crate) async fn read_tree_fresh(
    b: &LinuxBackend,
    window: &WindowInfo,
    limits: WalkLimits,
    freshness: Freshness,
) -> Result<(Tree, TreeFreshness), DriverError> {
    let r = b.reader().await?;
    // The window's app was matched to an approved one by the engine: the reader may link
    // to it.
    b.opener.allow_pid(window.pid);
    let wid = window.window_id;
    let may_reuse = matches!(freshness, Freshness::MayReuse { .. });
    let mut freshness = match freshness {
        Freshness::Walk => Freshness::Walk,
        Freshness::MayReuse { generation, .. } => Freshness::MayReuse {
            generation,
            have: b
                .held_trees
                .lock()
                .ok()
                .and_then(|mut k| k.held_version(&r, wid)),
        },
    };
    loop {
        let call = ReadTree {
            window: window.clone(),
            limits,
            freshness,
        };
        match b
            .reader
            .call(&r, call, b.read_timeout, CallKind::Read)
            .await?
            .map_err(|f| read_failed(&f))?
        {
            // A kept or reused tree is taken as one only when the read allowed reuse.
            TreeAnswer::Tree {
                tree,
                toolkit,
                freshness: fresh,
                ..
            } => {
                let fresh = if may_reuse {
                    fresh
                } else {
                    TreeFreshness::Walked
                };
                if let Ok(mut k) = b.held_trees.lock() {
                    k.hold(&r, wid, fresh.version(), &tree);
                }
                b.note_toolkit(&tree, toolkit);
                return Ok((tree, fresh));
            }
            // The tree held of that version stands (reused); one the agent host does not hold
            // (any other version, or none was named) is asked for again, whole.
            TreeAnswer::Unchanged { version, age_ms } => {
                let named = match freshness {
                    Freshness::MayReuse { have, .. } => have,
                    Freshness::Walk => None,
                };
                let held = b
                    .held_trees
                    .lock()
                    .ok()
                    .filter(|_| named == Some(version))
                    .and_then(|mut k| k.tree(&r, wid, version));
                match (held, freshness) {
                    (Some(tree), _) => {
                        return Ok((tree, TreeFreshness::Reused { version, age_ms }));
                    }
                    (
                        None,
                        Freshness::MayReuse {
                            generation,
                            have: Some(_),
                        },
                    ) => {
                        freshness = Freshness::MayReuse {
                            generation,
                            have: None,
                        };
                    }
                    // Named nothing, and told it stands: not an answer to this request.
                    (None, _) => {
                        return Err(DriverError::new(
                            ErrorCode::InternalError,
                            "the reader answered a walk with a version it was not asked about",
                        ));
                    }
                }
            }
        }
    }
}

/// Begins watching the events of `element`'s application before an act.
pub(crate) async fn watch_events(
    b: &LinuxBackend,
    window: &WindowInfo,
    element: &str,
) -> Option<u64> {
    let r = b.reader().await.ok()?;
    let call = Watch {
        window: window.clone(),
        element: element.to_string(),
    };
    match b.reader.call(&r, call, WATCH_TIMEOUT, CallKind::Read).await {
        Ok(Ok(watch)) => Some(watch),
        Ok(Err(failure)) => {
            tracing::debug!(code = failure.code.as_str(), "no event watch for the act");
            None
        }
        Err(_) => None,
    }
}

/// Waits for a watched act's application to settle.
pub(crate) async fn settle_events(
    b: &LinuxBackend,
    watch: u64,
    wait: SettleWait,
    bounds: SettleBounds,
) -> Option<SettleReport> {
    let r = b.reader().await.ok()?;
    let call = Settle {
        watch,
        wait,
        bounds,
    };
    let wait = Duration::from_millis(bounds.max_ms) + WATCH_TIMEOUT;
    b.reader
        .call(&r, call, wait, CallKind::Read)
        .await
        .ok()?
        .ok()
}

/// Lets the reader's kept walk that answered an act's re-check answer under the act's next
/// generation.
pub(crate) async fn rekeep(b: &LinuxBackend, window: &WindowInfo, from: u64, to: u64) -> bool {
    let Ok(r) = b.reader().await else {
        return false;
    };
    let call = Rekeep {
        window_id: window.window_id,
        from,
        to,
    };
    matches!(
        b.reader
            .call(&r, call, b.read_timeout, CallKind::Read)
            .await,
        Ok(Ok(true))
    )
}

/// The named objects of a window read again.
pub(crate) async fn read_objects(
    b: &LinuxBackend,
    window: &WindowInfo,
    handles: Vec<String>,
) -> Option<Vec<Option<Node>>> {
    let r = b.reader().await.ok()?;
    b.opener.allow_pid(window.pid);
    let call = ReadObjects {
        window: window.clone(),
        handles,
    };
    match b
        .reader
        .call(&r, call, b.read_timeout, CallKind::Read)
        .await
    {
        Ok(Ok(nodes)) => Some(nodes),
        Ok(Err(failure)) => {
            tracing::debug!(code = failure.code.as_str(), "objects not read again");
            None
        }
        Err(_) => None,
    }
}

/// A capture's screen-cast stream on a Wayland session, alive until dropped.
enum WindowCast {
    /// mutter's, of the window that has the focus.
    Mutter(crate::screencast::Cast),
    /// KWin's, of the window itself, marked live for the reader's one frame
    /// ([`crate::handover::Opener::cast_live`]).
    Kwin {
        // Declared first, dropped first: the node is no longer live before the stream
        // closes (PipeWire may give its number to another object).
        _live: crate::handover::CastLive,
        cast: crate::kwin_cast::KwinCast,
        /// The part of the window's accessible frame the image is.
        part: nish_proto::model::Rect,
    },
}

impl WindowCast {
    fn node(&self) -> u32 {
        match self {
            WindowCast::Mutter(c) => c.node,
            WindowCast::Kwin { cast, .. } => cast.node,
        }
    }
}

fn no_pipewire() -> DriverError {
    DriverError::new(
        ErrorCode::BackendUnavailable,
        "the window's screen cast did not start: PipeWire does not run in this session",
    )
}

/// On a Wayland session, a stream for one capture of `window`: on mutter of the window that
/// has the focus ([`crate::screencast`]), on KWin of the window itself
/// ([`crate::kwin_cast`]); elsewhere capture is not built.
async fn window_cast(b: &LinuxBackend, window: &WindowInfo) -> Result<WindowCast, DriverError> {
    let conn = crate::portal::session_conn(b.session_bus().as_deref())
        .await
        .ok_or_else(wayland_capture_unsupported)?;
    let mutter = match crate::monitor::kind(Some(&conn), &b.opener).await {
        Ok(crate::monitor::Kind::Mutter(mutter)) => mutter,
        Ok(crate::monitor::Kind::Kwin) => return kwin_window_cast(b, &conn, window).await,
        Err(_) => return Err(wayland_capture_unsupported()),
    };
    if !crate::screencast::pipewire_runs() {
        return Err(no_pipewire());
    }
    // The stream records the window that has the focus when it starts: the window asked for
    // must say it has it before (the reader checks again around the frame).
    let active = list_windows(b)
        .await?
        .iter()
        .any(|w| w.window_id == window.window_id && w.pid == window.pid && w.active);
    if !active {
        return Err(DriverError::new(
            ErrorCode::Unsupported,
            "on GNOME Wayland only the window that has the focus can be captured, and this one \
             does not say it has it; no capture was taken",
        ));
    }
    crate::screencast::Cast::focused_window(conn, &mutter, &b.opener)
        .await
        .map(WindowCast::Mutter)
}

/// On KWin: which of KWin's windows `window` is, from KWin itself ([`crate::kwin_scene`]: the
/// one window of its pid of its size, with its title, shown here), then KWin's stream of it.
async fn kwin_window_cast(
    b: &LinuxBackend,
    conn: &zbus::Connection,
    window: &WindowInfo,
) -> Result<WindowCast, DriverError> {
    let unavailable = |why: String| {
        DriverError::new(
            ErrorCode::BackendUnavailable,
            format!("{why}; no capture was taken"),
        )
    };
    if !crate::screencast::pipewire_runs() {
        return Err(no_pipewire());
    }
    let kwin = crate::kwin_scene::kwin_owner(conn, &b.opener)
        .await
        .ok_or_else(|| unavailable("KWin's connection on the session bus is not known".into()))?;
    let scene = tokio::time::timeout(
        crate::kwin_scene::SCENE_TIMEOUT,
        crate::kwin_scene::scene(conn, &kwin),
    )
    .await
    .map_err(|_| unavailable("KWin did not tell its windows in time".into()))?
    .map_err(unavailable)?;
    let w = crate::kwin_scene::window_of(&scene, window)?;
    let uuid = w.id.clone();
    let part = crate::kwin_scene::stream_part(w, window);
    if uuid.is_empty() {
        return Err(unavailable("KWin gave no id for the window".into()));
    }
    let opener = b.opener.clone();
    let started = tokio::time::timeout(
        crate::kwin_cast::START_TIMEOUT * 2,
        tokio::task::spawn_blocking(move || {
            let stream = opener.wayland_stream().map_err(|f| f.message)?;
            crate::kwin_cast::KwinCast::window(stream, &uuid)
        }),
    )
    .await
    .map_err(|_| unavailable("KWin's screen cast did not start in time".into()))?
    .map_err(|_| unavailable("KWin's screen cast did not start".into()))?;
    let cast = started.map_err(|why| unavailable(crate::agents::clean_message(&why)))?;
    let live = b.opener.window_cast_live(cast.node);
    Ok(WindowCast::Kwin {
        cast,
        _live: live,
        part,
    })
}

/// A window's image with its secure fields blacked out.
pub(crate) async fn capture(
    b: &LinuxBackend,
    window: &WindowInfo,
    secure: Vec<String>,
) -> Result<Capture, DriverError> {
    let cast = if session_type().0 == "wayland" {
        Some(window_cast(b, window).await?)
    } else {
        None
    };
    let r = b.reader().await?;
    b.opener.allow_pid(window.pid);
    let call = reader::Capture {
        window: window.clone(),
        secure,
        stream: cast.as_ref().map(WindowCast::node),
        stream_part: match &cast {
            Some(WindowCast::Kwin { part, .. }) => Some(*part),
            _ => None,
        },
    };
    let answer = b
        .reader
        .call(&r, call, b.read_timeout, CallKind::Read)
        .await;
    // The stream lives for this one frame.
    drop(cast);
    let png = answer?.map_err(|f| read_failed(&f))?;
    if png.data.len() < 8 || &png.data[1..4] != b"PNG" {
        return Err(DriverError::new(
            ErrorCode::InternalError,
            "the reader's capture is not a PNG",
        ));
    }
    Ok(Capture {
        width: png.width,
        height: png.height,
        redacted: png.redacted,
        png: png.data,
    })
}
