//! The rows' details: extents, action names and values, many in flight; a row whose details
//! could not all be read in time ends the tree.

use nish_proto::model::{Ifaces, Rect, State, TruncReason};
use std::collections::HashMap;
use std::sync::Arc;
use zbus::zvariant::OwnedValue;

use nish_atspi::a11y::FrameRef;
use nish_atspi::dbus::{CallError, Read};
use nish_atspi::states::{ValueKind, clip_chars, format_number, value_kind};
use nish_atspi::tree::{Arena, Details, Plan, VALUE_MAX_CHARS};

use super::ctx::{Ctx, DETAIL_POOL};

/// Most action names kept per element.
pub const MAX_ACTIONS: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Want {
    Extents,
    Actions,
    Text,
    Number,
    /// A field's attributes that say what it takes (a search, a URL).
    Attrs,
}

pub(super) enum Got {
    Extents(Rect),
    Actions(Vec<String>),
    Value(String),
    Attrs(Vec<(String, String)>),
}

/// Reads the details of every row; `None` in a slot means a call of that row timed out.
pub(super) async fn read_details(
    ctx: &Arc<Ctx>,
    arena: &Arena,
    plan: &Plan,
    frame: &FrameRef,
    all: bool,
) -> Vec<Option<Details>> {
    let mut jobs: Vec<(usize, Want, String)> = Vec::new();
    // Extents are read for showing rows. GTK 4.8 sets `showing` on no element below the
    // window: there, visible rows are read instead.
    let on_screen = if plan.rows[1..]
        .iter()
        .any(|r| arena.get(r.key).states.has(State::Showing))
    {
        State::Showing
    } else {
        State::Visible
    };
    for (i, r) in plan.rows.iter().enumerate() {
        let o = arena.get(r.key);
        // A light read (no `all`) keeps only the text values.
        if all && o.ifaces.has(Ifaces::COMPONENT) && o.states.has(on_screen) && i > 0 {
            jobs.push((i, Want::Extents, o.path.clone()));
        }
        if all && o.ifaces.has(Ifaces::ACTION) {
            jobs.push((i, Want::Actions, o.path.clone()));
        }
        match value_kind(&o.role, o.states, o.ifaces) {
            ValueKind::Text => jobs.push((i, Want::Text, o.path.clone())),
            ValueKind::Number => jobs.push((i, Want::Number, o.path.clone())),
            ValueKind::None => {}
        }
        if wants_attrs(o) {
            jobs.push((i, Want::Attrs, o.path.clone()));
        }
    }
    let rows_of: Vec<usize> = jobs.iter().map(|(row, _, _)| *row).collect();
    let results = nish_atspi::pool::run(jobs, DETAIL_POOL, |(_, want, path)| {
        let ctx = ctx.clone();
        async move { detail(&ctx, want, &path).await }
    })
    .await;
    let mut out: Vec<Option<Details>> = vec![Some(Details::default()); plan.rows.len()];
    if let Some(d) = out.first_mut().and_then(|d| d.as_mut()) {
        d.frame = frame.extents;
    }
    for (row, r) in rows_of.into_iter().zip(results) {
        let Some(slot) = out[row].as_mut() else {
            continue;
        };
        match r {
            Some(Ok(Got::Extents(e))) => slot.frame = Some(e),
            Some(Ok(Got::Actions(a))) => slot.actions = a,
            Some(Ok(Got::Value(v))) => slot.value = Some(v),
            Some(Ok(Got::Attrs(a))) => slot.field_attrs = a,
            Some(Err(CallError::Timeout)) | Some(Err(CallError::Connection)) | None => {
                out[row] = None
            }
            Some(Err(_)) => {}
        }
    }
    out
}

/// True for a field that is not secure: its attributes say whether it takes a search or a URL
/// (`nish_proto::lexicon::field_kind`), one `GetAttributes` call in every read, light or full.
pub(super) fn wants_attrs(o: &nish_atspi::tree::Obj) -> bool {
    let secure = o.states.has(State::Secure) || o.role == "password_text";
    !secure && nish_proto::model::is_field(&o.role, o.states, o.ifaces)
}

pub(super) async fn detail(ctx: &Ctx, want: Want, path: &str) -> Result<Got, CallError> {
    match want {
        Want::Attrs => {
            // Only the attributes the lexicon reads are kept, cut; an object that has no
            // attributes (or answers the call with an error) has none.
            match ctx
                .call::<_, HashMap<String, String>>(path, Read::GetAttributes, &())
                .await
            {
                Ok(all) => Ok(Got::Attrs(nish_proto::lexicon::field_attrs(
                    all.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                ))),
                Err(e @ (CallError::Timeout | CallError::Connection)) => Err(e),
                Err(_) => Ok(Got::Attrs(vec![])),
            }
        }
        Want::Extents => {
            let (x, y, w, h): (i32, i32, i32, i32) =
                ctx.call(path, Read::GetExtents, &(0u32,)).await?;
            Ok(Got::Extents(Rect::new(x, y, w, h)))
        }
        Want::Actions => {
            // `GetActions` gives localized names; the input agent needs the real ones.
            let names = action_names(ctx, path).await?;
            Ok(Got::Actions(
                names.into_iter().map(|n| clip_chars(n, 128)).collect(),
            ))
        }
        Want::Text => {
            let s: String = ctx
                .call(path, Read::GetText, &(0i32, VALUE_MAX_CHARS as i32))
                .await?;
            Ok(Got::Value(clip_chars(s, VALUE_MAX_CHARS)))
        }
        Want::Number => {
            let v: OwnedValue = ctx
                .call(
                    path,
                    Read::GetProperty,
                    &("org.a11y.atspi.Value", "CurrentValue"),
                )
                .await?;
            let f = f64::try_from(&v).map_err(|_| CallError::BadReply)?;
            Ok(Got::Value(format_number(f)))
        }
    }
}

/// The action names of one object: `GetActions` (localized names, one call), and the real
/// names from memory when the localized ones are unchanged, else one `GetName` per action.
async fn action_names(ctx: &Ctx, path: &str) -> Result<Vec<String>, CallError> {
    // GTK's objects keep their actions (a check button's stays `click` whether checked or
    // not), unlike Chromium's (`check` becomes `uncheck`), so GTK's need no second look.
    if ctx.stable_actions
        && let Some(names) = ctx.actions.known(&ctx.link.bus_name, path)
    {
        return Ok(names);
    }
    let localized: Vec<String> = match ctx
        .call::<_, Vec<(String, String, String)>>(path, Read::GetActions, &())
        .await
    {
        Ok(v) => v.into_iter().take(MAX_ACTIONS).map(|(n, _, _)| n).collect(),
        Err(CallError::Unknown) => {
            let n: OwnedValue = ctx
                .call(
                    path,
                    Read::GetProperty,
                    &("org.a11y.atspi.Action", "NActions"),
                )
                .await?;
            let n = i32::try_from(&n).map_err(|_| CallError::BadReply)?;
            return names_by_index(ctx, path, n).await;
        }
        Err(e) => return Err(e),
    };
    if let Some(names) = ctx.actions.get(&ctx.link.bus_name, path, &localized) {
        return Ok(names);
    }
    let names = names_by_index(ctx, path, localized.len() as i32).await?;
    ctx.actions
        .put(&ctx.link.bus_name, path, localized, names.clone());
    Ok(names)
}

async fn names_by_index(ctx: &Ctx, path: &str, n: i32) -> Result<Vec<String>, CallError> {
    let mut out = Vec::new();
    for i in 0..n.clamp(0, MAX_ACTIONS as i32) {
        out.push(
            ctx.call::<_, String>(path, Read::GetActionName, &(i,))
                .await?,
        );
    }
    Ok(out)
}

/// Keeps the rows before the first row whose details are incomplete (a call timed out), and
/// sets the truncation reason when rows are dropped.
pub(super) fn cut_at_first_incomplete(
    plan: &mut Plan,
    details: Vec<Option<Details>>,
    reason: TruncReason,
) -> Vec<Details> {
    let complete = details.iter().take_while(|d| d.is_some()).count();
    if complete < plan.rows.len() {
        plan.rows.truncate(complete.max(1));
        plan.truncated = Some(reason);
        // Child counts only count rows still listed.
        let n = plan.rows.len() as u32;
        for r in plan.rows.iter_mut() {
            r.child_rows = 0;
        }
        for i in 0..n as usize {
            if let Some(p) = plan.rows[i].parent {
                plan.rows[p as usize].child_rows += 1;
            }
        }
    }
    let mut out: Vec<Details> = details
        .into_iter()
        .take(plan.rows.len())
        .map(Option::unwrap_or_default)
        .collect();
    out.resize(plan.rows.len(), Details::default());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_atspi::tree::Row;

    fn row(parent: Option<u32>) -> Row {
        Row {
            key: 0,
            parent,
            depth: 0,
            child_rows: 0,
        }
    }

    #[test]
    fn incomplete_details_cut_the_rows() {
        let mut p = Plan {
            rows: vec![row(None), row(Some(0)), row(Some(0)), row(Some(2))],
            truncated: None,
            pending: vec![],
            pending_rows: vec![],
        };
        let d = vec![
            Some(Details::default()),
            Some(Details::default()),
            None,
            Some(Details::default()),
        ];
        let out = cut_at_first_incomplete(&mut p, d, TruncReason::AppNotResponding);
        assert_eq!(out.len(), 2);
        assert_eq!(p.rows.len(), 2);
        assert_eq!(p.rows[0].child_rows, 1);
        assert_eq!(p.truncated, Some(TruncReason::AppNotResponding));
    }

    #[test]
    fn complete_details_keep_everything() {
        let mut p = Plan {
            rows: vec![row(None), row(Some(0))],
            truncated: Some(TruncReason::MaxElements),
            pending: vec![],
            pending_rows: vec![],
        };
        let out = cut_at_first_incomplete(
            &mut p,
            vec![Some(Details::default()), Some(Details::default())],
            TruncReason::TimeBudget,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(p.truncated, Some(TruncReason::MaxElements));
    }
}
