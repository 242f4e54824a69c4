//! Where a window is on the screen, from KWin itself, for a takeover click on KDE
//! ([`crate::remote`]). A Wayland client cannot learn any window's place; KWin tells it
//! through its scripting API to any program on the session bus. The broker loads a script of
//! its own (`org.kde.kwin.Scripting`: `loadScript`, `start`, `unloadScript`), which reads
//! every window's pid, caption, geometry, stacking and desktop, the screen and the pointer's
//! place, and hands them back with `callDBus` to a method the broker serves, for this one
//! answer, at a path of its own on the takeover's connection. Only an answer from KWin's
//! unique name (pinned when the takeover began: its process is the compositor serving the
//! Wayland socket) is taken.
//!
//! [`place`] then judges a click: the target window must be the one window of its pid whose
//! size KWin gives as the app's accessible frame (a GTK 3 window with client-side decorations
//! counts its shadow, as KWin's `bufferGeometry` does; Qt and maximised windows have none);
//! the point must lie on the screen, within the window's `frameGeometry` (not in its shadow),
//! and under no window above it, each counted with its shadow (GTK 3 takes clicks in a
//! resize border 10 px outside its frame, measured). Anything else is refused, never guessed.
//! Not seen: surfaces that are not KWin's windows in `clientList()` (its own on-screen
//! displays, popup menus), see docs/security.md.

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
/// The interface of the broker's answer method.
const ANSWER_IFACE: &str = "org.nishdriver.KwinScene";
/// Longest wait for KWin's answer (about 20 ms measured).
pub const SCENE_TIMEOUT: Duration = Duration::from_secs(2);

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
    /// Not minimised, and on the current desktop.
    pub shown: bool,
}

/// What KWin said: its windows, the screen, and the pointer's place.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Scene {
    pub windows: Vec<SceneWindow>,
    pub screen: Rect,
    pub cursor: (i32, i32),
}

/// The script: one answer by `callDBus` to `dest` at `path`. The geometry is KWin's (whole
/// pixels on KWin 5.27); a window without a pid says 0.
fn script(dest: &str, path: &str) -> String {
    format!(
        r#"var r = function (g) {{ return {{x: Math.round(g.x), y: Math.round(g.y), w: Math.round(g.width), h: Math.round(g.height)}}; }};
var all = workspace.clientList();
var out = [];
for (var i = 0; i < all.length; i++) {{
    var c = all[i];
    out.push({{pid: c.pid > 0 ? c.pid : 0, caption: String(c.caption), frame: r(c.frameGeometry),
        buffer: r(c.bufferGeometry), stacking: c.stackingOrder,
        shown: !c.minimized && (c.onAllDesktops || c.desktop == workspace.currentDesktop)}});
}}
var p = workspace.cursorPos;
callDBus({dest}, {path}, "{ANSWER_IFACE}", "Scene",
    JSON.stringify({{windows: out, screen: r(workspace.virtualScreenGeometry), cursor: [Math.round(p.x), Math.round(p.y)]}}));
"#,
        dest = serde_json::to_string(dest).unwrap_or_default(),
        path = serde_json::to_string(path).unwrap_or_default(),
    )
}

/// The broker's answer method for one script.
struct Answer {
    /// KWin's unique name: the only sender taken.
    kwin: String,
    tx: Mutex<Option<oneshot::Sender<String>>>,
}

#[zbus::interface(name = "org.nishdriver.KwinScene")]
impl Answer {
    async fn scene(&self, #[zbus(header)] header: zbus::message::Header<'_>, answer: String) {
        if header.sender().map(|s| s.as_str()) != Some(self.kwin.as_str()) {
            tracing::warn!("an answer about KWin's windows from another connection was ignored");
            return;
        }
        if let Some(tx) = self.tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(answer);
        }
    }
}

/// Counts the scripts of this process.
static SCRIPTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Asks KWin (at unique name `kwin`) for its windows, the screen and the pointer, through a
/// script written in `dir` (the broker's own runtime directory) and removed again.
pub async fn scene(conn: &zbus::Connection, kwin: &str, dir: &Path) -> Result<Scene, String> {
    let n = SCRIPTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The path need not be secret (only KWin's answer is taken); it differs per script.
    let name = format!("nish_driver_{}_{n}", std::process::id());
    let path = format!("/org/nishdriver/KwinScene/{name}");
    let me = conn
        .unique_name()
        .ok_or("no name on the session bus")?
        .to_string();
    let (tx, rx) = oneshot::channel();
    let answer = Answer {
        kwin: kwin.to_string(),
        tx: Mutex::new(Some(tx)),
    };
    let object = ObjectPath::try_from(path.as_str()).map_err(|e| e.to_string())?;
    conn.object_server()
        .at(&object, answer)
        .await
        .map_err(|e| e.to_string())?;
    let file = dir.join(format!("{name}.js"));
    let asked = ask(conn, kwin, &file, &name, &script(&me, &path), rx).await;
    let _ = conn.object_server().remove::<Answer, _>(&object).await;
    let _ = std::fs::remove_file(&file);
    let text = asked?;
    serde_json::from_str::<Scene>(&text).map_err(|_| "KWin's answer is not understood".into())
}

async fn ask(
    conn: &zbus::Connection,
    kwin: &str,
    file: &Path,
    name: &str,
    text: &str,
    rx: oneshot::Receiver<String>,
) -> Result<String, String> {
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(file)
            .map_err(|e| format!("the script could not be written: {e}"))?;
        f.write_all(text.as_bytes())
            .map_err(|e| format!("the script could not be written: {e}"))?;
    }
    let call = |method: &'static str, body: Option<(String, String)>| async move {
        let reply = match body {
            Some(b) => {
                tokio::time::timeout(
                    SCENE_TIMEOUT,
                    conn.call_method(Some(kwin), SCRIPTING_PATH, Some(SCRIPTING), method, &b),
                )
                .await
            }
            None => {
                tokio::time::timeout(
                    SCENE_TIMEOUT,
                    conn.call_method(Some(kwin), SCRIPTING_PATH, Some(SCRIPTING), method, &()),
                )
                .await
            }
        };
        match reply {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!(
                "KWin's {method}: {}",
                crate::agents::clean_message(&e.to_string())
            )),
            Err(_) => Err(format!("KWin did not answer {method} in time")),
        }
    };
    call(
        "loadScript",
        Some((file.to_string_lossy().into_owned(), name.to_string())),
    )
    .await?;
    let got = async {
        call("start", None).await?;
        match tokio::time::timeout(SCENE_TIMEOUT, rx).await {
            Ok(Ok(text)) => Ok(text),
            _ => Err("KWin did not tell its windows in time".to_string()),
        }
    }
    .await;
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
    got
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

/// Where on the screen the point `x`, `y` of `target` (in the window's own coordinates, as
/// its accessible frame gives them) is, when a click there reaches that window: see the
/// module's rules. Errors say why not, in the contract's codes, with nothing sent.
pub fn place(
    scene: &Scene,
    target: &WindowInfo,
    x: i32,
    y: i32,
) -> Result<(i32, i32), DriverError> {
    let size = (target.frame.w, target.frame.h);
    let sized = |w: &&SceneWindow| {
        w.shown
            && w.pid == target.pid
            && ((w.buffer.w, w.buffer.h) == size || (w.frame.w, w.frame.h) == size)
    };
    let mut found: Vec<&SceneWindow> = scene.windows.iter().filter(sized).collect();
    if found.len() > 1 {
        found.retain(|w| w.caption == target.title);
    }
    let w = match found.as_slice() {
        [w] => *w,
        [] => {
            return Err(DriverError::new(
                ErrorCode::WindowTargetNotFound,
                "KWin shows no window of this app of the window's size (it may be minimised, \
                 on another desktop, or resized since the read); nothing was sent",
            )
            .with_effect("refused"));
        }
        _ => {
            return Err(DriverError::new(
                ErrorCode::AmbiguousWindowTarget,
                "KWin shows more than one window of this app with the window's size and \
                 title: the click's place is not known; nothing was sent",
            )
            .with_effect("refused"));
        }
    };
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
    if !contains(&w.frame, px, py) {
        return Err(occluded(
            "the point lies outside the window as KWin shows it",
        ));
    }
    if !contains(&scene.screen, px, py) {
        return Err(occluded("the point lies off the screen"));
    }
    let covered = scene.windows.iter().any(|o| {
        !std::ptr::eq(o, w) && o.shown && o.stacking > w.stacking && contains(&o.buffer, px, py)
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
            shown: true,
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
        }
    }

    #[test]
    fn a_gtk3_window_counts_from_its_shadow_and_qt_from_its_frame() {
        let s = measured();
        // GTK 3's panel at 26,23 in its own coordinates is KWin's frame origin.
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
    fn a_point_under_another_window_or_its_shadow_is_refused() {
        let s = measured();
        // The form's point at 500,300 lies under the Qt window; 600,25 under GTK 3's shadow
        // (its resize border takes clicks there).
        for (x, y) in [(500, 300), (600, 25)] {
            let e = place(&s, &target(10, "form", 1280, 800), x, y).unwrap_err();
            assert_eq!(e.code, ErrorCode::Occluded, "{x},{y}: {e:?}");
            assert_eq!(e.effect.as_deref(), Some("refused"));
        }
        assert_eq!(
            place(&s, &target(10, "form", 1280, 800), 600, 5),
            Ok((600, 5)),
            "above GTK 3's shadow the form is on top"
        );
    }

    #[test]
    fn a_point_in_the_shadow_or_off_the_screen_is_refused() {
        let s = measured();
        let gtk3 = target(20, "", 1467, 784);
        // In its own shadow (left of the frame), and right of the screen's edge.
        for (x, y) in [(10, 100), (1400, 100)] {
            let e = place(&s, &gtk3, x, y).unwrap_err();
            assert_eq!(e.code, ErrorCode::Occluded, "{x},{y}: {e:?}");
        }
    }

    #[test]
    fn a_window_that_is_not_one_of_kwins_by_pid_size_and_title_is_refused() {
        let mut s = measured();
        let e = place(&s, &target(20, "", 1000, 700), 100, 100).unwrap_err();
        assert_eq!(
            e.code,
            ErrorCode::WindowTargetNotFound,
            "resized since the read"
        );
        let e = place(&s, &target(99, "form", 1280, 800), 100, 100).unwrap_err();
        assert_eq!(e.code, ErrorCode::WindowTargetNotFound, "another pid");
        s.windows[2].shown = false;
        let e = place(&s, &target(30, "nish Qt form", 420, 220), 9, 9).unwrap_err();
        assert_eq!(e.code, ErrorCode::WindowTargetNotFound, "minimised");
        // Two windows of one pid and size: the title tells them apart, else refused.
        s.windows[2].shown = true;
        s.windows.push(win(
            30,
            "twin",
            rect(0, 500, 420, 220),
            rect(0, 500, 420, 220),
            3,
        ));
        assert_eq!(place(&s, &target(30, "twin", 420, 220), 9, 9), Ok((9, 509)));
        s.windows[3].caption = "nish Qt form".into();
        let e = place(&s, &target(30, "nish Qt form", 420, 220), 9, 9).unwrap_err();
        assert_eq!(e.code, ErrorCode::AmbiguousWindowTarget);
    }

    #[test]
    fn the_script_names_the_answer_as_json_strings() {
        let s = script(":1.42", "/org/nishdriver/KwinScene/x");
        assert!(s.contains(r#"callDBus(":1.42", "/org/nishdriver/KwinScene/x", "org.nishdriver.KwinScene", "Scene""#), "{s}");
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
        let text = r#"{"windows":[{"pid":7,"caption":"t","frame":{"x":1,"y":2,"w":3,"h":4},"buffer":{"x":0,"y":0,"w":5,"h":6},"stacking":3,"shown":true}],"screen":{"x":0,"y":0,"w":1280,"h":800},"cursor":[601,411]}"#;
        let s: Scene = serde_json::from_str(text).unwrap();
        assert_eq!(s.cursor, (601, 411));
        assert_eq!(s.windows[0].buffer, rect(0, 0, 5, 6));
    }
}
