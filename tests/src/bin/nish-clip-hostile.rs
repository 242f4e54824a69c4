//! `nish-clip-stall`: a hostile clipboard owner on a Wayland compositor with wlroots'
//! data-control protocol (sway, KWin), for the clipboard tests. It copies a text type and never
//! sends it: every request's pipe is kept open, unwritten, until the program is killed. It
//! prints `ready` once the compositor has its selection.
//!
//! A reader that waits for the owner's text without a deadline would wait forever here.

use std::os::fd::OwnedFd;

use wayland_client::protocol::{wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, Proxy, QueueHandle, event_created_child};
use wayland_protocols_wlr::data_control::v1::client::{
    zwlr_data_control_device_v1::{self, ZwlrDataControlDeviceV1},
    zwlr_data_control_manager_v1::ZwlrDataControlManagerV1,
    zwlr_data_control_offer_v1::ZwlrDataControlOfferV1,
    zwlr_data_control_source_v1::{self, ZwlrDataControlSourceV1},
};

#[derive(Default)]
struct Stall {
    seat: Option<wl_seat::WlSeat>,
    manager: Option<ZwlrDataControlManagerV1>,
    /// The requests' pipes, held open and never written.
    held: Vec<OwnedFd>,
    cancelled: bool,
}

fn main() -> anyhow::Result<()> {
    let conn = Connection::connect_to_env()?;
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    conn.display().get_registry(&qh, ());
    let mut st = Stall::default();
    queue.roundtrip(&mut st)?;
    let (Some(seat), Some(manager)) = (st.seat.clone(), st.manager.clone()) else {
        anyhow::bail!("the compositor offers no seat or no data-control");
    };
    let device = manager.get_data_device(&seat, &qh, ());
    let source = manager.create_data_source(&qh, ());
    source.offer("text/plain;charset=utf-8".into());
    source.offer("text/plain".into());
    device.set_selection(Some(&source));
    queue.roundtrip(&mut st)?;
    println!("ready");
    while !st.cancelled {
        queue.blocking_dispatch(&mut st)?;
    }
    eprintln!(
        "nish-clip-stall: another program copied; held {} pipes",
        st.held.len()
    );
    Ok(())
}

impl Dispatch<wl_registry::WlRegistry, ()> for Stall {
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

impl Dispatch<wl_seat::WlSeat, ()> for Stall {
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

impl Dispatch<ZwlrDataControlManagerV1, ()> for Stall {
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

impl Dispatch<ZwlrDataControlDeviceV1, ()> for Stall {
    fn event(
        _: &mut Self,
        _: &ZwlrDataControlDeviceV1,
        _: zwlr_data_control_device_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }

    event_created_child!(Stall, ZwlrDataControlDeviceV1, [
        zwlr_data_control_device_v1::EVT_DATA_OFFER_OPCODE => (ZwlrDataControlOfferV1, ()),
    ]);
}

impl Dispatch<ZwlrDataControlOfferV1, ()> for Stall {
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

impl Dispatch<ZwlrDataControlSourceV1, ()> for Stall {
    fn event(
        st: &mut Self,
        _: &ZwlrDataControlSourceV1,
        event: zwlr_data_control_source_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            zwlr_data_control_source_v1::Event::Send { fd, .. } => st.held.push(fd),
            zwlr_data_control_source_v1::Event::Cancelled => st.cancelled = true,
            _ => {}
        }
    }
}
