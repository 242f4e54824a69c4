//! The input agent's D-Bus filter, attacked as a compromised input agent would: with the very
//! descriptors the broker hands the input agent (the accessibility bus, and a peer-to-peer link
//! to an app, each relayed through the filter), arbitrary code calls DoAction, SetTextContents
//! and Properties.Set on objects and at times the broker did not ask for. The app is served
//! from this test process with counters of what was done to it: a refused call gets the
//! filter's AccessDenied and changes nothing, the act the broker granted goes through, and the
//! same calls without the filter change the app (so the refusals are the filter's doing). A
//! grant of one action index, text or number lets through that index, text or number only; `Properties.GetAll`, which
//! cuts a Qt 5 app off the bus, never passes. The
//! input agent gets a peer-to-peer link only to the app of the act the broker asked for, while
//! it is asked for.

use nish_testdesk::dbus::{error_of, stream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nish_agenthost::busfilter::{ActMethod, Args, Grant, Grants};
use nish_agenthost::handover::{Endpoints, Filter, Opener};
use nish_decider::conn::Peer;
use nish_proto::wire::{ConnectTarget, Handed};
use nish_testdesk::Desktop;

const ROOT: &str = "/org/a11y/atspi/accessible/root";
const REFUSED: &str = "org.freedesktop.DBus.Error.AccessDenied";
/// The element the broker grants acts on.
const GRANTED: &str = "/org/a11y/atspi/accessible/1";
/// Another element of the same app.
const OTHER: &str = "/org/a11y/atspi/accessible/2";

/// What was done to the app, per element: actions, text replacements, values set.
#[derive(Clone, Default)]
struct Done {
    actions: Arc<AtomicUsize>,
    texts: Arc<AtomicUsize>,
    values: Arc<AtomicUsize>,
}

impl Done {
    fn total(&self) -> usize {
        self.actions.load(Ordering::SeqCst)
            + self.texts.load(Ordering::SeqCst)
            + self.values.load(Ordering::SeqCst)
    }
}

struct Application {
    p2p: String,
}

#[zbus::interface(name = "org.a11y.atspi.Application")]
impl Application {
    fn get_application_bus_address(&self) -> String {
        self.p2p.clone()
    }
}

struct Accessible;

#[zbus::interface(name = "org.a11y.atspi.Accessible")]
impl Accessible {
    fn get_role(&self) -> u32 {
        43
    }
}

struct Action(Done);

#[zbus::interface(name = "org.a11y.atspi.Action")]
impl Action {
    fn do_action(&self, _index: i32) -> bool {
        self.0.actions.fetch_add(1, Ordering::SeqCst);
        true
    }
}

struct EditableText(Done);

#[zbus::interface(name = "org.a11y.atspi.EditableText")]
impl EditableText {
    fn set_text_contents(&self, _text: &str) -> bool {
        self.0.texts.fetch_add(1, Ordering::SeqCst);
        true
    }
    fn insert_text(&self, _position: i32, _text: &str, _length: i32) -> bool {
        self.0.texts.fetch_add(1, Ordering::SeqCst);
        true
    }
}

struct Value(Done);

#[zbus::interface(name = "org.a11y.atspi.Value")]
impl Value {
    #[zbus(property, name = "CurrentValue")]
    fn current_value(&self) -> f64 {
        0.0
    }
    #[zbus(property, name = "CurrentValue")]
    fn set_current_value(&mut self, _v: f64) {
        self.0.values.fetch_add(1, Ordering::SeqCst);
    }
    #[zbus(property, name = "MinimumIncrement")]
    fn minimum_increment(&self) -> f64 {
        1.0
    }
    #[zbus(property, name = "MinimumIncrement")]
    fn set_minimum_increment(&mut self, _v: f64) {
        self.0.values.fetch_add(1, Ordering::SeqCst);
    }
}

/// The app's objects on a connection builder.
fn objects<'a>(
    mut b: zbus::connection::Builder<'a>,
    granted: &Done,
    other: &Done,
    p2p: &str,
) -> zbus::connection::Builder<'a> {
    b = b
        .serve_at(
            ROOT,
            Application {
                p2p: p2p.to_string(),
            },
        )
        .unwrap()
        .serve_at(ROOT, Accessible)
        .unwrap();
    for (path, done) in [(GRANTED, granted), (OTHER, other)] {
        b = b
            .serve_at(path, Accessible)
            .unwrap()
            .serve_at(path, Action(done.clone()))
            .unwrap()
            .serve_at(path, EditableText(done.clone()))
            .unwrap()
            .serve_at(path, Value(done.clone()))
            .unwrap();
    }
    b
}

/// The calls a compromised input agent makes on `c` (to `dest`), each with what it hits.
async fn calls(c: &zbus::Connection, dest: Option<&str>) -> Vec<(&'static str, Option<String>)> {
    let v = zbus::zvariant::Value::F64(5.0);
    vec![
        (
            // The grant is of action 0.
            "another action of the granted element",
            error_of(
                c,
                dest,
                GRANTED,
                "org.a11y.atspi.Action",
                "DoAction",
                &(1i32,),
            )
            .await,
        ),
        (
            "DoAction on another element",
            error_of(
                c,
                dest,
                OTHER,
                "org.a11y.atspi.Action",
                "DoAction",
                &(0i32,),
            )
            .await,
        ),
        (
            "SetTextContents on the granted element",
            error_of(
                c,
                dest,
                GRANTED,
                "org.a11y.atspi.EditableText",
                "SetTextContents",
                &("x",),
            )
            .await,
        ),
        (
            "Properties.Set of another property",
            error_of(
                c,
                dest,
                GRANTED,
                "org.freedesktop.DBus.Properties",
                "Set",
                &("org.a11y.atspi.Value", "MinimumIncrement", &v),
            )
            .await,
        ),
        (
            // Qt 5 answers it with a message the bus refuses and is disconnected.
            "Properties.GetAll on the granted element",
            error_of(
                c,
                dest,
                GRANTED,
                "org.freedesktop.DBus.Properties",
                "GetAll",
                &("org.a11y.atspi.Accessible",),
            )
            .await,
        ),
    ]
}

async fn do_action(c: &zbus::Connection, dest: Option<&str>) -> Option<String> {
    error_of(
        c,
        dest,
        GRANTED,
        "org.a11y.atspi.Action",
        "DoAction",
        &(0i32,),
    )
    .await
}

#[test]
fn a_compromised_input_agent_acts_only_as_granted() {
    let desk = Desktop::start().expect("a desktop");
    let a11y = desk
        .a11y_bus_address()
        .expect("an accessibility bus")
        .to_string();
    let rt = nish_testdesk::runtime().expect("a runtime");
    let opener = Opener::new(Endpoints::from_vars(
        desk.env().into_iter().map(|(k, v)| (k.into(), v.into())),
    ));
    let sock = desk.dir().join("input-filter-app.sock");
    let (granted, other) = (Done::default(), Done::default());
    rt.block_on(async {
        // The app: on the accessibility bus, and a peer-to-peer listener of its own.
        let p2p = format!("unix:path={}", sock.display());
        let app = objects(
            zbus::connection::Builder::address(a11y.as_str()).unwrap(),
            &granted,
            &other,
            &p2p,
        )
        .build()
        .await
        .expect("the app on the accessibility bus");
        let app_name = app.unique_name().unwrap().to_string();
        let listener = tokio::net::UnixListener::bind(&sock).unwrap();
        let (g2, o2, p2) = (granted.clone(), other.clone(), p2p.clone());
        tokio::spawn(async move {
            let mut links = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                let b = zbus::connection::Builder::unix_stream(s)
                    .server(zbus::Guid::generate())
                    .unwrap()
                    .p2p();
                if let Ok(c) = objects(b, &g2, &o2, &p2).build().await {
                    links.push(c);
                }
            }
        });
        let pid = std::process::id();
        // A grant of `method` on `path`, of the text "hello" or the number 5 where it takes one.
        let grant = |method, path: &str| Grant {
            bus_name: app_name.clone(),
            pid,
            path: path.into(),
            method,
            args: match method {
                ActMethod::InsertText => Args::Typed {
                    text: "hello".into(),
                    utf16: false,
                },
                ActMethod::SetTextContents => Args::Text("hello".into()),
                ActMethod::SetCurrentValue => Args::Number(5.0f64.to_bits()),
                ActMethod::DoAction => Args::Action(0),
                ActMethod::SelectChild => Args::Index,
            },
        };

        let app_target = ConnectTarget::App {
            bus_name: app_name.clone(),
        };
        let held = nish_agenthost::handover::Holdings::new();
        for filtered in [true, false] {
            // Filtered: what the broker hands the input agent (`open_for_agent`); unfiltered:
            // the same streams handed as they are.
            let grants = if filtered {
                opener.grants().clone()
            } else {
                Grants::new()
            };
            let open = |target: ConnectTarget| {
                let (opener, held) = (&opener, &held);
                async move {
                    if filtered {
                        opener.open_for_agent(&target, Peer::Input, held).await
                    } else {
                        opener
                            .open_filtered(&target, &|p| p == pid, &Filter::Off)
                            .await
                    }
                }
            };
            let (_, fd) = open(ConnectTarget::A11yBus)
                .await
                .expect("the bus is handed");
            let bus = zbus::connection::Builder::unix_stream(stream(fd.unwrap()))
                .build()
                .await
                .expect("D-Bus authentication over the handed stream");
            if filtered {
                // A link only to the app of the act asked for, while it is asked for: not
                // before, not for a process a read named.
                opener.allow_pid(pid);
                let e = open(app_target.clone())
                    .await
                    .expect_err("no act asked for");
                assert_eq!(e.code, "app_not_in_scope");
                let mut other = grant(ActMethod::DoAction, GRANTED);
                other.pid = pid + 1;
                let g = grants.grant(other);
                let e = open(app_target.clone())
                    .await
                    .expect_err("another app's act");
                assert_eq!(e.code, "app_not_in_scope");
                drop(g);
            }
            let asked = filtered.then(|| grants.grant(grant(ActMethod::DoAction, GRANTED)));
            let (handed, fd) = open(app_target.clone()).await.expect("a link is handed");
            drop(asked);
            assert_eq!(handed, Handed::App, "the app offers a link");
            let link = zbus::connection::Builder::unix_stream(stream(fd.unwrap()))
                .p2p()
                .build()
                .await
                .expect("a peer-to-peer link over the handed stream");

            for (how, c, dest) in [
                ("bus", &bus, Some(app_name.as_str())),
                ("link", &link, None),
            ] {
                let before = (granted.total(), other.total());
                // Reads pass at any time.
                assert_eq!(
                    error_of(c, dest, ROOT, "org.a11y.atspi.Accessible", "GetRole", &()).await,
                    None,
                    "{how}: a read"
                );
                // No act asked for: the act is refused.
                let ungranted = do_action(c, dest).await;
                // An act asked for, and calls beside it.
                let guard = grants.grant(grant(ActMethod::DoAction, GRANTED));
                let beside = calls(c, dest).await;
                assert_eq!(do_action(c, dest).await, None, "{how}: the granted act");
                drop(guard);
                let after_grant = do_action(c, dest).await;
                // A value, granted: only CurrentValue may be set.
                let guard = grants.grant(grant(ActMethod::SetCurrentValue, GRANTED));
                let v = zbus::zvariant::Value::F64(5.0);
                assert_eq!(
                    error_of(
                        c,
                        dest,
                        GRANTED,
                        "org.freedesktop.DBus.Properties",
                        "Set",
                        &("org.a11y.atspi.Value", "CurrentValue", &v),
                    )
                    .await,
                    None,
                    "{how}: the granted value"
                );
                // Another value under the same grant.
                let v = zbus::zvariant::Value::F64(100.0);
                let other_value = error_of(
                    c,
                    dest,
                    GRANTED,
                    "org.freedesktop.DBus.Properties",
                    "Set",
                    &("org.a11y.atspi.Value", "CurrentValue", &v),
                )
                .await;
                drop(guard);
                // A text, granted: only that text may be set, or typed.
                let edit = "org.a11y.atspi.EditableText";
                let guard = grants.grant(grant(ActMethod::SetTextContents, GRANTED));
                let other_text =
                    error_of(c, dest, GRANTED, edit, "SetTextContents", &("rm -rf ~",)).await;
                assert_eq!(
                    error_of(c, dest, GRANTED, edit, "SetTextContents", &("hello",)).await,
                    None,
                    "{how}: the granted text"
                );
                drop(guard);
                let guard = grants.grant(grant(ActMethod::InsertText, GRANTED));
                let other_typed = error_of(
                    c,
                    dest,
                    GRANTED,
                    edit,
                    "InsertText",
                    &(0i32, "hellorm -rf ~\n", 15i32),
                )
                .await;
                assert_eq!(
                    error_of(c, dest, GRANTED, edit, "InsertText", &(3i32, "hello", 5i32)).await,
                    None,
                    "{how}: the granted typing"
                );
                drop(guard);
                let beside_args = [
                    ("another value", other_value),
                    ("another text", other_text),
                    ("other typing", other_typed),
                ];
                let done = (granted.total() - before.0, other.total() - before.1);
                if filtered {
                    assert_eq!(ungranted.as_deref(), Some(REFUSED), "{how}: no grant");
                    assert_eq!(after_grant.as_deref(), Some(REFUSED), "{how}: grant ended");
                    for (what, e) in &beside {
                        assert_eq!(e.as_deref(), Some(REFUSED), "{how}: {what}");
                    }
                    for (what, e) in &beside_args {
                        assert_eq!(e.as_deref(), Some(REFUSED), "{how}: {what}");
                    }
                    // The granted action, value, text and typing, nothing else.
                    assert_eq!(done, (4, 0), "{how}: what the app saw");
                } else {
                    assert_eq!(ungranted, None, "{how}: without the filter");
                    for (what, e) in beside.iter().chain(&beside_args) {
                        assert_ne!(e.as_deref(), Some(REFUSED), "{how}: {what} unfiltered");
                    }
                    // Every call reached the app.
                    assert_eq!(done, (12, 1), "{how}: what the app saw unfiltered");
                }
            }
        }
        drop(app);
    });
}
