//! Headless acts: one element, re-checked live, then one accessibility call.
//!
//! For each request, in order:
//!
//! 1. The arguments are checked (a finite number; text without NUL, at most
//!    [`MAX_TEXT_CHARS`]; an action name) before anything is read.
//! 2. The handle is parsed and the element read live through its application's link
//!    (peer-to-peer where the reader links peer-to-peer, else through the bus), with its
//!    connection's pid asked from the bus ([`crate::live`]).
//! 3. The re-check rules ([`crate::recheck::judge`]); for text and numbers also the secure-field
//!    rule ([`crate::recheck::secure`]).
//! 4. What the act needs is read (the action's index by its non-localized name; the caret; the
//!    parent's `Selection` and the element's index in it, the parent being the one the
//!    snapshot showed; the value's range) and checked.
//! 5. One act call from [`crate::calls`], with its timeout.
//!
//! Nothing changes the application before step 5. A failure before it is answered with
//! `sent: false`; an act call that timed out or lost its connection with `sent: true`.
//!
//! Choices:
//! - `DoAction`, `InsertText`, `SetTextContents` and `SelectChild` answer a boolean. `false`
//!   means the toolkit declined (GTK returns it for an insensitive or hidden widget before doing
//!   anything): `not_actionable`, `sent: false`.
//! - A number outside the element's `MinimumValue`..`MaximumValue` (when the range is known:
//!   both finite, minimum not above maximum) is refused with `invalid_arguments` before anything
//!   is sent, with the range in the message. Toolkits clamp silently or not at all; a refusal
//!   tells the model what to change, and nothing happens.
//! - Text is inserted at `Text.CaretOffset`, or at the end (`CharacterCount`) when the caret is
//!   unknown (-1) or past the end.

use std::time::Instant;

use nish_atspi::a11y::AppLink;
use nish_atspi::agent::connector::Connector;
use nish_atspi::dbus::{CallError, Read, call};
use nish_atspi::states::format_number;
use nish_proto::errors::ErrorCode;
use nish_proto::model::{Ifaces, State};
use nish_proto::wire::input::{ActPath, Expect, SemanticOp};
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

use crate::calls::{self, ACT_TIMEOUT, ActMethod};
use crate::failure::ActFailure;
use crate::handle::Handle;
use crate::live::{Desk, Element, NULL_PATH, RECHECK_BUDGET, left, read_failure};
use crate::recheck::{judge, secure};

/// Most characters one text act carries (the broker's tools allow far fewer).
pub const MAX_TEXT_CHARS: usize = 100_000;
/// Longest action name, in characters (the reader clips names to 128).
pub const MAX_ACTION_NAME: usize = 128;
/// Most actions of one element: an action index is below it (the reader lists 32).
pub const MAX_ACTIONS: u32 = 64;
/// Slack on a value's range, relative to its span.
pub const RANGE_EPSILON: f64 = 1e-9;

/// What kind of act, for logs.
pub fn op_kind(op: &SemanticOp) -> &'static str {
    match op {
        SemanticOp::Action { .. } => "action",
        SemanticOp::Select => "select",
        SemanticOp::InsertText { .. } => "insert_text",
        SemanticOp::SetText { .. } => "set_text",
        SemanticOp::SetNumber { .. } => "set_number",
    }
}

/// The length in characters of the text an act carries (never the text).
pub fn text_len(op: &SemanticOp) -> Option<usize> {
    match op {
        SemanticOp::InsertText { text } | SemanticOp::SetText { text } => {
            Some(text.chars().count())
        }
        _ => None,
    }
}

fn invalid(message: impl Into<String>) -> ActFailure {
    ActFailure::refused(ErrorCode::InvalidArguments, message)
}

/// Checks the arguments alone, before anything is read.
pub fn check_op(op: &SemanticOp) -> Result<(), ActFailure> {
    match op {
        SemanticOp::Action { name, index } => {
            let n = name.chars().count();
            if n == 0 || n > MAX_ACTION_NAME || name.chars().any(char::is_control) {
                return Err(invalid("the action name is empty, too long or malformed"));
            }
            if *index >= MAX_ACTIONS {
                return Err(invalid("the action index is out of range"));
            }
        }
        SemanticOp::Select => {}
        SemanticOp::InsertText { text } | SemanticOp::SetText { text } => {
            let n = text.chars().count();
            if n > MAX_TEXT_CHARS {
                return Err(invalid(format!(
                    "text of {n} characters is longer than {MAX_TEXT_CHARS}"
                )));
            }
            if text.contains('\0') {
                return Err(invalid("text must not contain NUL characters"));
            }
        }
        SemanticOp::SetNumber { value } => {
            if !value.is_finite() {
                return Err(invalid("the value must be a finite number"));
            }
        }
    }
    Ok(())
}

/// Refuses a value outside a known range.
pub fn check_range(value: f64, min: Option<f64>, max: Option<f64>) -> Result<(), ActFailure> {
    let (Some(min), Some(max)) = (min, max) else {
        return Ok(());
    };
    if !(min.is_finite() && max.is_finite()) || min > max {
        return Ok(());
    }
    let eps = (max - min).abs().max(1.0) * RANGE_EPSILON;
    if value < min - eps || value > max + eps {
        return Err(invalid(format!(
            "the value is outside the element's range {} to {}",
            format_number(min),
            format_number(max)
        )));
    }
    Ok(())
}

/// A failed act call.
pub fn act_failure(act: ActMethod, e: CallError) -> ActFailure {
    let what = act.spec().1;
    match e {
        CallError::Timeout => ActFailure::maybe_sent(
            ErrorCode::AppNotResponding,
            format!(
                "the application did not answer {what} within {} ms",
                ACT_TIMEOUT.as_millis()
            ),
        ),
        CallError::Connection => ActFailure::maybe_sent(
            ErrorCode::AppNotResponding,
            format!("the connection to the application failed during {what}"),
        ),
        // The method or object is not there: nothing was done.
        CallError::Unknown => ActFailure::gone(format!("the element no longer answers {what}")),
        CallError::BadReply => ActFailure::maybe_sent(
            ErrorCode::InternalError,
            format!("unexpected reply to {what}"),
        ),
        CallError::Other => ActFailure::maybe_sent(
            ErrorCode::NotActionable,
            format!("the application answered {what} with an error"),
        ),
    }
}

fn declined(what: &str) -> ActFailure {
    ActFailure::not_actionable(format!("the application declined the {what}"))
}

async fn get_prop(
    link: &AppLink,
    path: &str,
    iface: &str,
    prop: &str,
    deadline: Instant,
) -> Result<OwnedValue, ActFailure> {
    call(
        &link.conn,
        link.dest(),
        path,
        Read::GetProperty,
        &(iface, prop),
        left(deadline)?,
    )
    .await
    .map_err(read_failure)
}

fn as_i32(v: &OwnedValue) -> Result<i32, ActFailure> {
    i32::try_from(v).map_err(|_| read_failure(CallError::BadReply))
}

/// The headless half of the input agent.
#[derive(Debug)]
pub struct Semantic {
    desk: Desk,
}

impl Semantic {
    /// Nothing connected yet; connections are made through `connector`.
    pub fn new(connector: Connector) -> Semantic {
        Semantic {
            desk: Desk::new(connector),
        }
    }

    /// Does one act; the path taken (`atspi_action:<name>`, `atspi_selection`,
    /// `editable_text`, `value`).
    pub async fn act(&self, target: &Expect, op: &SemanticOp) -> Result<ActPath, ActFailure> {
        check_op(op)?;
        let handle = Handle::parse(&target.handle)
            .ok_or_else(|| ActFailure::gone("the element's handle is malformed"))?;
        let deadline = Instant::now() + RECHECK_BUDGET;
        let el = self.desk.read(&handle, target, deadline).await?;
        let mut rules = el.toolkit.rules();
        // An option of a collapsed `<select>` is picked without opening the popup, when the
        // broker says so and its combo box is showing now.
        if target.collapsed_option && matches!(op, SemanticOp::Action { .. }) {
            rules.collapsed_option = self.desk.combo_ancestor_showing(&el, deadline).await?;
        }
        judge(target, &el.live, rules)?;

        match op {
            SemanticOp::Action { name, index } => self.action(&el, name, *index, deadline).await,
            SemanticOp::Select => self.select(&el, target, deadline).await,
            SemanticOp::InsertText { text } => {
                secure(target, &el.live)?;
                editable(&el)?;
                self.insert_text(&el, text, deadline).await
            }
            SemanticOp::SetText { text } => {
                secure(target, &el.live)?;
                editable(&el)?;
                match calls::set_text_contents(&el.link, &el.handle.path, text).await {
                    Ok(true) => Ok(ActPath::EditableText),
                    Ok(false) => Err(declined("text")),
                    Err(e) => Err(act_failure(ActMethod::SetTextContents, e)),
                }
            }
            SemanticOp::SetNumber { value } => {
                secure(target, &el.live)?;
                self.set_number(&el, *value, deadline).await
            }
        }
    }

    /// The action `name` at `index`, the place the snapshot showed it in the element's action
    /// list: done only if the live name there is still `name` (one call; the broker's filter
    /// lets `DoAction` through with this index alone).
    async fn action(
        &self,
        el: &Element,
        name: &str,
        index: u32,
        deadline: Instant,
    ) -> Result<ActPath, ActFailure> {
        if !el.live.ifaces.has(Ifaces::ACTION) {
            return Err(ActFailure::not_actionable("the element has no actions"));
        }
        let Ok(index) = i32::try_from(index) else {
            return Err(invalid("the action index is out of range"));
        };
        let link = &el.link;
        let path = &el.handle.path;
        // Non-localized. An index past the element's actions gets an error or an empty name.
        let live = call::<_, String>(
            &link.conn,
            link.dest(),
            path,
            Read::GetActionName,
            &(index,),
            left(deadline)?,
        )
        .await;
        match live {
            Ok(n) if n == name => {}
            // The element answered its re-check just now: an error here is an index past its
            // actions (Qt answers one with "unknown method"), not a gone element.
            Ok(_) | Err(CallError::Other | CallError::Unknown | CallError::BadReply) => {
                return Err(ActFailure::not_actionable(
                    "the element has no action of that name where the snapshot showed it",
                ));
            }
            Err(e @ (CallError::Timeout | CallError::Connection)) => return Err(read_failure(e)),
        }
        match calls::do_action(link, path, index).await {
            Ok(true) => Ok(ActPath::Action {
                name: name.to_string(),
            }),
            Ok(false) => Err(declined("action")),
            Err(e) => Err(act_failure(ActMethod::DoAction, e)),
        }
    }

    async fn select(
        &self,
        el: &Element,
        target: &Expect,
        deadline: Instant,
    ) -> Result<ActPath, ActFailure> {
        if !el.live.states.has(State::Selectable) {
            return Err(ActFailure::not_actionable("the element is not selectable"));
        }
        let link = &el.link;
        let path = &el.handle.path;
        let no_selection =
            || ActFailure::not_actionable("the element's parent offers no selection");
        let (pbus, ppath) = self
            .desk
            .parent(link, path, left(deadline)?)
            .await
            .map_err(read_failure)?;
        if !(pbus.is_empty() || pbus == el.handle.bus) || ppath == NULL_PATH {
            return Err(no_selection());
        }
        // The broker lets `SelectChild` reach only the parent its snapshot showed.
        if let Some(p) = &target.parent_handle
            && !Handle::parse(p).is_some_and(|p| p.is(&el.handle.bus, ppath.as_str()))
        {
            return Err(ActFailure::stale(
                "the element's parent is not the one the snapshot showed",
            ));
        }
        let t = left(deadline)?;
        let (ifaces, index) = tokio::join!(
            call::<_, Vec<String>>(&link.conn, link.dest(), &ppath, Read::GetInterfaces, &(), t),
            calls::index_in_parent(link, path, t),
        );
        let ifaces = ifaces.map_err(read_failure)?;
        if !ifaces.iter().any(|i| i == "org.a11y.atspi.Selection") {
            return Err(no_selection());
        }
        let index = index.map_err(read_failure)?;
        if index < 0 {
            return Err(no_selection());
        }
        // The parent must list exactly this element at that index.
        let (cbus, cpath): (String, OwnedObjectPath) = call(
            &link.conn,
            link.dest(),
            &ppath,
            Read::GetChildAtIndex,
            &(index,),
            left(deadline)?,
        )
        .await
        .map_err(read_failure)?;
        if !el.handle.is(&cbus, cpath.as_str()) {
            return Err(ActFailure::stale(
                "the element's parent lists another child at its index",
            ));
        }
        match calls::select_child(link, &ppath, index).await {
            Ok(true) => Ok(ActPath::Selection),
            Ok(false) => Err(declined("selection")),
            Err(e) => Err(act_failure(ActMethod::SelectChild, e)),
        }
    }

    async fn insert_text(
        &self,
        el: &Element,
        text: &str,
        deadline: Instant,
    ) -> Result<ActPath, ActFailure> {
        let link = &el.link;
        let path = &el.handle.path;
        let (caret, count) = tokio::join!(
            get_prop(link, path, "org.a11y.atspi.Text", "CaretOffset", deadline),
            get_prop(
                link,
                path,
                "org.a11y.atspi.Text",
                "CharacterCount",
                deadline
            ),
        );
        let no_text = |f: ActFailure| {
            if f.code == ErrorCode::ElementNotFound {
                ActFailure::not_actionable("the element offers no text caret")
            } else {
                f
            }
        };
        let caret = as_i32(&caret.map_err(no_text)?)?;
        let count = as_i32(&count.map_err(no_text)?)?.max(0);
        let position = if caret < 0 || caret > count {
            count
        } else {
            caret
        };
        match calls::insert_text(link, path, position, text, el.toolkit.counts_utf16()).await {
            Ok(true) => Ok(ActPath::EditableText),
            Ok(false) => Err(declined("text")),
            Err(e) => Err(act_failure(ActMethod::InsertText, e)),
        }
    }

    async fn set_number(
        &self,
        el: &Element,
        value: f64,
        deadline: Instant,
    ) -> Result<ActPath, ActFailure> {
        if !el.live.ifaces.has(Ifaces::VALUE) {
            return Err(ActFailure::not_actionable(
                "the element offers no numeric value",
            ));
        }
        if el.live.states.has(State::ReadOnly) {
            return Err(ActFailure::not_actionable("the element is read-only"));
        }
        let link = &el.link;
        // One property at a time: Qt 5 answers `Properties.GetAll` with a message the bus
        // refuses, and loses its connection (`nish_atspi::a11y::props`).
        let t = left(deadline)?;
        let get = |prop: &'static str| async move {
            call::<_, OwnedValue>(
                &link.conn,
                link.dest(),
                &el.handle.path,
                Read::GetProperty,
                &("org.a11y.atspi.Value", prop),
                t,
            )
            .await
        };
        let (min, max) = tokio::join!(get("MinimumValue"), get("MaximumValue"));
        let num = |v: Result<OwnedValue, CallError>| -> Result<Option<f64>, ActFailure> {
            Ok(f64::try_from(&v.map_err(read_failure)?).ok())
        };
        let (min, max) = (num(min)?, num(max)?);
        check_range(value, min, max)?;
        match calls::set_current_value(link, &el.handle.path, value).await {
            Ok(()) => Ok(ActPath::Value),
            Err(e) => Err(act_failure(ActMethod::SetCurrentValue, e)),
        }
    }
}

/// Text acts need `EditableText`, the `editable` state and no `read_only`.
fn editable(el: &Element) -> Result<(), ActFailure> {
    if !el.live.ifaces.has(Ifaces::EDITABLE_TEXT) {
        return Err(ActFailure::not_actionable(
            "the element offers no editable text",
        ));
    }
    if !el.live.states.has(State::Editable) || el.live.states.has(State::ReadOnly) {
        return Err(ActFailure::not_actionable("the element is not editable"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<(), ActFailure>) -> Option<&'static str> {
        r.err().map(|f| {
            assert!(!f.sent);
            f.code.as_str()
        })
    }

    #[test]
    fn arguments_are_checked_first() {
        let num = |value| SemanticOp::SetNumber { value };
        assert_eq!(code(check_op(&num(f64::NAN))), Some("invalid_arguments"));
        assert_eq!(
            code(check_op(&num(f64::INFINITY))),
            Some("invalid_arguments")
        );
        assert_eq!(
            code(check_op(&num(f64::NEG_INFINITY))),
            Some("invalid_arguments")
        );
        assert_eq!(code(check_op(&num(-3.5))), None);
        let text = |t: &str| SemanticOp::SetText { text: t.into() };
        assert_eq!(code(check_op(&text("héllo ✓"))), None);
        assert_eq!(code(check_op(&text("a\0b"))), Some("invalid_arguments"));
        assert_eq!(
            code(check_op(&SemanticOp::InsertText {
                text: "x".repeat(MAX_TEXT_CHARS + 1)
            })),
            Some("invalid_arguments")
        );
        let action = |n: &str| SemanticOp::Action {
            name: n.into(),
            index: 0,
        };
        assert_eq!(code(check_op(&action("click"))), None);
        assert_eq!(code(check_op(&action(""))), Some("invalid_arguments"));
        assert_eq!(code(check_op(&action("a\nb"))), Some("invalid_arguments"));
        let far = SemanticOp::Action {
            name: "click".into(),
            index: MAX_ACTIONS,
        };
        assert_eq!(code(check_op(&far)), Some("invalid_arguments"));
        assert_eq!(code(check_op(&SemanticOp::Select)), None);
    }

    #[test]
    fn range_rule() {
        assert_eq!(code(check_range(5.0, Some(0.0), Some(10.0))), None);
        assert_eq!(code(check_range(0.0, Some(0.0), Some(10.0))), None);
        assert_eq!(code(check_range(10.0, Some(0.0), Some(10.0))), None);
        assert_eq!(
            code(check_range(10.5, Some(0.0), Some(10.0))),
            Some("invalid_arguments")
        );
        assert_eq!(
            code(check_range(-0.1, Some(0.0), Some(10.0))),
            Some("invalid_arguments")
        );
        // Unknown or nonsense ranges are not enforced.
        assert_eq!(code(check_range(1e9, None, Some(10.0))), None);
        assert_eq!(code(check_range(1e9, Some(10.0), Some(0.0))), None);
        assert_eq!(code(check_range(1e9, Some(0.0), Some(f64::INFINITY))), None);
        let f = check_range(11.0, Some(0.0), Some(10.0)).unwrap_err();
        assert!(f.message.contains("0 to 10"), "{}", f.message);
    }

    #[test]
    fn act_failures_say_whether_something_was_sent() {
        let f = act_failure(ActMethod::DoAction, CallError::Timeout);
        assert_eq!((f.code, f.sent), (ErrorCode::AppNotResponding, true));
        let f = act_failure(ActMethod::SetTextContents, CallError::Connection);
        assert_eq!((f.code, f.sent), (ErrorCode::AppNotResponding, true));
        let f = act_failure(ActMethod::SelectChild, CallError::Unknown);
        assert_eq!((f.code, f.sent), (ErrorCode::ElementNotFound, false));
        let f = act_failure(ActMethod::InsertText, CallError::Other);
        assert!(f.sent);
        assert!(!declined("action").sent);
    }

    #[test]
    fn only_lengths_are_logged() {
        assert_eq!(
            text_len(&SemanticOp::InsertText {
                text: "héllo".into()
            }),
            Some(5)
        );
        assert_eq!(text_len(&SemanticOp::Select), None);
        assert_eq!(op_kind(&SemanticOp::SetNumber { value: 1.0 }), "set_number");
    }
}
