//! The private headless Wayland desktop: a session bus, mutter as a headless GNOME compositor
//! (`--headless --wayland --no-x11`, one 1280x800 virtual monitor), the AT-SPI bus and registry.
//! No X server runs: mutter starts no XWayland, and the environment given to apps has no
//! `DISPLAY`.
//!
//! [`WaylandDesktop::start_sway`] runs sway (wlroots) instead of mutter, with the same buses:
//! headless (`WLR_BACKENDS=headless`, no input devices, one 1280x800 output), no XWayland.
//! sway refuses to start where it could regain root, so it runs in a user namespace of its own
//! (`unshare --user`) whose only user (65534) is this process's user: inside it sway cannot
//! become root, and outside it sway is this user, as any compositor of the person's session
//! is (the broker refuses a compositor of another user).
//!
//! [`WaylandDesktop::start_kwin`] runs KDE's KWin (`kwin_wayland --virtual --no-lockscreen`,
//! one 1280x800 output, no XWayland) with the same buses, and `XDG_CURRENT_DESKTOP=KDE` as a
//! Plasma session has (the desktop portal, activated on the session bus, then picks its KDE
//! backend). The packaged `kwin_wayland` carries a file capability (`cap_sys_resource`), which
//! a container without that capability refuses to execute ("Operation not permitted"); the
//! desktop runs a plain copy of it, made in its private directory.
//!
//! One variant, [`WaylandDesktop::start_with_xwayland`], runs mutter without `--no-x11`: mutter
//! 43 then starts Xwayland with itself (rootless, its own Xauthority cookie in
//! `XDG_RUNTIME_DIR`), so a test can play an X client on that display, e.g. an attacker sending
//! XTEST input. Apps still get no `DISPLAY`; [`WaylandDesktop::x_command`] is the way onto it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::atspi::{self, AtspiApp, AtspiDocument};
use crate::desktop::{
    AT_SPI_BUS_LAUNCHER, AT_SPI_REGISTRYD, App, DBUS_DAEMON, KEEP_ENV, entropy, private_dir,
    resolve,
};
use crate::mounts;
use crate::procs::{self, ProcessId};
use crate::wait::{Poll, poll};

const MUTTER: &str = "/usr/bin/mutter";
const SWAY: &str = "/usr/bin/sway";
const SWAYMSG: &str = "/usr/bin/swaymsg";
const KWIN: &str = "/usr/bin/kwin_wayland";
/// KWin's wrapper, which a Plasma session starts.
const KWIN_WRAPPER: &str = "/usr/bin/kwin_wayland_wrapper";
/// The file name of KWin's executable, which its Qt platform plugin requires.
const KWIN_NAME: &str = "kwin_wayland";
const UNSHARE: &str = "/usr/bin/unshare";
const PIPEWIRE: &str = "/usr/bin/pipewire";
const WIREPLUMBER: &str = "/usr/bin/wireplumber";

/// Executables of X servers: none of them may run on (or for) a Wayland desktop.
pub const X_SERVERS: &[&str] = &["Xwayland", "Xvfb", "Xephyr", "Xorg", "X"];

/// How a KWin desktop starts KWin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KwinStart {
    /// A plain copy of `kwin_wayland`, on a socket of the desktop's naming.
    Plain,
    /// The same copy under a file name no program knows KWin by.
    Unnamed(&'static str),
    /// Through KWin's own wrapper, which makes the socket and runs the copy from `PATH`.
    Wrapped,
}

/// An application the Wayland desktop started, once it is on the AT-SPI registry with a frame
/// that has children (Wayland gives no client a list of other clients' windows, so the
/// accessibility registry is where a window shows up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaylandApp {
    /// The process the desktop started (for Chromium, the browser process).
    pub pid: u32,
    /// The app's short name.
    pub name: String,
    /// Identity of the process (pid and start time).
    pub process: ProcessId,
    /// The app as the registry lists it.
    pub atspi: AtspiApp,
    /// From spawn to being on the registry.
    pub ready_after: Duration,
}

/// The compositor a [`WaylandDesktop`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compositor {
    /// GNOME's mutter, headless ([`WaylandDesktop::start`]).
    Mutter,
    /// sway (wlroots), headless ([`WaylandDesktop::start_sway`]).
    Sway,
    /// KDE's KWin, on a virtual framebuffer ([`WaylandDesktop::start_kwin`]).
    Kwin,
}

/// A private headless Wayland desktop (GNOME's mutter, sway or KWin). Dropping it (or [`WaylandDesktop::stop`]) ends
/// every process it started, and their descendants, and removes its directory.
#[derive(Debug)]
pub struct WaylandDesktop {
    dir: PathBuf,
    wayland_display: String,
    session_bus: String,
    a11y_bus: String,
    procs: procs::Group,
    app_counter: AtomicU32,
    start_deadline: Duration,
    app_deadline: Duration,
    startup: Duration,
    stopped: bool,
    /// With XWayland: its display (`:N`) and Xauthority file.
    xwayland: Option<(String, PathBuf)>,
    compositor: Compositor,
    /// With sway: its IPC socket (`SWAYSOCK`).
    swaysock: Option<PathBuf>,
    /// How KWin starts, on a KWin desktop.
    kwin: KwinStart,
    /// PipeWire and WirePlumber run.
    pipewire: bool,
}

impl WaylandDesktop {
    /// Starts the desktop: session bus, mutter, the AT-SPI bus launcher and registry, with
    /// `org.a11y.Status.IsEnabled` set as a screen reader would (Chromium reads it at start).
    pub fn start() -> Result<WaylandDesktop> {
        WaylandDesktop::start_inner(Compositor::Mutter, false, false)
    }

    /// Like [`WaylandDesktop::start`] with sway (wlroots 0.15 in sway 1.7) as the compositor:
    /// headless, one 1280x800 output `HEADLESS-1`, no XWayland, no input device until a client
    /// makes a virtual one; run in its own user namespace (see the module's text). Its Wayland
    /// socket is the one sway picks in the private directory.
    pub fn start_sway() -> Result<WaylandDesktop> {
        WaylandDesktop::start_inner(Compositor::Sway, false, false)
    }

    /// Like [`WaylandDesktop::start`] with KDE's KWin 5.27 as the compositor: `kwin_wayland
    /// --virtual --no-lockscreen` (a plain copy of it, see the module's text), one 1280x800
    /// output, no XWayland; the environment has `XDG_CURRENT_DESKTOP=KDE`, so the desktop
    /// portal, when something activates it, uses its KDE backend (`xdg-desktop-portal-kde`),
    /// whose RemoteDesktop drives KWin's fake input. PipeWire and WirePlumber run (started
    /// before KWin, for its screen casts), and the desktop's applications directory holds the
    /// package's desktop file for the workspace's `nish-driver`, so that KWin offers that
    /// broker its window screen cast, as on an installed system.
    pub fn start_kwin() -> Result<WaylandDesktop> {
        WaylandDesktop::start_inner(Compositor::Kwin, false, false)
    }

    /// Like [`WaylandDesktop::start_kwin`], but KWin's copy runs under a file name no program
    /// knows KWin by (`compositor-unnamed`): a compositor the driver does not recognise, with
    /// a desktop portal that offers RemoteDesktop (the attack tests' desktop).
    pub fn start_kwin_unnamed() -> Result<WaylandDesktop> {
        WaylandDesktop::start_inner_as(
            Compositor::Kwin,
            false,
            false,
            KwinStart::Unnamed("compositor-unnamed"),
        )
    }

    /// Like [`WaylandDesktop::start_kwin`], but started as a Plasma session starts KWin:
    /// through its wrapper (`kwin_wayland_wrapper`), which makes the Wayland socket (the first
    /// free `wayland-N` in the private directory), listens on it, and runs `kwin_wayland`
    /// (found on `PATH`: the plain copy) with it. The socket's listener is then the wrapper.
    pub fn start_kwin_wrapped() -> Result<WaylandDesktop> {
        WaylandDesktop::start_inner_as(Compositor::Kwin, false, false, KwinStart::Wrapped)
    }

    /// Like [`WaylandDesktop::start`], plus `pipewire` and `wireplumber` (same runtime dir and
    /// session bus), and returns once the desktop portal, started by D-Bus activation on the
    /// private session bus (frontend `xdg-desktop-portal`, backend `xdg-desktop-portal-gnome`,
    /// no gnome-shell), answers for `org.freedesktop.portal.RemoteDesktop`. The activated
    /// portal processes are children of this desktop's `dbus-daemon`, so the teardown ends them.
    pub fn start_with_portal() -> Result<WaylandDesktop> {
        WaylandDesktop::start_inner(Compositor::Mutter, false, true)
    }

    /// Like [`WaylandDesktop::start`], but mutter runs XWayland (no `--no-x11`), and the start
    /// waits until its display accepts an X client. The X display is reachable only through
    /// [`WaylandDesktop::x_command`]; [`WaylandDesktop::env`] still has no `DISPLAY`.
    pub fn start_with_xwayland() -> Result<WaylandDesktop> {
        WaylandDesktop::start_inner(Compositor::Mutter, true, false)
    }

    fn start_inner(compositor: Compositor, xwayland: bool, portal: bool) -> Result<WaylandDesktop> {
        WaylandDesktop::start_inner_as(compositor, xwayland, portal, KwinStart::Plain)
    }

    fn start_inner_as(
        compositor: Compositor,
        xwayland: bool,
        portal: bool,
        kwin: KwinStart,
    ) -> Result<WaylandDesktop> {
        let t0 = Instant::now();
        let dir = private_dir()?;
        let procs = procs::Group::new(&dir);
        std::fs::create_dir(dir.join("logs"))?;
        let mut desk = WaylandDesktop {
            dir,
            // sway names its own socket (found once it listens).
            wayland_display: match compositor {
                // The wrapper takes the first free name; the directory is new.
                Compositor::Kwin if kwin == KwinStart::Wrapped => "wayland-0".into(),
                Compositor::Mutter | Compositor::Kwin => {
                    format!("wayland-nish-{:08x}", entropy() >> 32)
                }
                Compositor::Sway => String::new(),
            },
            session_bus: String::new(),
            a11y_bus: String::new(),
            procs,
            app_counter: AtomicU32::new(0),
            start_deadline: Duration::from_secs(20),
            app_deadline: Duration::from_secs(45),
            startup: Duration::ZERO,
            stopped: false,
            xwayland: None,
            compositor,
            swaysock: None,
            kwin,
            pipewire: false,
        };
        desk.start_session_bus()?;
        match compositor {
            Compositor::Mutter => desk.start_mutter(xwayland)?,
            Compositor::Sway => desk.start_sway_compositor()?,
            Compositor::Kwin => {
                // As a Plasma session: PipeWire runs for KWin's screen casts, and the
                // package's desktop file lets KWin stream windows to the driver's broker.
                desk.trust_broker_in_kwin()?;
                desk.start_pipewire()?;
                desk.start_kwin_compositor()?
            }
        }
        desk.start_atspi()?;
        if portal {
            desk.start_portal()?;
        }
        desk.startup = t0.elapsed();
        Ok(desk)
    }

    fn launch_with(
        &self,
        role: &str,
        program: &Path,
        args: &[OsString],
        stdout: Option<Stdio>,
    ) -> Result<(ProcessId, Option<std::process::ChildStdout>)> {
        self.procs.launch(role, program, args, &self.env(), stdout)
    }

    fn launch(&self, role: &str, program: &Path, args: &[OsString]) -> Result<ProcessId> {
        Ok(self.launch_with(role, program, args, None)?.0)
    }

    fn check_running(&self, id: &ProcessId) -> Result<()> {
        self.procs.check_running(id)
    }

    /// The portal backends the desktop ships. The portal frontend picks among the backends
    /// installed on the machine and falls back to any that offers an interface
    /// (xdg-desktop-portal 1.16): with KDE's backend installed beside GNOME's, a GNOME desktop
    /// would seem to offer KDE's GlobalShortcuts. Each desktop sees its own desktop's backends
    /// only (`XDG_DESKTOP_PORTAL_DIR`), as a machine with one desktop does.
    fn portals(&self) -> &'static [&'static str] {
        match self.compositor {
            Compositor::Mutter => &["gnome.portal", "gtk.portal"],
            Compositor::Sway => &["wlr.portal", "gtk.portal"],
            Compositor::Kwin => &["kde.portal"],
        }
    }

    /// Copies the desktop's portal backends that are installed into its own portal directory.
    fn choose_portals(&self) -> Result<()> {
        mounts::choose_portals(&self.dir, self.portals())
    }

    fn start_session_bus(&mut self) -> Result<()> {
        mounts::mask_document_portal(&self.dir)?;
        self.choose_portals()?;
        let socket = self.dir.join("bus");
        let args: Vec<OsString> = vec![
            "--session".into(),
            "--nofork".into(),
            "--print-pid=1".into(),
            "--print-address=1".into(),
            format!("--address=unix:path={}", socket.display()).into(),
        ];
        let (id, stdout) = self.launch_with(
            "dbus-daemon",
            Path::new(DBUS_DAEMON),
            &args,
            Some(Stdio::piped()),
        )?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        if let Some(out) = stdout {
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(out)
                    .lines()
                    .map_while(Result::ok)
                    .take(2)
                {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let (mut address, mut pid) = (None, None);
        let (address, pid) = poll("the session bus", self.start_deadline, || {
            while let Ok(line) = rx.try_recv() {
                let line = line.trim().to_string();
                if let Ok(p) = line.parse::<u32>() {
                    pid = Some(p);
                } else if line.contains(':') {
                    address = Some(line);
                }
            }
            if let (Some(a), Some(p)) = (&address, pid) {
                return Ok(Poll::Ready((a.clone(), p)));
            }
            self.check_running(&id)?;
            Ok(Poll::Pending(format!("address {address:?}, pid {pid:?}")))
        })?;
        if pid != id.pid {
            bail!(
                "dbus-daemon reported pid {pid}, but the process started is {}",
                id.pid
            );
        }
        self.session_bus = address;
        Ok(())
    }

    fn start_mutter(&mut self, xwayland: bool) -> Result<()> {
        let mut args: Vec<OsString> = vec!["--headless".into(), "--wayland".into()];
        if !xwayland {
            args.push("--no-x11".into());
        }
        args.extend([
            "--virtual-monitor".into(),
            "1280x800".into(),
            format!("--wayland-display={}", self.wayland_display).into(),
        ]);
        let id = self.launch("mutter", Path::new(MUTTER), &args)?;
        self.wait_socket("mutter's Wayland socket", &id)?;
        if xwayland {
            self.xwayland = Some(self.wait_xwayland(&id)?);
        }
        Ok(())
    }

    /// Waits until the compositor `id` (still running) accepts a client on the desktop's
    /// Wayland socket.
    fn wait_socket(&self, what: &str, id: &ProcessId) -> Result<()> {
        let socket = self.wayland_socket();
        poll(what, self.start_deadline, || {
            self.check_running(id)?;
            Ok(match std::os::unix::net::UnixStream::connect(&socket) {
                Ok(_) => Poll::Ready(()),
                Err(e) => Poll::Pending(format!("{}: {e}", socket.display())),
            })
        })
    }

    /// sway in a user namespace of its own (uid and gid 65534 there, this process's outside),
    /// with a config that turns XWayland off and sets the output's size, then waits until its
    /// Wayland socket (`wayland-N` in the private directory) and IPC socket accept a client.
    fn start_sway_compositor(&mut self) -> Result<()> {
        for program in [SWAY, UNSHARE] {
            if !Path::new(program).exists() {
                bail!("{program} is not installed (scripts/ensure-deps.sh installs it)");
            }
        }
        let config = self.dir.join("sway.config");
        std::fs::write(
            &config,
            "xwayland disable\n\
             output HEADLESS-1 resolution 1280x800 position 0 0\n\
             focus_follows_mouse no\n",
        )?;
        let args: Vec<OsString> = vec![
            "--user".into(),
            "--map-user=65534".into(),
            "--map-group=65534".into(),
            "--".into(),
            SWAY.into(),
            "--config".into(),
            config.into(),
        ];
        let mut env = self.env();
        env.extend(
            [
                ("WLR_BACKENDS", "headless"),
                ("WLR_LIBINPUT_NO_DEVICES", "1"),
                ("WLR_RENDERER", "pixman"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let (id, _) = self
            .procs
            .launch("sway", Path::new(UNSHARE), &args, &env, None)?;
        let (display, swaysock) = poll(
            "sway's Wayland and IPC sockets",
            self.start_deadline,
            || {
                self.check_running(&id)?;
                let names: Vec<String> = std::fs::read_dir(&self.dir)?
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                let display = names.iter().find(|n| {
                    n.strip_prefix("wayland-")
                        .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
                });
                let ipc = names
                    .iter()
                    .find(|n| n.starts_with("sway-ipc.") && n.ends_with(".sock"));
                let (Some(display), Some(ipc)) = (display, ipc) else {
                    return Ok(Poll::Pending(format!("sockets so far: {names:?}")));
                };
                for socket in [display, ipc] {
                    if let Err(e) = std::os::unix::net::UnixStream::connect(self.dir.join(socket)) {
                        return Ok(Poll::Pending(format!("{socket}: {e}")));
                    }
                }
                Ok(Poll::Ready((display.clone(), self.dir.join(ipc))))
            },
        )?;
        self.wayland_display = display;
        self.swaysock = Some(swaysock);
        Ok(())
    }

    /// KWin on a virtual framebuffer, from a plain copy of `kwin_wayland` (no file
    /// capability), then waits until its Wayland socket accepts a client and it owns
    /// `org.kde.KWin` on the session bus (the name a Plasma session's programs, the driver's
    /// doctor among them, know it by).
    fn start_kwin_compositor(&mut self) -> Result<()> {
        if !Path::new(KWIN).exists() {
            bail!("{KWIN} is not installed (scripts/ensure-deps.sh installs it)");
        }
        let wrapped = self.kwin == KwinStart::Wrapped;
        let copy = self.dir.join(match self.kwin {
            KwinStart::Unnamed(name) => name,
            KwinStart::Plain | KwinStart::Wrapped => KWIN_NAME,
        });
        std::fs::copy(KWIN, &copy).context("copying kwin_wayland")?;
        let mut args: Vec<OsString> = vec![
            "--virtual".into(),
            "--no-lockscreen".into(),
            "--width".into(),
            "1280".into(),
            "--height".into(),
            "800".into(),
        ];
        let mut env = self.env();
        let program = if wrapped {
            // The wrapper runs `kwin_wayland` from PATH: the copy comes first.
            let wrapper = Path::new(KWIN_WRAPPER);
            if !wrapper.exists() {
                bail!("{KWIN_WRAPPER} is not installed (scripts/ensure-deps.sh installs it)");
            }
            for (k, v) in env.iter_mut() {
                if k == "PATH" {
                    *v = format!("{}:{v}", self.dir.display());
                }
            }
            wrapper.to_path_buf()
        } else {
            args.extend(["--socket".into(), self.wayland_display.clone().into()]);
            copy
        };
        if let KwinStart::Unnamed(_) = self.kwin {
            // KWin's own Qt platform plugin loads only in an executable named kwin_wayland,
            // unless this says it is KWin all the same.
            env.push(("KWIN_FORCE_OWN_QPA".into(), "1".into()));
        }
        // The copy was just written: a process another test thread forked meanwhile may hold
        // its write descriptor until it execs, and the kernel refuses to run a file open for
        // writing (ETXTBSY). Tried again for a moment.
        let mut tries = 0;
        let id = loop {
            match self
                .procs
                .launch("kwin_wayland", &program, &args, &env, None)
            {
                Ok((id, _)) => break id,
                Err(e) if tries < 20 && text_file_busy(&e) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e),
            }
        };
        self.wait_socket("KWin's Wayland socket", &id)?;
        poll(
            "org.kde.KWin on the session bus",
            self.start_deadline,
            || {
                self.check_running(&id)?;
                Ok(if self.has_bus_name("org.kde.KWin")? {
                    Poll::Ready(())
                } else {
                    Poll::Pending("not owned yet".into())
                })
            },
        )
    }

    /// Whether `name` has an owner on this desktop's session bus (asked with `gdbus`).
    pub fn has_bus_name(&self, name: &str) -> Result<bool> {
        let out = self
            .command("/usr/bin/gdbus")
            .args([
                "call",
                "--session",
                "--dest",
                "org.freedesktop.DBus",
                "--object-path",
                "/org/freedesktop/DBus",
                "--method",
                "org.freedesktop.DBus.NameHasOwner",
                name,
            ])
            .stdin(Stdio::null())
            .output()
            .context("running gdbus")?;
        if !out.status.success() {
            bail!(
                "NameHasOwner {name}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).contains("true"))
    }

    /// With KWin: its windows as KWin's scripting API (`workspace.clientList()`) gives them,
    /// one JSON object each: `class` (resource class: the app id), `caption`, `pid` (KWin's,
    /// from the client's socket credentials), `active`, `fullScreen`, `x`, `y`, `width`,
    /// `height`. A script is loaded through `org.kde.kwin.Scripting` on the session bus; it
    /// prints its answer to KWin's log, where this reads it.
    pub fn kwin_windows(&self) -> Result<Vec<serde_json::Value>> {
        if self.compositor != Compositor::Kwin {
            bail!("kwin_windows: this desktop does not run KWin");
        }
        let n = self.app_counter.fetch_add(1, Ordering::Relaxed);
        let tag = format!("nish-query-{n}-{:08x}", entropy() >> 32);
        let script = self.dir.join(format!("{tag}.js"));
        std::fs::write(&script, kwin_query_script(&tag))?;
        let gdbus = |method: &str, args: &[&str]| -> Result<()> {
            let out = self
                .command("/usr/bin/gdbus")
                .args([
                    "call",
                    "--session",
                    "--dest",
                    "org.kde.KWin",
                    "--object-path",
                    "/Scripting",
                    "--method",
                ])
                .arg(format!("org.kde.kwin.Scripting.{method}"))
                .args(args)
                .stdin(Stdio::null())
                .output()
                .context("running gdbus")?;
            if !out.status.success() {
                bail!(
                    "KWin {method}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            Ok(())
        };
        gdbus("loadScript", &[&script.to_string_lossy(), &tag])?;
        gdbus("start", &[])?;
        let log = self.procs.log_path("kwin_wayland");
        let head = format!("js: {tag} ");
        let lines = poll("KWin's answer to a script", self.start_deadline, || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<String> = text
                .lines()
                .filter_map(|l| l.strip_prefix(&head).map(str::to_string))
                .collect();
            Ok(if lines.last().is_some_and(|l| l == "end") {
                Poll::Ready(lines)
            } else {
                Poll::Pending(format!("{} lines so far", lines.len()))
            })
        })?;
        gdbus("unloadScript", &[&tag])?;
        let _ = std::fs::remove_file(&script);
        lines
            .iter()
            .filter(|l| *l != "end")
            .map(|l| serde_json::from_str(l).with_context(|| format!("KWin said {l}")))
            .collect()
    }

    /// With sway: runs `swaymsg` with `args` on its IPC socket and returns its output (e.g.
    /// `-t get_tree`: JSON with each window's pid, app id, rectangle, focus and fullscreen).
    pub fn swaymsg(&self, args: &[&str]) -> Result<String> {
        let sock = self
            .swaysock
            .as_ref()
            .context("swaymsg: this desktop does not run sway")?;
        let out = self
            .command(SWAYMSG)
            .env("SWAYSOCK", sock)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("running swaymsg")?;
        if !out.status.success() {
            bail!(
                "swaymsg {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// With KWin: the file its output goes to (where a script's `print` lands).
    pub fn kwin_log(&self) -> Option<PathBuf> {
        (self.compositor == Compositor::Kwin).then(|| self.procs.log_path("kwin_wayland"))
    }

    /// With sway: its IPC socket (for `SWAYSOCK`).
    pub fn sway_socket(&self) -> Option<&Path> {
        self.swaysock.as_deref()
    }

    /// The compositor this desktop runs.
    pub fn compositor(&self) -> Compositor {
        self.compositor
    }

    /// Waits for mutter's XWayland: the display number from mutter's log line "Using public
    /// X11 display :N", the cookie file mutter writes in `XDG_RUNTIME_DIR`, and an X client
    /// (`xdpyinfo`) connecting with them.
    fn wait_xwayland(&self, mutter: &ProcessId) -> Result<(String, PathBuf)> {
        let log = self.procs.log_path(&mutter.role);
        poll("mutter's XWayland display", self.start_deadline, || {
            self.check_running(mutter)?;
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let Some(display) = text.lines().find_map(|l| {
                let rest = l.split("Using public X11 display ").nth(1)?;
                let d = rest.split([',', ' ']).next()?;
                (d.starts_with(':') && d[1..].chars().all(|c| c.is_ascii_digit()) && d.len() > 1)
                    .then(|| d.to_string())
            }) else {
                return Ok(Poll::Pending("no X display in mutter's log yet".into()));
            };
            let auth = std::fs::read_dir(&self.dir)?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(".mutter-Xwaylandauth."))
                });
            let Some(auth) = auth else {
                return Ok(Poll::Pending(format!("{display}: no Xauthority file yet")));
            };
            let up = self
                .command("/usr/bin/xdpyinfo")
                .env("DISPLAY", &display)
                .env("XAUTHORITY", &auth)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .context("running xdpyinfo")?
                .success();
            Ok(if up {
                Poll::Ready((display.clone(), auth))
            } else {
                Poll::Pending(format!("{display} does not accept a client yet"))
            })
        })
    }

    fn start_atspi(&mut self) -> Result<()> {
        let launcher = self.launch(
            "at-spi-bus-launcher",
            Path::new(AT_SPI_BUS_LAUNCHER),
            &["--launch-immediately".into()],
        )?;
        let a11y = atspi::wait_a11y_bus(self.session_bus.clone(), self.start_deadline, launcher)?;
        self.a11y_bus = a11y.clone();
        self.launch("at-spi2-registryd", Path::new(AT_SPI_REGISTRYD), &[])?;
        atspi::set_accessibility_enabled(self.session_bus.clone(), true)?;
        let db = self.dir.join(".config/dconf/user");
        poll(
            "the accessibility setting in dconf (~/.config/dconf/user)",
            self.start_deadline,
            || {
                Ok(match std::fs::metadata(&db) {
                    Ok(m) if m.len() > 0 => Poll::Ready(()),
                    _ => Poll::Pending("not written yet".into()),
                })
            },
        )?;
        atspi::wait_registry(a11y, self.start_deadline)
    }

    /// PipeWire and WirePlumber (once).
    fn start_pipewire(&mut self) -> Result<()> {
        if self.pipewire {
            return Ok(());
        }
        for (role, program) in [("pipewire", PIPEWIRE), ("wireplumber", WIREPLUMBER)] {
            if !Path::new(program).exists() {
                bail!("{program} is not installed (scripts/ensure-deps.sh installs it)");
            }
            self.launch(role, Path::new(program), &[])?;
        }
        self.pipewire = true;
        Ok(())
    }

    /// What the package's desktop file (`systemd/nish-driver.desktop`) does for an installed
    /// broker, for the workspace's built `nish-driver` (when it is built): in the desktop's
    /// own applications directory, the same entry with its path in `Exec`, so that KWin, which
    /// finds a client's desktop file by its executable, offers it its window screen cast.
    fn trust_broker_in_kwin(&self) -> Result<()> {
        let Ok(exe) = crate::session::workspace_bin("nish-driver") else {
            return Ok(());
        };
        let exe = std::fs::canonicalize(&exe)?;
        let shipped = include_str!("../../systemd/nish-driver.desktop");
        let entry = shipped.replace(
            "Exec=/usr/bin/nish-driver serve",
            &format!("Exec={} serve", exe.display()),
        );
        if entry == shipped {
            bail!("systemd/nish-driver.desktop has no Exec=/usr/bin/nish-driver serve line");
        }
        let apps = self.dir.join(".local/share/applications");
        std::fs::create_dir_all(&apps)?;
        std::fs::write(apps.join("nish-driver.desktop"), entry)?;
        Ok(())
    }

    /// PipeWire and WirePlumber, then the portal by activation: waits until the frontend
    /// reports a RemoteDesktop version.
    fn start_portal(&mut self) -> Result<()> {
        self.start_pipewire()?;
        poll(
            "the desktop portal (D-Bus activation)",
            self.start_deadline,
            || {
                Ok(
                    match self.portal_version("org.freedesktop.portal.RemoteDesktop") {
                        Ok(v) => Poll::Ready(v),
                        Err(e) => Poll::Pending(format!("{e:#}")),
                    },
                )
            },
        )?;
        Ok(())
    }

    /// The `version` property of a desktop portal interface (e.g.
    /// `org.freedesktop.portal.ScreenCast`) on this desktop's session bus, read with `gdbus`
    /// (the call activates the portal if it is not running yet). An error when the frontend
    /// does not offer the interface.
    pub fn portal_version(&self, interface: &str) -> Result<u32> {
        let out = self
            .command("/usr/bin/gdbus")
            .args([
                "call",
                "--session",
                "--timeout",
                "10",
                "--dest",
                "org.freedesktop.portal.Desktop",
                "--object-path",
                "/org/freedesktop/portal/desktop",
                "--method",
                "org.freedesktop.DBus.Properties.Get",
                interface,
                "version",
            ])
            .stdin(Stdio::null())
            .output()
            .context("running gdbus")?;
        if !out.status.success() {
            bail!(
                "{interface}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        // gdbus prints e.g. "(<uint32 1>,)".
        let text = String::from_utf8_lossy(&out.stdout);
        text.split("uint32 ")
            .nth(1)
            .and_then(|r| r.split('>').next())
            .and_then(|n| n.trim().parse().ok())
            .with_context(|| format!("{interface}: unexpected answer {}", text.trim()))
    }

    /// The environment for children: `PATH`, `LANG`, `XDG_RUNTIME_DIR` and `HOME` (both the
    /// private directory), `XDG_SESSION_TYPE=wayland`, `WAYLAND_DISPLAY`, `GDK_BACKEND=wayland`,
    /// `XDG_DESKTOP_PORTAL_DIR` (the desktop's own portal backends) and
    /// `DBUS_SESSION_BUS_ADDRESS`. No `DISPLAY`. Apply it to a cleared environment.
    pub fn env(&self) -> Vec<(String, String)> {
        let path = std::env::var("PATH")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let dir = self.dir.to_string_lossy().into_owned();
        let mut env = vec![
            ("PATH".to_string(), path),
            ("LANG".to_string(), "C.UTF-8".to_string()),
            ("XDG_RUNTIME_DIR".to_string(), dir.clone()),
            ("HOME".to_string(), dir.clone()),
            // What HOME implies; set because dbus-daemon looks up its home in the password
            // database, not in HOME, and it must find the desktop's own service files.
            ("XDG_DATA_HOME".to_string(), format!("{dir}/.local/share")),
            ("XDG_SESSION_TYPE".to_string(), "wayland".to_string()),
            ("GDK_BACKEND".to_string(), "wayland".to_string()),
            (
                "XDG_DESKTOP_PORTAL_DIR".to_string(),
                format!("{dir}/portals"),
            ),
        ];
        if self.compositor == Compositor::Kwin {
            env.push(("XDG_CURRENT_DESKTOP".to_string(), "KDE".to_string()));
        }
        // Empty only while sway starts (it names its own socket).
        if !self.wayland_display.is_empty() {
            env.push(("WAYLAND_DISPLAY".to_string(), self.wayland_display.clone()));
        }
        if !self.session_bus.is_empty() {
            env.push((
                "DBUS_SESSION_BUS_ADDRESS".to_string(),
                self.session_bus.clone(),
            ));
        }
        if let Ok(keep) = std::env::var("NISH_KEEP_E2E_DIR") {
            env.push(("NISH_KEEP_E2E_DIR".to_string(), keep));
        }
        env
    }

    /// A command for `program` with a cleared environment set to [`WaylandDesktop::env`]. The
    /// caller owns what it spawns.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut cmd = std::process::Command::new(program);
        cmd.env_clear().envs(self.env());
        cmd
    }

    /// Starts `app` as a native Wayland client and returns once it is on the AT-SPI registry
    /// with a frame that has children. GTK apps run with `GDK_BACKEND=wayland`, Chromium with
    /// `--ozone-platform=wayland`. [`App::Gtk4Demo`] is the GTK 4 app (gtk4-widget-factory
    /// never registers with AT-SPI).
    pub fn spawn(&self, app: App) -> Result<WaylandApp> {
        let n = self.app_counter.fetch_add(1, Ordering::Relaxed);
        let name = app.name();
        let role = format!("{name}-{n}");
        let (program, args) = app.command_line(&self.dir, n, &["--ozone-platform=wayland"])?;
        let program = resolve(&program)?;
        let t0 = Instant::now();
        let id = self.launch(&role, &program, &args)?;
        let deadline = Instant::now() + self.app_deadline;
        // The registry wait runs in slices so an app that exits is reported with its log.
        let atspi = loop {
            self.check_running(&id)?;
            match atspi::wait_app(self.a11y_bus.clone(), id.pid, Duration::from_secs(2)) {
                Ok(a) => break a,
                Err(e) if Instant::now() >= deadline => {
                    return Err(e.context(format!("{name} (pid {}) on AT-SPI", id.pid)));
                }
                Err(_) => {}
            }
        };
        Ok(WaylandApp {
            pid: id.pid,
            name,
            process: id,
            atspi,
            ready_after: t0.elapsed(),
        })
    }

    /// Waits until app `pid` exposes a web document whose name starts with `title` and which
    /// has children.
    pub fn wait_atspi_document(
        &self,
        pid: u32,
        title: &str,
        within: Duration,
    ) -> Result<AtspiDocument> {
        atspi::wait_document(self.a11y_bus.clone(), pid, title.to_string(), within)
    }

    /// With [`WaylandDesktop::start_with_xwayland`]: XWayland's display (`:N`).
    pub fn x_display(&self) -> Option<&str> {
        self.xwayland.as_ref().map(|(d, _)| d.as_str())
    }

    /// With [`WaylandDesktop::start_with_xwayland`]: a command for `program` as an X client of
    /// XWayland ([`WaylandDesktop::command`] plus `DISPLAY` and `XAUTHORITY`); `None` without.
    pub fn x_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Option<std::process::Command> {
        let (display, auth) = self.xwayland.as_ref()?;
        let mut cmd = self.command(program);
        cmd.env("DISPLAY", display).env("XAUTHORITY", auth);
        Some(cmd)
    }

    /// The applications registered on the AT-SPI registry now.
    pub fn atspi_apps(&self) -> Result<Vec<AtspiApp>> {
        atspi::list_apps(self.a11y_bus.clone())
    }

    /// The window ids the driver gives `app`'s top-level accessibles on Wayland, computed here
    /// from the documented formula (`N << 32 | fnv1a32(path)`, `N` from the app's unique bus
    /// name `:1.N`) as an independent reference.
    pub fn window_ids(&self, app: &WaylandApp) -> Result<Vec<u64>> {
        let serial: u64 = app
            .atspi
            .bus_name
            .strip_prefix(":1.")
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("unique bus name {}", app.atspi.bus_name))?;
        let paths = atspi::top_level_paths(self.a11y_bus.clone(), app.atspi.bus_name.clone())?;
        Ok(paths
            .iter()
            .map(|p| {
                let mut h: u32 = 0x811c_9dc5;
                for b in p.bytes() {
                    h ^= u32::from(b);
                    h = h.wrapping_mul(0x0100_0193);
                }
                (serial << 32) | u64::from(h)
            })
            .collect())
    }

    /// Ends one app the desktop started (and its descendants).
    pub fn kill_app(&self, app: &WaylandApp) -> Result<()> {
        let Some(left) = self.procs.end(&app.process, Duration::from_secs(3)) else {
            bail!(
                "{} (pid {}) was not started by this desktop",
                app.name,
                app.pid
            );
        };
        if left.is_empty() {
            Ok(())
        } else {
            Err(procs::survivors_error(&left))
        }
    }

    /// Every process the desktop started and every descendant of them now, in start order.
    pub fn processes(&self) -> Vec<ProcessId> {
        self.procs.processes()
    }

    /// The desktop's processes (and descendants) whose executable is an X server
    /// ([`X_SERVERS`]), as `name (pid N)`; empty on a healthy Wayland desktop (on one from
    /// [`WaylandDesktop::start_with_xwayland`], mutter's Xwayland).
    pub fn x_servers(&self) -> Vec<String> {
        self.processes()
            .iter()
            .filter_map(|p| {
                let exe = std::fs::read_link(format!("/proc/{}/exe", p.pid)).ok()?;
                let name = exe.file_name()?.to_string_lossy().into_owned();
                X_SERVERS
                    .contains(&name.as_str())
                    .then(|| format!("{name} (pid {})", p.pid))
            })
            .collect()
    }

    /// The Wayland display name (`WAYLAND_DISPLAY`).
    pub fn wayland_display(&self) -> &str {
        &self.wayland_display
    }

    /// The compositor's socket.
    pub fn wayland_socket(&self) -> PathBuf {
        self.dir.join(&self.wayland_display)
    }

    /// The private directory (mode 0700): `XDG_RUNTIME_DIR` and `HOME` of the apps.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session bus address.
    pub fn session_bus_address(&self) -> &str {
        &self.session_bus
    }

    /// The accessibility bus address.
    pub fn a11y_bus_address(&self) -> &str {
        &self.a11y_bus
    }

    /// Time from [`WaylandDesktop::start`] to everything up.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// Ends every process the desktop started, newest first, each with its descendants
    /// (`SIGTERM`, a bounded wait, `SIGKILL`), and removes the directory. Idempotent.
    pub fn stop(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let survivors = self.procs.end_all(Duration::from_secs(3));
        let unmounted = mounts::unmount_leftovers(&self.dir);
        let removed = if std::env::var_os(KEEP_ENV).is_some_and(|v| v == "1") {
            eprintln!(
                "nish-testdesk: {KEEP_ENV}=1: keeping {} (logs in logs/)",
                self.dir.display()
            );
            Ok(())
        } else {
            std::fs::remove_dir_all(&self.dir)
        };
        if !survivors.is_empty() {
            return Err(procs::survivors_error(&survivors));
        }
        unmounted?;
        removed.with_context(|| format!("removing {}", self.dir.display()))
    }
}

/// Whether `e` is the kernel's refusal to run a file that a process holds open for writing.
fn text_file_busy(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            == Some(nix::errno::Errno::ETXTBSY as i32)
    })
}

/// The KWin script of [`WaylandDesktop::kwin_windows`]: one line per window, then `end`, each
/// after `tag`.
fn kwin_query_script(tag: &str) -> String {
    format!(
        r#"var all = workspace.clientList();
for (var i = 0; i < all.length; i++) {{
    var c = all[i];
    print("{tag} " + JSON.stringify({{class: String(c.resourceClass), caption: String(c.caption),
        pid: c.pid, active: c.active, fullScreen: c.fullScreen, x: c.x, y: c.y,
        width: c.width, height: c.height}}));
}}
print("{tag} end");
"#
    )
}

impl Drop for WaylandDesktop {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!(
                "nish-testdesk: teardown of Wayland display {}: {e:#}",
                self.wayland_display
            );
        }
    }
}
