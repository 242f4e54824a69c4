//! The reader's D-Bus filter, attacked as a compromised reader would: with the very descriptors
//! the broker hands the reader (the accessibility bus and a peer-to-peer link to an app, each
//! relayed through the filter), arbitrary code calls DoAction and SetTextContents. The filter
//! answers each with a D-Bus error of its own (AccessDenied) and the app sees nothing, while
//! reads go through. Without the filter the same calls reach the app (its answer is not the
//! filter's), so the refusal is the filter's doing.

use nish_testdesk::dbus::{error_of, stream};
use std::time::Duration;

use nish_agenthost::handover::{Endpoints, Opener};
use nish_proto::wire::{ConnectTarget, Handed};
use nish_testdesk::{App, Desktop};
use zbus::zvariant::OwnedObjectPath;

const ROOT: &str = "/org/a11y/atspi/accessible/root";
const REFUSED: &str = "org.freedesktop.DBus.Error.AccessDenied";

async fn attack(opener: &Opener, pid: u32, filter: bool) -> Vec<Option<String>> {
    let allow = |_: u32| true;
    let (_, fd) = opener
        .open_maybe_filtered(&ConnectTarget::A11yBus, &allow, filter)
        .await
        .expect("the bus is handed");
    let bus = zbus::connection::Builder::unix_stream(stream(fd.unwrap()))
        .build()
        .await
        .expect("D-Bus authentication over the handed stream");
    let kids: Vec<(String, OwnedObjectPath)> = bus
        .call_method(
            Some("org.a11y.atspi.Registry"),
            ROOT,
            Some("org.a11y.atspi.Accessible"),
            "GetChildren",
            &(),
        )
        .await
        .expect("a read goes through the filter")
        .body()
        .deserialize()
        .unwrap();
    let mut app = None;
    for (name, _) in kids {
        let p: u32 = bus
            .call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "GetConnectionUnixProcessID",
                &(name.as_str(),),
            )
            .await
            .unwrap()
            .body()
            .deserialize()
            .unwrap();
        if p == pid {
            app = Some(name);
        }
    }
    let app = app.expect("the app is on the registry");
    let mut out = Vec::new();
    // Through the bus.
    out.extend(read_then_act(&bus, Some(app.as_str()), "the bus").await);
    // Through a peer-to-peer link.
    let (handed, fd) = opener
        .open_maybe_filtered(
            &ConnectTarget::App {
                bus_name: app.clone(),
            },
            &allow,
            filter,
        )
        .await
        .expect("a link is handed");
    assert_eq!(handed, Handed::App, "gtk3-widget-factory offers a link");
    let link = zbus::connection::Builder::unix_stream(stream(fd.unwrap()))
        .p2p()
        .build()
        .await
        .expect("a peer-to-peer link over the handed stream");
    out.extend(read_then_act(&link, None, "the link").await);
    out
}

/// Through `conn` (to `dest`, none on a peer-to-peer link): a read must be answered; returns
/// the errors of an action (DoAction) and a setter (SetTextContents).
async fn read_then_act(
    conn: &zbus::Connection,
    dest: Option<&str>,
    what: &str,
) -> [Option<String>; 2] {
    assert_eq!(
        error_of(
            conn,
            dest,
            ROOT,
            "org.a11y.atspi.Accessible",
            "GetRole",
            &()
        )
        .await,
        None,
        "a read through {what}"
    );
    [
        error_of(
            conn,
            dest,
            ROOT,
            "org.a11y.atspi.Action",
            "DoAction",
            &(0i32,),
        )
        .await,
        error_of(
            conn,
            dest,
            ROOT,
            "org.a11y.atspi.EditableText",
            "SetTextContents",
            &("x",),
        )
        .await,
    ]
}

#[test]
fn a_compromised_reader_cannot_act_through_its_links() {
    let desk = Desktop::start().expect("a desktop");
    let app = desk.spawn(App::Gtk3WidgetFactory).expect("the app");
    desk.wait_atspi_app(app.pid, Duration::from_secs(45))
        .expect("the app on the registry");
    let rt = nish_testdesk::runtime().expect("a runtime");
    let opener = Opener::new(Endpoints::from_vars(
        desk.env().into_iter().map(|(k, v)| (k.into(), v.into())),
    ));
    rt.block_on(async {
        let on = attack(&opener, app.pid, true).await;
        for (i, e) in on.iter().enumerate() {
            assert_eq!(e.as_deref(), Some(REFUSED), "call {i} with the filter");
        }
        let off = attack(&opener, app.pid, false).await;
        for (i, e) in off.iter().enumerate() {
            assert_ne!(
                e.as_deref(),
                Some(REFUSED),
                "call {i} without the filter reaches the app"
            );
        }
    });
}
