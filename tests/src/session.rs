//! Running the end-to-end scripts (tests/e2e/*.py) against a private desktop: the apps they
//! expect, the workspace binaries, and the Python with the official MCP SDK.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::{App, AppHandle, Desktop, page};

/// A workspace binary (`nish-driver`, `nish-mcp`, ...), found next to the running executable
/// (tests live in `target/<profile>/deps`, examples in `target/<profile>/examples`).
pub fn workspace_bin(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("the running executable's path")?;
    for dir in exe.ancestors().skip(1).take(3) {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!(
        "{name} is not built next to {}: run `cargo build --workspace --bins` first",
        exe.display()
    )
}

/// The Python with the official `mcp` SDK: `$NISH_PYTHON`, else `<workspace>/.cache/venv`.
pub fn python() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("NISH_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/venv/bin/python");
    if !p.exists() {
        bail!(
            "no Python with the mcp SDK at {}: run scripts/ensure-deps.sh",
            p.display()
        );
    }
    Ok(p)
}

/// The standard output of a host-side script's run (`tests/e2e/*.py`), once it is known to
/// have passed: it exited 0 and printed `ALL CHECKS PASSED`. Panics, with both outputs and
/// `what` (what failed), otherwise.
pub fn passed(o: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{what}:\n{stdout}\n{stderr}");
    assert!(stdout.contains("ALL CHECKS PASSED"), "{stdout}");
    stdout
}

/// An end-to-end script in tests/e2e.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e").join(name)
}

/// The desktop of desktop_session.py: two gtk3-widget-factory windows (an ambiguous target),
/// gtk4-demo, Chromium on form.html, and gtk3-demo, which the session does not ask for.
#[allow(missing_debug_implementations)]
pub struct SessionDesktop {
    /// The desktop.
    pub desk: Desktop,
    /// The apps, in start order.
    pub apps: Vec<AppHandle>,
    /// gtk3-demo's window (never approved).
    pub unapproved_window: u32,
}

/// Starts the desktop (nested: the person has a real device to answer the consent dialog) and
/// its apps, each on the accessibility registry before this returns.
pub fn session_desktop() -> Result<SessionDesktop> {
    let desk = Desktop::builder().nested(true).start()?;
    let mut apps = Vec::new();
    for app in [
        App::Gtk3WidgetFactory,
        App::Gtk3WidgetFactory,
        App::Gtk4Demo,
        App::Gtk3Demo,
    ] {
        let h = desk.spawn(app)?;
        desk.wait_atspi_app(h.pid, Duration::from_secs(45))?;
        apps.push(h);
    }
    let chromium = desk.spawn(App::Chromium {
        page: page("form.html"),
    })?;
    desk.wait_atspi_app(chromium.pid, Duration::from_secs(60))?;
    desk.wait_atspi_document(
        chromium.pid,
        "nish-driver form test page",
        Duration::from_secs(60),
    )?;
    let unapproved_window = apps[3].window_id;
    apps.push(chromium);
    Ok(SessionDesktop {
        desk,
        apps,
        unapproved_window,
    })
}

/// Runs desktop_session.py in the desktop's environment.
pub fn run_desktop_session(sd: &SessionDesktop, out: &Path, demo: bool) -> Result<Output> {
    let mut cmd = sd.desk.command(python()?);
    cmd.arg(script("desktop_session.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .arg("--out")
        .arg(out)
        .arg("--unapproved-window")
        .arg(sd.unapproved_window.to_string());
    if demo {
        cmd.arg("--demo");
        cmd.stdout(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit());
    }
    Ok(cmd.output()?)
}

/// Runs desktop_acts.py in the desktop's environment; the person focuses the unapproved
/// gtk3-demo window first.
pub fn run_desktop_acts(sd: &SessionDesktop) -> Result<Output> {
    let mut cmd = sd.desk.command(python()?);
    cmd.arg(script("desktop_acts.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .arg("--focus-window")
        .arg(sd.unapproved_window.to_string());
    Ok(cmd.output()?)
}

/// The desktop of desktop_takeover.py (nested, so the person has a real device):
/// gtk3-widget-factory and Chromium on form.html, each on the accessibility registry.
pub fn takeover_desktop() -> Result<SessionDesktop> {
    let desk = Desktop::builder().nested(true).start()?;
    let gtk3 = desk.spawn(App::Gtk3WidgetFactory)?;
    desk.wait_atspi_app(gtk3.pid, Duration::from_secs(45))?;
    let chromium = desk.spawn(App::Chromium {
        page: page("form.html"),
    })?;
    desk.wait_atspi_app(chromium.pid, Duration::from_secs(60))?;
    desk.wait_atspi_document(
        chromium.pid,
        "nish-driver form test page",
        Duration::from_secs(60),
    )?;
    Ok(SessionDesktop {
        desk,
        apps: vec![gtk3, chromium],
        unapproved_window: 0,
    })
}

/// Runs desktop_takeover.py in the desktop's environment; screenshots go to `out`.
pub fn run_desktop_takeover(sd: &SessionDesktop, out: &Path, demo: bool) -> Result<Output> {
    let mut cmd = sd.desk.command(python()?);
    cmd.arg(script("desktop_takeover.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .arg("--out")
        .arg(out);
    if demo {
        cmd.stdout(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit());
    }
    Ok(cmd.output()?)
}

/// A Wayland session script (`name` in tests/e2e) in `desk`'s environment, run against the
/// built `driver` (`nish-driver` or `nish-testd`) and `nish-mcp`, told the window of the app
/// the person never approves.
fn wayland_script(
    desk: &crate::WaylandDesktop,
    name: &str,
    driver: &str,
    unapproved_window: u64,
) -> Result<std::process::Command> {
    let mut cmd = desk.command(python()?);
    cmd.arg(script(name))
        .arg("--driver")
        .arg(workspace_bin(driver)?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .arg("--unapproved-window")
        .arg(unapproved_window.to_string());
    Ok(cmd)
}

/// The desktop of wayland_session.py: the Wayland test desktop (mutter headless, no X server)
/// with two gtk3-widget-factory windows (an ambiguous target), gtk4-demo, gtk3-demo (never
/// approved) and Chromium on form.html, all native Wayland clients on the accessibility
/// registry.
#[allow(missing_debug_implementations)]
pub struct WaylandSessionDesktop {
    /// The desktop.
    pub desk: crate::WaylandDesktop,
    /// The apps, in start order.
    pub apps: Vec<crate::WaylandApp>,
    /// gtk3-demo's window id as the driver gives it on Wayland (computed independently).
    pub unapproved_window: u64,
}

/// Starts the Wayland desktop of wayland_session.py and its apps.
pub fn wayland_session_desktop() -> Result<WaylandSessionDesktop> {
    let desk = crate::WaylandDesktop::start()?;
    let mut apps = Vec::new();
    for app in [
        App::Gtk3WidgetFactory,
        App::Gtk3WidgetFactory,
        App::Gtk4Demo,
        App::Gtk3Demo,
    ] {
        apps.push(desk.spawn(app)?);
    }
    let chromium = desk.spawn(App::Chromium {
        page: page("form.html"),
    })?;
    desk.wait_atspi_document(
        chromium.pid,
        "nish-driver form test page",
        Duration::from_secs(60),
    )?;
    let unapproved_window = desk
        .window_ids(&apps[3])?
        .first()
        .copied()
        .context("gtk3-demo has no top-level accessible")?;
    apps.push(chromium);
    Ok(WaylandSessionDesktop {
        desk,
        apps,
        unapproved_window,
    })
}

/// Runs wayland_session.py in the Wayland desktop's environment (`demo`: its output goes to
/// this process's).
pub fn run_wayland_session(sd: &WaylandSessionDesktop, demo: bool) -> Result<Output> {
    // The test daemon: one early request is answered through files (NISH_TEST_CONSENT_DIR).
    let mut cmd = wayland_script(
        &sd.desk,
        "wayland_session.py",
        "nish-testd",
        sd.unapproved_window,
    )?;
    if demo {
        cmd.arg("--demo");
        cmd.stdout(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit());
    }
    Ok(cmd.output()?)
}

/// The desktop of sway_session.py: the Wayland test desktop on sway (headless, no X server)
/// with gtk3-widget-factory and gtk3-demo (never approved), native Wayland clients on the
/// accessibility registry.
#[allow(missing_debug_implementations)]
pub struct SwaySessionDesktop {
    /// The desktop.
    pub desk: crate::WaylandDesktop,
    /// The apps, in start order.
    pub apps: Vec<crate::WaylandApp>,
    /// gtk3-demo's window id as the driver gives it on Wayland (computed independently).
    pub unapproved_window: u64,
}

/// Starts the sway desktop of sway_session.py and its apps.
pub fn sway_session_desktop() -> Result<SwaySessionDesktop> {
    with_two_apps(crate::WaylandDesktop::start_sway()?)
}

/// gtk3-widget-factory and gtk3-demo (never approved) started on `desk`.
fn with_two_apps(desk: crate::WaylandDesktop) -> Result<SwaySessionDesktop> {
    let mut apps = Vec::new();
    for app in [App::Gtk3WidgetFactory, App::Gtk3Demo] {
        apps.push(desk.spawn(app)?);
    }
    let unapproved_window = desk
        .window_ids(&apps[1])?
        .first()
        .copied()
        .context("gtk3-demo has no top-level accessible")?;
    Ok(SwaySessionDesktop {
        desk,
        apps,
        unapproved_window,
    })
}

/// Runs sway_session.py with the real `nish-driver` in the sway desktop's environment, plus
/// `SWAYSOCK` (the test asks sway which window is focused; the driver never does).
pub fn run_sway_session(sd: &SwaySessionDesktop, demo: bool) -> Result<Output> {
    let mut cmd = wayland_script(
        &sd.desk,
        "sway_session.py",
        "nish-driver",
        sd.unapproved_window,
    )?;
    cmd.env(
        "SWAYSOCK",
        sd.desk
            .sway_socket()
            .context("the sway desktop has an IPC socket")?,
    );
    if demo {
        cmd.stdout(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit());
    }
    Ok(cmd.output()?)
}

/// The desktop of kwin_session.py, of the same shape as sway's.
pub type KwinSessionDesktop = SwaySessionDesktop;

/// Starts the desktop of kwin_session.py: the Wayland test desktop on KWin (virtual
/// framebuffer, no X server) with gtk3-widget-factory and gtk3-demo (never approved), native
/// Wayland clients on the accessibility registry.
pub fn kwin_session_desktop() -> Result<KwinSessionDesktop> {
    with_two_apps(crate::WaylandDesktop::start_kwin()?)
}

/// Runs kwin_session.py with the real `nish-driver` in the KWin desktop's environment, told
/// where KWin's log is (the test asks KWin which window is active by a script, whose answer
/// lands there; the driver never does).
pub fn run_kwin_session(sd: &KwinSessionDesktop) -> Result<Output> {
    let mut cmd = wayland_script(
        &sd.desk,
        "kwin_session.py",
        "nish-driver",
        sd.unapproved_window,
    )?;
    cmd.arg("--kwin-log").arg(
        sd.desk
            .kwin_log()
            .context("the KWin desktop has a KWin log")?,
    );
    Ok(cmd.output()?)
}

/// The desktop of wayland_takeover.py: the Wayland test desktop with the desktop portal
/// (mutter headless, the portal and its GNOME backend by D-Bus activation, PipeWire) and the
/// GTK 4 form (`tests/apps/form_gtk4.py`, a native Wayland client on the accessibility
/// registry).
#[allow(missing_debug_implementations)]
pub struct WaylandTakeoverDesktop {
    /// The desktop.
    pub desk: crate::WaylandDesktop,
    /// The form.
    pub form: crate::WaylandApp,
}

/// Starts [`WaylandTakeoverDesktop`].
pub fn wayland_takeover_desktop() -> Result<WaylandTakeoverDesktop> {
    let desk = crate::WaylandDesktop::start_with_portal()?;
    let form = desk.spawn(App::Command {
        program: "/usr/bin/python3".into(),
        args: vec![crate::test_app("form_gtk4.py").into()],
    })?;
    Ok(WaylandTakeoverDesktop { desk, form })
}

/// Starts the desktop of kwin_takeover.py: the Wayland test desktop on KWin, started through
/// its wrapper as a Plasma session starts it, so the socket's listener is the wrapper (virtual
/// framebuffer, no X server; the desktop portal with KDE's backend by D-Bus activation), and the
/// GTK 4 form, a native Wayland client on the accessibility registry.
pub fn kwin_takeover_desktop() -> Result<WaylandTakeoverDesktop> {
    let desk = crate::WaylandDesktop::start_kwin_wrapped()?;
    let form = desk.spawn(App::Command {
        program: "/usr/bin/python3".into(),
        args: vec![crate::test_app("form_gtk4.py").into()],
    })?;
    Ok(WaylandTakeoverDesktop { desk, form })
}

/// Runs kwin_takeover.py with the real `nish-driver` in the KWin desktop's environment, told
/// where KWin's log is (the test asks KWin for its windows by a script; the driver never does).
pub fn run_kwin_takeover(sd: &WaylandTakeoverDesktop) -> Result<Output> {
    let mut cmd = sd.desk.command(python()?);
    cmd.arg(script("kwin_takeover.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .arg("--kwin-log")
        .arg(
            sd.desk
                .kwin_log()
                .context("the KWin desktop has a KWin log")?,
        );
    Ok(cmd.output()?)
}

/// Runs wayland_takeover.py with the real `nish-driver` in the desktop's environment.
pub fn run_wayland_takeover(sd: &WaylandTakeoverDesktop) -> Result<Output> {
    let mut cmd = sd.desk.command(python()?);
    cmd.arg(script("wayland_takeover.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?);
    Ok(cmd.output()?)
}

/// Runs portal_clipboard.py on the plain Wayland test desktop (mutter headless, no portal
/// started yet): the script starts the stand-in portal frontend (`xdg-desktop-portal`, this
/// crate's binary) before anything asks for the portal, then the GTK 4 form, then the real
/// `nish-driver`.
pub fn run_portal_clipboard(desk: &crate::WaylandDesktop) -> Result<Output> {
    let mut cmd = desk.command(python()?);
    cmd.arg(script("portal_clipboard.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .arg("--portal")
        .arg(workspace_bin("xdg-desktop-portal")?);
    Ok(cmd.output()?)
}
