//! Where a window is on the screen, from KWin itself, for a takeover click on KDE
//! ([`crate::remote`]). A Wayland client cannot learn any window's place; KWin tells it
//! through its scripting API to any program on the session bus. The broker loads a script of
//! its own (`org.kde.kwin.Scripting`: `loadScript` under a random name, then `run` on that
//! one script's object, `unloadScript`), which reads every window's pid, caption, geometry,
//! stacking and desktop, the screen and the pointer's place, and hands them back with
//! `callDBus` to a method the broker serves, for this one answer, at a random path on the
//! takeover's connection. Only an answer from KWin's unique name (pinned when the takeover
//! began: its process is the compositor serving the Wayland socket) is taken. The script's
//! file lives in a new private directory made for it, and goes with it; the whole exchange
//! runs in a task of its own, so an act that stops leaves nothing loaded or written.
//!
//! [`place`] then judges a click: the target window must be the one window of its pid whose
//! size KWin gives as the app's accessible frame (a GTK 3 window with client-side decorations
//! counts its shadow, as KWin's `bufferGeometry` does; Qt and maximised windows have none),
//! counted over all its windows, minimised or elsewhere too, and with its title when it has
//! one; it must be shown here. The point must lie on the screen, within both the window's
//! `frameGeometry` (not in its shadow) and its `bufferGeometry` (not in a decoration the
//! compositor draws), and outside every other window above it that is not minimised, each
//! counted with both geometries and [`EDGE`] around them (GTK 3 takes clicks in a resize
//! border 10 px outside its frame, measured; KWin's decorations have resize borders too).
//! Anything else is refused, never guessed. An open menu is one of KWin's windows (GTK 3 and
//! GTK 4 measured), so it covers what lies under it. Not seen: KWin's own surfaces that are
//! not in `clientList()` (its on-screen displays), see docs/security.md.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{Rect, WindowInfo};
use serde::Deserialize;
use tokio::sync::oneshot;
use zbus::zvariant::ObjectPath;

/// KWin's scripting object and interface.
const SCRIPTING_PATH: &str = "/Scripting";
const SCRIPTING: &str = "org.kde.kwin.Scripting";
/// A loaded script's own interface.
const SCRIPT: &str = "org.kde.kwin.Script";
/// The interface of the broker's answer method.
const ANSWER_IFACE: &str = "org.nishdriver.KwinScene";
/// Longest wait for KWin's answer (about 20 ms measured).
pub const SCENE_TIMEOUT: Duration = Duration::from_secs(2);
/// How far around another window's geometry a click counts as on that window: resize
/// borders take clicks outside a window's frame.
pub const EDGE: i32 = 10;

/// One window as KWin tells it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct SceneWindow {
    pub pid: u32,
    /// The window's title: app text, only compared, never logged.
    pub caption: String,
    /// `frameGeometry`: the window without its shadow.
    pub frame: Rect,
    /// `bufferGeometry`: the window's surface, its shadow included.
    pub buffer: Rect,
    /// KWin's stacking order, higher on top.
    pub stacking: i64,
    /// Minimised.
    pub minimized: bool,
    /// On the current desktop (or on all), as KWin's `desktop` says.
    pub here: bool,
    /// KWin's id for the window (`internalId`), which its screen cast takes
    /// ([`crate::kwin_cast`]).
    #[serde(default)]
    pub id: String,
}

/// What KWin said: its windows, the screen, and the pointer's place.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Scene {
    /// The script's own word, to tell its answer from another script's.
    #[serde(default)]
    pub nonce: String,
    pub windows: Vec<SceneWindow>,
    pub screen: Rect,
    pub cursor: (i32, i32),
    /// The broker's own pid, which KWin gives the surfaces of the connections the broker
    /// opened (the indicator's): set here, never read from the answer.
    #[serde(skip)]
    pub own_pid: u32,
}

/// The script: one answer by `callDBus` to `dest` at `path`, carrying `nonce` (a script of
/// another program's that KWin runs in its place cannot say it). The geometry is KWin's
/// (whole pixels on KWin 5.27); a window without a pid says 0.
fn script(dest: &str, path: &str, nonce: &str) -> String {
    format!(
        r#"var r = function (g) {{ return {{x: Math.round(g.x), y: Math.round(g.y), w: Math.round(g.width), h: Math.round(g.height)}}; }};
var all = workspace.clientList();
var out = [];
for (var i = 0; i < all.length; i++) {{
    var c = all[i];
    out.push({{pid: c.pid > 0 ? c.pid : 0, caption: String(c.caption), frame: r(c.frameGeometry),
        buffer: r(c.bufferGeometry), stacking: c.stackingOrder, minimized: !!c.minimized,
        here: !!(c.onAllDesktops || c.desktop == workspace.currentDesktop), id: String(c.internalId)}});
}}
var p = workspace.cursorPos;
callDBus({dest}, {path}, "{ANSWER_IFACE}", "Scene",
    JSON.stringify({{nonce: {nonce}, windows: out, screen: r(workspace.virtualScreenGeometry), cursor: [Math.round(p.x), Math.round(p.y)]}}));
"#,
        dest = serde_json::to_string(dest).unwrap_or_default(),
        path = serde_json::to_string(path).unwrap_or_default(),
        nonce = serde_json::to_string(nonce).unwrap_or_default(),
    )
}

/// The broker's answer method for one script.
struct Answer {
    /// KWin's unique name: the only sender taken.
    kwin: String,
    tx: Mutex<Option<oneshot::Sender<String>>>,
    /// A call from another connection was logged (once: a flood of them logs one line).
    warned: std::sync::atomic::AtomicBool,
}

#[zbus::interface(name = "org.nishdriver.KwinScene")]
impl Answer {
    async fn scene(&self, #[zbus(header)] header: zbus::message::Header<'_>, answer: String) {
        if header.sender().map(|s| s.as_str()) != Some(self.kwin.as_str()) {
            if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(
                    "an answer about KWin's windows from another connection was ignored"
                );
            }
            return;
        }
        if let Some(tx) = self.tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(answer);
        }
    }
}

/// 128 random bits, as hex: a script's name and its answer's path, which no other program
/// can take or call before the broker does.
fn random_hex() -> Result<String, String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("no random name: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Asks KWin (at unique name `kwin`) for its windows, the screen and the pointer. The
/// exchange runs in a task of its own, which hands the answer back as soon as it comes and
/// then cleans up: dropping this future (the act stopped) does not cut it short, so the
/// script is unloaded, the answer's object removed and the file and its directory deleted
/// whatever the caller does.
pub async fn scene(conn: &zbus::Connection, kwin: &str) -> Result<Scene, String> {
    let (conn, kwin) = (conn.clone(), kwin.to_string());
    let (out, answer) = oneshot::channel();
    tokio::spawn(async move { exchange(&conn, &kwin, out).await });
    answer
        .await
        .map_err(|_| "the question to KWin ended early".to_string())?
}

async fn exchange(
    conn: &zbus::Connection,
    kwin: &str,
    out: oneshot::Sender<Result<Scene, String>>,
) {
    let (id, nonce) = match (random_hex(), random_hex()) {
        (Ok(id), Ok(nonce)) => (id, nonce),
        (Err(e), _) | (_, Err(e)) => {
            let _ = out.send(Err(e));
            return;
        }
    };
    let name = format!("nish_driver_{id}");
    let path = format!("/org/nishdriver/KwinScene/s{id}");
    let Some(me) = conn.unique_name().map(|n| n.to_string()) else {
        let _ = out.send(Err("no name on the session bus".into()));
        return;
    };
    let (tx, rx) = oneshot::channel();
    let answer = Answer {
        kwin: kwin.to_string(),
        tx: Mutex::new(Some(tx)),
        warned: std::sync::atomic::AtomicBool::new(false),
    };
    let object = match ObjectPath::try_from(path.as_str()) {
        Ok(o) => o,
        Err(e) => {
            let _ = out.send(Err(e.to_string()));
            return;
        }
    };
    if let Err(e) = conn.object_server().at(&object, answer).await {
        let _ = out.send(Err(e.to_string()));
        return;
    }
    match private_dir(&id) {
        Ok(dir) => {
            let file = dir.join("scene.js");
            let text = script(&me, &path, &nonce);
            ask(conn, kwin, &file, &name, &text, rx, &nonce, out).await;
            let _ = std::fs::remove_file(&file);
            let _ = std::fs::remove_dir(&dir);
        }
        Err(e) => {
            let _ = out.send(Err(e));
        }
    }
    let _ = conn.object_server().remove::<Answer, _>(&object).await;
}

/// A new directory of the broker's own, private (0700; made here, so no one else made or
/// holds it), in `XDG_RUNTIME_DIR`, else `/tmp`: where KWin reads the script from.
fn private_dir(id: &str) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || std::path::PathBuf::from("/tmp"),
            std::path::PathBuf::from,
        );
    // The parent must be this user's and no one else's to write, or root's with the sticky
    // bit (`/tmp`): else another user could rename the new directory and put theirs there.
    let meta = std::fs::metadata(&base)
        .map_err(|e| format!("the runtime directory could not be read: {e}"))?;
    let (uid, mode) = (meta.uid(), meta.mode());
    let mine = uid == nix::unistd::getuid().as_raw() && mode & 0o022 == 0;
    let sticky_root = uid == 0 && mode & 0o1000 != 0;
    if !(meta.is_dir() && (mine || sticky_root)) {
        return Err("the runtime directory is not this user's own".into());
    }
    let dir = base.join(format!("nish-driver-kwin-{id}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("the script's directory could not be made: {e}"))?;
    Ok(dir)
}

/// Writes the script, loads and runs it, hands KWin's answer to `out` as soon as it comes
/// (checked to carry `nonce`), then unloads the script, whatever happened.
#[allow(clippy::too_many_arguments)]
async fn ask(
    conn: &zbus::Connection,
    kwin: &str,
    file: &Path,
    name: &str,
    text: &str,
    rx: oneshot::Receiver<String>,
    nonce: &str,
    out: oneshot::Sender<Result<Scene, String>>,
) {
    let written = (|| {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(file)?;
        f.write_all(text.as_bytes())
    })();
    if let Err(e) = written {
        let _ = out.send(Err(format!("the script could not be written: {e}")));
        return;
    }
    let failed = |method: &str, e: zbus::Error| {
        format!(
            "KWin's {method}: {}",
            crate::agents::clean_message(&e.to_string())
        )
    };
    let late = |method: &str| format!("KWin did not answer {method} in time");
    let got = async {
        let loaded = tokio::time::timeout(
            SCENE_TIMEOUT,
            conn.call_method(
                Some(kwin),
                SCRIPTING_PATH,
                Some(SCRIPTING),
                "loadScript",
                &(file.to_string_lossy().as_ref(), name),
            ),
        )
        .await
        .map_err(|_| late("loadScript"))?
        .map_err(|e| failed("loadScript", e))?;
        let id: i32 = loaded
            .body()
            .deserialize()
            .map_err(|_| "KWin's loadScript answer is not understood".to_string())?;
        // KWin answers -1 for a name loaded already: not this script.
        if id < 0 {
            return Err("KWin did not load the script".to_string());
        }
        // `run` on the script's own object (KWin 5.27 serves it at `/<id>`), never
        // `Scripting.start`, which runs every script loaded and not yet running, other
        // programs' too. KWin may give an id another program's script still holds: then
        // that one runs, and its answer lacks the nonce.
        tokio::time::timeout(
            SCENE_TIMEOUT,
            conn.call_method(
                Some(kwin),
                format!("/{id}").as_str(),
                Some(SCRIPT),
                "run",
                &(),
            ),
        )
        .await
        .map_err(|_| late("run"))?
        .map_err(|e| failed("run", e))?;
        let text = match tokio::time::timeout(SCENE_TIMEOUT, rx).await {
            Ok(Ok(text)) => text,
            _ => return Err("KWin did not tell its windows in time".to_string()),
        };
        let mut scene = serde_json::from_str::<Scene>(&text)
            .map_err(|_| "KWin's answer is not understood".to_string())?;
        scene.own_pid = std::process::id();
        if scene.nonce != nonce {
            return Err("the answer did not come from the driver's script".to_string());
        }
        Ok(scene)
    }
    .await;
    let _ = out.send(got);
    // Unloaded by name whatever happened: a load that timed out may still have loaded it.
    let _ = tokio::time::timeout(
        SCENE_TIMEOUT,
        conn.call_method(
            Some(kwin),
            SCRIPTING_PATH,
            Some(SCRIPTING),
            "unloadScript",
            &(name,),
        ),
    )
    .await;
}

/// KWin's unique name on the session bus, when its process is the compositor serving the
/// Wayland socket (the pinned listener), or that listener's child (KWin started through its
/// wrapper, which listens and runs KWin), and its executable KWin's: the only connection a
/// window's place is taken from ([`crate::kwin_scene`]).
pub(crate) async fn kwin_owner(
    conn: &zbus::Connection,
    opener: &std::sync::Arc<crate::handover::Opener>,
) -> Option<String> {
    let owner = crate::portal::name_owner(conn, crate::monitor::KWIN)
        .await
        .ok()?;
    let pid = crate::portal::connection_pid(conn, &owner).await?;
    let opener = opener.clone();
    let (listener, listener_exe) = tokio::task::spawn_blocking(move || opener.wayland_compositor())
        .await
        .ok()??;
    let exe = crate::desktop::proc_identity(pid)?.exe;
    if crate::compositor::Compositor::of_exe(&exe) != Some(crate::compositor::Compositor::Kwin) {
        return None;
    }
    // KWin's wrapper listens on the socket and runs KWin: only then is the listener's child
    // the compositor.
    let wrapper = crate::compositor::is_kwin_wrapper(&listener_exe);
    (pid == listener || (wrapper && parent_pid(pid) == Some(listener))).then_some(owner)
}

/// The parent of process `pid`, from `/proc`.
pub fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the parenthesized command name: the state, then the parent's pid.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn contains(r: &Rect, x: i32, y: i32) -> bool {
    x >= r.x && y >= r.y && x < r.x + r.w && y < r.y + r.h
}

/// `r` grown by `by` on every side.
fn grown(r: &Rect, by: i32) -> Rect {
    Rect {
        x: r.x - by,
        y: r.y - by,
        w: r.w + 2 * by,
        h: r.h + 2 * by,
    }
}

/// Which of KWin's windows `target` is (its accessible frame matched by the module's rules),
/// and whether that frame is KWin's `bufferGeometry` (else its `frameGeometry`): the one
/// window of its pid of that size, with its title when it has one, shown here. Errors say
/// why not, in the contract's codes.
pub fn window_of<'a>(
    scene: &'a Scene,
    target: &WindowInfo,
) -> Result<&'a SceneWindow, DriverError> {
    let size = (target.frame.w, target.frame.h);
    let not_found = |why: &str| {
        DriverError::new(ErrorCode::WindowTargetNotFound, why.to_string()).with_effect("refused")
    };
    // Counted over all the app's windows of that size, minimised or elsewhere too: one that
    // is hidden must not stand in for another that is shown.
    let same: Vec<&SceneWindow> = scene
        .windows
        .iter()
        .filter(|w| {
            w.pid == target.pid
                && ((w.buffer.w, w.buffer.h) == size || (w.frame.w, w.frame.h) == size)
        })
        .collect();
    let w = match same.as_slice() {
        [w] => *w,
        [] => {
            return Err(not_found(
                "KWin shows no window of this app of the window's size (resized since the \
                 read, or not KWin's)",
            ));
        }
        _ => {
            return Err(DriverError::new(
                ErrorCode::AmbiguousWindowTarget,
                "KWin shows more than one window of this app with the window's size: the \
                 window is not known",
            )
            .with_effect("refused"));
        }
    };
    if !target.title.is_empty() && w.caption != target.title {
        return Err(not_found(
            "the app's window of that size has another title as KWin shows it",
        ));
    }
    if w.minimized || !w.here {
        return Err(not_found("the window is minimised or on another desktop"));
    }
    Ok(w)
}

/// Whether `o` is a side of the driver's own takeover frame (the indicator's layer surfaces):
/// one of the broker's windows (KWin gives the indicator's the broker's pid, which opened its
/// connection) with no title, exactly the frame's width, flush with an edge of the screen and
/// spanning it. Any other window of the broker's (a compromised agent's, on a connection the
/// broker opened) keeps a window's margin.
fn frame_side(scene: &Scene, o: &SceneWindow) -> bool {
    let t = i32::from(nish_proto::wire::indicator::TAKEOVER_FRAME_WIDTH);
    let (s, f) = (&scene.screen, &o.frame);
    let across = f.h == t && f.w == s.w && f.x == s.x && (f.y == s.y || f.y == s.y + s.h - t);
    let down = f.w == t && f.h == s.h && f.y == s.y && (f.x == s.x || f.x == s.x + s.w - t);
    scene.own_pid != 0
        && o.pid == scene.own_pid
        && o.caption.is_empty()
        && o.buffer == o.frame
        && (across || down)
}

/// The part of `target`'s accessible frame that KWin's screen cast of `w` (its match,
/// [`window_of`]) shows, in the window's own coordinates: KWin streams a window's
/// `frameGeometry` (measured: GTK 3's 1415x732 frame of its 1467x784 surface with the shadow;
/// a maximised GTK 4 window's whole surface), and the accessible frame is its
/// `bufferGeometry` or its `frameGeometry`, whichever has its size.
pub fn stream_part(w: &SceneWindow, target: &WindowInfo) -> Rect {
    let size = (target.frame.w, target.frame.h);
    let origin = if (w.buffer.w, w.buffer.h) == size {
        (w.buffer.x, w.buffer.y)
    } else {
        (w.frame.x, w.frame.y)
    };
    Rect {
        x: w.frame.x - origin.0,
        y: w.frame.y - origin.1,
        w: w.frame.w,
        h: w.frame.h,
    }
}

/// Where on the screen the point `x`, `y` of `target` (in the window's own coordinates, as
/// its accessible frame gives them) is, when a click there reaches that window: see the
/// module's rules. Errors say why not, in the contract's codes, with nothing sent.
pub fn place(
    scene: &Scene,
    target: &WindowInfo,
    x: i32,
    y: i32,
) -> Result<(i32, i32), DriverError> {
    let w = window_of(scene, target).map_err(|mut e| {
        e.message.push_str("; nothing was sent");
        e
    })?;
    let size = (target.frame.w, target.frame.h);
    let origin = if (w.buffer.w, w.buffer.h) == size {
        (w.buffer.x, w.buffer.y)
    } else {
        (w.frame.x, w.frame.y)
    };
    let (px, py) = (origin.0 + x, origin.1 + y);
    let occluded = |why: &str| {
        DriverError::new(
            ErrorCode::Occluded,
            format!("{why}; nothing was sent (read again, or bring the window to the front)"),
        )
        .with_effect("refused")
    };
    if !contains(&w.frame, px, py) || !contains(&w.buffer, px, py) {
        return Err(occluded(
            "the point lies outside the window as KWin shows it",
        ));
    }
    if !contains(&scene.screen, px, py) {
        return Err(occluded("the point lies off the screen"));
    }
    // The driver's own takeover frame takes no input and has no resize border: it covers its
    // own pixels only.
    let edge = |o: &SceneWindow| if frame_side(scene, o) { 0 } else { EDGE };
    // Every other window above that is not minimised, on whatever desktop KWin says (a
    // window on several desktops says one of them): a refusal is the safe side.
    let covered = scene.windows.iter().any(|o| {
        !std::ptr::eq(o, w)
            && !o.minimized
            && o.stacking > w.stacking
            && (contains(&grown(&o.frame, edge(o)), px, py)
                || contains(&grown(&o.buffer, edge(o)), px, py))
    });
    if covered {
        return Err(occluded("another window lies over the point"));
    }
    Ok((px, py))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(x: i32, y: i32, w: i32, h: i32) -> Rect {
        Rect { x, y, w, h }
    }

    fn win(pid: u32, caption: &str, frame: Rect, buffer: Rect, stacking: i64) -> SceneWindow {
        SceneWindow {
            pid,
            caption: caption.into(),
            frame,
            buffer,
            stacking,
            minimized: false,
            here: true,
            id: String::new(),
        }
    }

    fn target(pid: u32, title: &str, w: i32, h: i32) -> WindowInfo {
        WindowInfo {
            window_id: 1 << 40,
            pid,
            app: String::new(),
            title: title.into(),
            frame: rect(0, 0, w, h),
            active: false,
            visible: true,
            stacking: 0,
        }
    }

    /// The test desktop as measured: a maximised GTK 4 form, GTK 3 with its shadow, a Qt
    /// window above both.
    fn measured() -> Scene {
        let full = rect(0, 0, 1280, 800);
        Scene {
            nonce: String::new(),
            windows: vec![
                win(10, "form", full, full, 0),
                win(
                    20,
                    "gtk3-widget-factory",
                    rect(-67, 34, 1415, 732),
                    rect(-93, 11, 1467, 784),
                    1,
                ),
                win(
                    30,
                    "nish Qt form",
                    rect(430, 290, 420, 220),
                    rect(430, 290, 420, 220),
                    2,
                ),
            ],
            screen: full,
            cursor: (0, 0),
            own_pid: 0,
        }
    }

    fn code(r: Result<(i32, i32), DriverError>) -> ErrorCode {
        let e = r.unwrap_err();
        assert_eq!(e.effect.as_deref(), Some("refused"), "{e:?}");
        e.code
    }

    #[test]
    fn a_gtk3_window_counts_from_its_shadow_and_qt_from_its_frame() {
        let s = measured();
        // GTK 3's panel at 26,23 in its own coordinates is KWin's frame origin (its AT-SPI
        // title is empty: no title to compare).
        assert_eq!(
            place(&s, &target(20, "", 1467, 784), 26 + 100, 23 + 10),
            Ok((-67 + 100, 34 + 10))
        );
        assert_eq!(
            place(&s, &target(30, "nish Qt form", 420, 220), 9, 9),
            Ok((439, 299))
        );
    }

    #[test]
    fn a_point_under_another_window_its_shadow_or_its_edge_is_refused() {
        let s = measured();
        let form = target(10, "form", 1280, 800);
        // Under the Qt window; under GTK 3's shadow (its resize border takes clicks there);
        // within EDGE of the Qt window and of GTK 3's shadow.
        for (x, y) in [(500, 300), (600, 25), (425, 300), (600, 5)] {
            assert_eq!(code(place(&s, &form, x, y)), ErrorCode::Occluded, "{x},{y}");
        }
        assert_eq!(
            place(&s, &form, 600, 0),
            Ok((600, 0)),
            "clear of every window above"
        );
    }

    #[test]
    fn a_window_above_counts_on_any_desktop_unless_minimised() {
        let mut s = measured();
        // GTK 3's point under the Qt window (screen 500,300).
        let gtk3 = target(20, "", 1467, 784);
        s.windows[2].here = false;
        assert_eq!(
            code(place(&s, &gtk3, 593, 289)),
            ErrorCode::Occluded,
            "a window on several desktops says one of them"
        );
        s.windows[2].minimized = true;
        assert_eq!(place(&s, &gtk3, 593, 289), Ok((500, 300)));
    }

    #[test]
    fn a_decorated_window_counts_from_its_surface_and_its_title_bar_covers() {
        // A Qt window with KWin's decoration: the frame holds a 30 px title bar and 4 px
        // borders; the surface (its accessible frame) is the buffer.
        let mut s = measured();
        s.windows[2] = win(
            30,
            "nish Qt form",
            rect(426, 260, 428, 254),
            rect(430, 290, 420, 220),
            2,
        );
        let qt = target(30, "nish Qt form", 420, 220);
        assert_eq!(place(&s, &qt, 9, 9), Ok((439, 299)));
        // Its own title bar is not the window's point (outside its surface).
        assert_eq!(code(place(&s, &qt, 9, -20)), ErrorCode::Occluded);
        // The title bar covers the form below (the close button lies there).
        assert_eq!(
            code(place(&s, &target(10, "form", 1280, 800), 840, 270)),
            ErrorCode::Occluded
        );
    }

    #[test]
    fn the_drivers_own_frame_covers_its_pixels_only_and_a_look_alike_more() {
        // The takeover frame's top side, 6 px high, as KWin listed it (measured), above all.
        let mut s = measured();
        s.windows.truncate(1);
        let side = |pid: u32, caption: &str| {
            win(pid, caption, rect(0, 0, 1280, 6), rect(0, 0, 1280, 6), 9)
        };
        s.windows.push(side(77, ""));
        s.own_pid = 77;
        let form = target(10, "form", 1280, 800);
        assert_eq!(code(place(&s, &form, 300, 5)), ErrorCode::Occluded);
        assert_eq!(place(&s, &form, 300, 6), Ok((300, 6)));
        // Another program's surface there, or one of the broker's with a title (the takeover
        // surface, the consent dialog), keeps the resize border's margin.
        // An untitled window of the broker's of another shape (a compromised agent's) too.
        s.windows.pop();
        s.windows
            .push(win(77, "", rect(0, 0, 1280, 7), rect(0, 0, 1280, 7), 9));
        assert_eq!(code(place(&s, &form, 300, 15)), ErrorCode::Occluded);
        s.windows.pop();
        s.windows.push(side(77, ""));
        for (pid, caption) in [(78, ""), (77, "nish-driver: AI takeover active")] {
            s.windows.pop();
            s.windows.push(side(pid, caption));
            assert_eq!(
                code(place(&s, &form, 300, 15)),
                ErrorCode::Occluded,
                "{pid}"
            );
            assert_eq!(place(&s, &form, 300, 16), Ok((300, 16)));
        }
    }

    #[test]
    fn the_stream_shows_the_windows_frame_geometry_within_its_accessible_frame() {
        let s = measured();
        // GTK 3 (its shadow counted in its accessible frame): the frame without it, at 26,23.
        let gtk3 = target(20, "", 1467, 784);
        let w = window_of(&s, &gtk3).unwrap();
        assert_eq!(stream_part(w, &gtk3), rect(26, 23, 1415, 732));
        // A window without a shadow: its whole frame.
        let qt = target(30, "nish Qt form", 420, 220);
        assert_eq!(
            stream_part(window_of(&s, &qt).unwrap(), &qt),
            rect(0, 0, 420, 220)
        );
    }

    #[test]
    fn a_point_in_the_shadow_or_off_the_screen_is_refused() {
        let s = measured();
        let gtk3 = target(20, "", 1467, 784);
        // In its own shadow (left of the frame), and right of the screen's edge.
        for (x, y) in [(10, 100), (1400, 100)] {
            assert_eq!(code(place(&s, &gtk3, x, y)), ErrorCode::Occluded, "{x},{y}");
        }
    }

    #[test]
    fn a_window_that_is_not_one_of_kwins_by_pid_size_and_title_is_refused() {
        let mut s = measured();
        let qt = target(30, "nish Qt form", 420, 220);
        assert_eq!(
            code(place(&s, &target(20, "", 1000, 700), 100, 100)),
            ErrorCode::WindowTargetNotFound,
            "resized since the read"
        );
        assert_eq!(
            code(place(&s, &target(99, "form", 1280, 800), 100, 100)),
            ErrorCode::WindowTargetNotFound,
            "another pid"
        );
        assert_eq!(
            code(place(&s, &target(30, "another title", 420, 220), 9, 9)),
            ErrorCode::WindowTargetNotFound,
            "another title"
        );
        s.windows[2].minimized = true;
        assert_eq!(code(place(&s, &qt, 9, 9)), ErrorCode::WindowTargetNotFound);
        s.windows[2].minimized = false;
        s.windows[2].here = false;
        assert_eq!(code(place(&s, &qt, 9, 9)), ErrorCode::WindowTargetNotFound);
        // A twin of one pid and size, shown while the target is not: not taken for it; nor
        // when both are shown, whatever their titles (KWin adds " <2>" to a repeated one).
        s.windows.push(win(
            30,
            "nish Qt form <2>",
            rect(0, 500, 420, 220),
            rect(0, 500, 420, 220),
            3,
        ));
        assert_eq!(code(place(&s, &qt, 9, 9)), ErrorCode::AmbiguousWindowTarget);
        s.windows[2].here = true;
        assert_eq!(code(place(&s, &qt, 9, 9)), ErrorCode::AmbiguousWindowTarget);
    }

    #[test]
    fn the_script_names_the_answer_as_json_strings() {
        let s = script(":1.42", "/org/nishdriver/KwinScene/x", "n0");
        assert!(
            s.contains(r#"callDBus(":1.42", "/org/nishdriver/KwinScene/x", "org.nishdriver.KwinScene", "Scene""#),
            "{s}"
        );
    }

    #[test]
    fn the_answer_carries_the_scripts_nonce() {
        let s = script(":1.42", "/p", "abc");
        assert!(
            s.contains(r#"JSON.stringify({nonce: "abc", windows: out"#),
            "{s}"
        );
        // An answer without it (another script's) parses with an empty nonce, never the
        // driver's.
        let other: Scene = serde_json::from_str(
            r#"{"windows":[],"screen":{"x":0,"y":0,"w":1,"h":1},"cursor":[0,0]}"#,
        )
        .unwrap();
        assert_eq!(other.nonce, "");
    }

    #[test]
    fn a_private_directory_is_made_in_a_runtime_directory_of_this_users() {
        let id = random_hex().unwrap();
        let dir = private_dir(&id).unwrap();
        use std::os::unix::fs::MetadataExt as _;
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn random_names_differ() {
        let (a, b) = (random_hex().unwrap(), random_hex().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn the_parent_of_this_process_is_read() {
        assert_eq!(
            parent_pid(std::process::id()),
            Some(nix::unistd::getppid().as_raw() as u32)
        );
    }

    #[test]
    fn kwins_answer_parses() {
        let text = r#"{"windows":[{"pid":7,"caption":"t","frame":{"x":1,"y":2,"w":3,"h":4},"buffer":{"x":0,"y":0,"w":5,"h":6},"stacking":3,"minimized":false,"here":true}],"screen":{"x":0,"y":0,"w":1280,"h":800},"cursor":[601,411]}"#;
        let s: Scene = serde_json::from_str(text).unwrap();
        assert_eq!(s.cursor, (601, 411));
        assert_eq!(s.windows[0].buffer, rect(0, 0, 5, 6));
    }
}
