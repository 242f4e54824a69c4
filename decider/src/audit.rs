//! The audit: one structured event per session start and end, consent, read, act, refusal,
//! pause, resume and stop.
//!
//! Sinks, in order of preference:
//! 1. journald, through its native protocol on `/run/systemd/journal/socket` (or the socket
//!    named by `NISH_JOURNAL_SOCKET`, which tests bind themselves), with `SYSLOG_IDENTIFIER=
//!    nish-driver-audit` and one `NISH_*` field per event field (`journalctl --user
//!    SYSLOG_IDENTIFIER=nish-driver-audit -o json`);
//! 2. else a JSON-lines file, `$XDG_STATE_HOME/nish-driver/audit.jsonl` (default
//!    `~/.local/state/nish-driver/audit.jsonl`, or `NISH_AUDIT_FILE`), mode 0600 in a 0700
//!    directory.
//!
//! Events carry identifiers, kinds, paths, counts and lengths. They never carry typed text,
//! clipboard text, values or app text (the callers only pass such fields; the [`Audit::emit`]
//! event is an [`AuditEvent`], whose table docs/audit.md shows). Journald
//! field values are cut to [`MAX_FIELD_BYTES`].
//!
//! The audit knows whether it works: [`Audit::check`] fails when no sink could be opened or the
//! last write failed, after trying to open a sink again (a successful reopen writes
//! `audit.resumed` with the number of events lost). The engine refuses sessions and acts while
//! it fails.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

pub use crate::audit_event::AuditEvent;

/// Longest journald field value, in bytes; longer values are cut (at a character boundary).
pub const MAX_FIELD_BYTES: usize = 512;

enum Sink {
    Journald { sock: UnixDatagram, path: PathBuf },
    File(File),
    Off,
}

/// The sink and whether its last use worked.
struct State {
    sink: Sink,
    where_: String,
    /// Why the audit does not work, when it does not.
    failed: Option<String>,
    /// Events that could not be written since the last success.
    lost: u64,
    /// When a reopen was last tried.
    last_try: Option<Instant>,
}

/// Where a failed audit looks for a sink again.
#[derive(Debug, Clone)]
enum Reopen {
    /// As at start: journald, else the file, from the environment.
    Env,
    /// One file (tests).
    File(PathBuf),
    /// One journal socket (tests).
    Journal(PathBuf),
}

/// The audit writer.
pub struct Audit {
    state: Mutex<State>,
    start: Instant,
    reopen: Reopen,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Audit({})", self.destination())
    }
}

/// How often a failed audit tries to open its sink again.
const RETRY_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// The default JSON-lines path.
pub fn default_file() -> PathBuf {
    if let Some(p) = std::env::var_os("NISH_AUDIT_FILE").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("nish-driver").join("audit.jsonl")
}

fn open_file(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

fn journal_field(k: &str) -> String {
    let mut s: String = k
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    s.truncate(MAX_FIELD_NAME);
    s.insert_str(0, "NISH_");
    s
}

/// Longest journald field name after the `NISH_` prefix (journald allows 64 bytes in all).
const MAX_FIELD_NAME: usize = 59;

fn journal_socket() -> PathBuf {
    std::env::var_os("NISH_JOURNAL_SOCKET")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/systemd/journal/socket"))
}

/// Opens the best sink available: journald when its socket answers, else the file. On failure,
/// why neither works.
fn open_sink() -> Result<(Sink, String), String> {
    let journal = journal_socket();
    let journal_why = if journal.exists() {
        match UnixDatagram::unbound().and_then(|s| s.connect(&journal).map(|()| s)) {
            Ok(sock) => {
                let where_ = format!("journald ({})", journal.display());
                return Ok((
                    Sink::Journald {
                        sock,
                        path: journal,
                    },
                    where_,
                ));
            }
            Err(e) => format!("journald {}: {e}", journal.display()),
        }
    } else {
        format!("journald: no socket at {}", journal.display())
    };
    let path = default_file();
    match open_file(&path) {
        Ok(f) => Ok((Sink::File(f), path.display().to_string())),
        Err(e) => Err(format!("{journal_why}; file {}: {e}", path.display())),
    }
}

/// Cuts a journald value to [`MAX_FIELD_BYTES`] at a character boundary, without newlines.
fn journal_value(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut text: String = text.chars().filter(|c| *c != '\n').collect();
    if text.len() > MAX_FIELD_BYTES {
        let mut cut = MAX_FIELD_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

impl State {
    /// Writes one record; `Err` with why when it could not be written.
    fn write(
        &mut self,
        event: &str,
        session: Option<&str>,
        obj: &Map<String, Value>,
    ) -> Result<(), String> {
        match &mut self.sink {
            Sink::Journald { sock, path } => {
                let mut msg = String::new();
                msg.push_str("SYSLOG_IDENTIFIER=nish-driver-audit\nPRIORITY=6\n");
                let head = format!(
                    "nish-driver {event}{}",
                    session.map(|s| format!(" {s}")).unwrap_or_default()
                );
                msg.push_str(&format!(
                    "MESSAGE={}\n",
                    journal_value(&Value::String(head))
                ));
                for (k, v) in obj {
                    msg.push_str(&format!("{}={}\n", journal_field(k), journal_value(v)));
                }
                sock.send(msg.as_bytes())
                    .map(|_| ())
                    .map_err(|e| format!("journald {}: {e}", path.display()))
            }
            Sink::File(f) => {
                let line = Value::Object(obj.clone()).to_string();
                writeln!(f, "{line}").map_err(|e| format!("audit file: {e}"))
            }
            Sink::Off => Err(self
                .failed
                .clone()
                .unwrap_or_else(|| "no audit sink".into())),
        }
    }
}

impl Audit {
    fn with(sink: Result<(Sink, String), String>, reopen: Reopen) -> Audit {
        let state = match sink {
            Ok((sink, where_)) => State {
                sink,
                where_,
                failed: None,
                lost: 0,
                last_try: None,
            },
            Err(why) => {
                tracing::error!("no audit sink can be opened: {why}");
                State {
                    sink: Sink::Off,
                    where_: "nowhere (open failed)".into(),
                    failed: Some(why),
                    lost: 0,
                    last_try: Some(Instant::now()),
                }
            }
        };
        Audit {
            state: Mutex::new(state),
            start: Instant::now(),
            reopen,
        }
    }

    /// Opens the best sink available (journald, else the file). When none opens, the audit is
    /// off and [`Audit::check`] says why.
    pub fn open() -> Audit {
        Audit::with(open_sink(), Reopen::Env)
    }

    /// An audit that writes to one file (tests).
    pub fn to_file(path: &Path) -> std::io::Result<Audit> {
        let f = open_file(path)?;
        Ok(Audit::with(
            Ok((Sink::File(f), path.display().to_string())),
            Reopen::File(path.to_path_buf()),
        ))
    }

    /// An audit that sends to one journal socket (tests).
    pub fn to_journal(path: &Path) -> std::io::Result<Audit> {
        let sock = UnixDatagram::unbound()?;
        sock.connect(path)?;
        Ok(Audit::with(
            Ok((
                Sink::Journald {
                    sock,
                    path: path.to_path_buf(),
                },
                format!("journald ({})", path.display()),
            )),
            Reopen::Journal(path.to_path_buf()),
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where events go, for `status` and the docs.
    pub fn destination(&self) -> String {
        self.lock().where_.clone()
    }

    /// Milliseconds since the broker started (the driver's monotonic clock).
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// `Ok` when the audit works. When it does not (no sink opened, or the last write failed),
    /// tries to open a sink again (at most every 200 ms) and to write `audit.resumed` there;
    /// `Err` with why while that fails.
    pub fn check(&self) -> Result<(), String> {
        let mut st = self.lock();
        self.recover(&mut st)
    }

    fn recover(&self, st: &mut State) -> Result<(), String> {
        let Some(why) = st.failed.clone() else {
            return Ok(());
        };
        if st.last_try.is_some_and(|t| t.elapsed() < RETRY_EVERY) {
            return Err(why);
        }
        st.last_try = Some(Instant::now());
        let reopened = match &self.reopen {
            Reopen::Env => open_sink(),
            Reopen::File(p) => open_file(p)
                .map(|f| (Sink::File(f), p.display().to_string()))
                .map_err(|e| format!("file {}: {e}", p.display())),
            Reopen::Journal(p) => UnixDatagram::unbound()
                .and_then(|s| s.connect(p).map(|()| s))
                .map(|sock| {
                    (
                        Sink::Journald {
                            sock,
                            path: p.clone(),
                        },
                        format!("journald ({})", p.display()),
                    )
                })
                .map_err(|e| format!("journald {}: {e}", p.display())),
        };
        let result = reopened.and_then(|(sink, where_)| {
            st.sink = sink;
            st.where_ = where_;
            let event = AuditEvent::AuditResumed.name();
            let obj = self.record(event, None, json!({"lost": st.lost}));
            st.write(event, None, &obj)
        });
        match result {
            Ok(()) => {
                tracing::info!(lost = st.lost, "the audit works again");
                st.failed = None;
                st.lost = 0;
                Ok(())
            }
            Err(e) => {
                st.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The doctor's audit line: where events go, or why no sink can be opened (the broker
    /// refuses sessions meanwhile).
    pub fn probe(&self) -> nish_proto::doctor::Probe {
        match self.check() {
            Ok(()) => nish_proto::doctor::Probe {
                label: "audit".into(),
                status: "ok".into(),
                message: self.destination(),
            },
            Err(why) => nish_proto::doctor::Probe {
                label: "audit".into(),
                status: "fail".into(),
                message: format!(
                    "no audit sink can be opened ({why}); the broker refuses sessions until one can"
                ),
            },
        }
    }

    fn record(
        &self,
        event: &'static str,
        session: Option<&str>,
        fields: Value,
    ) -> Map<String, Value> {
        let mut obj = Map::new();
        obj.insert("event".into(), json!(event));
        if let Some(s) = session {
            obj.insert("session".into(), json!(s));
        }
        obj.insert("mono_ms".into(), json!(self.now_ms()));
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        obj.insert("ts_ms".into(), json!(wall));
        if let Value::Object(m) = fields {
            for (k, v) in m {
                obj.insert(k, v);
            }
        }
        obj
    }

    /// Writes one event. `fields` is a JSON object of identifiers, kinds, counts and lengths.
    /// A failed write marks the audit failed until [`Audit::check`] gets it working again.
    pub fn emit(&self, event: AuditEvent, session: Option<&str>, fields: Value) {
        let event = event.name();
        let obj = self.record(event, session, fields);
        let mut st = self.lock();
        if self.recover(&mut st).is_err() {
            st.lost += 1;
            return;
        }
        if let Err(e) = st.write(event, session, &obj) {
            tracing::error!("audit write failed: {e}");
            st.failed = Some(e);
            st.lost += 1;
            st.last_try = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journald_native_protocol() {
        let dir = std::env::temp_dir().join(format!("nish-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.sock");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        let sock = UnixDatagram::unbound().unwrap();
        sock.connect(&path).unwrap();
        let a = Audit::with(
            Ok((
                Sink::Journald {
                    sock,
                    path: path.clone(),
                },
                String::new(),
            )),
            Reopen::Journal(path.clone()),
        );
        a.emit(
            AuditEvent::Act,
            Some("mcp:h:1"),
            json!({"kind": "click", "text_len": 5}),
        );
        let mut buf = vec![0u8; 4096];
        let n = server.recv(&mut buf).unwrap();
        let msg = String::from_utf8_lossy(&buf[..n]);
        assert!(msg.contains("SYSLOG_IDENTIFIER=nish-driver-audit\n"));
        assert!(msg.contains("NISH_EVENT=act\n"));
        assert!(msg.contains("NISH_SESSION=mcp:h:1\n"));
        assert!(msg.contains("NISH_KIND=click\n"));
        assert!(msg.contains("NISH_TEXT_LEN=5\n"));
        // Values are bounded: a long one arrives cut, every line within the bound.
        a.emit(AuditEvent::Refusal, None, json!({"code": "é".repeat(2000)}));
        let n = server.recv(&mut buf).unwrap();
        let msg = String::from_utf8(buf[..n].to_vec()).unwrap();
        let code = msg.lines().find(|l| l.starts_with("NISH_CODE=")).unwrap();
        assert_eq!(code.len(), "NISH_CODE=".len() + MAX_FIELD_BYTES);
        assert!(
            msg.lines().all(|l| l.len() <= MAX_FIELD_BYTES + 32),
            "{msg}"
        );
        a.check().unwrap();
        // The journal goes away: the audit fails, and says so until it is back.
        drop(server);
        std::fs::remove_file(&path).unwrap();
        a.emit(AuditEvent::Act, None, json!({}));
        let why = a.check().unwrap_err();
        assert!(why.contains("journald"), "{why}");
        // Back: the next check after the pause reopens it and records the gap.
        let server = UnixDatagram::bind(&path).unwrap();
        std::thread::sleep(RETRY_EVERY);
        a.check().unwrap();
        let n = server.recv(&mut buf).unwrap();
        let msg = String::from_utf8_lossy(&buf[..n]);
        assert!(msg.contains("NISH_EVENT=audit.resumed\n"), "{msg}");
        assert!(msg.contains("NISH_LOST=1\n"), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_cannot_be_opened_leaves_the_audit_failed_until_it_can() {
        let dir = std::env::temp_dir().join(format!("nish-audit-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A path whose parent is a regular file cannot be opened, even by root.
        let blocker = dir.join("blocker");
        std::fs::write(&blocker, b"").unwrap();
        let path = blocker.join("audit.jsonl");
        let a = Audit::with(
            Err("file: not a directory".into()),
            Reopen::File(path.clone()),
        );
        assert!(a.check().is_err());
        a.emit(AuditEvent::Act, None, json!({}));
        // Fix the path: the next check (after the retry pause) reopens and records the gap.
        std::fs::remove_file(&blocker).unwrap();
        std::thread::sleep(RETRY_EVERY);
        a.check().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"audit.resumed\""), "{text}");
        assert!(text.contains("\"lost\":1"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
