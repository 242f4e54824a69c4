//! The only D-Bus calls the reader makes (and the input agent's reads): a closed list of
//! read-only methods ([`Read`], rows of the one table `nish_proto::atspi_calls::CALLS` the
//! broker's filter is made from), each with a timeout and sent only with the arguments of its
//! row. There is no way to name an AT-SPI action or setter here.

use std::time::Duration;

use serde::de::DeserializeOwned;
use zbus::Connection;
use zbus::zvariant::DynamicType;

pub use nish_proto::atspi_calls::{Call, Read};

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

/// Whether `body` has the signature of `call`'s arguments (its row's in
/// `nish_proto::atspi_calls::CALLS`): the only one the broker's filter lets through with it.
pub fn fits<B: DynamicType>(call: Call, body: &B) -> bool {
    body.signature().to_string_no_parens() == call.spec().signature
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
    if !fits(Call::Read(read), body) {
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

    #[test]
    fn a_read_is_sent_only_with_its_own_arguments() {
        fn fits<B: DynamicType>(read: Read, body: &B) -> bool {
            super::fits(Call::Read(read), body)
        }
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
}
