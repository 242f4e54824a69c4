//! `nish-clip-hostile MODE`: a hostile clipboard program on a Wayland compositor with wlroots'
//! data-control protocol (sway, KWin), for the clipboard tests. It prints `ready` once it has
//! done what its mode does first, and runs until it is killed (an owner also ends when another
//! program copies).
//!
//! - `stall`: copies a text type and never sends it: every request's pipe is kept open,
//!   unwritten. A reader that waits for the owner's text without a deadline waits forever.
//! - `many-types`: copies with [`JUNK_TYPES`] junk type names of [`JUNK_LEN`] bytes first,
//!   then a text type: a reader that keeps the first 64 names never sees the text type. (Not
//!   more: a compositor on libwayland 1.21 disconnects a client whose events fill its socket,
//!   and every data-control client gets each name; megabytes of names end the connections.)
//! - `switch`: copies a text type; at the first request it copies anew (a second source, with
//!   [`SWITCHED`]) and only then closes the first request's pipe unwritten, as a program does
//!   whose copy another copy replaced. A reader that takes the closed pipe for the clipboard's
//!   text answers empty text while the clipboard holds [`SWITCHED`].
//! - `flood`: copies nothing; it asks whoever holds the clipboard for its text [`FLOOD`] times,
//!   then [`FLOOD_AGAIN`] times every [`FLOOD_EVERY`] for as long as it lives, each pipe shrunk
//!   to one page and never read. An owner that serves each request until the requestor reads is
//!   held for as long as this program lives; one that serves a batch of requests one after the
//!   other on a shared deadline leaves the other requestors of the batch (an app pasting) with
//!   nothing or part of the text.

use std::os::fd::{AsFd as _, OwnedFd};

use wayland_client::protocol::{wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, Proxy, QueueHandle, event_created_child};
use wayland_protocols_wlr::data_control::v1::client::{
    zwlr_data_control_device_v1::{self, ZwlrDataControlDeviceV1},
    zwlr_data_control_manager_v1::ZwlrDataControlManagerV1,
    zwlr_data_control_offer_v1::ZwlrDataControlOfferV1,
    zwlr_data_control_source_v1::{self, ZwlrDataControlSourceV1},
};

/// The text `switch` copies second.
const SWITCHED: &str = "switched copy: clip-canary-s";
/// The junk type names `many-types` offers before its text type.
const JUNK_TYPES: usize = 200;
/// The length of each junk type name (the agent keeps names of up to 255 bytes).
const JUNK_LEN: usize = 250;
/// The requests `flood` makes at once.
const FLOOD: usize = 200;
/// The requests `flood` makes again, every [`FLOOD_EVERY`].
const FLOOD_AGAIN: usize = 5;
const FLOOD_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
/// The unread pipes `flood` keeps open at most (the oldest are closed).
const FLOOD_HELD: usize = 400;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Stall,
    ManyTypes,
    Switch,
    Flood,
}

#[derive(Default)]
struct Hostile {
    mode: Option<Mode>,
    seat: Option<wl_seat::WlSeat>,
    manager: Option<ZwlrDataControlManagerV1>,
    device: Option<ZwlrDataControlDeviceV1>,
    /// The first source (`switch`: the one whose request is left unwritten).
    first: Option<ZwlrDataControlSourceV1>,
    /// The selection's offer as the compositor last announced it.
    selection: Option<ZwlrDataControlOfferV1>,
    /// The requests' pipes, held open and never written.
    held: Vec<OwnedFd>,
    /// `switch`: the first request's pipe, closed once the second copy is in place.
    to_close: Option<OwnedFd>,
    switched: bool,
    /// The source the compositor last took (`switch`: the second).
    current: Option<ZwlrDataControlSourceV1>,
    /// Requests this program answered with text.
    answered: usize,
    /// The current source was cancelled: another program copied. (KWin 5.27 cancels a
    /// replaced source twice, so cancellations are not counted.)
    cancelled: bool,
}

fn main() -> anyhow::Result<()> {
    let mode = match std::env::args().nth(1).as_deref() {
        Some("stall") => Mode::Stall,
        Some("many-types") => Mode::ManyTypes,
        Some("switch") => Mode::Switch,
        Some("flood") => Mode::Flood,
        _ => anyhow::bail!("usage: nish-clip-hostile stall|many-types|switch|flood"),
    };
    let conn = Connection::connect_to_env()?;
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    conn.display().get_registry(&qh, ());
    let mut st = Hostile {
        mode: Some(mode),
        ..Hostile::default()
    };
    queue.roundtrip(&mut st)?;
    let (Some(seat), Some(manager)) = (st.seat.clone(), st.manager.clone()) else {
        anyhow::bail!("the compositor offers no seat or no data-control");
    };
    let device = manager.get_data_device(&seat, &qh, ());
    st.device = Some(device.clone());
    queue.roundtrip(&mut st)?;
    if mode == Mode::Flood {
        let Some(offer) = st.selection.clone() else {
            anyhow::bail!("nothing is copied: nobody to flood");
        };
        let ask = |st: &mut Hostile, offer: &ZwlrDataControlOfferV1| -> anyhow::Result<()> {
            let (reader, writer) = std::io::pipe()?;
            // One page: an owner's write of more blocks.
            let _ = nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096));
            offer.receive("text/plain;charset=utf-8".into(), writer.as_fd());
            drop(writer);
            st.held.push(OwnedFd::from(reader));
            Ok(())
        };
        for _ in 0..FLOOD {
            ask(&mut st, &offer)?;
        }
        queue.roundtrip(&mut st)?;
        println!("ready");
        loop {
            std::thread::sleep(FLOOD_EVERY);
            if let Some(offer) = st.selection.clone() {
                for _ in 0..FLOOD_AGAIN {
                    ask(&mut st, &offer)?;
                }
            }
            queue.roundtrip(&mut st)?;
            let over = st.held.len().saturating_sub(FLOOD_HELD);
            st.held.drain(..over);
        }
    }
    let source = manager.create_data_source(&qh, ());
    if mode == Mode::ManyTypes {
        for i in 0..JUNK_TYPES {
            source.offer(format!(
                "application/x-junk-{i:03}-{}",
                "j".repeat(JUNK_LEN - 23)
            ));
            if i % 2 == 0 {
                flush(&conn)?;
            }
        }
    }
    source.offer("text/plain;charset=utf-8".into());
    source.offer("text/plain".into());
    device.set_selection(Some(&source));
    st.first = Some(source.clone());
    st.current = Some(source);
    queue.roundtrip(&mut st)?;
    println!("ready");
    loop {
        queue.blocking_dispatch(&mut st)?;
        if st.switched
            && let Some(fd) = st.to_close.take()
        {
            // The second copy is the compositor's before the first request's pipe closes.
            queue.roundtrip(&mut st)?;
            drop(fd);
        }
        if st.cancelled {
            break;
        }
    }
    eprintln!(
        "nish-clip-hostile: another program copied; held {} pipes, answered {}",
        st.held.len(),
        st.answered
    );
    Ok(())
}

/// Sends what is queued, waiting while the compositor's socket is full.
fn flush(conn: &Connection) -> anyhow::Result<()> {
    loop {
        match conn.flush() {
            Err(wayland_client::backend::WaylandError::Io(e))
                if e.kind() == std::io::ErrorKind::WouldBlock =>
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            r => return Ok(r?),
        }
    }
}

impl Dispatch<wl_registry::WlRegistry, ()> for Hostile {
    fn event(
        st: &mut Self,
        registry: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name, interface, ..
        } = event
        {
            if interface == wl_seat::WlSeat::interface().name && st.seat.is_none() {
                st.seat = Some(registry.bind(name, 1, qh, ()));
            } else if interface == ZwlrDataControlManagerV1::interface().name {
                st.manager = Some(registry.bind(name, 1, qh, ()));
            }
        }
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for Hostile {
    fn event(
        _: &mut Self,
        _: &wl_seat::WlSeat,
        _: wl_seat::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ZwlrDataControlManagerV1, ()> for Hostile {
    fn event(
        _: &mut Self,
        _: &ZwlrDataControlManagerV1,
        _: <ZwlrDataControlManagerV1 as Proxy>::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ZwlrDataControlDeviceV1, ()> for Hostile {
    fn event(
        st: &mut Self,
        _: &ZwlrDataControlDeviceV1,
        event: zwlr_data_control_device_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let zwlr_data_control_device_v1::Event::Selection { id } = event {
            st.selection = id;
        }
    }

    event_created_child!(Hostile, ZwlrDataControlDeviceV1, [
        zwlr_data_control_device_v1::EVT_DATA_OFFER_OPCODE => (ZwlrDataControlOfferV1, ()),
    ]);
}

impl Dispatch<ZwlrDataControlOfferV1, ()> for Hostile {
    fn event(
        _: &mut Self,
        _: &ZwlrDataControlOfferV1,
        _: <ZwlrDataControlOfferV1 as Proxy>::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ZwlrDataControlSourceV1, ()> for Hostile {
    fn event(
        st: &mut Self,
        source: &ZwlrDataControlSourceV1,
        event: zwlr_data_control_source_v1::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        match event {
            zwlr_data_control_source_v1::Event::Send { fd, .. } => {
                let first = st.first.as_ref() == Some(source);
                match st.mode {
                    Some(Mode::Switch) if first && !st.switched => {
                        let (Some(manager), Some(device)) = (&st.manager, &st.device) else {
                            return;
                        };
                        let second = manager.create_data_source(qh, ());
                        second.offer("text/plain;charset=utf-8".into());
                        second.offer("text/plain".into());
                        device.set_selection(Some(&second));
                        st.current = Some(second);
                        st.switched = true;
                        st.to_close = Some(fd);
                    }
                    Some(Mode::Switch) if !first => {
                        let mut pipe = std::fs::File::from(fd);
                        let _ = std::io::Write::write_all(&mut pipe, SWITCHED.as_bytes());
                        st.answered += 1;
                    }
                    Some(Mode::ManyTypes) => {
                        let mut pipe = std::fs::File::from(fd);
                        let _ = std::io::Write::write_all(&mut pipe, b"many types: clip-canary-m");
                        st.answered += 1;
                    }
                    _ => st.held.push(fd),
                }
            }
            zwlr_data_control_source_v1::Event::Cancelled => {
                st.cancelled |= st.current.as_ref() == Some(source);
            }
            _ => {}
        }
    }
}
