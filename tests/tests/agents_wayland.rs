//! On a Wayland session the reader makes no X connection, even when it is given a `DISPLAY`
//! naming a live X server (as XWayland's would be): its probe finds no display, its windows
//! come from AT-SPI (ids made from the bus name, above 2^32, never an X window id) with frames
//! at their own 0,0, and the X server sees no new client while it lists and reads.

use std::time::Duration;

use nish_proto::wire::Role;
use nish_proto::wire::reader::ReaderToBroker;
use nish_proto::wire::reader::WalkLimits;
use nish_testdesk::agents::{AgentProc, Input, Reader};
use nish_testdesk::session::workspace_bin;
use nish_testdesk::{App, Desktop};

/// The X server's clients now (X-Resource QueryClients).
fn x_clients(desk: &Desktop) -> usize {
    use x11rb::protocol::res::ConnectionExt as _;
    let conn = desk.x11().expect("the desktop's X connection");
    conn.res_query_clients()
        .expect("X-Resource")
        .reply()
        .expect("QueryClients")
        .clients
        .len()
}

#[test]
fn the_reader_on_wayland_opens_no_x_display_even_when_given_one() {
    let desk = Desktop::start().expect("an X desktop, standing in for XWayland");
    let app = desk.spawn(App::Gtk3WidgetFactory).expect("GTK 3");
    desk.wait_atspi_app(app.pid, Duration::from_secs(45))
        .expect("on AT-SPI");
    let bin = workspace_bin("nish-reader").expect("nish-reader is built");
    let mut cmd = desk.command(&bin);
    cmd.env("XDG_SESSION_TYPE", "wayland");
    // The stand-in broker is told the same: it opens no X connection on a Wayland session
    // either, even for an agent that asks.
    let env: Vec<(String, String)> = desk
        .env()
        .into_iter()
        .map(|(k, v)| {
            if k == "XDG_SESSION_TYPE" {
                (k, "wayland".to_string())
            } else {
                (k, v)
            }
        })
        .collect();
    let before = x_clients(&desk);
    let mut reader = Reader(
        AgentProc::start_cmd(
            cmd,
            &env,
            &bin,
            Role::Reader,
            true,
            |m: &ReaderToBroker| match m {
                ReaderToBroker::Lockdown(r) => Some(r.clone()),
                _ => None,
            },
        )
        .expect("the reader starts"),
    );
    let probe = reader.probe().expect("probe");
    assert!(
        !probe.display_ok,
        "the reader opened the X display: {probe:?}"
    );
    assert!(probe.atspi_ok, "{probe:?}");
    let w = reader
        .window_of(app.pid)
        .expect("the app's window, from AT-SPI");
    assert!(
        w.window_id > u64::from(u32::MAX),
        "not an X window id: {w:?}"
    );
    assert_eq!((w.frame.x, w.frame.y), (0, 0), "{w:?}");
    let (tree, _) = reader.read(&w, WalkLimits::default()).expect("a read");
    assert!(tree.nodes.len() > 100, "{} rows", tree.nodes.len());
    assert_eq!(
        x_clients(&desk),
        before,
        "the X server got a new client while the reader listed and read"
    );
    // The control: the same reader without the Wayland marker does connect.
    let mut x_reader = Reader::start(&desk, &bin).expect("the X reader");
    assert!(x_reader.probe().expect("probe").display_ok);
    assert!(x_clients(&desk) > before, "the control reader connected");
}

/// The portal's own dialog (app `xdg-desktop-portal-gnome`, frame "Remote desktop"), shown by a
/// client asking the RemoteDesktop portal, is on AT-SPI, but the reader never lists it; and its
/// process's executable, as the kernel reports it, is one of the desktop's prompts, which the
/// broker refuses by (`nish_proto::prompts`) whatever the app calls itself.
#[test]
fn the_reader_on_wayland_never_lists_the_portal_dialog() {
    use nish_testdesk::WaylandDesktop;
    let desk = WaylandDesktop::start_with_portal().expect("the Wayland desktop with portal");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/portal_remote_desktop.py");
    let mut asker = desk
        .command("/usr/bin/python3")
        .arg(&script)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the portal client starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let dialog = loop {
        let apps = desk.atspi_apps().unwrap_or_default();
        if let Some(a) = apps
            .into_iter()
            .find(|a| a.name == "xdg-desktop-portal-gnome" && a.frames > 0)
        {
            break a;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the portal dialog did not show on AT-SPI"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let exe = std::fs::read_link(format!("/proc/{}/exe", dialog.pid))
        .expect("the dialog's executable is readable")
        .display()
        .to_string();
    assert!(
        nish_proto::prompts::is_prompt_exe(&exe),
        "the portal dialog's executable {exe} is not a listed prompt"
    );
    let bin = workspace_bin("nish-reader").expect("nish-reader is built");
    let mut reader = Reader(
        AgentProc::start_cmd(
            desk.command(&bin),
            &desk.env(),
            &bin,
            Role::Reader,
            true,
            |m: &ReaderToBroker| match m {
                ReaderToBroker::Lockdown(r) => Some(r.clone()),
                _ => None,
            },
        )
        .expect("the reader starts"),
    );
    let windows = reader.windows().expect("the window list");
    let _ = asker.kill();
    let _ = asker.wait();
    assert!(
        windows
            .iter()
            .all(|w| w.pid != dialog.pid && !w.app.starts_with("xdg-desktop-portal")),
        "the portal dialog is listed: {windows:?}"
    );
}

/// A broker that dies (SIGKILL: nothing is sent) leaves no agent behind: the reader and the
/// input agent see their link close and exit, on Wayland (where the input agent once stayed,
/// its writer waiting on a channel its own hand-over still held) and on X11.
#[test]
fn agents_exit_when_their_broker_is_gone() {
    let input = workspace_bin("nish-input").expect("nish-input is built");
    let reader = workspace_bin("nish-reader").expect("nish-reader is built");
    let wl = nish_testdesk::WaylandDesktop::start().expect("the Wayland desktop");
    let x = Desktop::start().expect("the X desktop");
    let within = Duration::from_secs(5);
    let mut agents: Vec<(&str, AgentProc)> = vec![
        (
            "input, Wayland",
            Input::start_wayland(&wl, &input).expect("input").0,
        ),
        (
            "reader, Wayland",
            Reader::start_wayland(&wl, &reader).expect("reader").0,
        ),
        ("input, X11", Input::start(&x, &input).expect("input").0),
        ("reader, X11", Reader::start(&x, &reader).expect("reader").0),
    ];
    for (what, agent) in &mut agents {
        let status = agent.close_link(within);
        assert!(
            status.is_some(),
            "the {what} agent still runs {within:?} after its link closed"
        );
    }
}
