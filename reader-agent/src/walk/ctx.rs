//! The calls of one walk (or one re-read of objects): each waits its turn among the calls in
//! flight to its application, within the walk's current phase, and a timeout before the
//! phase's end marks the application as not responding.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nish_proto::model::TruncReason;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

use nish_atspi::a11y::{A11y, ActionNames, AppLink, Named, Props, named_of, props_from};
use nish_atspi::dbus::{CallError, Read, call};
use nish_atspi::tree::MAX_CHILDREN;

/// Timeout of one call during a walk (also bounded by the walk's budget).
pub const CALL_TIMEOUT: Duration = Duration::from_millis(1000);
/// Requests in flight for details.
pub const DETAIL_POOL: usize = 48;
/// Objects whose properties are read at once during live walking (four calls each).
pub const PROPS_POOL: usize = 16;
/// Children lists read at once during live walking.
pub const LIST_POOL: usize = 16;
/// Children of a long list read at once (each by its index, then its properties).
pub const CHILD_POOL: usize = 16;

/// An object reference as the bus gives it: bus name and path.
pub(super) type ObjRefWire = (String, OwnedObjectPath);

/// The state of one walk's calls.
pub(super) struct Ctx {
    pub(super) link: AppLink,
    pub(super) actions: Arc<ActionNames>,
    /// The toolkit keeps each object's action names for its life (GTK): names remembered from an
    /// earlier walk are used without asking again.
    pub(super) stable_actions: bool,
    /// The toolkit answers `Properties.GetAll` ([`nish_atspi::a11y::answers_get_all`]); else
    /// an object's name and child count are asked one property at a time.
    pub(super) get_all: bool,
    pub(super) start: Instant,
    /// The end of the walk.
    pub(super) deadline: Instant,
    /// The end of the current phase, in microseconds after `start` (never after `deadline`).
    pub(super) phase_end_us: std::sync::atomic::AtomicU64,
    /// The application's calls in flight (shared with its other walks).
    pub(super) flights: Arc<tokio::sync::Semaphore>,
    pub(super) dead: AtomicBool,
    pub(super) out_of_time: AtomicBool,
    /// The connection itself failed (a direct link is dropped after the walk).
    pub(super) broken: AtomicBool,
    /// The application is too large for its whole-tree calls: the walk reads it bounded
    /// ([`BOUNDED_CHILDREN`] children per container), and what time leaves out is its cut
    /// (`app_too_large`).
    pub(super) bounded: AtomicBool,
    pub(super) calls: AtomicUsize,
}

/// Children per container a bounded walk reads (an application too large for its whole-tree
/// calls), so that the walk reaches past a container of thousands to what it holds and what
/// follows it.
pub const BOUNDED_CHILDREN: usize = nish_proto::model::BOUNDED_CHILDREN;

impl Ctx {
    /// The calls of one walk (or one re-read of objects) of the application `link` reaches,
    /// from `start` until `deadline`.
    pub(super) fn new(
        a11y: &A11y,
        link: AppLink,
        stable_actions: bool,
        get_all: bool,
        start: Instant,
        deadline: Instant,
    ) -> Arc<Ctx> {
        Arc::new(Ctx {
            flights: a11y.flights(&link.bus_name),
            link,
            actions: a11y.action_names(),
            stable_actions,
            get_all,
            start,
            deadline,
            phase_end_us: std::sync::atomic::AtomicU64::new(0),
            dead: AtomicBool::new(false),
            out_of_time: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            bounded: AtomicBool::new(false),
            calls: AtomicUsize::new(0),
        })
    }

    /// The end of the current phase.
    pub(super) fn phase_end(&self) -> Instant {
        self.start + Duration::from_micros(self.phase_end_us.load(Ordering::Relaxed))
    }

    /// Starts a phase that ends at `end` (at the latest at the deadline).
    pub(super) fn phase_until(&self, end: Instant) {
        let end = end.min(self.deadline);
        let us = end.saturating_duration_since(self.start).as_micros() as u64;
        self.phase_end_us.store(us, Ordering::Relaxed);
        self.out_of_time.store(false, Ordering::Relaxed);
    }

    /// The timeout for the next call, or `None` when the walk must not call any more.
    pub(super) fn timeout(&self) -> Option<Duration> {
        if self.dead.load(Ordering::Relaxed) {
            return None;
        }
        let left = self.phase_end().saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.out_of_time.store(true, Ordering::Relaxed);
            return None;
        }
        Some(left.min(CALL_TIMEOUT))
    }

    /// Records a failed call: a timeout before the end of the phase means the application
    /// stopped answering.
    pub(super) fn note(&self, e: CallError) {
        if e == CallError::Timeout {
            if Instant::now() >= self.phase_end() {
                self.out_of_time.store(true, Ordering::Relaxed);
            } else if !self.dead.swap(true, Ordering::Relaxed) {
                tracing::debug!(
                    calls = self.calls.load(Ordering::Relaxed),
                    "a call timed out before the deadline: the app is not responding"
                );
            }
        }
        if e == CallError::Connection {
            self.dead.store(true, Ordering::Relaxed);
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    pub(super) fn stopped(&self) -> bool {
        self.dead.load(Ordering::Relaxed) || self.out_of_time.load(Ordering::Relaxed)
    }

    pub(super) fn reason(&self) -> TruncReason {
        if self.dead.load(Ordering::Relaxed) {
            TruncReason::AppNotResponding
        } else if self.is_bounded() {
            TruncReason::AppTooLarge
        } else {
            TruncReason::TimeBudget
        }
    }

    /// The walk reads the application bounded (see [`Ctx::bounded`]).
    pub(super) fn is_bounded(&self) -> bool {
        self.bounded.load(Ordering::Relaxed)
    }

    /// Children per container the walk reads: [`BOUNDED_CHILDREN`] when bounded, else
    /// [`MAX_CHILDREN`].
    pub(super) fn children_cap(&self) -> usize {
        if self.is_bounded() {
            BOUNDED_CHILDREN
        } else {
            MAX_CHILDREN
        }
    }

    /// Why a list cut at [`Ctx::children_cap`] is cut.
    pub(super) fn cap_reason(&self) -> TruncReason {
        if self.is_bounded() {
            TruncReason::AppTooLarge
        } else {
            TruncReason::MaxElements
        }
    }

    /// One call, once the application has room for it among its calls in flight. Waiting for
    /// that room ends at the deadline; only the call itself counts against the app.
    pub(super) async fn call<B, R>(&self, path: &str, read: Read, body: &B) -> Result<R, CallError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: serde::de::DeserializeOwned + zbus::zvariant::Type,
    {
        self.timeout().ok_or(CallError::Timeout)?;
        let _turn =
            match tokio::time::timeout_at(self.phase_end().into(), self.flights.acquire()).await {
                Ok(Ok(p)) => p,
                Ok(Err(_)) => return Err(CallError::Other),
                Err(_) => {
                    self.out_of_time.store(true, Ordering::Relaxed);
                    return Err(CallError::Timeout);
                }
            };
        let t = self.timeout().ok_or(CallError::Timeout)?;
        self.calls.fetch_add(1, Ordering::Relaxed);
        let r = call(&self.link.conn, self.link.dest(), path, read, body, t).await;
        if let Err(e) = r {
            self.note(e);
        }
        r
    }

    /// Role, name, description, states, interfaces and child count of one object (four calls,
    /// or six where the name, description and child count are asked one at a time).
    pub(super) async fn props(&self, path: &str) -> Result<Props, CallError> {
        let named = async {
            if self.get_all {
                self.call::<_, HashMap<String, OwnedValue>>(
                    path,
                    Read::GetAllProperties,
                    &("org.a11y.atspi.Accessible",),
                )
                .await
                .map(named_of)
            } else {
                let get = |prop: &'static str| async move {
                    self.call::<_, OwnedValue>(
                        path,
                        Read::GetProperty,
                        &("org.a11y.atspi.Accessible", prop),
                    )
                    .await
                };
                let (name, description, count) =
                    tokio::join!(get("Name"), get("Description"), get("ChildCount"));
                Named::from_answers(name, description, count)
            }
        };
        let (role, named, states, ifaces) = tokio::join!(
            self.call::<_, u32>(path, Read::GetRole, &()),
            named,
            self.call::<_, Vec<u32>>(path, Read::GetState, &()),
            self.call::<_, Vec<String>>(path, Read::GetInterfaces, &()),
        );
        props_from(role, named, states, ifaces)
    }
}
