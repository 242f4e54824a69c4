//! Reading the target element live, with the code the reader's walk uses (`nish-atspi`): the
//! accessibility bus and the application links (`nish_atspi::a11y`), roles, names, states and
//! the secure rule (`nish_atspi::tree::Obj::from_atspi`), and extents as the reader's walk
//! reports them (screen coordinates; GTK 4's window-relative extents moved by the window's
//! position).
//!
//! Written here because the reader does not export it: the GTK 4 window offset (the reader's
//! `walk::window_relative_offset` is private), the parent reference decoding, and the toolkit
//! lookup (the reader's `a11y::toolkit` is private).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nish_atspi::a11y::{A11y, AppLink, ROOT_PATH, extents, get_string_prop, props};
use nish_atspi::agent::connector::Connector;
use nish_atspi::agent::x11::XDisplay;
use nish_atspi::dbus::{CallError, Read, call};
use nish_atspi::failure::Failure;
use nish_atspi::states::{ATSPI_DEFUNCT, atspi_bits, has_atspi_state};
use nish_proto::errors::ErrorCode;
use nish_proto::model::{Ifaces, Rect};
use nish_proto::wire::input::Expect;
use tokio::sync::Mutex;
use zbus::zvariant::{OwnedValue, Structure, Value};

use crate::failure::ActFailure;
use crate::handle::Handle;
use crate::recheck::{Live, Rules};

/// Longest one re-check read may wait.
pub const READ_TIMEOUT: Duration = Duration::from_millis(1500);
/// Everything before the act (connecting, re-checking, preparing) must fit in this.
pub const RECHECK_BUDGET: Duration = Duration::from_millis(4000);
/// Deepest ancestry walked to find an element's window.
pub const MAX_ANCESTRY: usize = 64;
/// Most applications remembered (registration, toolkit); the memory is emptied when full.
pub const MEMORY: usize = 4096;
/// The AT-SPI null object path.
pub const NULL_PATH: &str = "/org/a11y/atspi/null";

/// An application's toolkit, as `org.a11y.atspi.Application` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Toolkit {
    /// `ToolkitName` (`GTK`, `gtk`, `Chromium`).
    pub name: String,
    /// `Version`.
    pub version: String,
}

impl Toolkit {
    /// GTK 4: extents relative to the window, and no `showing` state below it.
    pub fn is_gtk4(&self) -> bool {
        self.name.eq_ignore_ascii_case("gtk") && self.version.starts_with("4.")
    }

    /// Qt: `InsertText`'s length counts UTF-16 units
    /// ([`nish_proto::wire::input::counts_utf16`]).
    pub fn counts_utf16(&self) -> bool {
        nish_proto::wire::input::counts_utf16(&self.name)
    }

    /// The toolkit's re-check rules.
    pub fn rules(&self) -> Rules {
        Rules {
            visible_for_showing: self.is_gtk4(),
            collapsed_option: false,
        }
    }
}

/// Where GTK 4's window-relative extents sit on screen, as the reader's walk places them
/// (`nish_reader::walk`, private there): when the window accessible's extents are at 0,0, by
/// the client window's position plus the margin GTK 4's surface keeps round the window (5 px
/// each side without a compositor), taken as even on both sides. `None`: no offset.
pub fn gtk4_window_offset(frame: Rect, client: Rect) -> Option<(i32, i32)> {
    if (frame.x, frame.y) != (0, 0) {
        return None;
    }
    let mx = ((client.w - frame.w) / 2).clamp(0, 64);
    let my = ((client.h - frame.h) / 2).clamp(0, 64);
    let off = (client.x + mx, client.y + my);
    (off != (0, 0)).then_some(off)
}

/// The target element, read live.
#[derive(Clone, Debug)]
pub struct Element {
    /// Its handle.
    pub handle: Handle,
    /// The link calls to it go through.
    pub link: AppLink,
    /// What it says now.
    pub live: Live,
    /// Its application's toolkit.
    pub toolkit: Toolkit,
}

/// The time left before `deadline`, at most [`READ_TIMEOUT`]; a failure when it ran out.
pub fn left(deadline: Instant) -> Result<Duration, ActFailure> {
    let t = deadline.saturating_duration_since(Instant::now());
    if t.is_zero() {
        return Err(ActFailure::not_responding(format!(
            "the re-check did not finish within {} ms",
            RECHECK_BUDGET.as_millis()
        )));
    }
    Ok(t.min(READ_TIMEOUT))
}

/// A failed read of the target, before anything was sent.
pub fn read_failure(e: CallError) -> ActFailure {
    match e {
        CallError::Unknown => ActFailure::gone("the element no longer exists"),
        CallError::Timeout => ActFailure::not_responding(format!(
            "the application did not answer within {} ms",
            READ_TIMEOUT.as_millis()
        )),
        CallError::Connection => {
            ActFailure::not_responding("the connection to the application failed")
        }
        CallError::BadReply | CallError::Other => {
            ActFailure::gone("the element did not answer as an accessible object")
        }
    }
}

fn from_reader(f: Failure) -> ActFailure {
    ActFailure::refused(f.code, f.message)
}

/// An object reference `(so)` inside a property value.
pub fn decode_ref(v: &Value<'_>) -> Option<(String, String)> {
    let s: &Structure = match v {
        Value::Structure(s) => s,
        Value::Value(inner) => return decode_ref(inner),
        _ => return None,
    };
    match s.fields() {
        [Value::Str(bus), Value::ObjectPath(p)] => Some((bus.to_string(), p.to_string())),
        _ => None,
    }
}

/// The reads behind every act: bus, application links, toolkits and the X display, kept
/// between requests and made through its [`Connector`].
#[derive(Debug)]
pub struct Desk {
    connector: Connector,
    a11y: Arc<A11y>,
    registered: Mutex<HashSet<String>>,
    toolkits: Mutex<HashMap<String, Toolkit>>,
    x11: Mutex<Option<Arc<XDisplay>>>,
}

impl Desk {
    /// Nothing connected yet; connections are made through `connector`.
    pub fn new(connector: Connector) -> Desk {
        Desk {
            a11y: A11y::new(connector.clone()),
            connector,
            registered: Mutex::default(),
            toolkits: Mutex::default(),
            x11: Mutex::default(),
        }
    }

    /// The accessibility side (bus and links).
    pub fn a11y(&self) -> &A11y {
        &self.a11y
    }

    /// A link to the handle's application: it must be registered on the accessibility bus.
    async fn link(&self, bus_name: &str) -> Result<AppLink, ActFailure> {
        let known = self.registered.lock().await.contains(bus_name);
        if !known {
            let apps = self.a11y.apps().await.map_err(from_reader)?;
            if !apps.iter().any(|a| a.bus_name == bus_name) {
                return Err(ActFailure::gone(
                    "the element's application is not on the accessibility bus",
                ));
            }
            let mut known = self.registered.lock().await;
            if known.len() >= MEMORY {
                known.clear();
                self.toolkits.lock().await.clear();
            }
            known.insert(bus_name.to_string());
        }
        self.a11y.link(bus_name).await.map_err(from_reader)
    }

    async fn toolkit(&self, link: &AppLink, deadline: Instant) -> Result<Toolkit, ActFailure> {
        if let Some(t) = self.toolkits.lock().await.get(&link.bus_name) {
            return Ok(t.clone());
        }
        let t = left(deadline)?;
        let (n, v) = tokio::join!(
            get_string_prop(
                &link.conn,
                link.dest(),
                ROOT_PATH,
                "org.a11y.atspi.Application",
                "ToolkitName",
                t
            ),
            get_string_prop(
                &link.conn,
                link.dest(),
                ROOT_PATH,
                "org.a11y.atspi.Application",
                "Version",
                t
            ),
        );
        let tk = Toolkit {
            name: nish_atspi::states::clip_chars(n.map_err(read_failure)?, 32),
            version: nish_atspi::states::clip_chars(v.unwrap_or_default(), 32),
        };
        self.toolkits
            .lock()
            .await
            .insert(link.bus_name.clone(), tk.clone());
        Ok(tk)
    }

    /// The unix process id of a connection on the accessibility bus (asked live, not
    /// remembered).
    async fn pid(&self, bus_name: &str, timeout: Duration) -> Result<u32, ActFailure> {
        let bus = self
            .a11y
            .bus()
            .await
            .map_err(|p| from_reader(p.failure()))?;
        let r = call::<_, u32>(
            &bus,
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Read::ConnectionPid,
            &(bus_name,),
            timeout,
        )
        .await;
        match r {
            Ok(pid) => Ok(pid),
            Err(CallError::Unknown | CallError::Other) => Err(ActFailure::gone(
                "the element's application has left the accessibility bus",
            )),
            Err(CallError::Connection) => {
                self.bus_failed().await;
                Err(ActFailure::refused(
                    ErrorCode::BackendUnavailable,
                    "the accessibility bus connection failed",
                ))
            }
            Err(e) => Err(read_failure(e)),
        }
    }

    /// Forgets a broken bus connection so the next request connects again.
    async fn bus_failed(&self) {
        self.a11y.reset_bus().await;
        self.registered.lock().await.clear();
    }

    /// Reads the element live.
    pub async fn read(
        &self,
        handle: &Handle,
        expect: &Expect,
        deadline: Instant,
    ) -> Result<Element, ActFailure> {
        let mut link = self.link(&handle.bus).await?;
        let mut attempt = 0;
        let (pid, p, frame) = loop {
            let t = left(deadline)?;
            let (pid, p, e) = tokio::join!(
                self.pid(&handle.bus, t),
                props(&link, &handle.path, t),
                extents(&link, &handle.path, t),
            );
            // A direct link that broke: once more through the bus.
            let broken =
                matches!(p, Err(CallError::Connection)) || matches!(e, Err(CallError::Connection));
            if broken && link.p2p && attempt == 0 {
                attempt += 1;
                self.a11y.drop_link(&handle.bus).await;
                link = self.a11y.link(&handle.bus).await.map_err(from_reader)?;
                continue;
            }
            let pid = pid?;
            let p = p.map_err(read_failure)?;
            let frame = match e {
                Ok(r) => Some(r),
                // No Component: no position.
                Err(CallError::Unknown) => None,
                Err(e) => return Err(read_failure(e)),
            };
            break (pid, p, frame);
        };
        let toolkit = self.toolkit(&link, deadline).await?;
        let defunct = has_atspi_state(atspi_bits(&p.states), ATSPI_DEFUNCT);
        let obj = p.to_obj(&handle.bus, &handle.path);
        let frame = if obj.ifaces.has(Ifaces::COMPONENT) {
            frame
        } else {
            None
        };
        let frame = match frame {
            Some(f) if toolkit.is_gtk4() => {
                let (dx, dy) = self
                    .gtk4_offset(&link, &handle.path, expect, deadline)
                    .await?;
                tracing::debug!(?f, dx, dy, "GTK 4 extents moved by the window offset");
                Some(Rect::new(f.x + dx, f.y + dy, f.w, f.h))
            }
            other => other,
        };
        Ok(Element {
            handle: handle.clone(),
            link,
            live: Live {
                pid,
                role: obj.role,
                name: obj.name,
                states: obj.states,
                defunct,
                ifaces: obj.ifaces,
                frame,
            },
            toolkit,
        })
    }

    /// True when the element's parent or grandparent is a combo box that is showing (the
    /// element is then an option of a collapsed `<select>`).
    pub async fn combo_ancestor_showing(
        &self,
        el: &Element,
        deadline: Instant,
    ) -> Result<bool, ActFailure> {
        let mut path = el.handle.path.clone();
        for _ in 0..2 {
            let (_, parent) = self
                .parent(&el.link, &path, left(deadline)?)
                .await
                .map_err(read_failure)?;
            if parent == ROOT_PATH || parent == NULL_PATH || parent == "/" {
                return Ok(false);
            }
            let p = props(&el.link, &parent, left(deadline)?)
                .await
                .map_err(read_failure)?;
            let obj = p.to_obj(&el.handle.bus, &parent);
            if obj.role == "combo_box" {
                let showing = obj.states.has(nish_proto::model::State::Showing)
                    || (el.toolkit.rules().visible_for_showing
                        && obj.states.has(nish_proto::model::State::Visible));
                return Ok(showing);
            }
            path = parent;
        }
        Ok(false)
    }

    /// An object's parent reference.
    pub async fn parent(
        &self,
        link: &AppLink,
        path: &str,
        timeout: Duration,
    ) -> Result<(String, String), CallError> {
        let v: OwnedValue = call(
            &link.conn,
            link.dest(),
            path,
            Read::GetProperty,
            &("org.a11y.atspi.Accessible", "Parent"),
            timeout,
        )
        .await?;
        decode_ref(&v).ok_or(CallError::BadReply)
    }

    /// GTK 4 on X11 reports extents relative to the window: the offset that moves them to
    /// the screen, by [`gtk4_window_offset`] with the element's window accessible and the
    /// window's geometry (read live from X; the snapshot's window frame when X does not answer).
    async fn gtk4_offset(
        &self,
        link: &AppLink,
        path: &str,
        expect: &Expect,
        deadline: Instant,
    ) -> Result<(i32, i32), ActFailure> {
        // On Wayland every frame is in the window's own coordinates already (the snapshot's
        // too), and there is no X connection to ask.
        if nish_atspi::agent::is_wayland() {
            return Ok((0, 0));
        }
        let mut top = path.to_string();
        for _ in 0..MAX_ANCESTRY {
            let (_, parent) = self
                .parent(link, &top, left(deadline)?)
                .await
                .map_err(read_failure)?;
            if parent == ROOT_PATH || parent == NULL_PATH || parent == "/" {
                break;
            }
            top = parent;
        }
        let frame = extents(link, &top, left(deadline)?)
            .await
            .map_err(read_failure)?;
        if (frame.x, frame.y) != (0, 0) {
            return Ok((0, 0));
        }
        let client = match self.window_geometry(expect.window_id).await {
            Ok(c) => c,
            Err(f) if f.code == ErrorCode::BackendUnavailable => {
                tracing::warn!(
                    window = expect.window_id,
                    "X display unavailable: GTK 4 extents placed with the snapshot's window frame"
                );
                expect.window_frame
            }
            Err(_) => {
                return Err(ActFailure::gone(format!(
                    "window {} no longer exists",
                    expect.window_id
                )));
            }
        };
        Ok(gtk4_window_offset(frame, client).unwrap_or((0, 0)))
    }

    /// A client window's geometry in screen coordinates, from X (connected on first use).
    async fn window_geometry(&self, window_id: u64) -> Result<Rect, Failure> {
        let win = u32::try_from(window_id)
            .map_err(|_| Failure::not_found(format!("window {window_id} does not exist")))?;
        let x = {
            let mut g = self.x11.lock().await;
            match g.as_ref() {
                Some(x) => x.clone(),
                None => {
                    let connector = self.connector.clone();
                    let x = Arc::new(
                        tokio::task::spawn_blocking(move || XDisplay::connect(&connector))
                            .await
                            .map_err(|_| Failure::internal("X11 task failed"))??,
                    );
                    *g = Some(x.clone());
                    x
                }
            }
        };
        let r = tokio::task::spawn_blocking(move || x.geometry(win))
            .await
            .map_err(|_| Failure::internal("X11 task failed"))?;
        if let Err(f) = &r
            && f.code == ErrorCode::BackendUnavailable
        {
            *self.x11.lock().await = None;
        }
        r.map(|(client, _)| client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::zvariant::ObjectPath;

    #[test]
    fn parent_references_decode() {
        let s = Structure::from((
            ":1.5",
            ObjectPath::try_from("/org/a11y/atspi/accessible/3").unwrap(),
        ));
        let v = Value::Structure(s);
        assert_eq!(
            decode_ref(&v),
            Some((
                ":1.5".to_string(),
                "/org/a11y/atspi/accessible/3".to_string()
            ))
        );
        let wrapped = Value::Value(Box::new(v));
        assert!(decode_ref(&wrapped).is_some());
        assert_eq!(decode_ref(&Value::U32(3)), None);
    }

    #[test]
    fn gtk4_offsets() {
        // An 800x600 client at 240,100 whose surface keeps 5 px round a 790x590 window.
        let client = Rect::new(240, 100, 800, 600);
        assert_eq!(
            gtk4_window_offset(Rect::new(0, 0, 790, 590), client),
            Some((245, 105))
        );
        // Extents already on screen: no offset.
        assert_eq!(
            gtk4_window_offset(Rect::new(245, 105, 790, 590), client),
            None
        );
        // A window at the origin without a margin.
        assert_eq!(
            gtk4_window_offset(Rect::new(0, 0, 800, 600), Rect::new(0, 0, 800, 600)),
            None
        );
        // Margins are bounded.
        assert_eq!(
            gtk4_window_offset(Rect::new(0, 0, 10, 10), Rect::new(0, 0, 1000, 1000)),
            Some((64, 64))
        );
    }

    #[test]
    fn toolkit_rules() {
        let g4 = Toolkit {
            name: "GTK".into(),
            version: "4.8.3".into(),
        };
        let g3 = Toolkit {
            name: "gtk".into(),
            version: "3.24.38".into(),
        };
        assert!(g4.is_gtk4() && g4.rules().visible_for_showing);
        assert!(!g3.is_gtk4() && !g3.rules().visible_for_showing);
    }

    #[test]
    fn running_out_of_time_is_a_refusal() {
        let f = left(Instant::now() - Duration::from_millis(1)).unwrap_err();
        assert_eq!(f.code, ErrorCode::AppNotResponding);
        assert!(!f.sent);
        assert_eq!(
            left(Instant::now() + Duration::from_secs(60)).unwrap(),
            READ_TIMEOUT
        );
    }
}
