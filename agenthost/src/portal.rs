//! The desktop portal on the session bus: whether it answers and which of its interfaces it
//! offers, each question bounded, and the requests that answer by a `Request.Response` signal
//! ([`Ask`]). Asked by the Wayland doctor ([`crate::wayland`]), by the stop hotkey's binding
//! ([`crate::shortcuts`]) and by the takeover's remote-desktop session ([`crate::remote`]).

use std::collections::HashMap;
use std::time::Duration;

use futures_lite::StreamExt as _;
use zbus::zvariant::{ObjectPath, OwnedValue};

/// The portal frontend's well-known name and object.
pub(crate) const PORTAL: &str = "org.freedesktop.portal.Desktop";
pub(crate) const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";
pub(crate) const REQUEST: &str = "org.freedesktop.portal.Request";
pub(crate) const SESSION: &str = "org.freedesktop.portal.Session";
/// Longest wait for a method's reply (the call may start the portal by D-Bus activation).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Messages queued per subscription. A full queue holds the connection's reader (no message
/// is dropped), so a subscription must be read promptly: one left unread stalls every reply
/// on its connection.
pub(crate) const QUEUED: usize = 64;

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

/// Why a portal request gave nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The person declined in the desktop's dialog (response 1).
    Declined,
    /// Anything else: no answer in time, an error, another response code.
    Failed(String),
}

fn failed(why: impl std::fmt::Display) -> Refusal {
    Refusal::Failed(crate::agents::clean_message(&why.to_string()))
}

/// A request to one interface of the portal frontend `portal` (its unique name), on behalf of
/// the connection whose unique name, as the portal writes it in paths, is `sender`.
pub(crate) struct Ask<'a> {
    pub conn: &'a zbus::Connection,
    pub portal: &'a str,
    pub sender: &'a str,
    pub iface: &'a str,
}

impl Ask<'_> {
    /// Calls `method` and waits at most `timeout` for its `Request.Response` on `responses`
    /// (a subscription to [`REQUEST`]'s `Response` from the portal, made before the call),
    /// for the request handle `token` names or the one the portal returned.
    pub(crate) async fn request<B>(
        &self,
        method: &str,
        body: &B,
        token: &str,
        responses: &mut zbus::MessageStream,
        timeout: Duration,
    ) -> Result<HashMap<String, OwnedValue>, Refusal>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        let expected = format!("{PORTAL_PATH}/request/{}/{token}", self.sender);
        let reply = tokio::time::timeout(
            CALL_TIMEOUT,
            self.conn.call_method(
                Some(self.portal),
                PORTAL_PATH,
                Some(self.iface),
                method,
                body,
            ),
        )
        .await
        .map_err(|_| {
            failed(format!(
                "the desktop portal did not answer {method} in time"
            ))
        })?
        .map_err(|e| failed(format!("{method}: {e}")))?;
        let handle = reply
            .body()
            .deserialize::<ObjectPath<'_>>()
            .map(|p| p.to_string())
            .map_err(|e| failed(format!("{method}: {e}")))?;
        let wait = async {
            while let Some(m) = responses.next().await {
                let Ok(m) = m else { continue };
                let header = m.header();
                let path = header.path().map(|p| p.as_str());
                if header.sender().map(|s| s.as_str()) != Some(self.portal)
                    || (path != Some(expected.as_str()) && path != Some(handle.as_str()))
                {
                    continue;
                }
                return m
                    .body()
                    .deserialize::<(u32, HashMap<String, OwnedValue>)>()
                    .map_err(|e| failed(format!("{method}: {e}")));
            }
            Err(failed("the session bus connection ended"))
        };
        let (code, results) = tokio::time::timeout(timeout, wait).await.map_err(|_| {
            failed(format!(
                "the desktop portal did not answer {method} in time"
            ))
        })??;
        match code {
            0 => Ok(results),
            1 => Err(Refusal::Declined),
            c => Err(failed(format!(
                "the desktop portal answered {method} with {c}"
            ))),
        }
    }
}

/// The pid of the process of connection `name` on the bus, bounded by [`CALL_TIMEOUT`].
pub(crate) async fn connection_pid(conn: &zbus::Connection, name: &str) -> Option<u32> {
    let reply = tokio::time::timeout(
        CALL_TIMEOUT,
        conn.call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "GetConnectionUnixProcessID",
            &(name,),
        ),
    )
    .await
    .ok()?
    .ok()?;
    reply.body().deserialize::<u32>().ok()
}

/// The unique name owning `name`, bounded by [`CALL_TIMEOUT`].
pub(crate) async fn name_owner(conn: &zbus::Connection, name: &str) -> Result<String, Refusal> {
    let reply = tokio::time::timeout(
        CALL_TIMEOUT,
        conn.call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "GetNameOwner",
            &(name,),
        ),
    )
    .await
    .map_err(|_| failed("the session bus did not answer in time"))?
    .map_err(|_| failed(format!("{name} is not on the session bus")))?;
    reply.body().deserialize::<String>().map_err(failed)
}

/// A subscription on `conn` to what `rule` matches, bounded by [`CALL_TIMEOUT`].
pub(crate) async fn subscribe(
    conn: &zbus::Connection,
    rule: zbus::Result<zbus::match_rule::Builder<'_>>,
) -> Result<zbus::MessageStream, Refusal> {
    let rule = rule
        .map(|b| zbus::OwnedMatchRule::from(b.build()))
        .map_err(failed)?;
    tokio::time::timeout(
        CALL_TIMEOUT,
        zbus::MessageStream::for_match_rule(rule, conn, Some(QUEUED)),
    )
    .await
    .map_err(|_| failed("the session bus did not answer a subscription in time"))?
    .map_err(failed)
}

/// The rule for the signal `iface.member` from `sender` only.
pub(crate) fn signal_from<'a>(
    sender: &'a str,
    iface: &'a str,
    member: &'a str,
) -> zbus::Result<zbus::match_rule::Builder<'a>> {
    zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(sender)
        .and_then(|b| b.interface(iface))
        .and_then(|b| b.member(member))
}

/// The rule for `NameOwnerChanged` of `name`, from the bus.
pub(crate) fn owner_changes(name: &str) -> zbus::Result<zbus::match_rule::Builder<'_>> {
    zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender("org.freedesktop.DBus")
        .and_then(|b| b.interface("org.freedesktop.DBus"))
        .and_then(|b| b.member("NameOwnerChanged"))
        .and_then(|b| b.add_arg(name))
}

/// The portal's path element for the connection `conn`: its unique name without ':' and with
/// '.' as '_'.
pub(crate) fn sender_of(conn: &zbus::Connection) -> Option<String> {
    Some(
        conn.unique_name()?
            .as_str()
            .trim_start_matches(':')
            .replace('.', "_"),
    )
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
