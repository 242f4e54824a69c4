//! The only D-Bus calls the reader makes (and the input agent's reads): a closed list of
//! read-only methods, each with a timeout. There is no way to name an AT-SPI action or setter
//! here.

use std::time::Duration;

use serde::de::DeserializeOwned;
use zbus::Connection;
use zbus::zvariant::DynamicType;

/// A read-only call the reader may make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// `org.a11y.Bus.GetAddress` on the session bus.
    BusAddress,
    /// `org.freedesktop.DBus.GetConnectionUnixProcessID` on the accessibility bus.
    ConnectionPid,
    /// `org.freedesktop.DBus.Peer.Ping`.
    Ping,
    /// `Accessible.GetChildren`.
    GetChildren,
    /// `Accessible.GetChildAtIndex`.
    GetChildAtIndex,
    /// `Accessible.GetRole`.
    GetRole,
    /// `Accessible.GetState`.
    GetState,
    /// `Accessible.GetInterfaces`.
    GetInterfaces,
    /// `Properties.Get` (the property is named in the body).
    GetProperty,
    /// `Properties.GetAll` (the interface is named in the body).
    GetAllProperties,
    /// `Application.GetApplicationBusAddress`.
    AppBusAddress,
    /// `Cache.GetItems`.
    CacheItems,
    /// `Component.GetExtents`.
    GetExtents,
    /// `Action.GetActions` (localized names, descriptions, key bindings).
    GetActions,
    /// `Action.GetName`.
    GetActionName,
    /// `Text.GetText`.
    GetText,
    /// `Registry.RegisterEvent`: asks the registry to forward an event kind; makes GTK 3
    /// answer `Cache.GetItems`. Changes no application state.
    RegisterEvent,
}

impl Read {
    /// Every read.
    pub const ALL: &[Read] = &[
        Read::BusAddress,
        Read::ConnectionPid,
        Read::Ping,
        Read::GetChildren,
        Read::GetChildAtIndex,
        Read::GetRole,
        Read::GetState,
        Read::GetInterfaces,
        Read::GetProperty,
        Read::GetAllProperties,
        Read::AppBusAddress,
        Read::CacheItems,
        Read::GetExtents,
        Read::GetActions,
        Read::GetActionName,
        Read::GetText,
        Read::RegisterEvent,
    ];

    /// The interface and method.
    pub const fn spec(self) -> (&'static str, &'static str) {
        match self {
            Read::BusAddress => ("org.a11y.Bus", "GetAddress"),
            Read::ConnectionPid => ("org.freedesktop.DBus", "GetConnectionUnixProcessID"),
            Read::Ping => ("org.freedesktop.DBus.Peer", "Ping"),
            Read::GetChildren => ("org.a11y.atspi.Accessible", "GetChildren"),
            Read::GetChildAtIndex => ("org.a11y.atspi.Accessible", "GetChildAtIndex"),
            Read::GetRole => ("org.a11y.atspi.Accessible", "GetRole"),
            Read::GetState => ("org.a11y.atspi.Accessible", "GetState"),
            Read::GetInterfaces => ("org.a11y.atspi.Accessible", "GetInterfaces"),
            Read::GetProperty => ("org.freedesktop.DBus.Properties", "Get"),
            Read::GetAllProperties => ("org.freedesktop.DBus.Properties", "GetAll"),
            Read::AppBusAddress => ("org.a11y.atspi.Application", "GetApplicationBusAddress"),
            Read::CacheItems => ("org.a11y.atspi.Cache", "GetItems"),
            Read::GetExtents => ("org.a11y.atspi.Component", "GetExtents"),
            Read::GetActions => ("org.a11y.atspi.Action", "GetActions"),
            Read::GetActionName => ("org.a11y.atspi.Action", "GetName"),
            Read::GetText => ("org.a11y.atspi.Text", "GetText"),
            Read::RegisterEvent => ("org.a11y.atspi.Registry", "RegisterEvent"),
        }
    }

    /// The signature of its arguments: the one the broker's filter lets through with it.
    pub const fn signature(self) -> &'static str {
        match self {
            Read::ConnectionPid | Read::GetAllProperties | Read::RegisterEvent => "s",
            Read::GetChildAtIndex | Read::GetActionName => "i",
            Read::GetProperty => "ss",
            Read::GetExtents => "u",
            Read::GetText => "ii",
            Read::BusAddress
            | Read::Ping
            | Read::GetChildren
            | Read::GetRole
            | Read::GetState
            | Read::GetInterfaces
            | Read::AppBusAddress
            | Read::CacheItems
            | Read::GetActions => "",
        }
    }
}

/// Why a call failed. Never carries the peer's error text (app text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No answer in time, or the peer said it would not answer.
    #[error("no reply in time")]
    Timeout,
    /// The object, method or peer is not there.
    #[error("unknown object or method")]
    Unknown,
    /// The reply did not have the expected type.
    #[error("unexpected reply type")]
    BadReply,
    /// The connection is closed or broken.
    #[error("connection failed")]
    Connection,
    /// Another error reply.
    #[error("error reply")]
    Other,
}

impl CallError {
    /// Classifies a zbus error without keeping its text.
    pub fn from_zbus(e: &zbus::Error) -> CallError {
        let name = match e {
            zbus::Error::MethodError(name, _, _) => name.as_str().to_string(),
            zbus::Error::FDO(f) => match **f {
                zbus::fdo::Error::UnknownMethod(_)
                | zbus::fdo::Error::UnknownObject(_)
                | zbus::fdo::Error::UnknownInterface(_)
                | zbus::fdo::Error::UnknownProperty(_)
                | zbus::fdo::Error::ServiceUnknown(_)
                | zbus::fdo::Error::NameHasNoOwner(_) => return CallError::Unknown,
                zbus::fdo::Error::NoReply(_)
                | zbus::fdo::Error::TimedOut(_)
                | zbus::fdo::Error::Timeout(_) => {
                    return CallError::Timeout;
                }
                _ => return CallError::Other,
            },
            zbus::Error::InputOutput(_) | zbus::Error::Handshake(_) => {
                return CallError::Connection;
            }
            zbus::Error::Variant(_) | zbus::Error::InvalidReply | zbus::Error::InvalidField => {
                return CallError::BadReply;
            }
            _ => return CallError::Other,
        };
        match name.as_str() {
            "org.freedesktop.DBus.Error.UnknownMethod"
            | "org.freedesktop.DBus.Error.UnknownObject"
            | "org.freedesktop.DBus.Error.UnknownInterface"
            | "org.freedesktop.DBus.Error.UnknownProperty"
            | "org.freedesktop.DBus.Error.ServiceUnknown"
            | "org.freedesktop.DBus.Error.NameHasNoOwner" => CallError::Unknown,
            "org.freedesktop.DBus.Error.NoReply"
            | "org.freedesktop.DBus.Error.Timeout"
            | "org.freedesktop.DBus.Error.TimedOut" => CallError::Timeout,
            _ => CallError::Other,
        }
    }
}

/// Whether `body` has the signature of `read`'s arguments ([`Read::signature`]).
fn fits<B: DynamicType>(read: Read, body: &B) -> bool {
    body.signature().to_string_no_parens() == read.signature()
}

/// Makes one read-only call and returns the reply message.
pub async fn call_msg<B>(
    conn: &Connection,
    dest: Option<&str>,
    path: &str,
    read: Read,
    body: &B,
    timeout: Duration,
) -> Result<zbus::Message, CallError>
where
    B: serde::Serialize + DynamicType,
{
    let (iface, method) = read.spec();
    // Any other arguments would be refused by the broker's filter: not sent.
    if !fits(read, body) {
        tracing::error!(read = ?read, "a read called with other arguments than its own");
        return Err(CallError::Other);
    }
    match tokio::time::timeout(
        timeout,
        conn.call_method(dest, path, Some(iface), method, body),
    )
    .await
    {
        Err(_) => Err(CallError::Timeout),
        Ok(Err(e)) => Err(CallError::from_zbus(&e)),
        Ok(Ok(m)) => Ok(m),
    }
}

/// Makes one read-only call and decodes the reply body.
pub async fn call<B, R>(
    conn: &Connection,
    dest: Option<&str>,
    path: &str,
    read: Read,
    body: &B,
    timeout: Duration,
) -> Result<R, CallError>
where
    B: serde::Serialize + DynamicType,
    R: DeserializeOwned + zbus::zvariant::Type,
{
    let m = call_msg(conn, dest, path, read, body, timeout).await?;
    m.body().deserialize::<R>().map_err(|_| CallError::BadReply)
}

pub use nish_proto::wire::local_unix_address;

#[cfg(test)]
mod tests {
    use super::*;

    /// Methods that change an application or the desktop. The reader's list must not name any.
    const FORBIDDEN: &[&str] = &[
        "DoAction",
        "SetTextContents",
        "InsertText",
        "DeleteText",
        "CutText",
        "CopyText",
        "PasteText",
        "SetCaretOffset",
        "AddSelection",
        "RemoveSelection",
        "SetSelection",
        "SelectChild",
        "DeselectChild",
        "DeselectSelectedChild",
        "SelectAll",
        "ClearSelection",
        "GrabFocus",
        "ScrollTo",
        "ScrollToPoint",
        "ScrollSubstringTo",
        "ScrollSubstringToPoint",
        "SetExtents",
        "SetPosition",
        "SetSize",
        "Set",
        "SetCurrentValue",
        "GenerateKeyboardEvent",
        "GenerateMouseEvent",
    ];

    #[test]
    fn no_action_or_setter_can_be_called() {
        for r in Read::ALL {
            let (iface, method) = r.spec();
            assert!(!FORBIDDEN.contains(&method), "{iface}.{method}");
            assert!(!iface.contains("EditableText"), "{iface}");
            assert!(!iface.contains("DeviceEventController"), "{iface}");
            assert!(
                method.starts_with("Get") || matches!(method, "Ping" | "RegisterEvent"),
                "{iface}.{method}"
            );
        }
    }

    #[test]
    fn a_read_is_sent_only_with_its_own_arguments() {
        assert!(fits(Read::GetRole, &()));
        assert!(fits(Read::GetActionName, &(3i32,)));
        assert!(fits(Read::GetExtents, &(0u32,)));
        assert!(fits(Read::GetText, &(0i32, 10i32)));
        assert!(fits(
            Read::GetProperty,
            &("org.a11y.atspi.Accessible", "Name")
        ));
        assert!(fits(Read::ConnectionPid, &(":1.5",)));
        assert!(!fits(Read::GetRole, &(1i32,)));
        assert!(!fits(Read::GetActionName, &()));
        assert!(!fits(Read::GetActionName, &(3u32,)));
        assert!(!fits(Read::GetExtents, &(0i32,)));
        assert!(!fits(Read::GetProperty, &("org.a11y.atspi.Accessible",)));
        assert!(!fits(Read::GetText, &(0i64, 10i32)));
    }

    #[test]
    fn every_read_passes_the_brokers_filter() {
        for r in Read::ALL {
            let ((iface, method), sig) = (r.spec(), r.signature());
            assert!(
                nish_proto::atspi_calls::READ_ONLY.contains(&(iface, method, sig)),
                "{iface}.{method}({sig}) is not on the filter's list"
            );
        }
    }
}
