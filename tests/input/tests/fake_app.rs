//! Timeouts and refusals a real toolkit will not show on demand: an application registered on
//! the test desktop's accessibility bus, served from this test process, whose buttons decline,
//! hang in their act or hang in the re-check.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nish_proto::model::{Rect, State, StateSet};
use nish_proto::wire::input::{Expect, SemanticOp};
use nish_testdesk::Desktop;
use nish_testdesk::wait::{Poll, poll};
use support::Input;
use zbus::zvariant::{ObjectPath, OwnedObjectPath};

const ROOT: &str = "/org/a11y/atspi/accessible/root";
/// ENABLED(8), SENSITIVE(24), SHOWING(25), VISIBLE(30).
const STATES: u32 = (1 << 8) | (1 << 24) | (1 << 25) | (1 << 30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Does the action.
    Fine,
    /// Answers false.
    Decline,
    /// Never answers DoAction in time.
    HangAct,
    /// Never answers GetRole in time (the re-check).
    HangRead,
}

struct Application;

#[zbus::interface(name = "org.a11y.atspi.Application")]
impl Application {
    fn get_application_bus_address(&self) -> zbus::fdo::Result<String> {
        Err(zbus::fdo::Error::NotSupported("no direct links".into()))
    }
    #[zbus(property, name = "ToolkitName")]
    fn toolkit_name(&self) -> String {
        "fake".into()
    }
    #[zbus(property, name = "Version")]
    fn version(&self) -> String {
        "1.0".into()
    }
}

struct Accessible {
    name: String,
    mode: Mode,
}

#[zbus::interface(name = "org.a11y.atspi.Accessible")]
impl Accessible {
    async fn get_role(&self) -> u32 {
        if self.mode == Mode::HangRead {
            tokio::time::sleep(Duration::from_secs(4)).await;
        }
        43
    }
    fn get_state(&self) -> Vec<u32> {
        vec![STATES, 0]
    }
    fn get_interfaces(&self) -> Vec<String> {
        [
            "org.a11y.atspi.Accessible",
            "org.a11y.atspi.Action",
            "org.a11y.atspi.Component",
        ]
        .map(String::from)
        .to_vec()
    }
    #[zbus(property, name = "Name")]
    fn name(&self) -> String {
        self.name.clone()
    }
    #[zbus(property, name = "ChildCount")]
    fn child_count(&self) -> i32 {
        0
    }
}

struct Component {
    extents: (i32, i32, i32, i32),
}

#[zbus::interface(name = "org.a11y.atspi.Component")]
impl Component {
    fn get_extents(&self, _coord_type: u32) -> (i32, i32, i32, i32) {
        self.extents
    }
}

/// Two actions: `click` (counted per button in `done`) and `menu` (counted in `menus`).
struct Action {
    mode: Mode,
    done: Arc<AtomicUsize>,
    menus: Arc<AtomicUsize>,
}

#[zbus::interface(name = "org.a11y.atspi.Action")]
impl Action {
    #[zbus(property, name = "NActions")]
    fn n_actions(&self) -> i32 {
        2
    }
    fn get_name(&self, index: i32) -> String {
        match index {
            0 => "click",
            1 => "menu",
            _ => "",
        }
        .into()
    }
    async fn do_action(&self, index: i32) -> bool {
        if index == 1 {
            self.menus.fetch_add(1, Ordering::SeqCst);
            return true;
        }
        if index != 0 {
            return false;
        }
        match self.mode {
            Mode::Decline => false,
            Mode::HangAct => {
                tokio::time::sleep(Duration::from_secs(4)).await;
                self.done.fetch_add(1, Ordering::SeqCst);
                true
            }
            Mode::Fine | Mode::HangRead => {
                self.done.fetch_add(1, Ordering::SeqCst);
                true
            }
        }
    }
}

const BUTTONS: &[(&str, Mode, i32)] = &[
    ("fine", Mode::Fine, 10),
    ("decline", Mode::Decline, 40),
    ("hang act", Mode::HangAct, 70),
    ("hang read", Mode::HangRead, 100),
];

fn path(i: usize) -> String {
    format!("/org/a11y/atspi/accessible/{}", i + 1)
}

/// Serves the fake application on the accessibility bus and registers it with the registry;
/// returns its connection (keep it alive), the click counters per button and the count of
/// `menu` actions done on any of them.
async fn serve(a11y: &str) -> (zbus::Connection, Vec<Arc<AtomicUsize>>, Arc<AtomicUsize>) {
    let mut b = zbus::connection::Builder::address(a11y)
        .unwrap()
        .serve_at(ROOT, Application)
        .unwrap();
    let mut counters = Vec::new();
    let menus = Arc::new(AtomicUsize::new(0));
    for (i, (name, mode, y)) in BUTTONS.iter().enumerate() {
        let done = Arc::new(AtomicUsize::new(0));
        counters.push(done.clone());
        b = b
            .serve_at(
                path(i),
                Accessible {
                    name: name.to_string(),
                    mode: *mode,
                },
            )
            .unwrap()
            .serve_at(
                path(i),
                Component {
                    extents: (10, *y, 80, 20),
                },
            )
            .unwrap()
            .serve_at(
                path(i),
                Action {
                    mode: *mode,
                    done,
                    menus: menus.clone(),
                },
            )
            .unwrap();
    }
    let conn = b.build().await.expect("connect to the accessibility bus");
    let me = conn.unique_name().unwrap().to_string();
    let plug = (me.clone(), ObjectPath::try_from(ROOT).unwrap());
    let _: zbus::Message = conn
        .call_method(
            Some("org.a11y.atspi.Registry"),
            ROOT,
            Some("org.a11y.atspi.Socket"),
            "Embed",
            &(plug,),
        )
        .await
        .expect("embed in the registry");
    (conn, counters, menus)
}

fn target(conn: &zbus::Connection, i: usize) -> Expect {
    let (name, _, y) = BUTTONS[i];
    Expect {
        handle: format!("{}|{}", conn.unique_name().unwrap(), path(i)),
        window_id: 1,
        pid: std::process::id(),
        role: "push_button".into(),
        name: name.into(),
        states: StateSet::of(&[
            State::Enabled,
            State::Sensitive,
            State::Showing,
            State::Visible,
        ]),
        frame: Some(Rect::new(10, y, 80, 20)),
        window_frame: Rect::new(0, 0, 400, 300),
        collapsed_option: false,
        parent_handle: None,
    }
}

#[test]
fn declined_hung_and_unresponsive_acts() {
    let desk = Desktop::start().expect("start the desktop");
    let a11y = desk
        .a11y_bus_address()
        .expect("accessibility bus")
        .to_string();
    let rt = nish_testdesk::runtime().expect("a runtime");
    let (conn, counters, menus) = rt.block_on(serve(&a11y));
    let me = conn.unique_name().unwrap().to_string();
    // Registered: the registry lists the fake application.
    poll(
        "the registry to list the fake app",
        Duration::from_secs(10),
        || {
            let listed: Vec<(String, OwnedObjectPath)> = rt.block_on(async {
                let reply = conn
                    .call_method(
                        Some("org.a11y.atspi.Registry"),
                        ROOT,
                        Some("org.a11y.atspi.Accessible"),
                        "GetChildren",
                        &(),
                    )
                    .await?;
                reply.body().deserialize()
            })?;
            Ok(if listed.iter().any(|(b, _)| *b == me) {
                Poll::Ready(())
            } else {
                Poll::Pending(format!("{} apps", listed.len()))
            })
        },
    )
    .expect("registered");

    let mut input = Input::spawn(&desk);
    let click = || SemanticOp::Action {
        name: "click".into(),
        index: 0,
    };

    // A plain act reaches the application once.
    let a = input.act(target(&conn, 0), click());
    assert_eq!(a.done(), "atspi_action:click");
    assert_eq!(counters[0].load(Ordering::SeqCst), 1);
    // The name at another index than the one given: neither action is done (the live name
    // at the index is checked before DoAction).
    let elsewhere = SemanticOp::Action {
        name: "click".into(),
        index: 1,
    };
    let a = input.act(target(&conn, 0), elsewhere);
    assert_eq!(a.failed(), ("not_actionable", false));
    assert!(!a.message().contains("declined"), "{}", a.message());
    assert_eq!(counters[0].load(Ordering::SeqCst), 1);
    assert_eq!(menus.load(Ordering::SeqCst), 0);
    // The second action at its own index.
    let menu = SemanticOp::Action {
        name: "menu".into(),
        index: 1,
    };
    assert_eq!(
        input.act(target(&conn, 0), menu).done(),
        "atspi_action:menu"
    );
    assert_eq!(menus.load(Ordering::SeqCst), 1);
    assert_eq!(counters[0].load(Ordering::SeqCst), 1);

    // Someone else's process: refused before anything is sent.
    let mut other = target(&conn, 0);
    other.pid = 1;
    assert_eq!(
        input.act(other, click()).failed(),
        ("app_not_in_scope", false)
    );
    assert_eq!(counters[0].load(Ordering::SeqCst), 1);

    // DoAction answered false: the toolkit declined, nothing was done.
    let a = input.act(target(&conn, 1), click());
    assert_eq!(a.failed(), ("not_actionable", false));

    // The application hangs in the re-check: nothing was sent, answered within the bound.
    let a = input.act(target(&conn, 3), click());
    assert_eq!(a.failed(), ("app_not_responding", false));
    assert!(
        a.took >= Duration::from_millis(1400) && a.took < Duration::from_millis(3000),
        "{:?}",
        a.took
    );
    assert_eq!(counters[3].load(Ordering::SeqCst), 0);

    // The application hangs in the act itself: it may have happened.
    let a = input.act(target(&conn, 2), click());
    assert_eq!(a.failed(), ("app_not_responding", true));
    assert!(
        a.took >= Duration::from_millis(1400) && a.took < Duration::from_millis(4500),
        "{:?}",
        a.took
    );

    // The agent still serves, and the hung act did arrive in the end: `sent` was right.
    let a = input.act(target(&conn, 0), click());
    assert_eq!(a.done(), "atspi_action:click");
    poll("the hung act to finish", Duration::from_secs(10), || {
        Ok(if counters[2].load(Ordering::SeqCst) == 1 {
            Poll::Ready(())
        } else {
            Poll::Pending("not yet".into())
        })
    })
    .expect("the hung act arrived");
    drop(conn);
}
