//! `nish-driver setup accessibility`: turns on the desktop's accessibility switch, the AT-SPI
//! bus's `org.a11y.Status.IsEnabled` property (asked of the bus launcher on the session bus;
//! on GNOME the launcher keeps the `toolkit-accessibility` setting the same), so that
//! Chromium, Electron apps and VS Code, which read the switch when they start, show their
//! accessibility trees. Says what it found and what it changed.

use anyhow::Context;
use zbus::zvariant::Value;

const BUS: &str = "org.a11y.Bus";
const PATH: &str = "/org/a11y/bus";
const STATUS: &str = "org.a11y.Status";

/// Reads the switch.
async fn is_enabled(conn: &zbus::Connection) -> anyhow::Result<bool> {
    let reply = conn
        .call_method(
            Some(BUS),
            PATH,
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(STATUS, "IsEnabled"),
        )
        .await
        .context("the accessibility bus launcher (at-spi-bus-launcher) does not answer: install at-spi2-core")?;
    let v: zbus::zvariant::OwnedValue = reply.body().deserialize()?;
    Ok(bool::try_from(v).unwrap_or(false))
}

/// Turns the switch on when it is off. Returns what to tell the person.
pub fn accessibility() -> anyhow::Result<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let conn = zbus::Connection::session()
            .await
            .context("the session bus is not reachable: run this in the desktop session")?;
        if is_enabled(&conn).await? {
            return Ok(
                "the desktop's accessibility switch was already on; nothing was changed".into(),
            );
        }
        conn.call_method(
            Some(BUS),
            PATH,
            Some("org.freedesktop.DBus.Properties"),
            "Set",
            &(STATUS, "IsEnabled", Value::from(true)),
        )
        .await
        .context("the accessibility bus launcher refused to turn the switch on")?;
        anyhow::ensure!(
            is_enabled(&conn).await?,
            "the accessibility switch is still off after it was turned on"
        );
        Ok("turned the desktop's accessibility switch on (org.a11y.Status.IsEnabled; on GNOME also the toolkit-accessibility setting). Programs started before now (Chromium, Electron apps, VS Code) read it when they start: quit and start them again so the driver can see them".into())
    })
}
