//! The X11 side of the test desktop: connection, extension check, EWMH properties, the window
//! tree and root-window screenshots (x11rb, pure Rust).

use std::collections::VecDeque;
use std::path::Path;

use anyhow::{Context, Result, bail};
use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::xinput::ConnectionExt as _;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, ImageFormat, MapState, Window};
use x11rb::rust_connection::RustConnection;

/// Extensions the driver relies on; the desktop refuses to start without them.
pub const REQUIRED_EXTENSIONS: [&str; 6] = [
    "XTEST",
    "XInputExtension",
    "Composite",
    "SHAPE",
    "XFIXES",
    "RANDR",
];

/// A window found in the X window tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XWindow {
    /// The X window id.
    pub id: u32,
    /// Its parent in the tree.
    pub parent: u32,
    /// `_NET_WM_NAME` (UTF-8) or else `WM_NAME`.
    pub name: String,
    /// Left edge in root coordinates.
    pub x: i32,
    /// Top edge in root coordinates.
    pub y: i32,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// Mapped and all its ancestors mapped.
    pub viewable: bool,
    /// Override-redirect (not managed by the window manager).
    pub override_redirect: bool,
}

impl XWindow {
    /// The centre, in root coordinates (where a person would click).
    pub fn center(&self) -> (i32, i32) {
        (
            self.x + self.width as i32 / 2,
            self.y + self.height as i32 / 2,
        )
    }
}

/// Where the pointer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pointer {
    /// Root x.
    pub x: i32,
    /// Root y.
    pub y: i32,
    /// The top-level child of the root under the pointer (0 if none).
    pub child: u32,
    /// Button and modifier mask.
    pub mask: u16,
}

/// Connects to `display` (`:N`).
pub(crate) fn connect(display: &str) -> Result<(RustConnection, Window, u16, u16)> {
    let (conn, screen_num) = RustConnection::connect(Some(display))
        .with_context(|| format!("connecting to X display {display}"))?;
    let screen = &conn.setup().roots[screen_num];
    let (root, w, h) = (screen.root, screen.width_in_pixels, screen.height_in_pixels);
    Ok((conn, root, w, h))
}

/// Fails, naming them, when a required extension is missing or XInput is older than 2.
pub(crate) fn check_extensions(conn: &RustConnection) -> Result<()> {
    let mut missing = Vec::new();
    for name in REQUIRED_EXTENSIONS {
        if conn.extension_information(name)?.is_none() {
            missing.push(name.to_string());
        }
    }
    if !missing.iter().any(|m| m == "XInputExtension") {
        let v = conn.xinput_xi_query_version(2, 2)?.reply()?;
        if v.major_version < 2 {
            missing.push(format!(
                "XInputExtension 2 (server has {}.{})",
                v.major_version, v.minor_version
            ));
        }
    }
    if !missing.is_empty() {
        bail!(
            "the X server lacks required extensions: {}",
            missing.join(", ")
        );
    }
    Ok(())
}

pub(crate) fn atom(conn: &RustConnection, name: &str) -> Result<u32> {
    Ok(conn.intern_atom(false, name.as_bytes())?.reply()?.atom)
}

/// A 32-bit property as a list (empty when absent).
pub(crate) fn prop_u32s(conn: &RustConnection, window: Window, prop: u32) -> Result<Vec<u32>> {
    let reply = conn
        .get_property(false, window, prop, AtomEnum::ANY, 0, 1 << 16)?
        .reply()?;
    Ok(reply.value32().map(|v| v.collect()).unwrap_or_default())
}

/// `_NET_WM_NAME` (UTF-8) or else `WM_NAME`, lossily decoded; empty when neither is set.
pub(crate) fn window_name(conn: &RustConnection, window: Window) -> Result<String> {
    let net_wm_name = atom(conn, "_NET_WM_NAME")?;
    let utf8 = atom(conn, "UTF8_STRING")?;
    let r = conn
        .get_property(false, window, net_wm_name, utf8, 0, 1 << 12)?
        .reply()?;
    if !r.value.is_empty() {
        return Ok(String::from_utf8_lossy(&r.value).into_owned());
    }
    let r = conn
        .get_property(false, window, AtomEnum::WM_NAME, AtomEnum::ANY, 0, 1 << 12)?
        .reply()?;
    Ok(String::from_utf8_lossy(&r.value).into_owned())
}

/// The window manager's check window when an EWMH window manager runs (the root's
/// `_NET_SUPPORTING_WM_CHECK` names a window whose own property names itself).
pub(crate) fn wm_check(conn: &RustConnection, root: Window) -> Result<Option<u32>> {
    let check = atom(conn, "_NET_SUPPORTING_WM_CHECK")?;
    let Some(&w) = prop_u32s(conn, root, check)?.first() else {
        return Ok(None);
    };
    // The property may name a window that is already gone (a previous manager).
    match conn
        .get_property(false, w, check, AtomEnum::WINDOW, 0, 1)?
        .reply()
    {
        Ok(r) => Ok(r
            .value32()
            .and_then(|mut v| v.next())
            .filter(|&own| own == w)),
        Err(_) => Ok(None),
    }
}

/// `_NET_CLIENT_LIST` of the root.
pub(crate) fn client_list(conn: &RustConnection, root: Window) -> Result<Vec<u32>> {
    let list = atom(conn, "_NET_CLIENT_LIST")?;
    prop_u32s(conn, root, list)
}

/// `_NET_WM_PID` of a window.
pub(crate) fn window_pid(conn: &RustConnection, window: Window) -> Result<Option<u32>> {
    let pid = atom(conn, "_NET_WM_PID")?;
    match conn
        .get_property(false, window, pid, AtomEnum::CARDINAL, 0, 1)?
        .reply()
    {
        Ok(r) => Ok(r.value32().and_then(|mut v| v.next())),
        // The window went away between listing and asking.
        Err(_) => Ok(None),
    }
}

/// `_NET_ACTIVE_WINDOW` of the root (None when unset or 0).
pub(crate) fn active_window(conn: &RustConnection, root: Window) -> Result<Option<u32>> {
    let active = atom(conn, "_NET_ACTIVE_WINDOW")?;
    Ok(prop_u32s(conn, root, active)?
        .first()
        .copied()
        .filter(|&w| w != 0))
}

pub(crate) fn pointer(conn: &RustConnection, root: Window) -> Result<Pointer> {
    let r = conn.query_pointer(root)?.reply()?;
    Ok(Pointer {
        x: i32::from(r.root_x),
        y: i32::from(r.root_y),
        child: r.child,
        mask: u16::from(r.mask),
    })
}

/// Describes one window (None when it vanished meanwhile).
pub(crate) fn describe(
    conn: &RustConnection,
    root: Window,
    window: Window,
    parent: Window,
) -> Result<Option<XWindow>> {
    let (Ok(geo), Ok(attrs)) = (
        conn.get_geometry(window)?.reply(),
        conn.get_window_attributes(window)?.reply(),
    ) else {
        return Ok(None);
    };
    let Ok(pos) = conn.translate_coordinates(window, root, 0, 0)?.reply() else {
        return Ok(None);
    };
    Ok(Some(XWindow {
        id: window,
        parent,
        name: window_name(conn, window)?,
        x: i32::from(pos.dst_x),
        y: i32::from(pos.dst_y),
        width: u32::from(geo.width),
        height: u32::from(geo.height),
        viewable: attrs.map_state == MapState::VIEWABLE,
        override_redirect: attrs.override_redirect,
    }))
}

/// Every window below the root, all levels, whose name starts with `prefix`, in tree order.
pub(crate) fn find_by_name(
    conn: &RustConnection,
    root: Window,
    prefix: &str,
) -> Result<Vec<XWindow>> {
    let mut found = Vec::new();
    let mut queue = VecDeque::from([root]);
    while let Some(w) = queue.pop_front() {
        let Ok(tree) = conn.query_tree(w)?.reply() else {
            continue;
        };
        for &child in &tree.children {
            queue.push_back(child);
            if window_name(conn, child)?.starts_with(prefix)
                && let Some(x) = describe(conn, root, child, w)?
            {
                found.push(x);
            }
        }
    }
    Ok(found)
}

/// Captures the root window and writes it as an RGB PNG; returns (width, height).
pub(crate) fn screenshot_root(
    conn: &RustConnection,
    root: Window,
    width: u16,
    height: u16,
    path: &Path,
) -> Result<(u32, u32)> {
    let image = conn
        .get_image(ImageFormat::Z_PIXMAP, root, 0, 0, width, height, !0)?
        .reply()
        .context("GetImage of the root window")?;
    let setup = conn.setup();
    let bpp = setup
        .pixmap_formats
        .iter()
        .find(|f| f.depth == image.depth)
        .map(|f| f.bits_per_pixel)
        .unwrap_or(32);
    if bpp != 32 {
        bail!(
            "unsupported root pixmap format: depth {} at {bpp} bits per pixel",
            image.depth
        );
    }
    let visual = setup
        .roots
        .iter()
        .flat_map(|s| s.allowed_depths.iter())
        .flat_map(|d| d.visuals.iter())
        .find(|v| v.visual_id == image.visual)
        .context("root visual not found")?;
    let masks = [visual.red_mask, visual.green_mask, visual.blue_mask];
    let big_endian = setup.image_byte_order == x11rb::protocol::xproto::ImageOrder::MSB_FIRST;
    let (w, h) = (u32::from(width), u32::from(height));
    let mut rgb = Vec::with_capacity((w * h * 3) as usize);
    for px in image.data.chunks_exact(4) {
        let bytes = [px[0], px[1], px[2], px[3]];
        let v = if big_endian {
            u32::from_be_bytes(bytes)
        } else {
            u32::from_le_bytes(bytes)
        };
        for m in masks {
            rgb.push(channel(v, m));
        }
    }
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header()?;
    writer.write_image_data(&rgb)?;
    writer.finish()?;
    Ok((w, h))
}

/// Scales the bits of `v` under `mask` to 0..=255.
fn channel(v: u32, mask: u32) -> u8 {
    if mask == 0 {
        return 0;
    }
    let shift = mask.trailing_zeros();
    let bits = (mask >> shift).count_ones();
    let raw = (v & mask) >> shift;
    if bits >= 8 {
        (raw >> (bits - 8)) as u8
    } else {
        ((raw * 255) / ((1 << bits) - 1)) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::channel;

    #[test]
    fn extracts_channels_by_mask() {
        let v = 0x00_12_34_56;
        assert_eq!(channel(v, 0xff0000), 0x12);
        assert_eq!(channel(v, 0x00ff00), 0x34);
        assert_eq!(channel(v, 0x0000ff), 0x56);
        // 5-6-5
        assert_eq!(channel(0xf800, 0xf800), 255);
        assert_eq!(channel(0x07e0, 0x07e0), 255);
        assert_eq!(channel(0, 0x001f), 0);
    }
}
