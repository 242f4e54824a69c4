//! When the window's kept walk ([`crate::kept`]) may answer a read: one pure function over plain
//! facts ([`may_answer`]), whose rows, in the order they are checked, are the table
//! docs/architecture.md shows ([`table_markdown`]; a test checks both).
//!
//! The same function decides whether a walk is kept at all: a walk is kept only when it would
//! answer a read just like its own at once ([`Facts::ALL_HOLD`] with the walk's own facts).

use std::time::Duration;

use nish_proto::wire::reader::{KEEP_FOR_MS, MAX_CHANGED};

/// How long after the reader asked for events a walk may be kept.
pub const EVENTS_SETTLED: Duration = Duration::from_millis(1000);
/// Longest wait for the application's answer that orders its events before a kept walk is
/// used (`Kept::barrier`).
pub const BARRIER_WAIT: Duration = Duration::from_millis(200);

/// The facts about one read and the window's kept walk that decide whether the walk answers
/// the read. Each is a plain value the reader finds; none is a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The application answered the barrier: one `Peer.Ping` through the bus within
    /// [`BARRIER_WAIT`], and every event delivered before the answer noted.
    pub barrier_answered: bool,
    /// Another read is reading objects of the kept walk again, until it merged them.
    pub merging: bool,
    /// The kept walk is the one the read began with (its barrier and lookup), not a newer one
    /// kept meanwhile.
    pub same_entry: bool,
    /// The walk was not cut short by its time budget or an application that stopped answering
    /// (cut by the limits is the same every time).
    pub complete: bool,
    /// The walk's window belongs to the application whose events are matched.
    pub same_app: bool,
    /// The reader had asked the registry to forward events at least [`EVENTS_SETTLED`] before
    /// the match went in (applications send nothing before they learn of it).
    pub events_settled: bool,
    /// The application sent an event that ends the keep (anything but a state, text or value
    /// change; more than [`MAX_CHANGED`] objects), or the bus closed.
    pub keep_ended: bool,
    /// Milliseconds since the match went in, right before the walk.
    pub age_ms: u64,
    /// The broker's window list entry (title, frame, ...) is the walk's.
    pub same_window: bool,
    /// The window's X geometry and its window-manager frame's, read again now, are the walk's.
    pub same_geometry: bool,
    /// The read's limits are the walk's (a light read's may be a full walk's).
    pub same_limits: bool,
    /// The read's act generation is the walk's.
    pub same_generation: bool,
    /// Objects of the application sent state, text or value changes since the walk (or since
    /// the last read of it).
    pub changed: bool,
    /// The toolkit sends an event for every object it changes (`kept::trusts_object_events`).
    pub trusted_toolkit: bool,
    /// Every object that sent a change is a row of the walk, and none is a secure field or
    /// inside one.
    pub changed_open: bool,
    /// The broker holds the kept walk's very version.
    pub broker_holds_it: bool,
}

impl Facts {
    /// Every row holds, nothing changed, and the broker holds no tree: the kept walk answers
    /// as it is.
    pub const ALL_HOLD: Facts = Facts {
        barrier_answered: true,
        merging: false,
        same_entry: true,
        complete: true,
        same_app: true,
        events_settled: true,
        keep_ended: false,
        age_ms: 0,
        same_window: true,
        same_geometry: true,
        same_limits: true,
        same_generation: true,
        changed: false,
        trusted_toolkit: true,
        changed_open: true,
        broker_holds_it: false,
    };
}

/// How the kept walk answers, when every row holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The kept tree as it is.
    Tree,
    /// The broker's tree of that version stands: nothing is sent.
    Stands,
    /// The objects that sent changes are read again and merged into the kept walk first.
    ReadAgain,
}

impl Answer {
    /// The answer's name in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Tree => "tree",
            Answer::Stands => "stands",
            Answer::ReadAgain => "read_again",
        }
    }
}

/// What a read does when a row does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// (When a walk is kept.) The walk answers its own read, but is not kept.
    NotKept,
    /// The read walks, and the window's kept walk stays for the others.
    WalkKeepIt,
    /// The read walks, and the window's kept walk is forgotten.
    WalkForget,
}

/// The rows, each a condition the kept walk needs to answer a read; [`Reason::ALL`] is their
/// order. The first that does not hold decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// [`Facts::barrier_answered`].
    NoBarrier,
    /// [`Facts::merging`].
    Merging,
    /// [`Facts::same_entry`].
    NewerWalk,
    /// [`Facts::complete`].
    CutShort,
    /// [`Facts::same_app`].
    OtherApp,
    /// [`Facts::events_settled`].
    EventsUnsettled,
    /// [`Facts::keep_ended`].
    KeepEnded,
    /// [`Facts::age_ms`].
    TooOld,
    /// [`Facts::same_window`].
    WindowChanged,
    /// [`Facts::same_geometry`].
    Moved,
    /// [`Facts::same_limits`].
    OtherLimits,
    /// [`Facts::same_generation`].
    OtherGeneration,
    /// [`Facts::trusted_toolkit`].
    UntrustedToolkit,
    /// [`Facts::changed_open`].
    ChangedNotOpen,
}

impl Reason {
    /// The rows in the order they are checked.
    pub const ALL: [Reason; 14] = [
        Reason::NoBarrier,
        Reason::Merging,
        Reason::NewerWalk,
        Reason::CutShort,
        Reason::OtherApp,
        Reason::EventsUnsettled,
        Reason::KeepEnded,
        Reason::TooOld,
        Reason::WindowChanged,
        Reason::Moved,
        Reason::OtherLimits,
        Reason::OtherGeneration,
        Reason::UntrustedToolkit,
        Reason::ChangedNotOpen,
    ];

    /// The row holds for `f`.
    pub fn holds(self, f: &Facts) -> bool {
        match self {
            Reason::NoBarrier => f.barrier_answered,
            Reason::Merging => !f.merging,
            Reason::NewerWalk => f.same_entry,
            Reason::CutShort => f.complete,
            Reason::OtherApp => f.same_app,
            Reason::EventsUnsettled => f.events_settled,
            Reason::KeepEnded => !f.keep_ended,
            Reason::TooOld => young(f.age_ms),
            Reason::WindowChanged => f.same_window,
            Reason::Moved => f.same_geometry,
            Reason::OtherLimits => f.same_limits,
            Reason::OtherGeneration => f.same_generation,
            Reason::UntrustedToolkit => !f.changed || f.trusted_toolkit,
            Reason::ChangedNotOpen => !f.changed || f.changed_open,
        }
    }

    /// What the read does when the row does not hold.
    pub fn outcome(self) -> Outcome {
        match self {
            Reason::Merging | Reason::NewerWalk => Outcome::WalkKeepIt,
            Reason::CutShort | Reason::OtherApp | Reason::EventsUnsettled => Outcome::NotKept,
            _ => Outcome::WalkForget,
        }
    }

    /// The window's kept walk is forgotten (before the read walks).
    pub fn forgets(self) -> bool {
        self.outcome() != Outcome::WalkKeepIt
    }

    /// The row's name in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NoBarrier => "no_barrier",
            Reason::Merging => "merging",
            Reason::NewerWalk => "newer_walk",
            Reason::CutShort => "cut_short",
            Reason::OtherApp => "other_app",
            Reason::EventsUnsettled => "events_unsettled",
            Reason::KeepEnded => "keep_ended",
            Reason::TooOld => "too_old",
            Reason::WindowChanged => "window_changed",
            Reason::Moved => "moved",
            Reason::OtherLimits => "other_limits",
            Reason::OtherGeneration => "other_generation",
            Reason::UntrustedToolkit => "untrusted_toolkit",
            Reason::ChangedNotOpen => "changed_not_open",
        }
    }

    /// The row's condition, as the table says it.
    pub fn condition(self) -> String {
        match self {
            Reason::NoBarrier => format!(
                "the application answered one `Peer.Ping` through the bus within {} ms, and \
                 every event delivered before the answer was noted (none still in flight)",
                BARRIER_WAIT.as_millis()
            ),
            Reason::Merging => "no other read is merging objects into the kept walk".into(),
            Reason::NewerWalk => {
                "the kept walk is the one the read began with, not a newer one kept meanwhile"
                    .into()
            }
            Reason::CutShort => {
                "the walk was not cut short by its time budget or an application that stopped \
                 answering (cut by the limits is the same every time)"
                    .into()
            }
            Reason::OtherApp => {
                "the walk's window belongs to the application whose events are matched".into()
            }
            Reason::EventsUnsettled => format!(
                "the reader had asked the registry for events at least {} ms before the match \
                 went in",
                EVENTS_SETTLED.as_millis()
            ),
            Reason::KeepEnded => format!(
                "the application sent no event since but state, text or value changes of at \
                 most {MAX_CHANGED} objects, and the bus did not close"
            ),
            Reason::TooOld => {
                format!("the walk is less than {KEEP_FOR_MS} ms old (`KEEP_FOR_MS`)")
            }
            Reason::WindowChanged => {
                "the window list's entry (title, frame, ...) is the same".into()
            }
            Reason::Moved => {
                "the window's X geometry and its window-manager frame's, read again now, are \
                 the same"
                    .into()
            }
            Reason::OtherLimits => {
                "the limits are the same (a light read's may be a full walk's)".into()
            }
            Reason::OtherGeneration => {
                "the act generation is the same (`Freshness::MayReuse`)".into()
            }
            Reason::UntrustedToolkit => {
                "objects that sent changes: the toolkit sends an event for every object it \
                 changes (GTK 3, Chromium)"
                    .into()
            }
            Reason::ChangedNotOpen => {
                "objects that sent changes: every one is a row of the walk, none a secure \
                 field or inside one"
                    .into()
            }
        }
    }
}

/// The walk is young enough to answer: less than [`KEEP_FOR_MS`] old.
pub fn young(age_ms: u64) -> bool {
    age_ms < KEEP_FOR_MS
}

/// Whether the kept walk answers a read with these facts: how, or the first row that does not
/// hold ([`Reason::ALL`] order).
pub fn may_answer(f: &Facts) -> Result<Answer, Reason> {
    if let Some(r) = Reason::ALL.into_iter().find(|r| !r.holds(f)) {
        return Err(r);
    }
    Ok(if f.changed {
        Answer::ReadAgain
    } else if f.broker_holds_it {
        Answer::Stands
    } else {
        Answer::Tree
    })
}

/// The table docs/architecture.md shows: every row in order, what fails it does, and how the
/// kept walk answers when all hold.
pub fn table_markdown() -> String {
    let mut out = String::from(
        "| # | the kept walk answers a read only when | when not | reason |\n|---|---|---|---|\n",
    );
    for (i, r) in Reason::ALL.into_iter().enumerate() {
        let outcome = match r.outcome() {
            Outcome::NotKept => "the walk is not kept",
            Outcome::WalkKeepIt => "walk; the kept walk stays",
            Outcome::WalkForget => "walk; the kept walk is forgotten",
        };
        out.push_str(&format!(
            "| {} | {} | {outcome} | `{}` |\n",
            i + 1,
            r.condition(),
            r.as_str()
        ));
    }
    for (when, answer, code) in [
        (
            "all hold, no object sent a change, and the broker holds that version",
            "`ReaderToBroker::Unchanged`: the broker's tree stands",
            Answer::Stands,
        ),
        (
            "all hold, and no object sent a change",
            "the kept tree (`TreeFreshness::Reused`)",
            Answer::Tree,
        ),
        (
            "all hold, and objects sent changes",
            "those objects read again and merged: a new version (walk when the merge fails)",
            Answer::ReadAgain,
        ),
    ] {
        out.push_str(&format!("| | {when} | {answer} | `{}` |\n", code.as_str()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f` with the fact of row `r` made false (and nothing else that any row checks).
    fn broken(r: Reason, f: &mut Facts) {
        match r {
            Reason::NoBarrier => f.barrier_answered = false,
            Reason::Merging => f.merging = true,
            Reason::NewerWalk => f.same_entry = false,
            Reason::CutShort => f.complete = false,
            Reason::OtherApp => f.same_app = false,
            Reason::EventsUnsettled => f.events_settled = false,
            Reason::KeepEnded => f.keep_ended = true,
            Reason::TooOld => f.age_ms = KEEP_FOR_MS,
            Reason::WindowChanged => f.same_window = false,
            Reason::Moved => f.same_geometry = false,
            Reason::OtherLimits => f.same_limits = false,
            Reason::OtherGeneration => f.same_generation = false,
            Reason::UntrustedToolkit => {
                f.changed = true;
                f.trusted_toolkit = false;
            }
            Reason::ChangedNotOpen => {
                f.changed = true;
                f.changed_open = false;
            }
        }
    }

    #[test]
    fn every_row_alone_decides_and_the_first_one_that_fails_is_named() {
        assert_eq!(may_answer(&Facts::ALL_HOLD), Ok(Answer::Tree));
        for (i, a) in Reason::ALL.into_iter().enumerate() {
            let mut f = Facts::ALL_HOLD;
            broken(a, &mut f);
            assert!(!a.holds(&f), "{a:?}");
            assert_eq!(may_answer(&f), Err(a), "{a:?} alone");
            // With the broker holding the version too: still not answered.
            f.broker_holds_it = true;
            assert_eq!(may_answer(&f), Err(a), "{a:?}, the version held");
            for b in Reason::ALL.into_iter().skip(i + 1) {
                let mut f = Facts::ALL_HOLD;
                broken(b, &mut f);
                broken(a, &mut f);
                assert_eq!(may_answer(&f), Err(a), "{a:?} before {b:?}");
            }
        }
    }

    #[test]
    fn the_kept_walk_answers_as_the_last_rows_say() {
        let f = |changed, holds| Facts {
            changed,
            broker_holds_it: holds,
            ..Facts::ALL_HOLD
        };
        assert_eq!(may_answer(&f(false, false)), Ok(Answer::Tree));
        assert_eq!(may_answer(&f(false, true)), Ok(Answer::Stands));
        // A change seen: never told unchanged, even with the version held.
        assert_eq!(may_answer(&f(true, false)), Ok(Answer::ReadAgain));
        assert_eq!(may_answer(&f(true, true)), Ok(Answer::ReadAgain));
        // The toolkit and the rows matter only for changes.
        let quiet = Facts {
            trusted_toolkit: false,
            changed_open: false,
            ..Facts::ALL_HOLD
        };
        assert_eq!(may_answer(&quiet), Ok(Answer::Tree));
    }

    #[test]
    fn a_walk_answers_until_it_is_keep_for_ms_old() {
        for (age_ms, ok) in [
            (0, true),
            (KEEP_FOR_MS - 1, true),
            (KEEP_FOR_MS, false),
            (u64::MAX, false),
        ] {
            let f = Facts {
                age_ms,
                ..Facts::ALL_HOLD
            };
            assert_eq!(may_answer(&f).is_ok(), ok, "{age_ms} ms");
        }
    }

    #[test]
    fn only_a_read_that_finds_another_read_at_work_leaves_the_kept_walk() {
        for r in Reason::ALL {
            assert_eq!(
                r.forgets(),
                !matches!(r, Reason::Merging | Reason::NewerWalk),
                "{r:?}"
            );
        }
        let names: std::collections::HashSet<_> = Reason::ALL.map(Reason::as_str).into();
        assert_eq!(names.len(), Reason::ALL.len(), "one name a row");
    }

    /// docs/architecture.md carries the table as [`table_markdown`] renders it
    /// (`NISH_BLESS_DOCS=1` rewrites it).
    #[test]
    fn the_architecture_doc_shows_the_kept_walk_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (start, end) = (
            "<!-- kept-walk-table:start -->\n",
            "<!-- kept-walk-table:end -->",
        );
        let a = doc.find(start).expect("the start marker") + start.len();
        let b = doc.find(end).expect("the end marker");
        let want = table_markdown();
        if std::env::var_os("NISH_BLESS_DOCS").is_some() {
            std::fs::write(&path, format!("{}{want}{}", &doc[..a], &doc[b..])).unwrap();
            return;
        }
        assert_eq!(
            &doc[a..b],
            want,
            "docs/architecture.md's kept walk table is stale (NISH_BLESS_DOCS=1 rewrites it)"
        );
        assert_eq!(want.lines().count(), 2 + Reason::ALL.len() + 3);
    }
}
