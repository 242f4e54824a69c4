//! The D-Bus side of the test desktop: the session bus, `org.a11y.Bus` and the AT-SPI registry.
//!
//! The desktop's API is synchronous so tests of any kind can use it; every D-Bus exchange runs
//! on a short-lived thread with its own single-threaded tokio runtime (zbus with tokio), which
//! also works when called from inside an async test.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use zbus::Connection;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

use crate::procs::ProcessId;

/// Longest any single D-Bus call may take (a hung application must not hang a test).
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

const REGISTRY: &str = "org.a11y.atspi.Registry";
const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";
const ACCESSIBLE: &str = "org.a11y.atspi.Accessible";

/// An application registered on the AT-SPI registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtspiApp {
    /// Its connection's unique name on the accessibility bus.
    pub bus_name: String,
    /// The object path of its root accessible.
    pub path: String,
    /// The unix process id of that connection (`GetConnectionUnixProcessID`).
    pub pid: u32,
    /// Its accessible name (the toolkit's program name).
    pub name: String,
    /// Its top-level accessibles (frames, windows).
    pub frames: usize,
    /// The largest child count among its frames.
    pub frame_children: i32,
}

/// Runs `f`'s future to completion on a fresh thread with a current-thread tokio runtime.
pub(crate) fn run_async<T, F, Fut>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T>>,
{
    std::thread::Builder::new()
        .name("nish-testdesk-dbus".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("building a tokio runtime for D-Bus")?;
            rt.block_on(f())
        })
        .context("starting the D-Bus thread")?
        .join()
        .map_err(|_| anyhow!("the D-Bus thread panicked"))?
}

async fn with_timeout<T>(what: &str, fut: impl Future<Output = zbus::Result<T>>) -> Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, fut).await {
        Ok(r) => r.with_context(|| what.to_string()),
        Err(_) => bail!("{what}: no answer within {} ms", CALL_TIMEOUT.as_millis()),
    }
}

pub(crate) async fn connect(address: &str) -> Result<Connection> {
    let builder = zbus::connection::Builder::address(address)
        .with_context(|| format!("bad D-Bus address {address}"))?;
    with_timeout("connecting to the bus", builder.build()).await
}

async fn call<B, R>(
    conn: &Connection,
    dest: &str,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> Result<R>
where
    B: serde::ser::Serialize + zbus::zvariant::DynamicType,
    R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
{
    let what = format!("{iface}.{method} on {dest}");
    let msg = with_timeout(
        &what,
        conn.call_method(Some(dest), path, Some(iface), method, body),
    )
    .await?;
    msg.body()
        .deserialize::<R>()
        .with_context(|| format!("decoding the reply of {what}"))
}

async fn property(conn: &Connection, dest: &str, path: &str, name: &str) -> Result<OwnedValue> {
    call(
        conn,
        dest,
        path,
        "org.freedesktop.DBus.Properties",
        "Get",
        &(ACCESSIBLE, name),
    )
    .await
}

/// Polls, inside the D-Bus thread, until `check` gives a value or `within` passes; `alive`
/// (a process that must keep running meanwhile) ends the wait early when it dies.
async fn poll_async<T, F, Fut>(
    what: &str,
    within: Duration,
    alive: Option<&ProcessId>,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let start = Instant::now();
    let mut interval = Duration::from_millis(5);
    let mut last = String::from("nothing yet");
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if let Some(p) = alive
            && !p.is_alive()
        {
            bail!("{what}: {} (pid {}) exited", p.role, p.pid);
        }
        if start.elapsed() >= within {
            bail!(
                "{what} did not happen within {} ms (last seen: {last})",
                within.as_millis()
            );
        }
        tokio::time::sleep(interval).await;
        interval = (interval * 2).min(Duration::from_millis(50));
    }
}

/// Waits until the session bus at `session` answers `org.a11y.Bus.GetAddress`; returns the
/// accessibility bus address.
pub(crate) fn wait_a11y_bus(
    session: String,
    within: Duration,
    launcher: ProcessId,
) -> Result<String> {
    run_async(move || async move {
        let conn = connect(&session).await?;
        poll_async(
            "the accessibility bus (org.a11y.Bus.GetAddress)",
            within,
            Some(&launcher),
            || async {
                // Ask only once the launcher owns the name: calling an unowned name would make
                // the session bus start a second launcher through service activation.
                let owned: bool = call(
                    &conn,
                    "org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus",
                    "NameHasOwner",
                    &("org.a11y.Bus",),
                )
                .await?;
                if !owned {
                    return Ok(None);
                }
                let addr: String = call(
                    &conn,
                    "org.a11y.Bus",
                    "/org/a11y/bus",
                    "org.a11y.Bus",
                    "GetAddress",
                    &(),
                )
                .await?;
                Ok(Some(addr).filter(|a| !a.is_empty()))
            },
        )
        .await
    })
}

/// Sets `org.a11y.Status.IsEnabled` on the session bus, as a screen reader does when it starts.
/// Chromium exposes itself on AT-SPI only when this is true at its start (or when it runs with
/// `ACCESSIBILITY_ENABLED=1`); GTK apps register either way.
pub(crate) fn set_accessibility_enabled(session: String, on: bool) -> Result<()> {
    run_async(move || async move {
        let conn = connect(&session).await?;
        let _: () = call(
            &conn,
            "org.a11y.Bus",
            "/org/a11y/bus",
            "org.freedesktop.DBus.Properties",
            "Set",
            &(
                "org.a11y.Status",
                "IsEnabled",
                zbus::zvariant::Value::from(on),
            ),
        )
        .await?;
        let now: OwnedValue = call(
            &conn,
            "org.a11y.Bus",
            "/org/a11y/bus",
            "org.freedesktop.DBus.Properties",
            "Get",
            &("org.a11y.Status", "IsEnabled"),
        )
        .await?;
        if bool::try_from(now).ok() != Some(on) {
            bail!("org.a11y.Status.IsEnabled did not change to {on}");
        }
        Ok(())
    })
}

/// Waits until the AT-SPI registry owns its name on the accessibility bus and answers.
pub(crate) fn wait_registry(a11y: String, within: Duration) -> Result<()> {
    run_async(move || async move {
        let conn = connect(&a11y).await?;
        poll_async("the AT-SPI registry", within, None, || async {
            let owned: bool = call(
                &conn,
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "NameHasOwner",
                &(REGISTRY,),
            )
            .await?;
            if !owned {
                return Ok(None);
            }
            let _: Vec<(String, OwnedObjectPath)> =
                call(&conn, REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren", &()).await?;
            Ok(Some(()))
        })
        .await
    })
}

/// Reads one registered application; None when it went away or does not answer.
async fn read_app(conn: &Connection, bus_name: &str, path: &str) -> Result<AtspiApp> {
    let pid: u32 = call(
        conn,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "GetConnectionUnixProcessID",
        &(bus_name,),
    )
    .await?;
    let name: String = property(conn, bus_name, path, "Name")
        .await
        .ok()
        .and_then(|v| String::try_from(v).ok())
        .unwrap_or_default();
    let frames: Vec<(String, OwnedObjectPath)> =
        call(conn, bus_name, path, ACCESSIBLE, "GetChildren", &()).await?;
    let mut frame_children = 0;
    for (fbus, fpath) in &frames {
        let n = property(conn, fbus, fpath.as_str(), "ChildCount")
            .await
            .ok()
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(0);
        frame_children = frame_children.max(n);
    }
    Ok(AtspiApp {
        bus_name: bus_name.to_string(),
        path: path.to_string(),
        pid,
        name,
        frames: frames.len(),
        frame_children,
    })
}

async fn list_apps_on(conn: &Connection) -> Result<Vec<AtspiApp>> {
    let apps: Vec<(String, OwnedObjectPath)> =
        call(conn, REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren", &()).await?;
    let mut out = Vec::new();
    for (bus, path) in apps {
        // An application that went away or hangs is left out, not an error.
        if let Ok(app) = read_app(conn, &bus, path.as_str()).await {
            out.push(app);
        }
    }
    Ok(out)
}

/// Every application on the registry that answers.
pub(crate) fn list_apps(a11y: String) -> Result<Vec<AtspiApp>> {
    run_async(move || async move {
        let conn = connect(&a11y).await?;
        list_apps_on(&conn).await
    })
}

/// Waits until the registry lists an application whose connection belongs to `pid` and one of
/// whose frames has children.
pub(crate) fn wait_app(a11y: String, pid: u32, within: Duration) -> Result<AtspiApp> {
    run_async(move || async move {
        let conn = connect(&a11y).await?;
        let what = format!("AT-SPI application of pid {pid} with a populated frame");
        poll_async(&what, within, None, || async {
            let apps: Vec<(String, OwnedObjectPath)> =
                call(&conn, REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren", &()).await?;
            let mut seen = Vec::new();
            for (bus, path) in apps {
                let Ok(app_pid) = call::<_, u32>(
                    &conn,
                    "org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus",
                    "GetConnectionUnixProcessID",
                    &(bus.as_str(),),
                )
                .await
                else {
                    continue;
                };
                if app_pid != pid {
                    seen.push(app_pid);
                    continue;
                }
                let app = read_app(&conn, &bus, path.as_str()).await?;
                if app.frame_children > 0 {
                    return Ok(Some(app));
                }
                bail_pending::<AtspiApp>(format!(
                    "registered with {} frames, none with children yet",
                    app.frames
                ))?;
            }
            bail_pending(format!("registered pids {seen:?}"))
        })
        .await
    })
}

/// AT-SPI role number of a web document (`ATSPI_ROLE_DOCUMENT_WEB`).
const ROLE_DOCUMENT_WEB: u32 = 95;

/// A web document found in an application's tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtspiDocument {
    /// Bus name of the application.
    pub bus_name: String,
    /// Object path of the document.
    pub path: String,
    /// Its name (the page title).
    pub name: String,
    /// Its child count.
    pub children: i32,
}

/// Breadth-first search of `pid`'s tree (at most `MAX_NODES` objects) for a populated web
/// document whose name starts with `title`.
async fn find_document(conn: &Connection, pid: u32, title: &str) -> Result<Option<AtspiDocument>> {
    const MAX_NODES: usize = 2000;
    let apps: Vec<(String, OwnedObjectPath)> =
        call(conn, REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren", &()).await?;
    for (bus, path) in apps {
        let Ok(app_pid) = call::<_, u32>(
            conn,
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "GetConnectionUnixProcessID",
            &(bus.as_str(),),
        )
        .await
        else {
            continue;
        };
        if app_pid != pid {
            continue;
        }
        let mut queue = std::collections::VecDeque::from([(bus.clone(), path)]);
        let mut visited = 0;
        while let Some((obus, opath)) = queue.pop_front() {
            visited += 1;
            if visited > MAX_NODES {
                break;
            }
            let role: u32 = call(conn, &obus, opath.as_str(), ACCESSIBLE, "GetRole", &()).await?;
            if role == ROLE_DOCUMENT_WEB {
                let name = property(conn, &obus, opath.as_str(), "Name")
                    .await
                    .ok()
                    .and_then(|v| String::try_from(v).ok())
                    .unwrap_or_default();
                let children = property(conn, &obus, opath.as_str(), "ChildCount")
                    .await
                    .ok()
                    .and_then(|v| i32::try_from(v).ok())
                    .unwrap_or(0);
                if name.starts_with(title) && children > 0 {
                    return Ok(Some(AtspiDocument {
                        bus_name: obus,
                        path: opath.to_string(),
                        name,
                        children,
                    }));
                }
                // A document's content is not searched further.
                continue;
            }
            let kids: Vec<(String, OwnedObjectPath)> =
                call(conn, &obus, opath.as_str(), ACCESSIBLE, "GetChildren", &()).await?;
            queue.extend(kids);
        }
    }
    Ok(None)
}

/// Waits until `pid`'s tree holds a web document named `title...` with children. Chromium
/// builds a page's accessible tree lazily, on the first request for it; this request is one.
pub(crate) fn wait_document(
    a11y: String,
    pid: u32,
    title: String,
    within: Duration,
) -> Result<AtspiDocument> {
    run_async(move || async move {
        let conn = connect(&a11y).await?;
        let what = format!("a populated web document titled {title:?} in pid {pid}");
        poll_async(&what, within, None, || find_document(&conn, pid, &title)).await
    })
}

/// A pending state that `poll_async` records as the last thing seen.
fn bail_pending<T>(note: String) -> Result<Option<T>> {
    Err(anyhow!(note))
}

/// The object paths of the top-level accessibles (the root's children) of the application at
/// `bus_name`.
pub(crate) fn top_level_paths(a11y: String, bus_name: String) -> Result<Vec<String>> {
    run_async(move || async move {
        let conn = connect(&a11y).await?;
        let kids: Vec<(String, OwnedObjectPath)> =
            call(&conn, &bus_name, ROOT_PATH, ACCESSIBLE, "GetChildren", &()).await?;
        Ok(kids
            .into_iter()
            .map(|(_, p)| p.as_str().to_string())
            .collect())
    })
}
