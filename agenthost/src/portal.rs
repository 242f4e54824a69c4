//! The desktop portal on the session bus: whether it answers and which of its interfaces it
//! offers, each question bounded. Asked by the Wayland doctor ([`crate::wayland`]) and by the
//! stop hotkey's binding ([`crate::shortcuts`]).

/// Longest wait for the desktop portal's answer (it may be started on demand by the bus).
pub(crate) const PORTAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// What the desktop's portal says of one of its interfaces (e.g.
/// `org.freedesktop.portal.GlobalShortcuts`, the only way a Wayland client can have a stop
/// hotkey, bound by [`crate::shortcuts`]; GNOME 43's portal has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// The portal offers it, at this interface version.
    Offered(u32),
    /// The portal answers but has no such interface.
    Absent,
    /// No portal answered on the session bus (none installed, none running, no session bus).
    NoPortal,
}

impl Offer {
    /// Sorts the portal's error for the version property: the portal or the bus never answered
    /// for it (no such name, activation failed, no reply) or the interface is not there.
    fn of_error(name: &str) -> Offer {
        let no_portal = [
            "ServiceUnknown",
            "NameHasNoOwner",
            "NoReply",
            "TimedOut",
            "Timeout",
        ];
        if name.starts_with("org.freedesktop.DBus.Error.Spawn")
            || no_portal
                .iter()
                .any(|n| name == format!("org.freedesktop.DBus.Error.{n}"))
        {
            Offer::NoPortal
        } else {
            Offer::Absent
        }
    }
}

/// Asks the desktop portal on the session bus `session_bus` (a local Unix address) for the
/// GlobalShortcuts interface version, bounded by `PORTAL_TIMEOUT` (3 s).
pub async fn global_shortcuts(session_bus: Option<&str>) -> Offer {
    let Some(conn) = session_conn(session_bus).await else {
        return Offer::NoPortal;
    };
    portal_interface(&conn, "org.freedesktop.portal.GlobalShortcuts").await
}

/// A connection to the session bus `session_bus` (a local Unix address only), bounded by
/// [`PORTAL_TIMEOUT`].
pub(crate) async fn session_conn(session_bus: Option<&str>) -> Option<zbus::Connection> {
    let addr = session_bus.and_then(nish_proto::wire::local_unix_address)?;
    tokio::time::timeout(PORTAL_TIMEOUT, async {
        zbus::connection::Builder::address(addr.as_str())
            .ok()?
            .build()
            .await
            .ok()
    })
    .await
    .ok()
    .flatten()
}

/// Asks the desktop portal for the version of `interface`, bounded by [`PORTAL_TIMEOUT`] (the
/// call may start the portal by D-Bus activation).
pub(crate) async fn portal_interface(conn: &zbus::Connection, interface: &str) -> Offer {
    let asked = tokio::time::timeout(
        PORTAL_TIMEOUT,
        conn.call_method(
            Some("org.freedesktop.portal.Desktop"),
            "/org/freedesktop/portal/desktop",
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(interface, "version"),
        ),
    )
    .await
    .map(Ok::<_, zbus::Error>);
    match asked {
        Ok(Ok(Ok(reply))) => reply
            .body()
            .deserialize::<zbus::zvariant::OwnedValue>()
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .map_or(Offer::Absent, Offer::Offered),
        Ok(Ok(Err(zbus::Error::MethodError(name, _, _)))) => Offer::of_error(name.as_str()),
        Ok(Ok(Err(zbus::Error::FDO(e)))) => {
            use zbus::DBusError as _;
            Offer::of_error(e.name().as_str())
        }
        // Another failure, or no answer in time.
        _ => Offer::NoPortal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_portal_s_errors_are_sorted() {
        for (name, want) in [
            ("org.freedesktop.DBus.Error.ServiceUnknown", Offer::NoPortal),
            ("org.freedesktop.DBus.Error.NameHasNoOwner", Offer::NoPortal),
            (
                "org.freedesktop.DBus.Error.Spawn.ChildExited",
                Offer::NoPortal,
            ),
            ("org.freedesktop.DBus.Error.NoReply", Offer::NoPortal),
            ("org.freedesktop.DBus.Error.UnknownInterface", Offer::Absent),
            ("org.freedesktop.DBus.Error.UnknownProperty", Offer::Absent),
            ("org.freedesktop.DBus.Error.InvalidArgs", Offer::Absent),
        ] {
            assert_eq!(Offer::of_error(name), want, "{name}");
        }
    }

    #[tokio::test]
    async fn no_session_bus_is_no_portal() {
        assert_eq!(global_shortcuts(None).await, Offer::NoPortal);
        assert_eq!(
            global_shortcuts(Some("tcp:host=127.0.0.1,port=1")).await,
            Offer::NoPortal
        );
    }
}
