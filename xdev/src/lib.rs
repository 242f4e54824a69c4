//! Which X input devices are the person's (shared by the indicator, whose controls only the
//! person may answer, and the input agent, whose watcher tells the person's input from the
//! driver's own).
//!
//! On X11 any client can inject input with XTEST, and XTEST events look real to the core
//! protocol (they are not SendEvent). XInput 2 tells them apart: every event carries its source
//! device, and the server routes all XTEST input through the "XTEST" slave devices it creates for
//! each master. The server marks those with the device property `XTEST Device` = 1, which no
//! client can change or delete (checked: BadAccess). A press counts as the person's only when
//! its source is a slave device (attached or floating) without that mark and whose name does not
//! say XTEST either (the name is a second signal; the property decides).
//!
//! The device list is read once at start and again whenever the server reports a hierarchy
//! change, and at once when an event names a device not seen yet (so a device added a moment ago
//! is classified from the server, never guessed).

use std::collections::HashMap;

use x11rb::connection::Connection;
use x11rb::errors::ReplyError;
use x11rb::protocol::xinput::{self, ConnectionExt as _, DeviceType};
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, Window};

/// `XIAllDevices`.
const ALL_DEVICES: u16 = 0;

/// The core pointer master ("Virtual core pointer"): the server makes it first, so its id is
/// always 2. A master any client adds (`XIChangeHierarchy`) gets another id, whatever its name.
pub const CORE_POINTER: u16 = 2;
/// The core keyboard master ("Virtual core keyboard"), always id 3.
pub const CORE_KEYBOARD: u16 = 3;

/// Where an input event came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A real device: the person.
    Person,
    /// An XTEST device: a program (the driver, or any other client).
    Xtest,
    /// A master device, or one the server no longer lists.
    Unknown,
}

/// What is known of one input device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Master, slave or floating.
    pub kind: DeviceType,
    /// The server marks it as an XTEST device.
    pub xtest: bool,
    /// Its name says XTEST (second signal).
    pub named_xtest: bool,
}

impl Device {
    /// True when events from this device are the person's own.
    pub fn is_real(&self) -> bool {
        matches!(
            self.kind,
            DeviceType::SLAVE_POINTER | DeviceType::SLAVE_KEYBOARD | DeviceType::FLOATING_SLAVE
        ) && !self.xtest
            && !self.named_xtest
    }
}

/// The server's input devices, classified.
#[derive(Debug, Default, Clone)]
pub struct Devices {
    by_id: HashMap<u16, Device>,
    xtest_atom: u32,
    /// An operator opted in to assistive tools that click through XTEST (an admin-owned
    /// setting the broker passes on): XTEST devices then count as the person's.
    pub accept_xtest: bool,
}

impl Devices {
    /// Reads the device list and selects, on `root` for every device, hierarchy changes and
    /// the `extra` events (one selection per window and device: a caller that wants raw events
    /// from every device passes them here).
    pub fn load<C: Connection>(
        conn: &C,
        root: Window,
        extra: xinput::XIEventMask,
    ) -> Result<Self, ReplyError> {
        conn.xinput_xi_select_events(
            root,
            &[xinput::EventMask {
                deviceid: ALL_DEVICES,
                mask: vec![xinput::XIEventMask::HIERARCHY | extra],
            }],
        )?;
        Devices::read(conn)
    }

    /// Reads the device list without selecting any event (for a connection that never reads
    /// events; call [`Devices::refresh`] before each use).
    pub fn read<C: Connection>(conn: &C) -> Result<Self, ReplyError> {
        let xtest_atom = conn.intern_atom(false, b"XTEST Device")?.reply()?.atom;
        let mut d = Devices {
            by_id: HashMap::new(),
            xtest_atom,
            accept_xtest: false,
        };
        d.refresh(conn)?;
        Ok(d)
    }

    /// Reads the device list again.
    pub fn refresh<C: Connection>(&mut self, conn: &C) -> Result<(), ReplyError> {
        let infos = conn.xinput_xi_query_device(ALL_DEVICES)?.reply()?.infos;
        let cookies = infos
            .iter()
            .map(|i| {
                conn.xinput_xi_get_property(
                    i.deviceid,
                    false,
                    self.xtest_atom,
                    u32::from(AtomEnum::ANY),
                    0,
                    1,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut by_id = HashMap::new();
        for (info, cookie) in infos.iter().zip(cookies) {
            // A device without the property answers with no items; an error means it is gone.
            let xtest = match cookie.reply() {
                Ok(r) => r.num_items > 0 && property_is_set(&r.items),
                Err(ReplyError::X11Error(_)) => continue,
                Err(e) => return Err(e),
            };
            let name = String::from_utf8_lossy(&info.name).to_ascii_uppercase();
            by_id.insert(
                info.deviceid,
                Device {
                    kind: info.type_,
                    xtest,
                    named_xtest: name.contains("XTEST"),
                },
            );
        }
        self.by_id = by_id;
        Ok(())
    }

    /// Where an event from source device `id` comes from. An unknown device makes the list be
    /// read again first.
    pub fn source<C: Connection>(&mut self, conn: &C, id: u16) -> Result<Source, ReplyError> {
        if !self.by_id.contains_key(&id) {
            self.refresh(conn)?;
        }
        Ok(match self.by_id.get(&id) {
            Some(d) if d.is_real() => Source::Person,
            Some(d) if d.xtest => Source::Xtest,
            _ => Source::Unknown,
        })
    }

    /// The XTEST devices (the driver's and every other program's injected input).
    pub fn xtest_ids(&self) -> Vec<u16> {
        let mut v: Vec<u16> = self
            .by_id
            .iter()
            .filter(|(_, d)| d.xtest)
            .map(|(&id, _)| id)
            .collect();
        v.sort_unstable();
        v
    }

    /// True when an event from source device `id` is the person's (or, with the assistive
    /// opt-in, an XTEST pointer's). A device still unknown after a fresh read is not.
    pub fn is_real<C: Connection>(&mut self, conn: &C, id: u16) -> Result<bool, ReplyError> {
        let src = self.source(conn, id)?;
        Ok(src == Source::Person
            || (self.accept_xtest
                && src == Source::Xtest
                && self
                    .by_id
                    .get(&id)
                    .is_some_and(|d| d.kind == DeviceType::SLAVE_POINTER)))
    }
}

fn property_is_set(items: &xinput::XIGetPropertyItems) -> bool {
    match items {
        xinput::XIGetPropertyItems::Data8(v) => v.iter().any(|&b| b != 0),
        xinput::XIGetPropertyItems::Data16(v) => v.iter().any(|&b| b != 0),
        xinput::XIGetPropertyItems::Data32(v) => v.iter().any(|&b| b != 0),
        // An unknown format: count it as marked (never let an XTEST device pass on a parse gap).
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(kind: DeviceType, xtest: bool, named: bool) -> Device {
        Device {
            kind,
            xtest,
            named_xtest: named,
        }
    }

    #[test]
    fn only_unmarked_slaves_are_real() {
        assert!(dev(DeviceType::SLAVE_POINTER, false, false).is_real());
        assert!(dev(DeviceType::SLAVE_KEYBOARD, false, false).is_real());
        assert!(dev(DeviceType::FLOATING_SLAVE, false, false).is_real());
        assert!(!dev(DeviceType::SLAVE_POINTER, true, true).is_real());
        assert!(!dev(DeviceType::SLAVE_POINTER, true, false).is_real());
        assert!(!dev(DeviceType::SLAVE_POINTER, false, true).is_real());
        assert!(!dev(DeviceType::MASTER_POINTER, false, false).is_real());
        assert!(!dev(DeviceType::MASTER_KEYBOARD, false, false).is_real());
    }
}
