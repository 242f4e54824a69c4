//! The input agent's act grant: the one call the D-Bus filter lets through while an act runs
//! ([`Grant`], held in [`Grants`]), and the audit's refusal reports.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::ActMethod;
use super::Refused;
use super::wire::Header;

/// The one act the input agent may carry out now: which application, which object, which
/// method, with which arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The application's unique name on the accessibility bus.
    pub bus_name: String,
    /// Its process.
    pub pid: u32,
    /// The object the act's call goes to (the element; its parent for `SelectChild`).
    pub path: String,
    /// The method.
    pub method: ActMethod,
    /// What its arguments must be.
    pub args: Args,
}

/// The arguments a granted call must carry: exactly the action index, text or number the
/// broker asked the input agent for, so that a compromised agent cannot do another action, type
/// or set anything else on the granted element. The index of `SelectChild` is free (the agent
/// finds the element's place in its parent live), but its signature is not: one `i`.
#[derive(Clone, PartialEq, Eq)]
pub enum Args {
    /// `DoAction(i)`: this index (the action's place in the element's action list as the
    /// snapshot showed it).
    Action(u32),
    /// `SelectChild(i)`: any index.
    Index,
    /// `InsertText(i position, s text, i length)`: this text, any position, and its length in
    /// the unit the application's toolkit reads: UTF-16 units (`utf16`, Qt, whose adaptor pads
    /// or cuts the text to that many) or UTF-8 bytes (GTK, Chromium).
    Typed {
        /// The text.
        text: String,
        /// Its length counts UTF-16 units.
        utf16: bool,
    },
    /// `SetTextContents(s text)`: this text.
    Text(String),
    /// `Properties.Set(s, s, v)` of [`SETTABLE`](nish_proto::atspi_calls::SETTABLE): a double of these bits.
    Number(u64),
}

impl std::fmt::Debug for Args {
    // The text the agent is to type never reaches a log: its length only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Args::Action(i) => write!(f, "Action({i})"),
            Args::Index => f.write_str("Index"),
            Args::Typed { text, utf16 } => {
                write!(f, "Typed({} bytes, utf16 {utf16})", text.len())
            }
            Args::Text(t) => write!(f, "Text({} bytes)", t.len()),
            Args::Number(_) => f.write_str("Number"),
        }
    }
}

/// Where refusals of the input agent's calls are reported (the broker's audit).
pub type OnRefusal = Arc<dyn Fn(Refused) + Send + Sync>;

/// Most refusals reported per second; more are only logged (a flood of refused calls does not
/// flood the audit).
pub const REPORTS_PER_SECOND: u64 = 10;

/// Where the input agent's links stand: the current grant, if any (one at a time).
#[derive(Default)]
pub struct Grants {
    slot: Mutex<Option<(u64, Grant)>>,
    next: AtomicU64,
    on_refusal: Mutex<Option<OnRefusal>>,
    /// The second of the last report (since the first) and the reports in it.
    reports: Mutex<(u64, u64)>,
    born: std::sync::OnceLock<std::time::Instant>,
}

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grants")
            .field("grant", &self.current())
            .finish_non_exhaustive()
    }
}

/// Holds a grant; dropping it ends the grant (unless another replaced or cleared it meanwhile).
#[derive(Debug)]
#[must_use = "the grant ends when this is dropped"]
pub struct GrantGuard {
    grants: Arc<Grants>,
    id: u64,
}

impl Drop for GrantGuard {
    fn drop(&mut self) {
        let mut g = self.grants.lock();
        if g.as_ref().is_some_and(|(id, _)| *id == self.id) {
            *g = None;
        }
    }
}

impl Grants {
    /// No grant.
    pub fn new() -> Arc<Grants> {
        Arc::new(Grants::default())
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Option<(u64, Grant)>> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets the input agent carry out `grant` until the guard is dropped or [`Grants::clear`]
    /// is called; it replaces any grant before it.
    pub fn grant(self: &Arc<Self>, grant: Grant) -> GrantGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        *self.lock() = Some((id, grant));
        GrantGuard {
            grants: self.clone(),
            id,
        }
    }

    /// Ends the grant, whoever holds it (the kill switch, a revoke, a pause).
    pub fn clear(&self) {
        *self.lock() = None;
    }

    /// The grant now.
    pub fn current(&self) -> Option<Grant> {
        self.lock().as_ref().map(|(_, g)| g.clone())
    }

    /// Where refusals go from now on.
    pub fn on_refusal(&self, f: OnRefusal) {
        *self.on_refusal.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    /// Reports a refused call (at most [`REPORTS_PER_SECOND`]).
    pub(super) fn report(&self, h: &Header) {
        let second = self
            .born
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs();
        {
            let mut r = self.reports.lock().unwrap_or_else(|e| e.into_inner());
            if r.0 != second {
                *r = (second, 0);
            }
            if r.1 >= REPORTS_PER_SECOND {
                return;
            }
            r.1 += 1;
        }
        let method = ActMethod::ALL.iter().copied().find(|m| {
            let (i, n) = m.spec();
            h.interface.as_deref() == Some(i) && h.member.as_deref() == Some(n)
        });
        let refused = Refused {
            method,
            granted: self.lock().is_some(),
        };
        let f = self
            .on_refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(f) = f {
            f(refused);
        }
    }
}
