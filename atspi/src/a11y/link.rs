//! The links to one application: through the bus, or peer-to-peer when the application offers
//! it ([`AppLink`]), the latter made through the agent's [`Connector`].

use std::time::Duration;

use zbus::Connection;

use super::bus::ROOT_PATH;
use crate::agent::connector::Connector;
use crate::dbus::{Read, call, local_unix_address};
use crate::failure::Failure;

/// Timeout of one peer-to-peer connection attempt.
pub const P2P_TIMEOUT: Duration = Duration::from_millis(500);

/// A way to talk to one application: its bus name, and either the bus or a direct link.
#[derive(Clone, Debug)]
pub struct AppLink {
    /// The application's unique name on the accessibility bus (handles use it).
    pub bus_name: String,
    /// The connection calls go through.
    pub conn: Connection,
    /// True for a peer-to-peer link (calls carry no destination).
    pub p2p: bool,
}

impl AppLink {
    /// The destination for calls on this link.
    pub fn dest(&self) -> Option<&str> {
        if self.p2p {
            None
        } else {
            Some(self.bus_name.as_str())
        }
    }
}

/// A peer-to-peer link to the application through `connector`: `Ok(None)` when it offers none.
/// In an agent the broker connects (after checking the application is in scope) and hands the
/// stream in; in-process the application is asked for its address on `bus`.
pub(super) async fn open_p2p(
    connector: &Connector,
    bus: &Connection,
    bus_name: &str,
) -> Result<Option<Connection>, Failure> {
    let failed = || {
        Failure::not_responding(format!(
            "the peer-to-peer link to {} could not be made",
            crate::states::clip_chars(bus_name.to_string(), 64)
        ))
    };
    let conn = match connector {
        Connector::Broker(h) => {
            let target = nish_proto::wire::ConnectTarget::App {
                bus_name: bus_name.to_string(),
            };
            let fd = match h.connect(target).await? {
                (nish_proto::wire::Handed::NoLink, _) => return Ok(None),
                (nish_proto::wire::Handed::App, Some(fd)) => fd,
                _ => {
                    return Err(Failure::internal(
                        "the broker handed something else than a link",
                    ));
                }
            };
            let stream = crate::agent::handed::tokio_stream(fd).map_err(|_| failed())?;
            tokio::time::timeout(
                P2P_TIMEOUT,
                zbus::connection::Builder::unix_stream(stream).p2p().build(),
            )
            .await
            .map_err(|_| failed())?
            .map_err(|_| failed())?
        }
        Connector::Direct => {
            let Ok(addr) = call::<_, String>(
                bus,
                Some(bus_name),
                ROOT_PATH,
                Read::AppBusAddress,
                &(),
                P2P_TIMEOUT,
            )
            .await
            else {
                return Ok(None);
            };
            let Some(addr) = local_unix_address(&addr) else {
                return Ok(None);
            };
            tokio::time::timeout(P2P_TIMEOUT, async {
                zbus::connection::Builder::address(addr.as_str())?
                    .p2p()
                    .build()
                    .await
            })
            .await
            .map_err(|_| failed())?
            .map_err(|_| failed())?
        }
    };
    // The link must answer before it is used.
    call::<_, u32>(&conn, None, ROOT_PATH, Read::GetRole, &(), P2P_TIMEOUT)
        .await
        .map_err(|_| failed())?;
    Ok(Some(conn))
}
