//! The watcher of the person's own input during a takeover.
//!
//! It reads XInput 2 raw key presses, button presses and motion of every device on the root
//! window (raw events reach the root whatever window has the pointer or a grab). An event from a
//! real device is the person's. An event from an XTEST device is the driver's only when the send
//! log explains it; otherwise another program sent it (an on-screen keyboard, a hostile client),
//! and it counts as the person's too. Between acts it also reads the pointer every
//! [`POLL`], so an absolute XTEST move by another program (which makes no raw event) or a move
//! the raw events missed is seen within that time; during an act the executor checks the pointer
//! itself at every step.
//!
//! The first such input while watching is recorded in [`Shared`] (which stops the act in
//! progress at its next step) and reported through `report`.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nish_atspi::agent::connector::{Connector, x11_connect};
use nish_proto::wire::input::PersonInput;
use nish_xdev::{Devices, Source};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use x11rb::connection::Connection;
use x11rb::protocol::Event;
use x11rb::protocol::xinput::XIEventMask;
use x11rb::protocol::xproto::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;

use super::sendlog::Sent;
use super::{Shared, drifted};

/// How often the pointer is read between acts while watching.
pub const POLL: Duration = Duration::from_millis(20);

/// Starts or stops watching; the watcher answers on `done` once it is in force.
#[derive(Debug)]
pub struct WatchCmd {
    /// Watch.
    pub on: bool,
    /// The answer: `Ok` once watching is in force (or stopped).
    pub done: std::sync::mpsc::Sender<anyhow::Result<()>>,
}

/// Connects to the display through `connector` and watches until the connection fails.
/// `report` gets each first person input while watching; `cmds` starts and stops watching.
///
/// Starting is done here, on the watcher's own connection, in order: a round trip to the server
/// (every event it generated before is then queued), every queued event dropped (input from
/// before the takeover began or resumed, such as the click on Continue, is not the person
/// taking over again), the pointer read as the baseline, then watching.
pub fn run(
    shared: Arc<Shared>,
    connector: &Connector,
    cmds: std::sync::mpsc::Receiver<WatchCmd>,
    report: impl Fn(PersonInput),
) -> anyhow::Result<()> {
    let (conn, screen) = x11_connect(connector).map_err(|f| anyhow::anyhow!(f.message))?;
    let root = conn.setup().roots[screen].root;
    let mut devices = Devices::load(
        &conn,
        root,
        XIEventMask::RAW_KEY_PRESS | XIEventMask::RAW_BUTTON_PRESS | XIEventMask::RAW_MOTION,
    )?;
    conn.flush()?;
    tracing::info!("watcher of the person's input ready");
    loop {
        while let Ok(cmd) = cmds.try_recv() {
            let r = (|| -> anyhow::Result<()> {
                if cmd.on {
                    conn.get_input_focus()?.reply()?;
                    while let Some(ev) = conn.poll_for_event()? {
                        if matches!(ev, Event::XinputHierarchy(_)) {
                            devices.refresh(&conn)?;
                        }
                    }
                    let p = conn.query_pointer(root)?.reply()?;
                    shared.watch(Some((i32::from(p.root_x), i32::from(p.root_y))));
                } else {
                    shared.unwatch();
                }
                Ok(())
            })();
            let _ = cmd.done.send(r);
        }
        while let Some(ev) = conn.poll_for_event()? {
            if let Some(input) = judge(&conn, &mut devices, &shared, &ev)?
                && shared.person_seen(input)
            {
                tracing::info!(input = ?input, "the person's input");
                report(input);
            }
        }
        if shared.watching.load(Ordering::SeqCst)
            && !shared.busy.load(Ordering::SeqCst)
            && let Some(left) = shared.pointer()
        {
            let p = conn.query_pointer(root)?.reply()?;
            if drifted(left, (i32::from(p.root_x), i32::from(p.root_y)))
                && !shared.busy.load(Ordering::SeqCst)
                && shared.person_seen(PersonInput::PointerMoved)
            {
                tracing::info!("the pointer moved away from where the driver left it");
                report(PersonInput::PointerMoved);
            }
        }
        let mut fds = [PollFd::new(conn.stream().as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(POLL.as_millis() as u16)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => anyhow::bail!("poll: {e}"),
        }
        let broken = fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR));
        if broken {
            anyhow::bail!("the X connection hung up");
        }
    }
}

/// What one event says about the person.
fn judge(
    conn: &RustConnection,
    devices: &mut Devices,
    shared: &Shared,
    ev: &Event,
) -> anyhow::Result<Option<PersonInput>> {
    // Raw events come once for the device itself and once more for its master (with the
    // device as the source); only the device's own copy counts, so each input is judged once
    // (a floating device has no master copy).
    let (source, sent, input) = match ev {
        Event::XinputHierarchy(_) => {
            devices.refresh(conn)?;
            return Ok(None);
        }
        Event::XinputRawKeyPress(e) if e.deviceid == e.sourceid => (
            e.sourceid,
            Sent::Key(e.detail as u8),
            PersonInput::KeyPressed,
        ),
        Event::XinputRawButtonPress(e) if e.deviceid == e.sourceid => (
            e.sourceid,
            Sent::Button(e.detail as u8),
            PersonInput::ButtonPressed,
        ),
        Event::XinputRawMotion(e) if e.deviceid == e.sourceid => {
            (e.sourceid, Sent::Motion, PersonInput::PointerMoved)
        }
        _ => return Ok(None),
    };
    if !shared.watching.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let from = devices.source(conn, source)?;
    Ok(match from {
        // The driver's own XTEST input is only what it logged before sending.
        Source::Xtest if shared.log().claim(sent, Instant::now()) => None,
        // A real device, another program's XTEST input, or a device that vanished: the person.
        _ => {
            tracing::debug!(device = source, from = ?from, sent = ?sent, "input not sent by the driver");
            Some(input)
        }
    })
}
