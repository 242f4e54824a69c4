//! The accessibility bus: where it is, and the one connection to it, made through the agent's
//! [`Connector`] and checked against the registry.

use std::time::Duration;

use zbus::Connection;
use zbus::zvariant::OwnedObjectPath;

use crate::agent::connector::Connector;
use crate::dbus::{Read, call, local_unix_address};
use crate::failure::Failure;

/// The registry's bus name.
pub const REGISTRY: &str = "org.a11y.atspi.Registry";
/// Every application's root object path (and the registry's desktop).
pub const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";
/// Timeout of the calls that find the bus and the applications.
pub const SETUP_TIMEOUT: Duration = Duration::from_millis(1500);
/// After a failed connection to the accessibility bus, requests fail at once with the same
/// problem for this long instead of each trying again in turn.
pub const BUS_RETRY: Duration = Duration::from_secs(2);

/// Why the accessibility bus is not usable (the doctor's reason codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusProblem {
    /// Nobody tells where the bus is (no `AT_SPI_BUS_ADDRESS`, no `org.a11y.Bus`).
    NotAdvertised,
    /// The advertised bus does not answer.
    Unreachable,
}

impl BusProblem {
    /// The reason code.
    pub fn reason(self) -> &'static str {
        match self {
            BusProblem::NotAdvertised => "atspi_bus_not_advertised",
            BusProblem::Unreachable => "atspi_bus_unreachable",
        }
    }

    /// The failure for a request that needs the bus.
    pub fn failure(self) -> Failure {
        Failure::backend(format!("accessibility bus: {}", self.reason()))
    }
}

/// The accessibility bus address: `AT_SPI_BUS_ADDRESS`, else `org.a11y.Bus.GetAddress` on the
/// session bus. Only local Unix socket addresses are accepted. Used only by
/// [`Connector::Direct`]: an agent has no bus address in its environment.
pub async fn bus_address() -> Result<String, BusProblem> {
    if let Ok(a) = std::env::var("AT_SPI_BUS_ADDRESS")
        && !a.is_empty()
    {
        return local_unix_address(&a).ok_or(BusProblem::NotAdvertised);
    }
    let session = std::env::var("DBUS_SESSION_BUS_ADDRESS").unwrap_or_default();
    let session = local_unix_address(&session).ok_or(BusProblem::NotAdvertised)?;
    let conn = tokio::time::timeout(SETUP_TIMEOUT, async {
        zbus::connection::Builder::address(session.as_str())?
            .build()
            .await
    })
    .await
    .map_err(|_| BusProblem::NotAdvertised)?
    .map_err(|_| BusProblem::NotAdvertised)?;
    let addr: String = call(
        &conn,
        Some("org.a11y.Bus"),
        "/org/a11y/bus",
        Read::BusAddress,
        &(),
        SETUP_TIMEOUT,
    )
    .await
    .map_err(|_| BusProblem::NotAdvertised)?;
    local_unix_address(&addr).ok_or(BusProblem::NotAdvertised)
}

/// Connects to the accessibility bus through `connector` (a stream handed in by the broker in
/// an agent, the advertised address in-process) and checks that the registry answers.
pub async fn connect_bus(connector: &Connector) -> Result<Connection, BusProblem> {
    let conn = tokio::time::timeout(SETUP_TIMEOUT, async {
        match connector {
            Connector::Broker(h) => {
                let fd = h
                    .connect(nish_proto::wire::ConnectTarget::A11yBus)
                    .await
                    .and_then(crate::agent::handed::need_fd)
                    .map_err(|_| BusProblem::Unreachable)?;
                let stream =
                    crate::agent::handed::tokio_stream(fd).map_err(|_| BusProblem::Unreachable)?;
                zbus::connection::Builder::unix_stream(stream)
                    .build()
                    .await
                    .map_err(|_| BusProblem::Unreachable)
            }
            Connector::Direct => {
                let addr = bus_address().await?;
                async {
                    zbus::connection::Builder::address(addr.as_str())?
                        .build()
                        .await
                }
                .await
                .map_err(|_| BusProblem::Unreachable)
            }
        }
    })
    .await
    .map_err(|_| BusProblem::Unreachable)??;
    let _: Vec<(String, OwnedObjectPath)> = call(
        &conn,
        Some(REGISTRY),
        ROOT_PATH,
        Read::GetChildren,
        &(),
        SETUP_TIMEOUT,
    )
    .await
    .map_err(|_| BusProblem::Unreachable)?;
    Ok(conn)
}
