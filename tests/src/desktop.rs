//! The private headless desktop: Xvfb, a session bus, the AT-SPI bus and registry, openbox.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use x11rb::rust_connection::RustConnection;

use crate::atspi::{self, AtspiApp, AtspiDocument};
use crate::mounts;
use crate::procs::{self, ProcessId};
use crate::wait::{Poll, poll};
use crate::x11::{self, Pointer, XWindow};

/// Programs the desktop runs (Debian paths).
const XVFB: &str = "/usr/bin/Xvfb";
const XEPHYR: &str = "/usr/bin/Xephyr";
pub(crate) const DBUS_DAEMON: &str = "/usr/bin/dbus-daemon";
pub(crate) const AT_SPI_BUS_LAUNCHER: &str = "/usr/libexec/at-spi-bus-launcher";
pub(crate) const AT_SPI_REGISTRYD: &str = "/usr/libexec/at-spi2-registryd";
const OPENBOX: &str = "/usr/bin/openbox";
const CHROMIUM: &str = "/usr/bin/chromium";

/// The portal backends an X11 desktop ships: GTK's, the generic one a desktop without its own
/// (openbox) uses. Without a portal directory of its own, the portal frontend that Chromium
/// activates on the session bus would start every backend the machine has (xdg-desktop-portal
/// 1.16 falls back to any that offers an interface): GNOME's and KDE's too, beside the app
/// under test, as no machine with one desktop does.
const X11_PORTALS: &[&str] = &["gtk.portal"];

/// Set to `1` to keep the private directory (with every process's log in `logs/`) at teardown.
pub const KEEP_ENV: &str = "NISH_TESTDESK_KEEP";

/// An application the tests drive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum App {
    /// `gtk3-widget-factory` (GTK 3, ~260 accessibles).
    Gtk3WidgetFactory,
    /// `gtk3-demo` (GTK 3).
    Gtk3Demo,
    /// `gtk4-demo` (GTK 4; gtk4-widget-factory never registers with AT-SPI).
    Gtk4Demo,
    /// Chromium showing a local page, with renderer accessibility forced on.
    Chromium {
        /// An HTML file (see [`crate::page`]).
        page: PathBuf,
    },
    /// Any other program, run with the desktop's environment.
    Command {
        /// The program.
        program: PathBuf,
        /// Its arguments.
        args: Vec<OsString>,
    },
}

impl App {
    /// A short name for logs and errors.
    pub fn name(&self) -> String {
        match self {
            App::Gtk3WidgetFactory => "gtk3-widget-factory".into(),
            App::Gtk3Demo => "gtk3-demo".into(),
            App::Gtk4Demo => "gtk4-demo".into(),
            App::Chromium { .. } => "chromium".into(),
            App::Command { program, .. } => program
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "command".into()),
        }
    }

    /// The program and arguments that start the app; `dir` holds per-run state (Chromium's
    /// profile `chromium-<n>`), `platform` goes first among Chromium's arguments (for example
    /// `--ozone-platform=wayland`). A page may carry a query (`dense.html?rows=700`).
    pub fn command_line(
        &self,
        dir: &Path,
        n: u32,
        platform: &[&str],
    ) -> Result<(PathBuf, Vec<OsString>)> {
        Ok(match self {
            App::Gtk3WidgetFactory => ("gtk3-widget-factory".into(), vec![]),
            App::Gtk3Demo => ("gtk3-demo".into(), vec![]),
            App::Gtk4Demo => ("gtk4-demo".into(), vec![]),
            App::Chromium { page } => {
                let text = page.display().to_string();
                let (file, query) = match text.split_once('?') {
                    Some((f, q)) => (PathBuf::from(f), format!("?{q}")),
                    None => (page.clone(), String::new()),
                };
                let page = file
                    .canonicalize()
                    .with_context(|| format!("page {}", file.display()))?;
                let profile = dir.join(format!("chromium-{n}"));
                let mut args: Vec<String> = platform.iter().map(|a| a.to_string()).collect();
                args.extend([
                    "--force-renderer-accessibility".to_string(),
                    "--no-sandbox".into(),
                    format!("--user-data-dir={}", profile.display()),
                    "--no-first-run".into(),
                    "--no-default-browser-check".into(),
                    "--disable-background-networking".into(),
                    "--disable-component-update".into(),
                    "--disable-sync".into(),
                    "--disable-quic".into(),
                    "--disable-gpu".into(),
                    "--password-store=basic".into(),
                    "--disable-features=Translate,MediaRouter".into(),
                    "--window-size=1200,760".into(),
                    format!("file://{}{query}", page.display()),
                ]);
                (
                    CHROMIUM.into(),
                    args.into_iter().map(OsString::from).collect(),
                )
            }
            App::Command { program, args } => (program.clone(), args.clone()),
        })
    }
}

/// An application the desktop started, once its top-level window is managed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppHandle {
    /// The process the desktop started (for Chromium, the browser process).
    pub pid: u32,
    /// Its top-level client window (in `_NET_CLIENT_LIST`, `_NET_WM_PID` == `pid`).
    pub window_id: u32,
    /// The app's short name.
    pub name: String,
    /// Identity of the process (pid and start time).
    pub process: ProcessId,
    /// From spawn to its window being managed.
    pub window_after: Duration,
}

/// Options of a desktop; see [`Desktop::builder`].
#[derive(Clone, Debug)]
pub struct DesktopBuilder {
    width: u16,
    height: u16,
    displays: std::ops::Range<u32>,
    atspi: bool,
    accessibility_enabled: bool,
    window_manager: bool,
    nested: bool,
    start_deadline: Duration,
    app_deadline: Duration,
}

impl Default for DesktopBuilder {
    fn default() -> Self {
        DesktopBuilder {
            width: 1280,
            height: 800,
            displays: 100..400,
            atspi: true,
            accessibility_enabled: true,
            window_manager: true,
            nested: false,
            start_deadline: Duration::from_secs(20),
            app_deadline: Duration::from_secs(45),
        }
    }
}

impl DesktopBuilder {
    /// Screen size (default 1280x800, depth 24).
    pub fn size(mut self, width: u16, height: u16) -> Self {
        self.width = width;
        self.height = height;
        self
    }

    /// Display numbers to pick from at random (default 100..400).
    pub fn displays(mut self, range: std::ops::Range<u32>) -> Self {
        self.displays = range;
        self
    }

    /// Start the AT-SPI bus launcher and registry (default true).
    pub fn atspi(mut self, on: bool) -> Self {
        self.atspi = on;
        self
    }

    /// Set the session's `org.a11y.Status.IsEnabled` to true at start, as a running screen
    /// reader does (default true). Chromium registers on AT-SPI only when it is true when
    /// Chromium starts; GTK apps register either way.
    pub fn accessibility_enabled(mut self, on: bool) -> Self {
        self.accessibility_enabled = on;
        self
    }

    /// Start openbox (default true).
    pub fn window_manager(mut self, on: bool) -> Self {
        self.window_manager = on;
        self
    }

    /// Nest the desktop so the person has a real input device (default false): an outer Xvfb,
    /// and inside it Xephyr, which is the desktop's display. The person is then played with
    /// [`Desktop::person_xdotool`] on the outer display, and arrives on the desktop from the
    /// "Xephyr virtual mouse/keyboard" devices, as a real mouse would; [`Desktop::xdotool`] on
    /// the desktop itself is XTEST, what any other program can inject. Controls that only the
    /// person may answer (the consent dialog, Continue) need this.
    pub fn nested(mut self, on: bool) -> Self {
        self.nested = on;
        self
    }

    /// Deadline of each start-up wait (default 20 s).
    pub fn start_deadline(mut self, d: Duration) -> Self {
        self.start_deadline = d;
        self
    }

    /// Deadline for an app's window in [`Desktop::spawn`] (default 45 s).
    pub fn app_deadline(mut self, d: Duration) -> Self {
        self.app_deadline = d;
        self
    }

    /// Starts the desktop.
    pub fn start(self) -> Result<Desktop> {
        Desktop::start_with(self)
    }
}

/// A private headless desktop. Dropping it (or [`Desktop::stop`]) ends every process it
/// started, and their descendants, and removes its directory.
#[derive(Debug)]
pub struct Desktop {
    opts: DesktopBuilder,
    dir: PathBuf,
    display: u32,
    /// The outer display of a nested desktop, where the person's input comes from.
    person_display: Option<u32>,
    session_bus: String,
    a11y_bus: Option<String>,
    x: Option<RustConnection>,
    root: u32,
    procs: procs::Group,
    app_counter: AtomicU32,
    timings: Vec<(&'static str, Duration)>,
    startup: Duration,
    stopped: bool,
}

/// Something random enough to pick display numbers and directory names (no RNG dependency).
pub(crate) fn entropy() -> u64 {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = u64::from(COUNTER.fetch_add(1, Ordering::Relaxed));
    // SplitMix64 of the mix.
    let mut z = nanos ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9e37_79b9);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A display number no live server holds: no lock file, or one naming a process that is gone
/// (a server killed by SIGKILL leaves its lock and socket behind; the X server takes such a
/// stale lock over, and its socket with it).
fn display_free(n: u32) -> bool {
    let lock = PathBuf::from(format!("/tmp/.X{n}-lock"));
    !lock.exists() || display_lock_is_dead_or_ours(&lock)
}

pub(crate) fn private_dir() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    for _ in 0..16 {
        let dir = std::env::temp_dir().join(format!("nish-testdesk-{:012x}", entropy() >> 16));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).context("creating the desktop's private directory"),
        }
    }
    bail!("could not create a private directory under the temp dir")
}

impl Desktop {
    /// Starts a desktop with the default options.
    pub fn start() -> Result<Desktop> {
        DesktopBuilder::default().start()
    }

    /// Options for a desktop.
    pub fn builder() -> DesktopBuilder {
        DesktopBuilder::default()
    }

    fn start_with(opts: DesktopBuilder) -> Result<Desktop> {
        let t0 = Instant::now();
        let dir = private_dir()?;
        let procs = procs::Group::new(&dir);
        std::fs::create_dir(dir.join("logs"))?;
        // From here on, an error drops `desk`, which ends whatever was started.
        let mut desk = Desktop {
            opts,
            dir,
            display: 0,
            person_display: None,
            session_bus: String::new(),
            a11y_bus: None,
            x: None,
            root: 0,
            procs,
            app_counter: AtomicU32::new(0),
            timings: Vec::new(),
            startup: Duration::ZERO,
            stopped: false,
        };
        let mut mark = Instant::now();
        let mut lap = |desk: &mut Desktop, what: &'static str| {
            desk.timings.push((what, mark.elapsed()));
            mark = Instant::now();
        };

        if desk.opts.nested {
            desk.start_nested()?;
            lap(&mut desk, "xvfb and xephyr");
        } else {
            desk.start_xvfb()?;
            lap(&mut desk, "xvfb");
        }
        if desk.opts.window_manager {
            // openbox needs only the X server; it comes up while the buses do.
            desk.launch("openbox", Path::new(OPENBOX), &["--sm-disable".into()])?;
        }
        desk.start_session_bus()?;
        lap(&mut desk, "session bus");
        if desk.opts.atspi {
            desk.start_atspi()?;
            lap(&mut desk, "at-spi bus and registry");
        }
        if desk.opts.window_manager {
            desk.wait_window_manager()?;
            lap(&mut desk, "openbox");
        }
        desk.startup = t0.elapsed();
        Ok(desk)
    }

    /// Starts a process with the desktop environment and records it.
    fn launch(&self, role: &str, program: &Path, args: &[OsString]) -> Result<ProcessId> {
        Ok(self.procs.launch(role, program, args, &self.env(), None)?.0)
    }

    /// Fails with the log's tail when the recorded process `role` has exited.
    fn check_running(&self, id: &ProcessId) -> Result<()> {
        self.procs.check_running(id)
    }

    fn start_xvfb(&mut self) -> Result<()> {
        let (w, h) = (self.opts.width, self.opts.height);
        let (n, conn, root) = self.start_server("Xvfb", Path::new(XVFB), None, move |_| {
            vec![
                "-screen".into(),
                "0".into(),
                format!("{w}x{h}x24").into(),
                "-nolisten".into(),
                "tcp".into(),
                "-noreset".into(),
            ]
        })?;
        x11::check_extensions(&conn)?;
        self.display = n;
        self.x = Some(conn);
        self.root = root;
        Ok(())
    }

    /// An outer Xvfb (the person's side) and Xephyr inside it (the desktop).
    fn start_nested(&mut self) -> Result<()> {
        let (w, h) = (self.opts.width, self.opts.height);
        let (outer, outer_conn, _) =
            self.start_server("Xvfb-outer", Path::new(XVFB), None, move |_| {
                vec![
                    "-screen".into(),
                    "0".into(),
                    format!("{w}x{h}x24").into(),
                    "-nolisten".into(),
                    "tcp".into(),
                    "-noreset".into(),
                ]
            })?;
        drop(outer_conn);
        self.person_display = Some(outer);
        let (n, conn, root) =
            self.start_server("Xephyr", Path::new(XEPHYR), Some(outer), move |_| {
                vec![
                    "-screen".into(),
                    format!("{w}x{h}").into(),
                    "-no-host-grab".into(),
                    "-nolisten".into(),
                    "tcp".into(),
                    "-noreset".into(),
                ]
            })?;
        x11::check_extensions(&conn)?;
        self.display = n;
        self.x = Some(conn);
        self.root = root;
        Ok(())
    }

    /// Starts an X server on a free display number (random in the builder's range), with
    /// `DISPLAY` set to `host` (a nested server's outer display) when given; returns the number,
    /// a connection and the root window.
    fn start_server(
        &mut self,
        role: &str,
        program: &Path,
        host: Option<u32>,
        args: impl Fn(u32) -> Vec<OsString>,
    ) -> Result<(u32, RustConnection, u32)> {
        // Every free number in the range, in a random order: picking blindly failed when most
        // numbers held stale locks.
        let mut free: Vec<u32> = self
            .opts
            .displays
            .clone()
            .filter(|&n| display_free(n) && Some(n) != self.person_display)
            .collect();
        if free.is_empty() {
            bail!(
                "no free X display number in {:?} (every one has a live lock file in /tmp)",
                self.opts.displays
            );
        }
        let mut last_err = anyhow!("no display number tried");
        for attempt in 0..8 {
            if free.is_empty() {
                break;
            }
            let n = free.swap_remove((entropy() % free.len() as u64) as usize);
            let mut argv: Vec<OsString> = vec![format!(":{n}").into()];
            argv.extend(args(n));
            // The child's DISPLAY is the host display for a nested server.
            self.display = host.unwrap_or(n);
            let id = self.launch(role, program, &argv)?;
            let display = format!(":{n}");
            let up = poll(
                &format!("{role} on {display}"),
                self.opts.start_deadline,
                || {
                    self.check_running(&id)?;
                    match x11::connect(&display) {
                        // Another test's server may answer on this number while ours fails
                        // for want of it: ours is up only once the display's lock names it.
                        Ok(c) if display_lock_holder(n) == Some(id.pid) => Ok(Poll::Ready(c)),
                        Ok(_) => Ok(Poll::Pending(format!(
                            "{display} answers but its lock file does not name {role} {}",
                            id.pid
                        ))),
                        Err(e) => Ok(Poll::Pending(format!("{e:#}"))),
                    }
                },
            );
            match up {
                Ok((conn, root, _, _)) => return Ok((n, conn, root)),
                Err(e) => {
                    // Most likely someone else took the number meanwhile: forget this server
                    // and try another number.
                    last_err = e.context(format!("attempt {} on display :{n}", attempt + 1));
                    self.procs.end(&id, Duration::from_secs(2));
                }
            }
        }
        Err(last_err.context(format!("{role} did not start on any free display")))
    }

    fn start_session_bus(&mut self) -> Result<()> {
        let role = "dbus-daemon";
        mounts::mask_document_portal(&self.dir)?;
        mounts::choose_portals(&self.dir, X11_PORTALS)?;
        let socket = self.dir.join("bus");
        let args: Vec<OsString> = vec![
            "--session".into(),
            // The daemon stays our direct child (its pid is the one we spawned, which
            // --print-pid confirms), so it is reaped and never orphaned.
            "--nofork".into(),
            "--print-pid=1".into(),
            "--print-address=1".into(),
            format!("--address=unix:path={}", socket.display()).into(),
        ];
        let (id, stdout) = self.procs.launch(
            role,
            Path::new(DBUS_DAEMON),
            &args,
            &self.env(),
            Some(Stdio::piped()),
        )?;

        // Read "<address>\n<pid>\n" on a thread; the wait below is bounded.
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
        let mut address = None;
        let mut pid = None;
        let (address, pid) = poll(
            "the session bus (dbus-daemon --print-address)",
            self.opts.start_deadline,
            || {
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
            },
        )?;
        if pid != id.pid {
            bail!(
                "dbus-daemon reported pid {pid}, but the process started is {}",
                id.pid
            );
        }
        self.session_bus = address;
        Ok(())
    }

    fn start_atspi(&mut self) -> Result<()> {
        let launcher = self.launch(
            "at-spi-bus-launcher",
            Path::new(AT_SPI_BUS_LAUNCHER),
            &["--launch-immediately".into()],
        )?;
        let a11y =
            atspi::wait_a11y_bus(self.session_bus.clone(), self.opts.start_deadline, launcher)?;
        self.a11y_bus = Some(a11y.clone());
        self.launch("at-spi2-registryd", Path::new(AT_SPI_REGISTRYD), &[])?;
        if self.opts.accessibility_enabled {
            atspi::set_accessibility_enabled(self.session_bus.clone(), true)?;
            // The launcher stores the flag in GSettings (toolkit-accessibility), written by
            // dconf-service, which the session bus starts on first use; toolkits read the
            // stored value when they start. Wait until it is on disk.
            let db = self.dir.join(".config/dconf/user");
            poll(
                "the accessibility setting in dconf (~/.config/dconf/user)",
                self.opts.start_deadline,
                || {
                    Ok(match std::fs::metadata(&db) {
                        Ok(m) if m.len() > 0 => Poll::Ready(()),
                        _ => Poll::Pending("not written yet".into()),
                    })
                },
            )?;
        }
        atspi::wait_registry(a11y, self.opts.start_deadline)
    }

    fn wait_window_manager(&self) -> Result<()> {
        let id = self
            .procs
            .find("openbox")
            .context("openbox was not started")?;
        poll(
            "openbox (_NET_SUPPORTING_WM_CHECK on the root window)",
            self.opts.start_deadline,
            || {
                self.check_running(&id)?;
                Ok(match x11::wm_check(self.conn()?, self.root)? {
                    Some(w) => Poll::Ready(w),
                    None => Poll::Pending("no EWMH check window".into()),
                })
            },
        )?;
        Ok(())
    }

    fn conn(&self) -> Result<&RustConnection> {
        self.x.as_ref().context("the X server is not up")
    }

    /// The display name, `:N`.
    pub fn display_name(&self) -> String {
        format!(":{}", self.display)
    }

    /// The display number N.
    pub fn display_number(&self) -> u32 {
        self.display
    }

    /// The outer display (`:P`) of a nested desktop: where the person's input comes from.
    pub fn person_display(&self) -> Option<String> {
        self.person_display.map(|n| format!(":{n}"))
    }

    /// The private directory (mode 0700): `XDG_RUNTIME_DIR` and `HOME` of the apps.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session bus address (`DBUS_SESSION_BUS_ADDRESS`).
    pub fn session_bus_address(&self) -> &str {
        &self.session_bus
    }

    /// The accessibility bus address (from `org.a11y.Bus.GetAddress`), when AT-SPI runs.
    pub fn a11y_bus_address(&self) -> Option<&str> {
        self.a11y_bus.as_deref()
    }

    /// Root window size.
    pub fn size(&self) -> (u16, u16) {
        (self.opts.width, self.opts.height)
    }

    /// The root window id.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// Time from [`Desktop::start`] to everything up.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// Time of each start-up phase, in order.
    pub fn startup_phases(&self) -> &[(&'static str, Duration)] {
        &self.timings
    }

    /// The environment for children: `PATH`, `LANG`, `DISPLAY`, `DBUS_SESSION_BUS_ADDRESS`,
    /// `XDG_RUNTIME_DIR`, `HOME` (both the private directory), `XDG_SESSION_TYPE=x11`,
    /// `XDG_DESKTOP_PORTAL_DIR` (the desktop's own portal backends), and on a
    /// nested desktop `NISH_PERSON_DISPLAY` (the outer display, for scripts that play the person).
    /// Nothing else: apply it to a cleared environment (see [`Desktop::command`]), so
    /// `NO_AT_BRIDGE`, `GTK_A11Y`, `WAYLAND_DISPLAY` and `AT_SPI_BUS_ADDRESS` are unset and apps
    /// find the accessibility bus through the session bus, as on a real desktop.
    pub fn env(&self) -> Vec<(String, String)> {
        let path = std::env::var("PATH")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let dir = self.dir.to_string_lossy().into_owned();
        let mut env = vec![
            ("PATH".to_string(), path),
            ("LANG".to_string(), "C.UTF-8".to_string()),
            ("DISPLAY".to_string(), self.display_name()),
            ("XDG_RUNTIME_DIR".to_string(), dir.clone()),
            ("HOME".to_string(), dir.clone()),
            // What HOME implies; set because dbus-daemon looks up its home in the password
            // database, not in HOME, and it must find the desktop's own service files.
            ("XDG_DATA_HOME".to_string(), format!("{dir}/.local/share")),
            ("XDG_SESSION_TYPE".to_string(), "x11".to_string()),
            (
                "XDG_DESKTOP_PORTAL_DIR".to_string(),
                format!("{dir}/portals"),
            ),
        ];
        if !self.session_bus.is_empty() {
            env.push((
                "DBUS_SESSION_BUS_ADDRESS".to_string(),
                self.session_bus.clone(),
            ));
        }
        if let Some(outer) = self.person_display() {
            // For test scripts that play the person (tests/e2e/nishhost.py); apps ignore it.
            env.push(("NISH_PERSON_DISPLAY".to_string(), outer));
        }
        if let Ok(keep) = std::env::var("NISH_KEEP_E2E_DIR") {
            // The e2e scripts keep the broker's log and audit for a developer who asks.
            env.push(("NISH_KEEP_E2E_DIR".to_string(), keep));
        }
        env
    }

    /// A command for `program` with a cleared environment set to [`Desktop::env`]. The caller
    /// owns what it spawns (the desktop does not track it).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut cmd = std::process::Command::new(program);
        cmd.env_clear().envs(self.env());
        cmd
    }

    // ---- apps ------------------------------------------------------------------------------

    /// Starts `app` and returns once its top-level window is managed: listed in
    /// `_NET_CLIENT_LIST` with `_NET_WM_PID` equal to the started pid.
    pub fn spawn(&self, app: App) -> Result<AppHandle> {
        let deadline = self.opts.app_deadline;
        self.spawn_within(app, deadline)
    }

    /// [`Desktop::spawn`] with its own deadline.
    pub fn spawn_within(&self, app: App, within: Duration) -> Result<AppHandle> {
        let n = self.app_counter.fetch_add(1, Ordering::Relaxed);
        let name = app.name();
        let role = format!("{name}-{n}");
        let (program, args) = app.command_line(&self.dir, n, &[])?;
        let program = resolve(&program)?;
        let t0 = Instant::now();
        let id = self.launch(&role, &program, &args)?;
        let window = poll(
            &format!("the window of {name} (pid {})", id.pid),
            within,
            || {
                self.check_running(&id)?;
                let conn = self.conn()?;
                let clients = x11::client_list(conn, self.root)?;
                for &w in &clients {
                    if x11::window_pid(conn, w)? == Some(id.pid) {
                        return Ok(Poll::Ready(w));
                    }
                }
                Ok(Poll::Pending(format!("{} managed windows", clients.len())))
            },
        )?;
        Ok(AppHandle {
            pid: id.pid,
            window_id: window,
            name,
            process: id,
            window_after: t0.elapsed(),
        })
    }

    /// Waits until the AT-SPI registry lists an application whose connection's unix process id
    /// is `pid` and one of whose frames has children.
    pub fn wait_atspi_app(&self, pid: u32, within: Duration) -> Result<AtspiApp> {
        let a11y = self.a11y_bus.clone().context("AT-SPI is not running")?;
        atspi::wait_app(a11y, pid, within)
    }

    /// Waits until app `pid` exposes a web document (AT-SPI role `document web`) whose name (the
    /// page title) starts with `title` and which has children: the page is loaded and its
    /// accessible tree is built (Chromium builds it on the first request, which this makes).
    pub fn wait_atspi_document(
        &self,
        pid: u32,
        title: &str,
        within: Duration,
    ) -> Result<AtspiDocument> {
        let a11y = self.a11y_bus.clone().context("AT-SPI is not running")?;
        atspi::wait_document(a11y, pid, title.to_string(), within)
    }

    /// The applications registered on the AT-SPI registry now.
    pub fn atspi_apps(&self) -> Result<Vec<AtspiApp>> {
        let a11y = self.a11y_bus.clone().context("AT-SPI is not running")?;
        atspi::list_apps(a11y)
    }

    /// Ends one app the desktop started (and its descendants).
    pub fn kill_app(&self, app: &AppHandle) -> Result<()> {
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

    // ---- the person ------------------------------------------------------------------------

    /// Runs `xdotool` with the desktop's `DISPLAY` and returns its standard output; fails when
    /// it exits non-zero.
    pub fn xdotool(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command("xdotool")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("running xdotool")?;
        if !out.status.success() {
            bail!(
                "xdotool {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs `xdotool` as the person: on the outer display of a nested desktop, so the desktop
    /// gets it from its real input devices. Fails on a desktop that is not nested (there every
    /// input is XTEST, and nothing can play the person's own device).
    pub fn person_xdotool(&self, args: &[&str]) -> Result<String> {
        let outer = self
            .person_display()
            .context("the desktop is not nested: the person has no real device here")?;
        let out = std::process::Command::new("xdotool")
            .env_clear()
            .env("DISPLAY", outer)
            .env(
                "PATH",
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            )
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("running xdotool")?;
        if !out.status.success() {
            bail!(
                "xdotool {} (person) failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Where the pointer is (QueryPointer on the root).
    pub fn pointer(&self) -> Result<Pointer> {
        x11::pointer(self.conn()?, self.root)
    }

    /// `_NET_ACTIVE_WINDOW`.
    pub fn active_window(&self) -> Result<Option<u32>> {
        x11::active_window(self.conn()?, self.root)
    }

    /// The managed client windows (`_NET_CLIENT_LIST`) with their `_NET_WM_PID`.
    pub fn client_windows(&self) -> Result<Vec<(u32, Option<u32>)>> {
        let conn = self.conn()?;
        x11::client_list(conn, self.root)?
            .into_iter()
            .map(|w| Ok((w, x11::window_pid(conn, w)?)))
            .collect()
    }

    /// Every window below the root, at any level, whose `_NET_WM_NAME` or `WM_NAME` starts with
    /// `prefix` (the consent dialog's controls are child windows named like
    /// `nish-driver consent: allow`).
    pub fn find_windows_by_name(&self, prefix: &str) -> Result<Vec<XWindow>> {
        x11::find_by_name(self.conn()?, self.root, prefix)
    }

    /// Describes one window (position in root coordinates, size, name, mapped).
    pub fn window(&self, id: u32) -> Result<Option<XWindow>> {
        x11::describe(self.conn()?, self.root, id, 0)
    }

    /// Captures the whole screen (GetImage of the root) to a PNG file; returns its size.
    pub fn screenshot_root(&self, path: impl AsRef<Path>) -> Result<(u32, u32)> {
        x11::screenshot_root(
            self.conn()?,
            self.root,
            self.opts.width,
            self.opts.height,
            path.as_ref(),
        )
    }

    /// The X connection the desktop holds (for checks the helpers above do not cover).
    pub fn x11(&self) -> Result<&RustConnection> {
        self.conn()
    }

    // ---- teardown --------------------------------------------------------------------------

    /// Ends every process the desktop started, newest first (apps, openbox, the registry, the
    /// bus launcher, the session bus, Xvfb), each with its descendants: `SIGTERM`, a bounded
    /// wait, then `SIGKILL`. Removes the private directory. Idempotent.
    pub fn stop(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        // Close our X connection first so Xvfb has no client of ours left.
        self.x = None;
        let survivors = self.procs.end_all(Duration::from_secs(3));
        let unmounted = mounts::unmount_leftovers(&self.dir);
        // Xvfb removes its socket and lock when it ends by SIGTERM; after a SIGKILL they stay.
        for n in std::iter::once(self.display).chain(self.person_display) {
            let lock = PathBuf::from(format!("/tmp/.X{n}-lock"));
            if n != 0 && display_lock_is_dead_or_ours(&lock) {
                let _ = std::fs::remove_file(&lock);
                let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{n}"));
            }
        }
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

/// The pid the X server lock file of display `n` names, if it can be read.
fn display_lock_holder(n: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/tmp/.X{n}-lock"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// True when the lock file names no live process (its Xvfb was ours and is gone).
fn display_lock_is_dead_or_ours(lock: &Path) -> bool {
    match std::fs::read_to_string(lock) {
        Ok(text) => match text.trim().parse::<u32>() {
            Ok(pid) => procs::stat(pid).is_none_or(|s| matches!(s.state, 'Z' | 'X' | 'x')),
            Err(_) => false,
        },
        Err(_) => false,
    }
}

/// Finds `program` on `PATH` when it is a bare name, so a missing program is a clear error.
pub(crate) fn resolve(program: &Path) -> Result<PathBuf> {
    if program.components().count() > 1 {
        if program.exists() {
            return Ok(program.to_path_buf());
        }
        bail!("{} not found", program.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "{} not found on PATH (run scripts/ensure-deps.sh)",
                program.display()
            )
        })
}

impl Drop for Desktop {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!(
                "nish-testdesk: teardown of display :{}: {e:#}",
                self.display
            );
        }
    }
}
