//! A private X desktop and the real `nish-indicator` on a socketpair, for the indicator's
//! end-to-end tests.
//!
//! The desktop is nested, so that the person has a real input device: an outer Xvfb, and inside
//! it Xephyr (the desktop the indicator and openbox run on). The person is played with
//! `xdotool` on the *outer* display: Xephyr turns that into input from its own "Xephyr virtual
//! mouse/keyboard" devices, as a real mouse would arrive. `xdotool` on the inner display is
//! XTEST, what another program (or the driver) can inject; `--window` clicks are SendEvent.
#![allow(dead_code)]

pub mod wayland;

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use nish_proto::wire::codec;
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentApp, ConsentDialog, ConsentRequest, ConsentShown, HostProgram,
    IndicatorToBroker,
};
use nish_proto::wire::{ConnectTarget, Hello, LockdownReport, MAX_FRAME_BYTES, Role};
use x11rb::connection::Connection;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    AtomEnum, ConfigureWindowAux, ConnectionExt as _, CreateWindowAux, EventMask, ImageFormat,
    MapState, Window, WindowClass,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

/// `nish-indicator`, built next to this test (`cargo build --workspace --bins`).
pub fn indicator_binary() -> std::path::PathBuf {
    nish_testdesk::session::workspace_bin("nish-indicator").expect("the indicator's binary")
}

/// Plays the broker's connection service: opens X on `display` as the broker does (handshake
/// included) and sends it as the answer to request `id`, the descriptor attached.
pub fn hand_x(sock: &UnixStream, display: &str, id: u64) {
    use nish_agenthost::handover::{Endpoints, answer, open_x11, send_with_fd};
    let ep = Endpoints {
        display: Some(display.to_string()),
        ..Endpoints::default()
    };
    let (result, fd) = answer(open_x11(&ep));
    let frame = codec::encode(
        &BrokerToIndicator::Connected { id, result },
        MAX_FRAME_BYTES,
    )
    .expect("encodes");
    send_with_fd(sock, &frame, fd.as_ref()).expect("the X connection is handed");
}

/// Serialises picking a display number among this process's tests.
static DISPLAY_PICK: Mutex<()> = Mutex::new(());

/// Xvfb, Xephyr inside it, openbox on Xephyr, and a connection to Xephyr.
pub struct Desktop {
    /// `:N`, the desktop (Xephyr).
    pub display: String,
    /// `:P`, the outer Xvfb where the person's input comes from.
    pub person_display: String,
    /// The test's own connection.
    pub conn: RustConnection,
    /// The root window.
    pub root: Window,
    xvfb: Child,
    xephyr: Child,
    openbox: Child,
}

fn pick_start() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    50 + (nanos ^ std::process::id().wrapping_mul(7919)) % 900
}

fn free(n: u32) -> bool {
    !Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
        && !Path::new(&format!("/tmp/.X{n}-lock")).exists()
}

/// Polls `f` every 20 ms until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts an X server `program` on the first free display from a random start, with `args`
/// after the display name and `env` set; returns the display, a connection and the process.
fn start_server(
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (String, RustConnection, usize, Child) {
    let _g = DISPLAY_PICK.lock().unwrap_or_else(|e| e.into_inner());
    let mut n = pick_start();
    let mut tries = 0;
    loop {
        tries += 1;
        assert!(tries < 40, "no free X display found for {program}");
        while !free(n) {
            n += 1;
        }
        let display = format!(":{n}");
        let mut server = Command::new(program)
            .arg(&display)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{program} starts: {e}"));
        let conn = wait_for(Duration::from_secs(10), || {
            if let Ok(Some(_)) = server.try_wait() {
                return Some(None);
            }
            x11rb::connect(Some(&display)).ok().map(Some)
        })
        .flatten();
        match conn {
            Some((conn, screen)) => return (display, conn, screen, server),
            None => {
                let _ = server.kill();
                let _ = server.wait();
                n += 1;
            }
        }
    }
}

impl Desktop {
    /// Starts the nested desktop (1280x800) with openbox and waits until the window manager is
    /// up.
    pub fn start() -> Desktop {
        let (person_display, _outer, _, mut xvfb) = start_server(
            "Xvfb",
            &["-screen", "0", "1280x800x24", "-nolisten", "tcp"],
            &[],
        );
        drop(_outer);
        let nested = std::panic::catch_unwind(|| {
            start_server(
                "Xephyr",
                &["-screen", "1280x800", "-no-host-grab", "-nolisten", "tcp"],
                &[("DISPLAY", person_display.as_str())],
            )
        });
        let (display, conn, screen, xephyr) = match nested {
            Ok(x) => x,
            Err(e) => {
                let _ = xvfb.kill();
                let _ = xvfb.wait();
                std::panic::resume_unwind(e);
            }
        };
        let root = conn.setup().roots[screen].root;
        let openbox = Command::new("openbox")
            .arg("--sm-disable")
            .env("DISPLAY", &display)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let openbox = match openbox {
            Ok(c) => c,
            Err(e) => {
                let mut xephyr = xephyr;
                for c in [&mut xephyr, &mut xvfb] {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                panic!("openbox starts: {e}");
            }
        };
        let desk = Desktop {
            display,
            person_display,
            conn,
            root,
            xvfb,
            xephyr,
            openbox,
        };
        let check = desk.intern("_NET_SUPPORTING_WM_CHECK");
        let up = wait_for(Duration::from_secs(15), || {
            let r = desk
                .conn
                .get_property(false, desk.root, check, AtomEnum::WINDOW, 0, 1)
                .ok()?
                .reply()
                .ok()?;
            r.value32()?.next()
        });
        assert!(up.is_some(), "openbox did not come up on {}", desk.display);
        // openbox sets the check property before it manages windows; a window mapped in
        // between is never managed. Map probe windows until one is reparented.
        let managed = wait_for(Duration::from_secs(15), || {
            let probe = desk.conn.generate_id().unwrap();
            desk.conn
                .create_window(
                    x11rb::COPY_DEPTH_FROM_PARENT,
                    probe,
                    desk.root,
                    0,
                    0,
                    10,
                    10,
                    0,
                    WindowClass::INPUT_OUTPUT,
                    x11rb::COPY_FROM_PARENT,
                    &CreateWindowAux::new(),
                )
                .unwrap();
            desk.conn.map_window(probe).unwrap();
            desk.conn.flush().unwrap();
            let ok = wait_for(Duration::from_millis(500), || {
                let t = desk.conn.query_tree(probe).ok()?.reply().ok()?;
                (t.parent != desk.root).then_some(())
            });
            desk.conn.destroy_window(probe).unwrap();
            desk.conn.sync().unwrap();
            ok
        });
        assert!(
            managed.is_some(),
            "openbox does not manage windows on {}",
            desk.display
        );
        desk
    }

    /// Interns an atom.
    pub fn intern(&self, name: &str) -> u32 {
        self.conn
            .intern_atom(false, name.as_bytes())
            .unwrap()
            .reply()
            .unwrap()
            .atom
    }

    /// Runs xdotool on the desktop (XTEST: another program's input); returns its stdout and
    /// whether it succeeded.
    pub fn xdotool(&self, args: &[&str]) -> (bool, String) {
        xdotool_on(&self.display, args)
    }

    /// Runs `program` with `args` on the desktop (another program of the session, e.g. xmodmap
    /// or xinput); returns its stdout, and panics when it fails.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        let out = std::process::Command::new(program)
            .args(args)
            .env("DISPLAY", &self.display)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs xdotool as the person: on the outer display, so the desktop gets it from its real
    /// input devices.
    pub fn person(&self, args: &[&str]) -> (bool, String) {
        xdotool_on(&self.person_display, args)
    }

    /// Window ids whose name matches the regex (xdotool search --name).
    pub fn search(&self, name_regex: &str) -> Vec<Window> {
        let (_, out) = self.xdotool(&["search", "--name", name_regex]);
        out.lines().filter_map(|l| l.trim().parse().ok()).collect()
    }

    /// Waits for exactly one viewable window whose name matches.
    pub fn find_viewable(&self, name_regex: &str) -> Window {
        wait_for(Duration::from_secs(10), || {
            let ws = self.search(name_regex);
            let v: Vec<Window> = ws.into_iter().filter(|&w| self.viewable(w)).collect();
            (v.len() == 1).then(|| v[0])
        })
        .unwrap_or_else(|| {
            let found: Vec<(Window, bool)> =
                self.search(name_regex).into_iter().map(|w| (w, self.viewable(w))).collect();
            if std::env::var_os("NISH_TEST_DEBUG").is_some() {
                let (_, tree) = self.xdotool(&["getactivewindow"]);
                eprintln!("active: {tree}");
                let out = Command::new("sh").arg("-c").arg(format!("xwininfo -root -tree | head -40; for w in {}; do xprop -id $w; xwininfo -id $w; done", found.iter().map(|f| f.0.to_string()).collect::<Vec<_>>().join(" "))).env("DISPLAY", &self.display).output().unwrap();
                eprintln!("{}", String::from_utf8_lossy(&out.stdout));
            }
            panic!("no single viewable window named {name_regex}; found (id, viewable): {found:?}")
        })
    }

    /// The window exists and is viewable (mapped, and its ancestors too).
    pub fn viewable(&self, w: Window) -> bool {
        self.conn
            .get_window_attributes(w)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some_and(|a| a.map_state == MapState::VIEWABLE)
    }

    /// The window still exists.
    pub fn exists(&self, w: Window) -> bool {
        self.conn
            .get_window_attributes(w)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some()
    }

    /// Root-relative (x, y, w, h).
    pub fn geometry(&self, w: Window) -> (i16, i16, u16, u16) {
        let g = self.conn.get_geometry(w).unwrap().reply().unwrap();
        let t = self
            .conn
            .translate_coordinates(w, self.root, 0, 0)
            .unwrap()
            .reply()
            .unwrap();
        (t.dst_x, t.dst_y, g.width, g.height)
    }

    /// The centre of a window in root coordinates.
    pub fn center(&self, w: Window) -> (i16, i16) {
        let (x, y, ww, hh) = self.geometry(w);
        (x + ww as i16 / 2, y + hh as i16 / 2)
    }

    /// The person's click (from the real device) at root coordinates.
    pub fn real_click_at(&self, x: i16, y: i16) {
        self.move_pointer(x, y);
        let (ok, _) = self.person(&["click", "1"]);
        assert!(ok, "xdotool click (person)");
    }

    /// An XTEST click at root coordinates: another program, not the person.
    pub fn xtest_click_at(&self, x: i16, y: i16) {
        self.xtest_move(x, y);
        let (ok, _) = self.xdotool(&["click", "1"]);
        assert!(ok, "xdotool click (XTEST)");
    }

    /// Moves the pointer as the person and waits until the desktop reports it there. (`xdotool
    /// mousemove --sync` waits forever when the pointer is already at the spot.)
    pub fn move_pointer(&self, x: i16, y: i16) {
        let (ok, _) = self.person(&["mousemove", &x.to_string(), &y.to_string()]);
        assert!(ok, "xdotool mousemove (person)");
        self.wait_pointer(x, y);
    }

    /// Moves the pointer with XTEST and waits until the desktop reports it there.
    pub fn xtest_move(&self, x: i16, y: i16) {
        let (ok, _) = self.xdotool(&["mousemove", &x.to_string(), &y.to_string()]);
        assert!(ok, "xdotool mousemove (XTEST)");
        self.wait_pointer(x, y);
    }

    fn wait_pointer(&self, x: i16, y: i16) {
        let there = wait_for(Duration::from_secs(3), || {
            let p = self.conn.query_pointer(self.root).ok()?.reply().ok()?;
            (p.root_x == x && p.root_y == y).then_some(())
        });
        assert!(there.is_some(), "pointer did not reach ({x},{y})");
    }

    /// The person's click on the centre of a window.
    pub fn real_click(&self, w: Window) {
        let (x, y) = self.center(w);
        self.real_click_at(x, y);
    }

    /// An XTEST click on the centre of a window.
    pub fn xtest_click(&self, w: Window) {
        let (x, y) = self.center(w);
        self.xtest_click_at(x, y);
    }

    /// A SendEvent click on a window (`xdotool click --window`).
    pub fn send_event_click(&self, w: Window) {
        let (ok, _) = self.xdotool(&["click", "--window", &w.to_string(), "1"]);
        assert!(ok, "xdotool click --window");
    }

    /// A CARDINAL property's first value.
    pub fn cardinal(&self, w: Window, prop: &str) -> Option<u32> {
        let atom = self.intern(prop);
        let r = self
            .conn
            .get_property(false, w, atom, AtomEnum::CARDINAL, 0, 1)
            .ok()?
            .reply()
            .ok()?;
        r.value32()?.next()
    }

    /// An ATOM list property.
    pub fn atoms(&self, w: Window, prop: &str) -> Vec<u32> {
        let atom = self.intern(prop);
        self.conn
            .get_property(false, w, atom, AtomEnum::ATOM, 0, 32)
            .ok()
            .and_then(|c| c.reply().ok())
            .and_then(|r| r.value32().map(|v| v.collect()))
            .unwrap_or_default()
    }

    /// A plain override-redirect window the test owns, listening for button presses.
    pub fn test_window(&self, x: i16, y: i16, w: u16, h: u16) -> Window {
        let win = self.unmapped_test_window(x, y, w, h);
        self.conn.map_window(win).unwrap();
        self.conn.flush().unwrap();
        self.conn.sync().unwrap();
        win
    }

    /// [`Desktop::test_window`] before it is mapped (to shape it first).
    pub fn unmapped_test_window(&self, x: i16, y: i16, w: u16, h: u16) -> Window {
        let win = self.conn.generate_id().unwrap();
        self.conn
            .create_window(
                x11rb::COPY_DEPTH_FROM_PARENT,
                win,
                self.root,
                x,
                y,
                w,
                h,
                0,
                WindowClass::INPUT_OUTPUT,
                x11rb::COPY_FROM_PARENT,
                &CreateWindowAux::new()
                    .override_redirect(1)
                    .background_pixel(0x0020_6080)
                    .event_mask(EventMask::BUTTON_PRESS | EventMask::STRUCTURE_NOTIFY),
            )
            .unwrap();
        win
    }

    /// Drains the test connection's events; returns the button presses on `win` seen within
    /// `timeout` (stops at the first one).
    pub fn button_press_on(&self, win: Window, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            while let Some(ev) = self.conn.poll_for_event().unwrap() {
                if let Event::ButtonPress(e) = ev
                    && e.event == win
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Forgets queued events on the test connection.
    pub fn drain_events(&self) {
        self.conn.sync().unwrap();
        while self.conn.poll_for_event().unwrap().is_some() {}
    }

    /// How many pixels of a (visible) window, 4 px inside its edges (past any border), are
    /// darker than mid-grey: text drawn on a light control.
    pub fn dark_pixels(&self, w: Window) -> usize {
        let (_, _, ww, hh) = self.geometry(w);
        let img = self
            .conn
            .get_image(ImageFormat::Z_PIXMAP, w, 0, 0, ww, hh, !0)
            .unwrap()
            .reply()
            .unwrap();
        let (ww, hh) = (usize::from(ww), usize::from(hh));
        let mut n = 0;
        for y in 4..hh.saturating_sub(4) {
            for x in 4..ww.saturating_sub(4) {
                let p = &img.data[(y * ww + x) * 4..(y * ww + x) * 4 + 3];
                if u32::from(p[0]) + u32::from(p[1]) + u32::from(p[2]) < 3 * 0x60 {
                    n += 1;
                }
            }
        }
        n
    }

    /// Saves a window's pixels (from the root, so what is on screen there) as a PNG scaled by
    /// `scale` (OCR reads bitmap fonts better at twice their size).
    pub fn save_window_png(&self, w: Window, path: &Path, scale: u32) {
        let (x, y, ww, hh) = self.geometry(w);
        let img = self
            .conn
            .get_image(ImageFormat::Z_PIXMAP, self.root, x, y, ww, hh, !0)
            .unwrap()
            .reply()
            .unwrap();
        let (ww, hh) = (u32::from(ww), u32::from(hh));
        let mut rgb = Vec::with_capacity((ww * hh * 3 * scale * scale) as usize);
        for row in 0..hh {
            let line: Vec<u8> = (0..ww)
                .flat_map(|col| {
                    let px = &img.data[((row * ww + col) * 4) as usize..][..4];
                    std::iter::repeat_n([px[2], px[1], px[0]], scale as usize).flatten()
                })
                .collect();
            for _ in 0..scale {
                rgb.extend_from_slice(&line);
            }
        }
        let file = std::fs::File::create(path).unwrap();
        let mut enc = png::Encoder::new(std::io::BufWriter::new(file), ww * scale, hh * scale);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.write_header().unwrap().write_image_data(&rgb).unwrap();
    }

    /// Saves the root window as a PNG in `$NISH_SCREENSHOT_DIR/<name>` when that variable is set.
    pub fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("NISH_SCREENSHOT_DIR") else {
            return;
        };
        let setup = self.conn.setup();
        let (w, h) = (
            setup.roots[0].width_in_pixels,
            setup.roots[0].height_in_pixels,
        );
        let img = self
            .conn
            .get_image(ImageFormat::Z_PIXMAP, self.root, 0, 0, w, h, !0)
            .unwrap()
            .reply()
            .unwrap();
        let bpp = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == img.depth)
            .map(|f| f.bits_per_pixel)
            .unwrap_or(32);
        assert_eq!(bpp, 32, "screenshot expects 32 bits per pixel");
        let mut rgb = Vec::with_capacity(usize::from(w) * usize::from(h) * 3);
        for px in img.data.chunks_exact(4) {
            // Little-endian BGRX.
            rgb.extend_from_slice(&[px[2], px[1], px[0]]);
        }
        std::fs::create_dir_all(&dir).unwrap();
        let path = Path::new(&dir).join(name);
        let file = std::fs::File::create(&path).unwrap();
        let mut enc = png::Encoder::new(std::io::BufWriter::new(file), u32::from(w), u32::from(h));
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().unwrap();
        writer.write_image_data(&rgb).unwrap();
        eprintln!("screenshot saved to {}", path.display());
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        for c in [&mut self.openbox, &mut self.xephyr, &mut self.xvfb] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn xdotool_on(display: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("xdotool")
        .args(args)
        .env("DISPLAY", display)
        .output()
        .expect("xdotool runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Waits until `target` is drawn (so the indicator has handled the map that armed it), then
/// stops the indicator (`SIGSTOP`, as another process of the person's user may); returns its
/// pid and when it was stopped.
pub fn stop_once_drawn(
    desk: &Desktop,
    ind: &Indicator,
    target: Window,
) -> (nix::unistd::Pid, Instant) {
    use nix::sys::signal::{Signal, kill};
    let drawn = wait_for(Duration::from_secs(3), || {
        (desk.dark_pixels(target) > 20).then_some(())
    });
    assert!(drawn.is_some(), "the control was drawn");
    let pid = nix::unistd::Pid::from_raw(ind.pid());
    kill(pid, Signal::SIGSTOP).expect("stop the indicator");
    (pid, Instant::now())
}

/// The attack on the arming delay by a stop: the indicator stopped once `target` is drawn, the
/// person's click on it within the arming delay, and the indicator continued 800 ms after the
/// stop, when it reads the click.
pub fn click_while_stopped(desk: &Desktop, ind: &Indicator, target: Window) {
    use nix::sys::signal::{Signal, kill};
    let (pid, stopped) = stop_once_drawn(desk, ind, target);
    desk.real_click(target);
    let clicked = stopped.elapsed();
    assert!(
        clicked < Duration::from_millis(450),
        "the click came within the arming delay ({clicked:?})"
    );
    std::thread::sleep(Duration::from_millis(800).saturating_sub(clicked));
    kill(pid, Signal::SIGCONT).expect("continue the indicator");
}

/// Another client of the desktop that floods the indicator with events: a small
/// override-redirect window of its own at the corner, far from the controls.
pub struct Flood {
    conn: x11rb::rust_connection::RustConnection,
    small: Window,
}

impl Flood {
    /// Connects and maps the small window.
    pub fn start(desk: &Desktop) -> Flood {
        let (conn, _) = x11rb::connect(Some(&desk.display)).expect("the attacker's connection");
        let root = conn.setup().roots[0].root;
        let small = conn.generate_id().unwrap();
        conn.create_window(
            0,
            small,
            root,
            0,
            0,
            10,
            10,
            0,
            WindowClass::INPUT_OUTPUT,
            0,
            &CreateWindowAux::new().override_redirect(1),
        )
        .unwrap();
        conn.map_window(small).unwrap();
        conn.sync().unwrap();
        Flood { conn, small }
    }

    /// The attack on the stall check: the indicator is made to fall behind without any one
    /// stop long enough to be seen. Once `target` is drawn the indicator is stopped; twenty
    /// thousand moves of the small window (which do not re-arm anything) queue for it; the
    /// person's click on `target` comes within the arming delay, behind them; then the
    /// indicator runs 2 ms at a time between stops of 150 ms, so it reads the click long after
    /// the arming delay. Returns with the indicator running.
    pub fn late_click_behind_a_flood(&self, desk: &Desktop, ind: &Indicator, target: Window) {
        use nix::sys::signal::{Signal, kill};
        let (pid, stopped) = stop_once_drawn(desk, ind, target);
        self.moves(20_000);
        desk.real_click(target);
        let clicked = stopped.elapsed();
        assert!(
            clicked < Duration::from_millis(450),
            "the click came within the arming delay ({clicked:?})"
        );
        // Short runs between stops: each gap is below the stall check's.
        for _ in 0..20 {
            kill(pid, Signal::SIGCONT).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            kill(pid, Signal::SIGSTOP).unwrap();
            std::thread::sleep(Duration::from_millis(150));
        }
        kill(pid, Signal::SIGCONT).expect("continue the indicator");
    }

    /// Queues `n` moves of the small window (far from the controls) for the indicator.
    pub fn moves(&self, n: i32) {
        for i in 0..n {
            self.conn
                .configure_window(self.small, &ConfigureWindowAux::new().x(i % 2))
                .unwrap();
        }
        self.conn.sync().unwrap();
    }
}

/// The indicator run 2 ms at a time between stops of 150 ms (no gap its stall check sees),
/// from another thread, until dropped (then it runs again).
pub struct Crawl {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pid: nix::unistd::Pid,
}

impl Crawl {
    /// Starts crawling the indicator.
    pub fn start(ind: &Indicator) -> Crawl {
        use nix::sys::signal::{Signal, kill};
        let pid = nix::unistd::Pid::from_raw(ind.pid());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let _ = kill(pid, Signal::SIGSTOP);
                    std::thread::sleep(Duration::from_millis(150));
                    let _ = kill(pid, Signal::SIGCONT);
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        Crawl {
            stop,
            thread: Some(thread),
            pid,
        }
    }
}

impl Drop for Crawl {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGCONT);
    }
}

/// The indicator's messages on `reader` (the broker's end), read on a thread of their own from
/// now on.
pub fn indicator_messages(mut reader: UnixStream) -> Messages {
    reader.set_read_timeout(None).unwrap();
    let (tx, rx) = channel();
    let (shown_tx, shown) = channel();
    std::thread::spawn(move || {
        while let Ok(m) = codec::read_frame::<_, IndicatorToBroker>(&mut reader, MAX_FRAME_BYTES) {
            // What the dialog shows goes apart: it answers nothing, and the tests that wait for
            // an answer read on.
            let sent = match m {
                IndicatorToBroker::ConsentShown { id, shown } => {
                    shown_tx.send((id, shown)).map_err(|_| ())
                }
                m => tx.send(m).map_err(|_| ()),
            };
            if sent.is_err() {
                break;
            }
        }
    });
    Messages { rx, shown }
}

/// What an indicator sent: its answers and events, and apart what its dialog shows.
pub struct Messages {
    /// Every message but `ConsentShown`.
    pub rx: Receiver<IndicatorToBroker>,
    /// The `ConsentShown` messages: (dialog id, what it shows).
    pub shown: Receiver<(u64, ConsentShown)>,
}

/// The real `nish-indicator`, with the test playing the broker.
pub struct Indicator {
    child: Child,
    sock: Option<UnixStream>,
    rx: Receiver<IndicatorToBroker>,
    shown: Receiver<(u64, ConsentShown)>,
    /// The lock-down report it sent.
    pub lockdown: LockdownReport,
    /// It said the stop hotkey is grabbed.
    pub hotkey_grabbed: bool,
}

impl Indicator {
    /// Starts the binary on `desk` as `nish-indicator --fd 3` and reads its hello and report.
    pub fn spawn(desk: &Desktop, env: &[(&str, &str)]) -> Indicator {
        Indicator::spawn_on(&desk.display, env)
    }

    /// Starts the binary on another display (the outer Xvfb, for what Xephyr lacks). As the
    /// broker does, the test starts it with no display in its environment and hands it the X
    /// connection it asks for after its lock-down report.
    pub fn spawn_on(display: &str, env: &[(&str, &str)]) -> Indicator {
        let (mine, theirs) = UnixStream::pair().unwrap();
        let mut cmd = Command::new(indicator_binary());
        cmd.args(["--fd", "3"])
            .env_clear()
            .env("NISH_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        nish_agenthost::sys::pass_as_fd3(&mut cmd, OwnedFd::from(theirs));
        let mut child = cmd.spawn().expect("nish-indicator starts");
        drop(cmd);
        // The indicator cannot write regular files (RLIMIT_FSIZE 0): its log comes over a pipe.
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("[indicator] {line}");
            }
        });
        let mut reader = mine.try_clone().unwrap();
        reader
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let hello: Hello = codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("hello");
        hello.check(&[Role::Indicator]).expect("indicator hello");
        let first: IndicatorToBroker =
            codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("report");
        let IndicatorToBroker::Lockdown(lockdown) = first else {
            panic!("first message after hello must be Lockdown, got {first:?}");
        };
        let ask: IndicatorToBroker =
            codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("connect");
        let IndicatorToBroker::Connect { id, target } = ask else {
            panic!("the message after Lockdown must be Connect, got {ask:?}");
        };
        assert_eq!(target, ConnectTarget::X11, "the indicator asks for X only");
        hand_x(&mine, display, id);
        let ready: IndicatorToBroker =
            codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("ready");
        let IndicatorToBroker::Ready { hotkey_grabbed } = ready else {
            panic!("the message after Connect must be Ready, got {ready:?}");
        };
        let Messages { rx, shown } = indicator_messages(reader);
        Indicator {
            child,
            sock: Some(mine),
            rx,
            shown,
            lockdown,
            hotkey_grabbed,
        }
    }

    /// The process id (to stop and continue it as another process of the person could).
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("a pid fits")
    }

    /// Sends a message as the broker.
    pub fn send(&mut self, msg: BrokerToIndicator) {
        codec::write_frame(self.sock.as_mut().expect("open"), &msg, MAX_FRAME_BYTES).unwrap();
    }

    /// The next message within `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<IndicatorToBroker> {
        match self.rx.recv_timeout(timeout) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The next `ConsentShown` within `timeout`: (dialog id, what it shows).
    #[allow(dead_code)]
    pub fn shown(&self, timeout: Duration) -> Option<(u64, ConsentShown)> {
        self.shown.recv_timeout(timeout).ok()
    }

    /// Asserts nothing arrives within `d`.
    pub fn expect_silence(&self, d: Duration, what: &str) {
        if let Some(m) = self.recv(d) {
            panic!("{what}: expected no message, got {m:?}");
        }
    }

    /// Closes the broker's end, as a broker that went away.
    pub fn close_link(&mut self) {
        if let Some(s) = self.sock.take() {
            // The reader thread holds a clone: shut the socket down, not just this handle.
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Waits for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_for(timeout, || self.child.try_wait().ok().flatten())
    }
}

impl Drop for Indicator {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A consent request with these app lines (name, ticked), one window each, a 15-minute lease,
/// both extra lines and a 60 s timeout; tests change the fields they need.
pub fn consent_request(id: u64, apps: &[(&str, bool)]) -> ConsentDialog {
    ConsentDialog {
        id,
        request: ConsentRequest {
            host_claimed: "Test Host".into(),
            program: HostProgram {
                exe: "/usr/bin/test-host".into(),
                pid: 4242,
                script: String::new(),
            },
            apps: apps
                .iter()
                .map(|(name, ticked)| ConsentApp {
                    name: (*name).into(),
                    ticked: *ticked,
                    windows: 1,
                    // The program as the broker reads it from /proc: here the name in
                    // lower case.
                    program: name.to_lowercase(),
                })
                .collect(),
            missing_requested: 0,
            lease_minutes: 15,
            takeover: true,
            clipboard: true,
            timeout_ms: 60_000,
        },
    }
}

/// Sends a consent request.
pub fn show_consent(ind: &mut Indicator, req: ConsentDialog) {
    ind.send(BrokerToIndicator::ShowConsent(req));
}
