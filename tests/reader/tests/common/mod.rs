//! Stand-in applications on a real accessibility bus, for the reader's event tests: a
//! connection, the AT-SPI object events toolkits send, and a round trip that routes them.

use std::collections::HashMap;

use zbus::zvariant::Value;

/// The AT-SPI interface of object events.
pub const EVENTS: &str = "org.a11y.atspi.Event.Object";

/// A connection to the bus at `addr`.
pub async fn connect(addr: &str) -> zbus::Connection {
    zbus::connection::Builder::address(addr)
        .unwrap()
        .build()
        .await
        .unwrap()
}

/// One AT-SPI object event `member` of `path` from `app`, body as toolkits send it
/// (`siiva{sv}`).
pub async fn emit(app: &zbus::Connection, path: &str, member: &str) {
    let props: HashMap<&str, Value> = HashMap::new();
    app.emit_signal(
        None::<zbus::names::BusName<'_>>,
        path,
        EVENTS,
        member,
        &("checked", 1i32, 0i32, Value::from(0i32), props),
    )
    .await
    .unwrap();
}

/// One round trip to the bus on each connection: the signals `from` sent before are routed by
/// then, and `to` has read every message routed to it before the answer (so none of them
/// reaches a watch begun afterwards).
pub async fn drain(from: &zbus::Connection, to: &zbus::Connection) {
    for c in [from, to] {
        c.call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "GetId",
            &(),
        )
        .await
        .unwrap();
    }
}
