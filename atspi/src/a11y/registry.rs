//! The registry: the watch of its application list (its `ChildrenChanged` on the desktop),
//! which lets the list it last answered stand while nothing registers or leaves, and the
//! event kinds the reader asks it to forward.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;
use zbus::Connection;
use zbus::zvariant::OwnedObjectPath;

use super::bus::ROOT_PATH;

/// The longest the registry's standing answer is used ([`super::A11y::standing_order`]): a registry that
/// stopped sends nothing, and the one started after it is not watched until it is asked.
pub const STANDING_ORDER_MAX_AGE: Duration = Duration::from_secs(2);

/// The registry's application list as last answered, standing between window lists while
/// its watch counts no change ([`super::A11y::standing_order`]).
#[derive(Debug, Default)]
pub(super) struct RegistryAnswer {
    watch: Option<RegistryWatch>,
    /// The bus names in the registry's order, the watch's change count before they were asked
    /// for, and when they were answered.
    order: Option<(u64, Vec<String>, Instant)>,
}

impl RegistryAnswer {
    /// The standing bus names and how long ago they were answered, while the watch has counted no
    /// change since before they were asked for, for at most [`STANDING_ORDER_MAX_AGE`].
    pub(super) fn standing(&self) -> Option<(Vec<String>, Duration)> {
        let w = self.watch.as_ref()?;
        let (at, names, when) = self.order.as_ref()?;
        let live = w.live.load(Ordering::SeqCst) && !w.task.is_finished();
        let age = when.elapsed();
        (live && w.changes.load(Ordering::SeqCst) == *at && age < STANDING_ORDER_MAX_AGE)
            .then(|| (names.clone(), age))
    }

    /// How many `ChildrenChanged` the current watch has counted (0 with no watch).
    pub(super) fn signals(&self) -> u64 {
        self.watch
            .as_ref()
            .map(|w| w.changes.load(Ordering::SeqCst))
            .unwrap_or(0)
    }

    /// The watch's id and change count, when it is in force on `bus`.
    pub(super) fn changes_on(&self, bus: &Connection) -> Option<(u64, u64)> {
        self.watch.as_ref().and_then(|w| w.changes_on(bus))
    }

    /// Keeps the registry's answer `children` (from `sender`) when the watch was in force
    /// before it was asked for (`watched`, its id and change count then); starts a watch of
    /// `sender` when there is none of it on `bus` (the registry restarted, the bus was made
    /// again).
    pub(super) fn keep(
        &mut self,
        bus: &Connection,
        watched: Option<(u64, u64)>,
        sender: Option<String>,
        children: &[(String, OwnedObjectPath)],
    ) {
        let Some(sender) = sender.filter(|s| s.starts_with(':')) else {
            *self = RegistryAnswer::default();
            return;
        };
        let current = self.watch.as_ref().is_some_and(|w| {
            w.registry == sender
                && !w.task.is_finished()
                && bus.unique_name().is_some_and(|n| n.as_str() == w.ours)
        });
        if !current {
            *self = RegistryAnswer {
                watch: RegistryWatch::start(bus, &sender),
                order: None,
            };
            return;
        }
        let id = self.watch.as_ref().map(|w| w.id);
        self.order = watched.filter(|(w, _)| Some(*w) == id).map(|(_, at)| {
            (
                at,
                children.iter().map(|(n, _)| n.clone()).collect(),
                Instant::now(),
            )
        });
    }
}

/// A watch of the registry's `ChildrenChanged` on its desktop (an application registered or
/// left): a match rule for that one signal of the registry's unique name, and a task that counts
/// the signals.
#[derive(Debug)]
struct RegistryWatch {
    /// Never the same for two watches.
    id: u64,
    /// Our unique name on the bus the watch is on (another after the bus is made again).
    ours: String,
    /// The registry's unique name.
    registry: String,
    changes: Arc<AtomicU64>,
    /// The match is in force and the task runs.
    live: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

/// The match rule of [`RegistryWatch`]: `ChildrenChanged` on the desktop from `registry` (a
/// unique name), a rule the broker's D-Bus filter lets the reader add.
fn children_rule(registry: &str) -> Option<zbus::OwnedMatchRule> {
    Some(
        zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(registry)
            .and_then(|b| b.interface("org.a11y.atspi.Event.Object"))
            .and_then(|b| b.member("ChildrenChanged"))
            .and_then(|b| b.path(ROOT_PATH))
            .ok()?
            .build()
            .to_owned()
            .into(),
    )
}

impl Drop for RegistryWatch {
    fn drop(&mut self) {
        // Dropping the task's stream removes the match from the bus.
        self.task.abort();
    }
}

impl RegistryWatch {
    /// Starts watching `registry` on `bus`: the match is added in the background and the watch
    /// is live once the bus has answered it.
    fn start(bus: &Connection, registry: &str) -> Option<RegistryWatch> {
        let ours = bus.unique_name()?.to_string();
        let rule = children_rule(registry)?;
        let changes = Arc::new(AtomicU64::new(0));
        let live = Arc::new(AtomicBool::new(false));
        let task = {
            let (bus, changes, live) = (bus.clone(), changes.clone(), live.clone());
            tokio::spawn(async move {
                let Ok(mut stream) =
                    zbus::MessageStream::for_match_rule(rule, &bus, Some(64)).await
                else {
                    tracing::debug!("the registry's children cannot be watched");
                    return;
                };
                live.store(true, Ordering::SeqCst);
                // zbus waits for a full stream to be read rather than drop a signal.
                while let Some(m) = stream.next().await {
                    if m.is_ok() {
                        changes.fetch_add(1, Ordering::SeqCst);
                    }
                }
                live.store(false, Ordering::SeqCst);
            })
        };
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Some(RegistryWatch {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            ours,
            registry: registry.to_string(),
            changes,
            live,
            task,
        })
    }

    /// The watch's id and change count, when it is in force on `bus`.
    fn changes_on(&self, bus: &Connection) -> Option<(u64, u64)> {
        (self.live.load(Ordering::SeqCst)
            && !self.task.is_finished()
            && bus.unique_name().is_some_and(|n| n.as_str() == self.ours))
        .then(|| (self.id, self.changes.load(Ordering::SeqCst)))
    }
}

/// The event kinds the reader registers for ([`super::A11y::register_events`]).
///
/// Beyond what the act's settle follows, the kinds that change a window's rows without any of
/// the above (a table's rows reordered, inserted or deleted, a model replaced, a selection or
/// the active descendant moved, attributes, the visible part of a view scrolled): a kept walk
/// (`nish_reader::kept`) must see them to know it is out of date, and applications send only
/// the kinds some client registered for.
pub const EVENT_KINDS: &[&str] = &[
    "object:children-changed",
    "object:state-changed",
    "object:property-change",
    "object:text-changed",
    "object:value-changed",
    "object:row-inserted",
    "object:row-deleted",
    "object:row-reordered",
    "object:column-inserted",
    "object:column-deleted",
    "object:column-reordered",
    "object:model-changed",
    "object:selection-changed",
    "object:active-descendant-changed",
    "object:attributes-changed",
    "object:visible-data-changed",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The broker's filter lets the reader add the registry watch's rule as zbus writes it
    /// (a rule it refused would leave the window list asking the registry every time).
    #[test]
    fn the_registry_watch_rule_passes_the_readers_filter() {
        let rule = children_rule(":1.7").expect("a rule").to_string();
        assert!(
            nish_proto::atspi_calls::match_rule_ok(&rule),
            "refused: {rule}"
        );
        assert!(rule.contains("member='ChildrenChanged'"), "{rule}");
        assert!(children_rule("not a bus name").is_none());
    }
}
