//! The live re-check: pure rules that compare what the snapshot recorded ([`Expect`]) with what
//! the element says now ([`Live`]), before anything is sent to the application.
//!
//! In order (the first rule that fails decides):
//!
//! 1. The object still exists (not `defunct`), else `element_not_found`.
//! 2. Its connection's process is the snapshot's pid, else `app_not_in_scope`.
//! 3. Role and name are the snapshot's (both normalized and clipped as the reader does), else
//!    `stale_element_token`.
//! 4. It is enabled: every one of `sensitive` and `enabled` the snapshot recorded is still set,
//!    and at least one is, else `not_actionable`.
//! 5. It is showing, else `not_actionable`. GTK 4.8 sets `showing` on no element below the
//!    window, so for GTK 4 `visible` stands in for it, as in the reader's walk.
//! 6. Its extents equal the snapshot's frame exactly (both absent also matches: an element
//!    without a position), else `stale_element_token` (moved or resized).
//! 7. Its frame has an area and lies inside the snapshot's window frame, with
//!    [`CONTAIN_SLACK`] pixels of slack, else `not_actionable`.
//!
//! Acts that write ([`secure`]): a password or secure field (role `password_text`, the reader's
//! secure rule on the live role and name, or a snapshot that marked it secure) is refused with
//! `secure_field`.

use nish_proto::model::{Ifaces, Rect, State, StateSet};
use nish_proto::wire::input::Expect;

use crate::failure::ActFailure;
use nish_proto::errors::ErrorCode;

/// Pixels an element may stick out of its window's frame.
pub const CONTAIN_SLACK: i32 = 2;

/// What the element says now, computed as the reader's walk computes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Live {
    /// The unix process id of the element's connection on the accessibility bus.
    pub pid: u32,
    /// Role, normalized.
    pub role: String,
    /// Name, clipped as the reader clips it.
    pub name: String,
    /// Model states, `secure` included.
    pub states: StateSet,
    /// The AT-SPI `defunct` state.
    pub defunct: bool,
    /// Interfaces.
    pub ifaces: Ifaces,
    /// Extents in screen coordinates, when it has them.
    pub frame: Option<Rect>,
}

/// Toolkit-dependent rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// `visible` counts as `showing` (GTK 4).
    pub visible_for_showing: bool,
    /// The element is an option of a collapsed combo box whose box was checked live to be
    /// showing: it need not be showing itself, nor have an area on screen.
    pub collapsed_option: bool,
}

/// Judges the element against the snapshot; `Ok` when the act may go ahead.
pub fn judge(expect: &Expect, live: &Live, rules: Rules) -> Result<(), ActFailure> {
    if live.defunct {
        return Err(ActFailure::gone("the element no longer exists"));
    }
    if live.pid != expect.pid {
        return Err(ActFailure::refused(
            ErrorCode::AppNotInScope,
            format!(
                "the element belongs to pid {}, not to pid {}",
                live.pid, expect.pid
            ),
        ));
    }
    if live.role != expect.role {
        return Err(ActFailure::stale(
            "the element's role changed since the snapshot",
        ));
    }
    if live.name != expect.name {
        return Err(ActFailure::stale(
            "the element's name changed since the snapshot",
        ));
    }
    let lost = |s: State| expect.states.has(s) && !live.states.has(s);
    if lost(State::Sensitive)
        || lost(State::Enabled)
        || !(live.states.has(State::Sensitive) || live.states.has(State::Enabled))
    {
        return Err(ActFailure::not_actionable("the element is disabled"));
    }
    let showing = live.states.has(State::Showing)
        || (rules.visible_for_showing && live.states.has(State::Visible));
    if !showing && !rules.collapsed_option {
        return Err(ActFailure::not_actionable("the element is not showing"));
    }
    // An option of a collapsed combo box has no stable place on screen (its popup is closed):
    // its identity rests on role, name, pid and the live combo box above it.
    if live.frame != expect.frame && !rules.collapsed_option {
        return Err(ActFailure::stale(
            "the element moved or was resized since the snapshot",
        ));
    }
    if let Some(f) = live.frame.filter(|_| !rules.collapsed_option) {
        if f.is_empty() {
            return Err(ActFailure::not_actionable(
                "the element has no area on screen",
            ));
        }
        if !expect.window_frame.contains_rect(&f, CONTAIN_SLACK) {
            return Err(ActFailure::not_actionable(
                "the element lies outside its window",
            ));
        }
    }
    Ok(())
}

/// True for a password or secure field, now or at snapshot time.
pub fn is_secure(expect: &Expect, live: &Live) -> bool {
    live.states.has(State::Secure)
        || live.role == "password_text"
        || nish_atspi::states::is_secure(&live.role, &live.name)
        || expect.states.has(State::Secure)
        || expect.role == "password_text"
}

/// Refuses writes into secure fields.
pub fn secure(expect: &Expect, live: &Live) -> Result<(), ActFailure> {
    if is_secure(expect, live) {
        return Err(ActFailure::refused(
            ErrorCode::SecureField,
            "the element is a password or secure field",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(list: &[State]) -> StateSet {
        StateSet::of(list)
    }

    fn expect() -> Expect {
        Expect {
            handle: ":1.5|/org/a11y/atspi/accessible/9".into(),
            window_id: 0x800007,
            pid: 4242,
            role: "check_box".into(),
            name: "checkbutton".into(),
            states: states(&[
                State::Enabled,
                State::Sensitive,
                State::Showing,
                State::Visible,
            ]),
            frame: Some(Rect::new(15, 397, 108, 22)),
            window_frame: Rect::new(0, 0, 1366, 741),
            collapsed_option: false,
            parent_handle: None,
        }
    }

    fn live() -> Live {
        Live {
            pid: 4242,
            role: "check_box".into(),
            name: "checkbutton".into(),
            states: states(&[
                State::Enabled,
                State::Sensitive,
                State::Showing,
                State::Visible,
                State::Checked,
            ]),
            defunct: false,
            ifaces: Ifaces(Ifaces::ACTION | Ifaces::COMPONENT),
            frame: Some(Rect::new(15, 397, 108, 22)),
        }
    }

    fn code(r: Result<(), ActFailure>) -> Option<&'static str> {
        r.err().map(|f| {
            assert!(!f.sent, "a re-check never sends anything");
            f.code.as_str()
        })
    }

    #[test]
    fn unchanged_element_passes() {
        assert_eq!(code(judge(&expect(), &live(), Rules::default())), None);
    }

    #[test]
    fn rules_table() {
        type Change = fn(&mut Expect, &mut Live);
        let cases: &[(&str, Change, Option<&str>)] = &[
            (
                "defunct",
                |_, l| l.defunct = true,
                Some("element_not_found"),
            ),
            ("other pid", |_, l| l.pid = 1, Some("app_not_in_scope")),
            (
                "other role",
                |_, l| l.role = "push_button".into(),
                Some("stale_element_token"),
            ),
            (
                "other name",
                |_, l| l.name = "Delete".into(),
                Some("stale_element_token"),
            ),
            (
                "name case",
                |_, l| l.name = "CheckButton".into(),
                Some("stale_element_token"),
            ),
            (
                "insensitive",
                |_, l| l.states.remove(State::Sensitive),
                Some("not_actionable"),
            ),
            (
                "disabled",
                |_, l| l.states.remove(State::Enabled),
                Some("not_actionable"),
            ),
            (
                "sensitive without enabled at snapshot and now",
                |e, l| {
                    e.states.remove(State::Enabled);
                    l.states.remove(State::Enabled);
                },
                None,
            ),
            (
                "neither",
                |e, l| {
                    e.states = StateSet::of(&[State::Showing]);
                    l.states = StateSet::of(&[State::Showing]);
                },
                Some("not_actionable"),
            ),
            (
                "hidden",
                |_, l| l.states.remove(State::Showing),
                Some("not_actionable"),
            ),
            (
                "moved 1px",
                |_, l| l.frame = Some(Rect::new(16, 397, 108, 22)),
                Some("stale_element_token"),
            ),
            (
                "resized",
                |_, l| l.frame = Some(Rect::new(15, 397, 108, 23)),
                Some("stale_element_token"),
            ),
            (
                "lost its extents",
                |_, l| l.frame = None,
                Some("stale_element_token"),
            ),
            (
                "gained extents",
                |e, _| e.frame = None,
                Some("stale_element_token"),
            ),
            (
                "no extents at all",
                |e, l| {
                    e.frame = None;
                    l.frame = None;
                },
                None,
            ),
            (
                "empty",
                |e, l| {
                    e.frame = Some(Rect::new(15, 397, 0, 0));
                    l.frame = e.frame;
                },
                Some("not_actionable"),
            ),
            (
                "outside its window",
                |e, l| {
                    e.frame = Some(Rect::new(1360, 397, 108, 22));
                    l.frame = e.frame;
                },
                Some("not_actionable"),
            ),
            (
                "2px over the edge",
                |e, l| {
                    e.frame = Some(Rect::new(-2, 397, 108, 22));
                    l.frame = e.frame;
                },
                None,
            ),
            (
                "3px over the edge",
                |e, l| {
                    e.frame = Some(Rect::new(-3, 397, 108, 22));
                    l.frame = e.frame;
                },
                Some("not_actionable"),
            ),
            (
                "checked changed is not staleness",
                |_, l| l.states.remove(State::Checked),
                None,
            ),
        ];
        for (what, change, want) in cases {
            let (mut e, mut l) = (expect(), live());
            change(&mut e, &mut l);
            assert_eq!(code(judge(&e, &l, Rules::default())), *want, "{what}");
        }
    }

    #[test]
    fn gtk4_visible_stands_in_for_showing() {
        let (mut e, mut l) = (expect(), live());
        for s in [&mut e.states, &mut l.states] {
            s.remove(State::Showing);
            s.remove(State::Enabled);
        }
        assert_eq!(
            code(judge(&e, &l, Rules::default())),
            Some("not_actionable")
        );
        let gtk4 = Rules {
            visible_for_showing: true,
            collapsed_option: false,
        };
        assert_eq!(code(judge(&e, &l, gtk4)), None);
        l.states.remove(State::Visible);
        assert_eq!(code(judge(&e, &l, gtk4)), Some("not_actionable"));
        // An option of a collapsed combo box whose box was found showing live: neither its own
        // showing state nor its (empty) frame refuses it.
        let option = Rules {
            visible_for_showing: false,
            collapsed_option: true,
        };
        l.frame = Some(Rect::new(0, 0, 0, 0));
        e.frame = l.frame;
        assert_eq!(code(judge(&e, &l, option)), None);
        assert_eq!(
            code(judge(&e, &l, Rules::default())),
            Some("not_actionable")
        );
    }

    #[test]
    fn secure_fields_are_refused() {
        let (mut e, mut l) = (expect(), live());
        e.role = "entry".into();
        l.role = "entry".into();
        assert_eq!(code(secure(&e, &l)), None);
        let mut pw = l.clone();
        pw.role = "password_text".into();
        assert_eq!(code(secure(&e, &pw)), Some("secure_field"));
        let mut named = l.clone();
        named.name = "Password".into();
        assert_eq!(code(secure(&e, &named)), Some("secure_field"));
        let mut marked = e.clone();
        marked.states.insert(State::Secure);
        assert_eq!(code(secure(&marked, &l)), Some("secure_field"));
        let mut live_marked = l.clone();
        live_marked.states.insert(State::Secure);
        assert_eq!(code(secure(&e, &live_marked)), Some("secure_field"));
    }
}
