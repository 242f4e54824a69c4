//! `xdg-desktop-portal [--no-clipboard-grant]`: a stand-in for the desktop portal's frontend on
//! the test desktop's private session bus, for the end-to-end test of the takeover's clipboard.
//!
//! On GNOME 45+ the driver's takeover uses the portal's `org.freedesktop.portal.Clipboard`
//! (version 1) inside its `org.freedesktop.portal.RemoteDesktop` session; GNOME 43's portal has
//! no Clipboard, so the test runs this program instead of the real frontend. The driver checks
//! that the owner of `org.freedesktop.portal.Desktop` runs an executable named
//! `xdg-desktop-portal`, hence this program's name. It follows the portal's documented D-Bus
//! API (RemoteDesktop, Clipboard, Request and Session, each version 1): a session's requests
//! answer by `Request.Response` at the request's path, every request is granted, and the
//! clipboard is granted to a session that asked for it before its start (not with
//! `--no-clipboard-grant`).
//!
//! Standing in for the other applications of the desktop, it reads commands on stdin, one JSON
//! object a line, and tells on stdout, one JSON object a line, what it was asked and what it
//! received (diagnostics go to stderr):
//!
//! - `{"cmd":"own","mime_types":[...],"mode":"text","text":"..."}`: another application
//!   copied. Mode `stall` keeps each reader's pipe open unwritten (60 s at most), `huge` with
//!   `"bytes":N` writes N bytes of `x`, `binary` with `"hex":"..."` writes those bytes.
//! - `{"cmd":"paste","mime":"..."}`: another application pastes what the session copied; the
//!   answer has the transfer's serial, and a `written` event follows.
//! - `{"cmd":"flood","count":N}`: N pastes at once of programs that never read: each pipe the
//!   session is handed is held open unread (60 s at most), told by a `stalled` event.
//! - `{"cmd":"close"}`: the desktop closes every session.
//!
//! A `SetSelection` without `mime_types` gives the clipboard up (an `unset_selection` event,
//! and an owner change with no owner), as mutter does.
//!
//! Each command is answered by `{"event":"ok","cmd":...}` or `{"event":"error","cmd":...,
//! "message":...}`. It prints `{"event":"ready"}` once it owns the portal's name, and ends when
//! stdin closes.

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::os::fd::AsFd as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::json;
use zbus::fdo;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{ObjectPath, OwnedFd, OwnedObjectPath, OwnedValue, Value};

/// The portal frontend's well-known name and object.
const PORTAL: &str = "org.freedesktop.portal.Desktop";
const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";
const REQUEST: &str = "org.freedesktop.portal.Request";
/// The device types the portal offers and a session has unless it selects others: keyboard
/// and pointer.
const ALL_DEVICES: u32 = 3;
/// The wait before a request's `Response`, so that it follows the method's reply.
const RESPONSE_DELAY: Duration = Duration::from_millis(20);
/// The longest wait for the session's `SelectionWriteDone` after a paste.
const WRITE_DONE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a `SelectionWrite` pipe is read.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The bytes of a `SelectionWrite` pipe kept (the rest is read and counted only).
const READ_KEPT: usize = 8 << 20;
/// The longest a `stall` owner holds a reader's pipe.
const STALL: Duration = Duration::from_secs(60);

/// Prints one event line on stdout, flushed.
fn event(line: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Prints the `call` event of a method call on one of the portal's interfaces.
fn call(interface: &str, method: &str) {
    event(json!({"event": "call", "interface": interface, "method": method}));
}

fn failed(why: impl Into<String>) -> fdo::Error {
    fdo::Error::Failed(why.into())
}

/// A remote-desktop session of a client.
struct Session {
    /// The unique name of the client that created it.
    owner: String,
    /// The device types it selected.
    types: u32,
    /// It called `RequestClipboard` before its start.
    clipboard_requested: bool,
    /// Its start granted the clipboard.
    clipboard_enabled: bool,
    started: bool,
}

/// What another application writes when a session reads the clipboard it copied.
#[derive(Clone)]
enum Mode {
    /// This text.
    Text(String),
    /// Nothing, with the pipe held open.
    Stall,
    /// This many bytes of `x`.
    Huge(u64),
    /// These bytes.
    Binary(Vec<u8>),
}

/// Who holds the desktop's clipboard.
#[derive(Default)]
enum Owner {
    #[default]
    Nobody,
    /// The session at this path (it told the types it offers in its `SetSelection`).
    Session { path: String },
    /// Another application, with the types it offers and what it writes.
    Other { mime_types: Vec<String>, mode: Mode },
}

/// What a `SelectionWrite` pipe gave so far.
struct Received {
    /// The bytes kept (at most [`READ_KEPT`]) and the count of all bytes read.
    data: Mutex<(Vec<u8>, usize)>,
    /// Set once the pipe is read to its end (or abandoned).
    finished: tokio::sync::watch::Sender<bool>,
}

/// A transfer to another application (a paste) waiting for the session's
/// `SelectionWriteDone`.
struct Pending {
    session: String,
    /// The reading of the session's pipe, once it called `SelectionWrite`.
    received: Option<Arc<Received>>,
    /// A paste of a program that never reads (a `flood`): its pipe is held open unread.
    stall: bool,
}

/// The portal's state, shared by its interfaces and the commands.
#[derive(Default)]
struct State {
    /// The sessions by path.
    sessions: HashMap<String, Session>,
    owner: Owner,
    /// The last transfer serial handed out.
    serial: u32,
    pending: HashMap<u32, Pending>,
    /// A counter for request and session tokens a client did not give.
    tokens: u32,
}

impl State {
    /// The session at `path` of the client `sender`.
    fn session(&mut self, path: &str, sender: &str) -> fdo::Result<&mut Session> {
        match self.sessions.get_mut(path) {
            Some(s) if s.owner == sender => Ok(s),
            _ => Err(failed(format!("no session {path}"))),
        }
    }

    /// Forgets the session at `path`, and its hold on the clipboard.
    fn forget(&mut self, path: &str) {
        self.sessions.remove(path);
        if matches!(&self.owner, Owner::Session { path: p } if p == path) {
            self.owner = Owner::Nobody;
        }
    }

    /// The token `key` of `options`, or a new one.
    fn token(&mut self, options: &HashMap<String, OwnedValue>, key: &str) -> String {
        match options.get(key).and_then(|v| <&str>::try_from(v).ok()) {
            Some(t) => t.to_owned(),
            None => {
                self.tokens += 1;
                format!("t{}", self.tokens)
            }
        }
    }
}

/// The portal: its state and whether it grants the clipboard.
struct Portal {
    state: Mutex<State>,
    grant_clipboard: bool,
}

impl Portal {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The caller's unique name and its element in the portal's paths (without ':', '.' as '_').
fn sender(hdr: &Header<'_>) -> fdo::Result<(String, String)> {
    let name = hdr
        .sender()
        .ok_or_else(|| failed("a call without a sender"))?
        .to_string();
    let element = name.trim_start_matches(':').replace('.', "_");
    Ok((name, element))
}

/// The path `/org/freedesktop/portal/desktop/{kind}/{sender}/{token}`.
fn handle(kind: &str, sender: &str, token: &str) -> fdo::Result<OwnedObjectPath> {
    let path = format!("{PORTAL_PATH}/{kind}/{sender}/{token}");
    OwnedObjectPath::try_from(path.as_str())
        .map_err(|e| fdo::Error::InvalidArgs(format!("{path}: {e}")))
}

/// Emits `Request.Response(0, results)` at `request` once the method's reply has gone.
fn respond(
    conn: &zbus::Connection,
    request: OwnedObjectPath,
    results: HashMap<&'static str, Value<'static>>,
) {
    let conn = conn.clone();
    tokio::spawn(async move {
        tokio::time::sleep(RESPONSE_DELAY).await;
        if let Err(e) = conn
            .emit_signal(
                None::<&str>,
                &request,
                REQUEST,
                "Response",
                &(0u32, results),
            )
            .await
        {
            eprintln!("xdg-desktop-portal: Response at {request}: {e}");
        }
    });
}

/// `org.freedesktop.portal.RemoteDesktop`.
struct RemoteDesktop(Arc<Portal>);

impl RemoteDesktop {
    /// A `Notify*` call: the session must be the caller's and started.
    fn notify(&self, method: &str, session: &ObjectPath<'_>, hdr: &Header<'_>) -> fdo::Result<()> {
        call("RemoteDesktop", method);
        let (name, _) = sender(hdr)?;
        let mut st = self.0.state();
        if st.session(session, &name)?.started {
            Ok(())
        } else {
            Err(failed("the session is not started"))
        }
    }
}

#[zbus::interface(name = "org.freedesktop.portal.RemoteDesktop")]
impl RemoteDesktop {
    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        1
    }

    #[zbus(property)]
    fn available_device_types(&self) -> u32 {
        ALL_DEVICES
    }

    /// Creates a session at the path its `session_handle_token` names, and its object.
    async fn create_session(
        &self,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> fdo::Result<OwnedObjectPath> {
        call("RemoteDesktop", "CreateSession");
        let (name, element) = sender(&hdr)?;
        let (request, session) = {
            let mut st = self.0.state();
            let request = st.token(&options, "handle_token");
            let session = st.token(&options, "session_handle_token");
            (
                handle("request", &element, &request)?,
                handle("session", &element, &session)?,
            )
        };
        let created = conn
            .object_server()
            .at(
                &session,
                SessionObject {
                    portal: self.0.clone(),
                    path: session.to_string(),
                },
            )
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !created {
            return Err(failed(format!("the session {session} exists")));
        }
        self.0.state().sessions.insert(
            session.to_string(),
            Session {
                owner: name,
                types: ALL_DEVICES,
                clipboard_requested: false,
                clipboard_enabled: false,
                started: false,
            },
        );
        // The path, for a test that forges the portal's signals for it.
        event(serde_json::json!({"event": "session", "path": session.to_string()}));
        let results = HashMap::from([("session_handle", Value::from(session.to_string()))]);
        respond(conn, request.clone(), results);
        Ok(request)
    }

    /// Records the session's device types (`types`, keyboard and pointer by default).
    async fn select_devices(
        &self,
        session_handle: ObjectPath<'_>,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> fdo::Result<OwnedObjectPath> {
        call("RemoteDesktop", "SelectDevices");
        let (name, element) = sender(&hdr)?;
        let request = {
            let mut st = self.0.state();
            let token = st.token(&options, "handle_token");
            let session = st.session(&session_handle, &name)?;
            if session.started {
                return Err(failed("the session is started"));
            }
            session.types = options
                .get("types")
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(ALL_DEVICES);
            handle("request", &element, &token)?
        };
        respond(conn, request.clone(), HashMap::new());
        Ok(request)
    }

    /// Starts the session: its devices, and the clipboard if it asked for it.
    async fn start(
        &self,
        session_handle: ObjectPath<'_>,
        _parent_window: &str,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> fdo::Result<OwnedObjectPath> {
        call("RemoteDesktop", "Start");
        let (name, element) = sender(&hdr)?;
        let grant = self.0.grant_clipboard;
        let (request, results) = {
            let mut st = self.0.state();
            let token = st.token(&options, "handle_token");
            let session = st.session(&session_handle, &name)?;
            if session.started {
                return Err(failed("the session is started"));
            }
            session.started = true;
            let mut results = HashMap::from([("devices", Value::from(session.types))]);
            if session.clipboard_requested {
                session.clipboard_enabled = grant;
                results.insert("clipboard_enabled", Value::from(grant));
            }
            (handle("request", &element, &token)?, results)
        };
        respond(conn, request.clone(), results);
        Ok(request)
    }

    async fn notify_keyboard_keysym(
        &self,
        session_handle: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
        _keysym: i32,
        _state: u32,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        self.notify("NotifyKeyboardKeysym", &session_handle, &hdr)
    }

    async fn notify_keyboard_keycode(
        &self,
        session_handle: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
        _keycode: i32,
        _state: u32,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        self.notify("NotifyKeyboardKeycode", &session_handle, &hdr)
    }

    async fn notify_pointer_motion(
        &self,
        session_handle: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
        _dx: f64,
        _dy: f64,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        self.notify("NotifyPointerMotion", &session_handle, &hdr)
    }

    async fn notify_pointer_motion_absolute(
        &self,
        session_handle: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
        _stream: u32,
        _x: f64,
        _y: f64,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        self.notify("NotifyPointerMotionAbsolute", &session_handle, &hdr)
    }

    async fn notify_pointer_button(
        &self,
        session_handle: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
        _button: i32,
        _state: u32,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        self.notify("NotifyPointerButton", &session_handle, &hdr)
    }

    async fn notify_pointer_axis(
        &self,
        session_handle: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
        _dx: f64,
        _dy: f64,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        self.notify("NotifyPointerAxis", &session_handle, &hdr)
    }

    async fn notify_pointer_axis_discrete(
        &self,
        session_handle: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
        _axis: u32,
        _steps: i32,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        self.notify("NotifyPointerAxisDiscrete", &session_handle, &hdr)
    }
}

/// `org.freedesktop.portal.Clipboard`.
struct Clipboard(Arc<Portal>);

#[zbus::interface(name = "org.freedesktop.portal.Clipboard")]
impl Clipboard {
    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        1
    }

    /// Asks for the clipboard in a session not started yet.
    async fn request_clipboard(
        &self,
        session_handle: ObjectPath<'_>,
        _options: HashMap<String, OwnedValue>,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        call("Clipboard", "RequestClipboard");
        let (name, _) = sender(&hdr)?;
        let mut st = self.0.state();
        let session = st.session(&session_handle, &name)?;
        if session.started {
            return Err(failed("the session is started"));
        }
        session.clipboard_requested = true;
        Ok(())
    }

    /// The session copied: it holds the clipboard with `mime_types`.
    async fn set_selection(
        &self,
        session_handle: ObjectPath<'_>,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> fdo::Result<()> {
        call("Clipboard", "SetSelection");
        let (name, _) = sender(&hdr)?;
        if !options.contains_key("mime_types") {
            // No types: the session gives the clipboard up (mutter unsets its selection), and
            // the owner change says no owner.
            {
                let mut st = self.0.state();
                if !st.session(&session_handle, &name)?.clipboard_enabled {
                    return Err(failed("the session has no clipboard"));
                }
                if matches!(&st.owner, Owner::Session { path } if path == session_handle.as_str()) {
                    st.owner = Owner::Nobody;
                }
            }
            event(json!({"event": "unset_selection"}));
            let options: HashMap<&str, Value> = HashMap::new();
            return Clipboard::selection_owner_changed(&emitter, session_handle, options)
                .await
                .map_err(|e| failed(e.to_string()));
        }
        let mime_types = strings(options.get("mime_types"));
        {
            let mut st = self.0.state();
            if !st.session(&session_handle, &name)?.clipboard_enabled {
                return Err(failed("the session has no clipboard"));
            }
            st.owner = Owner::Session {
                path: session_handle.to_string(),
            };
        }
        event(json!({"event": "set_selection", "mime_types": mime_types}));
        let options = HashMap::from([
            ("mime_types", Value::from(mime_types)),
            ("session_is_owner", Value::from(true)),
        ]);
        Clipboard::selection_owner_changed(&emitter, session_handle, options)
            .await
            .map_err(|e| failed(e.to_string()))
    }

    /// The pipe the session writes the transfer `serial` to.
    async fn selection_write(
        &self,
        session_handle: ObjectPath<'_>,
        serial: u32,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<OwnedFd> {
        call("Clipboard", "SelectionWrite");
        let (name, _) = sender(&hdr)?;
        let mut st = self.0.state();
        st.session(&session_handle, &name)?;
        let pending = match st.pending.get_mut(&serial) {
            Some(p) if p.session == session_handle.as_str() && p.received.is_none() => p,
            _ => return Err(failed(format!("no transfer {serial} to write"))),
        };
        let (reader, writer) = std::io::pipe().map_err(|e| failed(e.to_string()))?;
        if pending.stall {
            st.pending.remove(&serial);
            event(json!({"event": "stalled", "serial": serial}));
            std::thread::spawn(move || {
                std::thread::sleep(STALL);
                drop(reader);
            });
            return Ok(OwnedFd::from(std::os::fd::OwnedFd::from(writer)));
        }
        let received = Arc::new(Received {
            data: Mutex::new((Vec::new(), 0)),
            finished: tokio::sync::watch::Sender::new(false),
        });
        pending.received = Some(received.clone());
        std::thread::spawn(move || read_pipe(reader, &received));
        Ok(OwnedFd::from(std::os::fd::OwnedFd::from(writer)))
    }

    /// The session wrote the transfer `serial`: prints what it wrote once the pipe is read.
    async fn selection_write_done(
        &self,
        session_handle: ObjectPath<'_>,
        serial: u32,
        success: bool,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<()> {
        call("Clipboard", "SelectionWriteDone");
        let (name, _) = sender(&hdr)?;
        let received = {
            let mut st = self.0.state();
            st.session(&session_handle, &name)?;
            match st.pending.get(&serial) {
                Some(p) if p.session == session_handle.as_str() => {}
                _ => return Err(failed(format!("no transfer {serial} pending"))),
            }
            st.pending.remove(&serial).and_then(|p| p.received)
        };
        tokio::spawn(async move {
            let (text, len, eof) = match received {
                Some(r) => {
                    let mut finished = r.finished.subscribe();
                    let eof = tokio::time::timeout(WRITE_DONE_TIMEOUT, finished.wait_for(|f| *f))
                        .await
                        .is_ok_and(|r| r.is_ok());
                    let data = r.data.lock().unwrap_or_else(|e| e.into_inner());
                    (String::from_utf8_lossy(&data.0).into_owned(), data.1, eof)
                }
                None => (String::new(), 0, true),
            };
            let mut line = json!({
                "event": "written",
                "serial": serial,
                "success": success,
                "text": text,
                "len": len,
            });
            if !eof {
                line["eof"] = json!(false);
            }
            event(line);
        });
        Ok(())
    }

    /// A pipe with what the other application that holds the clipboard has as `mime_type`.
    async fn selection_read(
        &self,
        session_handle: ObjectPath<'_>,
        mime_type: &str,
        #[zbus(header)] hdr: Header<'_>,
    ) -> fdo::Result<OwnedFd> {
        call("Clipboard", "SelectionRead");
        let (name, _) = sender(&hdr)?;
        let mode = {
            let mut st = self.0.state();
            if !st.session(&session_handle, &name)?.clipboard_enabled {
                return Err(failed("the session has no clipboard"));
            }
            match &st.owner {
                Owner::Other { mime_types, mode } if mime_types.iter().any(|m| m == mime_type) => {
                    mode.clone()
                }
                _ => {
                    return Err(fdo::Error::InvalidArgs(format!(
                        "the clipboard has no {mime_type}"
                    )));
                }
            }
        };
        let (reader, writer) = std::io::pipe().map_err(|e| failed(e.to_string()))?;
        event(json!({"event": "selection_read", "mime": mime_type}));
        std::thread::spawn(move || write_pipe(writer, &mode));
        Ok(OwnedFd::from(std::os::fd::OwnedFd::from(reader)))
    }

    #[zbus(signal)]
    async fn selection_owner_changed(
        emitter: &SignalEmitter<'_>,
        session_handle: ObjectPath<'_>,
        options: HashMap<&str, Value<'_>>,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn selection_transfer(
        emitter: &SignalEmitter<'_>,
        session_handle: ObjectPath<'_>,
        mime_type: &str,
        serial: u32,
    ) -> zbus::Result<()>;
}

/// `org.freedesktop.portal.Session`, at a session's path.
struct SessionObject {
    portal: Arc<Portal>,
    path: String,
}

#[zbus::interface(name = "org.freedesktop.portal.Session")]
impl SessionObject {
    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        1
    }

    /// The client closes its session.
    async fn close(&self, #[zbus(object_server)] server: &zbus::ObjectServer) -> fdo::Result<()> {
        call("Session", "Close");
        event(json!({"event": "closed_by_client"}));
        self.portal.state().forget(&self.path);
        server
            .remove::<SessionObject, _>(self.path.as_str())
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok(())
    }

    #[zbus(signal)]
    async fn closed(
        emitter: &SignalEmitter<'_>,
        details: HashMap<&str, Value<'_>>,
    ) -> zbus::Result<()>;
}

/// The strings of an `as` value (none for anything else).
fn strings(value: Option<&OwnedValue>) -> Vec<String> {
    let Some(Value::Array(array)) = value.map(|v| &**v) else {
        return Vec::new();
    };
    array
        .iter()
        .filter_map(|v| match v {
            Value::Str(s) => Some(s.to_string()),
            _ => None,
        })
        .collect()
}

/// Reads a session's `SelectionWrite` pipe to its end, for [`READ_TIMEOUT`] at most.
fn read_pipe(mut reader: std::io::PipeReader, received: &Received) {
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            eprintln!("xdg-desktop-portal: a selection write was not ended in time");
            break;
        }
        let wait = u16::try_from(left.as_millis().min(1000)).unwrap_or(1000);
        let mut fds = [nix::poll::PollFd::new(
            reader.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, wait) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => {
                eprintln!("xdg-desktop-portal: poll: {e}");
                break;
            }
        }
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let mut data = received.data.lock().unwrap_or_else(|e| e.into_inner());
                let keep = n.min(READ_KEPT.saturating_sub(data.0.len()));
                data.0.extend_from_slice(&buf[..keep]);
                data.1 += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                eprintln!("xdg-desktop-portal: read: {e}");
                break;
            }
        }
    }
    received.finished.send_replace(true);
}

/// Writes what the other application has to a session's `SelectionRead` pipe, then closes it.
fn write_pipe(mut writer: std::io::PipeWriter, mode: &Mode) {
    // A reader that closed its end early is no error here (SIGPIPE is ignored: EPIPE).
    let _ = match mode {
        Mode::Text(text) => writer.write_all(text.as_bytes()),
        Mode::Binary(bytes) => writer.write_all(bytes),
        Mode::Stall => {
            std::thread::sleep(STALL);
            Ok(())
        }
        Mode::Huge(n) => {
            let chunk = vec![b'x'; 64 << 10];
            let mut left = *n;
            let mut r = Ok(());
            while left > 0 && r.is_ok() {
                let len = usize::try_from(left).unwrap_or(usize::MAX).min(chunk.len());
                r = writer.write_all(&chunk[..len]);
                left -= len as u64;
            }
            r
        }
    };
}

/// A command on stdin.
#[derive(serde::Deserialize)]
struct Command {
    cmd: String,
    #[serde(default)]
    mime_types: Vec<String>,
    mode: Option<String>,
    text: Option<String>,
    bytes: Option<u64>,
    hex: Option<String>,
    mime: Option<String>,
    count: Option<u32>,
}

/// The bytes of a hexadecimal string.
fn unhex(hex: &str) -> Result<Vec<u8>, String> {
    let digits = hex.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err("an odd count of hex digits".into());
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("not hex: {hex}"))
        })
        .collect()
}

/// Runs one command; its `ok` event's extra fields, or why it failed.
async fn command(
    portal: &Arc<Portal>,
    conn: &zbus::Connection,
    c: &Command,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let emitter = SignalEmitter::new(conn, PORTAL_PATH).map_err(|e| e.to_string())?;
    match c.cmd.as_str() {
        "own" => {
            let mode = match c.mode.as_deref().unwrap_or("text") {
                "text" => Mode::Text(c.text.clone().unwrap_or_default()),
                "stall" => Mode::Stall,
                "huge" => Mode::Huge(c.bytes.ok_or("huge needs bytes")?),
                "binary" => Mode::Binary(unhex(c.hex.as_deref().ok_or("binary needs hex")?)?),
                m => return Err(format!("no mode {m}")),
            };
            let sessions: Vec<String> = {
                let mut st = portal.state();
                st.owner = Owner::Other {
                    mime_types: c.mime_types.clone(),
                    mode,
                };
                st.sessions
                    .iter()
                    .filter(|(_, s)| s.started && s.clipboard_enabled)
                    .map(|(p, _)| p.clone())
                    .collect()
            };
            for path in sessions {
                let path = ObjectPath::try_from(path.as_str()).map_err(|e| e.to_string())?;
                let options = HashMap::from([
                    ("mime_types", Value::from(c.mime_types.clone())),
                    ("session_is_owner", Value::from(false)),
                ]);
                Clipboard::selection_owner_changed(&emitter, path, options)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok(serde_json::Map::new())
        }
        "paste" => {
            let mime = c.mime.as_deref().ok_or("paste needs mime")?;
            let (session, serial) = {
                let mut st = portal.state();
                let Owner::Session { path } = &st.owner else {
                    return Err("no session holds the clipboard".into());
                };
                let session = path.clone();
                st.serial += 1;
                let serial = st.serial;
                st.pending.insert(
                    serial,
                    Pending {
                        session: session.clone(),
                        received: None,
                        stall: false,
                    },
                );
                (session, serial)
            };
            let path = ObjectPath::try_from(session.as_str()).map_err(|e| e.to_string())?;
            Clipboard::selection_transfer(&emitter, path, mime, serial)
                .await
                .map_err(|e| e.to_string())?;
            let portal = portal.clone();
            tokio::spawn(async move {
                tokio::time::sleep(WRITE_DONE_TIMEOUT).await;
                let Some(pending) = portal.state().pending.remove(&serial) else {
                    return;
                };
                let len = pending
                    .received
                    .map_or(0, |r| r.data.lock().unwrap_or_else(|e| e.into_inner()).1);
                event(json!({"event": "written", "serial": serial, "timeout": true, "len": len}));
            });
            let mut extra = serde_json::Map::new();
            extra.insert("serial".into(), json!(serial));
            Ok(extra)
        }
        "flood" => {
            let count = c.count.ok_or("flood needs count")?;
            let session = match &portal.state().owner {
                Owner::Session { path } => path.clone(),
                _ => return Err("no session holds the clipboard".into()),
            };
            let path = ObjectPath::try_from(session.as_str()).map_err(|e| e.to_string())?;
            for _ in 0..count {
                let serial = {
                    let mut st = portal.state();
                    st.serial += 1;
                    let serial = st.serial;
                    st.pending.insert(
                        serial,
                        Pending {
                            session: session.clone(),
                            received: None,
                            stall: true,
                        },
                    );
                    serial
                };
                Clipboard::selection_transfer(
                    &emitter,
                    path.clone(),
                    "text/plain;charset=utf-8",
                    serial,
                )
                .await
                .map_err(|e| e.to_string())?;
            }
            Ok(serde_json::Map::new())
        }
        "close" => {
            let paths: Vec<String> = {
                let mut st = portal.state();
                let paths: Vec<String> = st.sessions.keys().cloned().collect();
                for p in &paths {
                    st.forget(p);
                }
                paths
            };
            for path in paths {
                let emitter = SignalEmitter::new(conn, path.as_str()).map_err(|e| e.to_string())?;
                SessionObject::closed(&emitter, HashMap::new())
                    .await
                    .map_err(|e| e.to_string())?;
                if let Err(e) = conn
                    .object_server()
                    .remove::<SessionObject, _>(path.as_str())
                    .await
                {
                    eprintln!("xdg-desktop-portal: the session {path}: {e}");
                }
            }
            Ok(serde_json::Map::new())
        }
        other => Err(format!("no command {other}")),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut grant_clipboard = true;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--no-clipboard-grant" => grant_clipboard = false,
            _ => anyhow::bail!("usage: xdg-desktop-portal [--no-clipboard-grant]"),
        }
    }
    let portal = Arc::new(Portal {
        state: Mutex::new(State::default()),
        grant_clipboard,
    });
    let conn = zbus::connection::Builder::session()?
        .serve_at(PORTAL_PATH, RemoteDesktop(portal.clone()))?
        .serve_at(PORTAL_PATH, Clipboard(portal.clone()))?
        .build()
        .await?;
    match conn
        .request_name_with_flags(PORTAL, fdo::RequestNameFlags::DoNotQueue.into())
        .await
    {
        Ok(fdo::RequestNameReply::PrimaryOwner) => {}
        // zbus answers a name owned by another connection with `NameTaken`.
        Ok(reply) => {
            eprintln!("xdg-desktop-portal: {PORTAL} is not ours: {reply:?}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("xdg-desktop-portal: {PORTAL} is not ours: {e}");
            std::process::exit(1);
        }
    }
    event(json!({"event": "ready"}));
    // Stdin is read on a thread of its own; the channel ends with it.
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = lines.recv().await {
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Command>(&line) {
            Ok(c) => match command(&portal, &conn, &c).await {
                Ok(mut extra) => {
                    extra.insert("event".into(), json!("ok"));
                    extra.insert("cmd".into(), json!(c.cmd));
                    serde_json::Value::Object(extra)
                }
                Err(message) => json!({"event": "error", "cmd": c.cmd, "message": message}),
            },
            Err(e) => json!({"event": "error", "cmd": null, "message": e.to_string()}),
        };
        event(answer);
    }
    // Stalled writers' threads hold pipes: the process ends without waiting for them.
    std::process::exit(0);
}
