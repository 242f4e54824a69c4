//! The consent dialog's one look, for X11 and Wayland alike: the system's fonts
//! ([`fonts`], read before the lock-down), one layout ([`layout`]), one renderer into an
//! XRGB8888 buffer ([`canvas`], [`paint`]) and the light and dark colours ([`theme`]). The
//! X11 dialog puts the pixels into its windows (`crate::xui::put_pixels`), the Wayland one into
//! shared memory. No toolkit, no other process: nothing here has an accessibility bridge.

pub mod canvas;
pub mod fonts;
pub mod layout;
pub mod paint;
pub mod theme;
