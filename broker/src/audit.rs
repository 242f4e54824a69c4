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
//! signature takes JSON so the event list in docs/audit.md is the whole vocabulary).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// Every event name the broker emits (docs/audit.md lists their fields).
pub const EVENTS: &[&str] = &[
    "broker.start",
    "broker.stop",
    "connection.refused",
    "session.start",
    "session.end",
    "session.mode",
    "consent.request",
    "consent.answer",
    "consent.closed",
    "consent.cooldown",
    "consent.busy",
    "read",
    "act",
    "refusal",
    "approval.request",
    "approval.answer",
    "takeover.granted",
    "takeover.ended",
    "takeover.paused",
    "takeover.resumed",
    "control.refused",
    "lease.expired",
    "stop",
    "agent.start",
    "agent.refused",
    "agent.exit",
];

enum Sink {
    Journald { sock: UnixDatagram, path: PathBuf },
    File(File),
    Off,
}

/// The audit writer.
pub struct Audit {
    sink: Mutex<Sink>,
    start: Instant,
    where_: String,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Audit({})", self.where_)
    }
}

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
    s.insert_str(0, "NISH_");
    s
}

impl Audit {
    /// Opens the best sink available.
    pub fn open() -> Audit {
        let journal = std::env::var_os("NISH_JOURNAL_SOCKET")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/run/systemd/journal/socket"));
        if journal.exists()
            && let Ok(sock) = UnixDatagram::unbound()
            && sock.connect(&journal).is_ok()
        {
            let where_ = format!("journald ({})", journal.display());
            return Audit {
                sink: Mutex::new(Sink::Journald {
                    sock,
                    path: journal,
                }),
                start: Instant::now(),
                where_,
            };
        }
        let path = default_file();
        match open_file(&path) {
            Ok(f) => Audit {
                sink: Mutex::new(Sink::File(f)),
                start: Instant::now(),
                where_: path.display().to_string(),
            },
            Err(e) => {
                tracing::error!("cannot open the audit file {}: {e}", path.display());
                Audit {
                    sink: Mutex::new(Sink::Off),
                    start: Instant::now(),
                    where_: "nowhere (open failed)".into(),
                }
            }
        }
    }

    /// An audit that writes to one file (tests).
    pub fn to_file(path: &Path) -> std::io::Result<Audit> {
        Ok(Audit {
            sink: Mutex::new(Sink::File(open_file(path)?)),
            start: Instant::now(),
            where_: path.display().to_string(),
        })
    }

    /// Where events go, for `status` and the docs.
    pub fn destination(&self) -> &str {
        &self.where_
    }

    /// Milliseconds since the broker started (the driver's monotonic clock).
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Writes one event. `fields` is a JSON object of identifiers, kinds, counts and lengths.
    pub fn emit(&self, event: &'static str, session: Option<&str>, fields: Value) {
        debug_assert!(EVENTS.contains(&event), "unlisted audit event {event}");
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
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *sink {
            Sink::Journald { sock, path } => {
                let mut msg = String::new();
                msg.push_str("SYSLOG_IDENTIFIER=nish-driver-audit\nPRIORITY=6\n");
                msg.push_str(&format!(
                    "MESSAGE=nish-driver {event}{}\n",
                    session.map(|s| format!(" {s}")).unwrap_or_default()
                ));
                for (k, v) in &obj {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    // Values are single-line identifiers; strip any newline defensively.
                    let text: String = text.chars().filter(|c| *c != '\n').collect();
                    msg.push_str(&format!("{}={}\n", journal_field(k), text));
                }
                if let Err(e) = sock.send(msg.as_bytes()) {
                    tracing::error!("audit to journald ({}) failed: {e}", path.display());
                }
            }
            Sink::File(f) => {
                let line = Value::Object(obj).to_string();
                if let Err(e) = writeln!(f, "{line}") {
                    tracing::error!("audit write failed: {e}");
                }
            }
            Sink::Off => {}
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
        let a = Audit {
            sink: Mutex::new(Sink::Journald {
                sock,
                path: path.clone(),
            }),
            start: Instant::now(),
            where_: String::new(),
        };
        a.emit(
            "act",
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
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
