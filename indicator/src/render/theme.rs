//! The dialog's colours, light and dark (0xRRGGBB).

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

/// The dark scheme.
pub const DARK: Theme = Theme {
    dark: true,
    bg: 0x2b2b2f,
    edge: 0x6a6a70,
    text: 0xf2f2f2,
    hint: 0xb4b4b8,
    danger: 0xff8088,
    hover: 0x3a3f4a,
    check_bg: 0x1f1f22,
    check_border: 0xa0a0a6,
    button: 0x45454b,
    button_hover: 0x55555c,
    button_border: 0x6c6c72,
    accent: 0x3584e4,
    accent_hover: 0x4a94ef,
    accent_text: 0xffffff,
    focus: 0x78aeed,
    backdrop: 0x101010,
};

/// The scheme for a GTK theme name (as XSETTINGS `Net/ThemeName` publishes it) or a
/// `color-scheme` value: dark when it says so.
pub fn from_name(name: &str) -> Theme {
    let n = name.to_ascii_lowercase();
    if n.contains("dark") { DARK } else { LIGHT }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dark_only_when_the_name_says_so() {
        assert_eq!(from_name("Adwaita-dark"), DARK);
        assert_eq!(from_name("prefer-dark"), DARK);
        assert_eq!(from_name("Breeze"), LIGHT);
        assert_eq!(from_name(""), LIGHT);
    }
}
