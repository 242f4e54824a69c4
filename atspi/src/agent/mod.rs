//! What an agent process (the reader, the input agent) needs around its accessibility reads,
//! none of it AT-SPI: the connections the broker hands in ([`handed`]), adopting the broker's
//! socket ([`sys::adopt_socket`], the crate's only `unsafe`), which kind of session this is
//! ([`is_wayland`]), and the X display with a window's geometry ([`x11::XDisplay`]).

pub mod handed;
pub mod sys;
pub mod x11;

/// True when the session is Wayland: `XDG_SESSION_TYPE=wayland` or `WAYLAND_DISPLAY` set
/// (whatever `DISPLAY` says: XWayland sets it on a Wayland session).
pub fn is_wayland() -> bool {
    let var = |k: &str| std::env::var(k).ok();
    is_wayland_of(
        var("XDG_SESSION_TYPE").as_deref(),
        var("WAYLAND_DISPLAY").as_deref(),
    )
}

/// [`is_wayland`] from the values of `XDG_SESSION_TYPE` and `WAYLAND_DISPLAY`.
pub fn is_wayland_of(xdg_session_type: Option<&str>, wayland_display: Option<&str>) -> bool {
    xdg_session_type.is_some_and(|t| t.eq_ignore_ascii_case("wayland"))
        || wayland_display.is_some_and(|d| !d.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_is_wayland_by_either_variable_whatever_display_says() {
        assert!(is_wayland_of(Some("wayland"), None));
        assert!(is_wayland_of(Some("Wayland"), Some("")));
        assert!(is_wayland_of(Some("x11"), Some("wayland-0")));
        assert!(is_wayland_of(None, Some("wayland-0")));
        assert!(!is_wayland_of(Some("x11"), None));
        assert!(!is_wayland_of(None, Some("")));
        assert!(!is_wayland_of(None, None));
    }
}
