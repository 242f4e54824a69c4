//! Test support for nish-driver: a private headless desktop for end-to-end tests, benchmarks
//! and the demo.
//!
//! [`Desktop::start`] brings up, in a private 0700 directory that serves as the apps'
//! `XDG_RUNTIME_DIR` and `HOME`:
//!
//! - `Xvfb` on a free display number (1280x800x24, no TCP), checked for XTEST, XInput 2,
//!   Composite, SHAPE, XFIXES and RANDR; or, with [`DesktopBuilder::nested`], an outer Xvfb
//!   with Xephyr inside it as the desktop, so that the person (played with
//!   [`Desktop::person_xdotool`] on the outer display) arrives from a real input device and not
//!   through XTEST;
//! - a private session bus (`dbus-daemon --session --nofork`, so the daemon stays the desktop's
//!   own child; `--print-pid` confirms its pid);
//! - the AT-SPI bus launcher and registry (waiting until `org.a11y.Bus.GetAddress` answers and
//!   the registry owns its name), with `org.a11y.Status.IsEnabled` set as a screen reader would
//!   (and waited for in dconf: Chromium reads it when it starts and exposes itself on AT-SPI
//!   only when it is on);
//! - openbox (waiting for `_NET_SUPPORTING_WM_CHECK`).
//!
//! Both desktops mask the document portal on their session bus (its FUSE mount at
//! `$XDG_RUNTIME_DIR/doc` is of no use here and, left by a daemon killed under load, blocks the
//! teardown), and the teardown lazily unmounts anything still mounted in the directory. Each
//! desktop's portal frontend sees its own desktop's portal backends only
//! (`XDG_DESKTOP_PORTAL_DIR`): GTK's on X11, not every backend the machine has.
//!
//! [`WaylandDesktop::start`] brings up the same in a GNOME Wayland session instead: a private
//! session bus, `mutter --headless --wayland --no-x11` with one 1280x800 virtual monitor, and
//! AT-SPI; apps run as native Wayland clients and no X server runs.
//! [`WaylandDesktop::start_sway`] does the same with sway (wlroots) headless as the compositor,
//! [`WaylandDesktop::start_kwin`] with KDE's KWin on a virtual framebuffer.
//!
//! Every wait polls with a deadline and names what did not come up. [`Desktop::spawn`] starts
//! GTK 3, GTK 4 or Chromium apps and returns once their window is managed;
//! [`Desktop::wait_atspi_app`] waits until an app is on the AT-SPI registry, and
//! [`Desktop::wait_atspi_document`] until a web page's accessible tree is there. The person's
//! side (`xdotool`, the pointer, the active window, screenshots, windows by name) is there to
//! play the human in tests. Set `NISH_TESTDESK_KEEP=1` to keep the directory and every
//! process's log after teardown.
//!
//! [`Shared`] holds one desktop for the tests of a test binary that can take turns on it,
//! started by the first of them and torn down when the process exits.
//!
//! Teardown (drop or [`Desktop::stop`]) signals only the processes the desktop started and their
//! descendants (found through `/proc`, each re-identified by its start time), newest first,
//! `SIGTERM` then `SIGKILL`, and removes the directory. Every process is spawned with a
//! parent-death signal, so even a killed test run does not leave the desktop's own processes
//! behind.
//!
//! ```no_run
//! use nish_testdesk::{App, Desktop};
//! use std::time::Duration;
//!
//! let desk = Desktop::start()?;
//! let app = desk.spawn(App::Gtk3WidgetFactory)?;
//! let on_registry = desk.wait_atspi_app(app.pid, Duration::from_secs(20))?;
//! assert!(on_registry.frame_children > 0);
//! desk.xdotool(&["mousemove", "10", "10"])?;
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod agents;
mod atspi;
pub mod dbus;

mod desktop;
mod mounts;
mod procs;
pub mod session;
mod shared;

mod sys;
pub mod wait;
mod wayland;
mod x11;

pub use atspi::{AtspiApp, AtspiDocument};
pub use desktop::{App, AppHandle, Desktop, DesktopBuilder, KEEP_ENV};
pub use procs::ProcessId;
pub use shared::{Shared, SharedGuard};
pub use wayland::{Compositor, WaylandApp, WaylandDesktop, X_SERVERS};
pub use x11::{Pointer, REQUIRED_EXTENSIONS, XWindow};

/// A test app shipped in `tests/apps/` (a Python script; run it with [`App::Command`]).
pub fn test_app(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("apps")
        .join(name)
}

/// A test page shipped in `tests/pages/` (for [`App::Chromium`]).
pub fn page(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("pages")
        .join(name)
}

/// The runtime the desktop tests drive their bus clients, stand-in apps and relays on: two
/// worker threads, with I/O and timers.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
