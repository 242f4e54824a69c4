//! The dialog's colours (0xRRGGBB).

/// A colour scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    /// Dark (light text on a dark box).
    pub dark: bool,
    /// The box.
    pub bg: u32,
    /// Its edge.
    pub edge: u32,
    /// Main text.
    pub text: u32,
    /// Secondary text.
    pub hint: u32,
    /// The takeover line and warnings.
    pub danger: u32,
    /// A hovered line.
    pub hover: u32,
    /// A checkbox's face.
    pub check_bg: u32,
    /// A checkbox's border.
    pub check_border: u32,
    /// A plain button's face.
    pub button: u32,
    /// A plain button's face under the pointer.
    pub button_hover: u32,
    /// A plain button's border.
    pub button_border: u32,
    /// The default button's face and a ticked box.
    pub accent: u32,
    /// The default button's face under the pointer.
    pub accent_hover: u32,
    /// Text on the accent.
    pub accent_text: u32,
    /// The focus ring.
    pub focus: u32,
    /// The dimmed screen behind the Wayland dialog.
    pub backdrop: u32,
}

/// The light scheme (the default).
pub const LIGHT: Theme = Theme {
    dark: false,
    bg: 0xfafafa,
    edge: 0x9a9a9a,
    text: 0x1e1e1e,
    hint: 0x555555,
    danger: 0xb00014,
    hover: 0xe8edf4,
    check_bg: 0xffffff,
    check_border: 0x6a6a6a,
    button: 0xe6e6e5,
    button_hover: 0xd6d6d4,
    button_border: 0xa9a9a7,
    accent: 0x1c63c8,
    accent_hover: 0x1552a8,
    accent_text: 0xffffff,
    focus: 0x1c63c8,
    backdrop: 0x3a3a3a,
};
