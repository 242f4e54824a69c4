//! The desktop's colour scheme as X publishes it: the XSETTINGS manager's `Net/ThemeName`
//! (the owner of the `_XSETTINGS_S<screen>` selection keeps the settings in its
//! `_XSETTINGS_SETTINGS` property; GNOME's settings daemon and most desktops run one). A theme
//! named `...dark...` gives the dark colours, anything else or no manager the light ones.
//!
//! GNOME's newer `org.gnome.desktop.interface color-scheme` key lives in dconf, reachable only
//! over the session bus, which the indicator does not have: it is not read.

use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};

use crate::render::theme::{self, Theme};
use x11rb::rust_connection::RustConnection as Conn;

/// The dialog's colours for the desktop on `screen`.
pub fn theme(conn: &Conn, screen: usize) -> Theme {
    match theme_name(conn, screen) {
        Some(name) => theme::from_name(&name),
        None => theme::LIGHT,
    }
}

fn theme_name(conn: &Conn, screen: usize) -> Option<String> {
    let sel = conn
        .intern_atom(false, format!("_XSETTINGS_S{screen}").as_bytes())
        .ok()?
        .reply()
        .ok()?
        .atom;
    let prop = conn
        .intern_atom(false, b"_XSETTINGS_SETTINGS")
        .ok()?
        .reply()
        .ok()?
        .atom;
    let owner = conn.get_selection_owner(sel).ok()?.reply().ok()?.owner;
    if owner == 0 {
        return None;
    }
    let value = conn
        .get_property(false, owner, prop, AtomEnum::ANY, 0, 1 << 16)
        .ok()?
        .reply()
        .ok()?
        .value;
    let _ = conn.flush();
    string_setting(&value, "Net/ThemeName")
}

/// The string setting `name` in an `_XSETTINGS_SETTINGS` value (the XSETTINGS format:
/// byte order, serial, count, then each setting's type, name, serial and value, padded to 4).
pub fn string_setting(data: &[u8], name: &str) -> Option<String> {
    let big = *data.first()? == 1; // MSBFirst
    let u16_at = |o: usize| -> Option<u16> {
        let b: [u8; 2] = data.get(o..o + 2)?.try_into().ok()?;
        Some(if big {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    };
    let u32_at = |o: usize| -> Option<u32> {
        let b: [u8; 4] = data.get(o..o + 4)?.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    let pad4 = |n: usize| n.div_ceil(4) * 4;
    let count = u32_at(8)?;
    let mut o = 12;
    for _ in 0..count.min(4096) {
        let kind = *data.get(o)?;
        let name_len = usize::from(u16_at(o + 2)?);
        let this = data.get(o + 4..o + 4 + name_len)?;
        o += 4 + pad4(name_len) + 4; // name, last-change serial
        match kind {
            0 => o += 4,
            1 => {
                let len = u32_at(o)? as usize;
                let value = data.get(o + 4..o + 4 + len)?;
                if this == name.as_bytes() {
                    return Some(String::from_utf8_lossy(value).into_owned());
                }
                o += 4 + pad4(len);
            }
            2 => o += 8,
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(kind: u8, name: &str, value: &[u8]) -> Vec<u8> {
        let mut v = vec![kind, 0];
        v.extend_from_slice(&(name.len() as u16).to_le_bytes());
        v.extend_from_slice(name.as_bytes());
        v.resize(v.len().div_ceil(4) * 4, 0);
        v.extend_from_slice(&7u32.to_le_bytes());
        v.extend_from_slice(value);
        v
    }

    #[test]
    fn the_theme_name_is_found_among_other_settings() {
        let mut data = vec![0, 0, 0, 0];
        data.extend_from_slice(&1u32.to_le_bytes());
        data.extend_from_slice(&3u32.to_le_bytes());
        data.extend(setting(0, "Xft/DPI", &(96 * 1024u32).to_le_bytes()));
        data.extend(setting(2, "Gtk/Color", &[0; 8]));
        let theme = "Adwaita-dark";
        let mut s = (theme.len() as u32).to_le_bytes().to_vec();
        s.extend_from_slice(theme.as_bytes());
        s.resize(4 + theme.len().div_ceil(4) * 4, 0);
        data.extend(setting(1, "Net/ThemeName", &s));
        assert_eq!(
            string_setting(&data, "Net/ThemeName").as_deref(),
            Some("Adwaita-dark")
        );
        assert_eq!(string_setting(&data, "Net/IconThemeName"), None);
        assert_eq!(string_setting(&data[..20], "Net/ThemeName"), None);
        assert_eq!(string_setting(&[], "Net/ThemeName"), None);
    }
}
