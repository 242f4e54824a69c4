//! Matching an X window to its top-level accessible: by geometry first (toolkits leave frame
//! names empty, e.g. gtk3-widget-factory), then by name against the title.

use nish_proto::model::Rect;

/// Roles a window's top-level accessible (a child of its application's root object) may have.
/// `filler`: Qt's for a top-level window that is a bare widget (not a main window or dialog).
pub const TOP_LEVEL_ROLES: &[&str] = &[
    "frame",
    "filler",
    "window",
    "dialog",
    "alert",
    "file_chooser",
    "color_chooser",
    "font_chooser",
];

/// A top-level accessible of the window's application.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Wire role name.
    pub role: String,
    /// Accessible name.
    pub name: String,
    /// Extents as the toolkit reports them (screen coordinates, or window-relative for
    /// toolkits that do not know their position).
    pub extents: Option<Rect>,
    /// Showing state.
    pub showing: bool,
}

/// The X side of the match.
#[derive(Clone, Debug, PartialEq)]
pub struct Target<'a> {
    /// The client window in screen coordinates.
    pub client: Rect,
    /// The window manager's frame around it, when there is one.
    pub wm_frame: Option<Rect>,
    /// The window title.
    pub title: &'a str,
}

/// Least score a match needs when the application has more than one top-level accessible.
pub const MIN_SCORE: i32 = 40;

fn geometry_score(e: &Rect, r: &Rect) -> i32 {
    let pos = (e.x - r.x).abs() + (e.y - r.y).abs();
    let size = (e.w - r.w).abs() + (e.h - r.h).abs();
    if pos + size <= 4 {
        100
    } else if size <= 24 {
        // Same size elsewhere: toolkits that report window-relative extents (GTK 4 on X11).
        if pos <= 4 { 70 } else { 50 }
    } else if pos <= 4 {
        20
    } else {
        0
    }
}

fn name_score(name: &str, title: &str) -> i32 {
    let name = name.trim();
    if name.is_empty() {
        return 0;
    }
    if name == title.trim() {
        40
    } else if name.chars().count() >= 3 && title.contains(name) {
        20
    } else {
        0
    }
}

fn geo_score(c: &Candidate, t: &Target<'_>) -> i32 {
    c.extents
        .filter(|e| !e.is_empty())
        .map(|e| {
            let a = geometry_score(&e, &t.client);
            let b = t.wm_frame.map(|f| geometry_score(&e, &f)).unwrap_or(0);
            a.max(b)
        })
        .unwrap_or(0)
}

/// The score of one candidate (higher is better; negative means not a window).
pub fn score(c: &Candidate, t: &Target<'_>) -> i32 {
    if !TOP_LEVEL_ROLES.contains(&c.role.as_str()) {
        return -1;
    }
    geo_score(c, t) + name_score(&c.name, t.title) + if c.showing { 5 } else { 0 }
}

/// The candidate is another window: it has a name, the title does not show it, and it is
/// neither where the window is nor of its size.
fn another_window(c: &Candidate, t: &Target<'_>) -> bool {
    !c.name.trim().is_empty()
        && name_score(&c.name, t.title) == 0
        && c.extents.is_some_and(|e| !e.is_empty())
        && geo_score(c, t) == 0
}

/// The index of the candidate that is the target window: the best score, which must reach
/// [`MIN_SCORE`] unless it is the only top-level accessible and nothing says it is another
/// window (a name the title does not show, and neither the window's place nor its size: an
/// application's one accessible window is not taken for an X window of it that has none).
/// Ties go to the first.
pub fn match_frame(cands: &[Candidate], t: &Target<'_>) -> Option<usize> {
    let scored: Vec<(usize, i32)> = cands
        .iter()
        .enumerate()
        .map(|(i, c)| (i, score(c, t)))
        .filter(|(_, s)| *s >= 0)
        .collect();
    let (best, best_score) = scored
        .iter()
        .copied()
        .fold(None::<(usize, i32)>, |acc, (i, s)| match acc {
            Some((_, bs)) if bs >= s => acc,
            _ => Some((i, s)),
        })?;
    if best_score >= MIN_SCORE || (scored.len() == 1 && !another_window(&cands[best], t)) {
        Some(best)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(role: &str, name: &str, e: Option<Rect>, showing: bool) -> Candidate {
        Candidate {
            role: role.into(),
            name: name.into(),
            extents: e,
            showing,
        }
    }

    #[test]
    fn a_qt_window_that_is_a_bare_widget_is_a_filler() {
        // Qt: a main window's accessible is a frame, a bare top-level widget's a filler.
        let cands = [
            c(
                "frame",
                "nish Qt form",
                Some(Rect::new(430, 325, 420, 220)),
                true,
            ),
            c(
                "filler",
                "nish Qt notes",
                Some(Rect::new(40, 40, 300, 120)),
                true,
            ),
            c(
                "panel",
                "nish Qt notes",
                Some(Rect::new(40, 40, 300, 120)),
                true,
            ),
        ];
        let t = Target {
            client: Rect::new(40, 40, 300, 120),
            wm_frame: None,
            title: "nish Qt notes",
        };
        assert_eq!(match_frame(&cands, &t), Some(1));
        assert_eq!(score(&cands[2], &t), -1, "not a top-level role");
    }

    #[test]
    fn the_only_top_level_is_not_taken_for_another_window() {
        let notes = Target {
            client: Rect::new(40, 40, 300, 120),
            wm_frame: None,
            title: "nish Qt notes",
        };
        // Named otherwise, elsewhere, of another size: another window.
        let form = c(
            "frame",
            "nish Qt form",
            Some(Rect::new(430, 325, 420, 220)),
            true,
        );
        assert_eq!(match_frame(std::slice::from_ref(&form), &notes), None);
        // No name, or no extents to tell: still the application's one window.
        let unnamed = c("frame", "", Some(Rect::new(430, 325, 420, 220)), true);
        assert_eq!(match_frame(&[unnamed], &notes), Some(0));
        let no_extents = c("frame", "nish Qt form", None, true);
        assert_eq!(match_frame(&[no_extents], &notes), Some(0));
        // Named otherwise but where the window is: the one window.
        let here = c("frame", "Untitled", Some(Rect::new(40, 40, 300, 120)), true);
        assert_eq!(match_frame(&[here], &notes), Some(0));
    }

    #[test]
    fn empty_name_matches_by_geometry() {
        // gtk3-widget-factory: frame with an empty name, extents equal to the client window.
        let cands = [
            c("frame", "", Some(Rect::new(0, 0, 1366, 741)), true),
            c("frame", "", Some(Rect::new(300, 200, 400, 300)), false),
        ];
        let t = Target {
            client: Rect::new(0, 0, 1366, 741),
            wm_frame: None,
            title: "gtk3-widget-factory",
        };
        assert_eq!(match_frame(&cands, &t), Some(0));
        let t2 = Target {
            client: Rect::new(300, 200, 400, 300),
            wm_frame: Some(Rect::new(299, 180, 402, 321)),
            title: "About",
        };
        assert_eq!(match_frame(&cands, &t2), Some(1));
    }

    #[test]
    fn window_relative_extents_match_by_size_and_name() {
        // GTK 4 reports the frame at 0,0 and a few pixels smaller than the X window.
        let cands = [
            c("frame", "GTK Demo", Some(Rect::new(0, 0, 790, 590)), true),
            c("dialog", "Other", Some(Rect::new(0, 0, 300, 200)), true),
        ];
        let t = Target {
            client: Rect::new(480, 200, 800, 600),
            wm_frame: Some(Rect::new(479, 180, 802, 621)),
            title: "GTK Demo",
        };
        assert_eq!(match_frame(&cands, &t), Some(0));
    }

    #[test]
    fn geometry_beats_name() {
        // Two windows with the same title: geometry decides.
        let cands = [
            c("frame", "Doc", Some(Rect::new(0, 0, 500, 500)), true),
            c("frame", "Doc", Some(Rect::new(600, 0, 500, 500)), true),
        ];
        let t = Target {
            client: Rect::new(600, 0, 500, 500),
            wm_frame: None,
            title: "Doc",
        };
        assert_eq!(match_frame(&cands, &t), Some(1));
    }

    #[test]
    fn chromium_popups_do_not_win() {
        let cands = [
            c(
                "frame",
                "Form test - Chromium",
                Some(Rect::new(10, 10, 1050, 780)),
                true,
            ),
            c("frame", "", Some(Rect::new(113, 35, 880, 88)), true),
        ];
        let t = Target {
            client: Rect::new(10, 10, 1050, 780),
            wm_frame: None,
            title: "Form test - Chromium",
        };
        assert_eq!(match_frame(&cands, &t), Some(0));
    }

    #[test]
    fn nothing_plausible_is_no_match() {
        let cands = [
            c("frame", "A", Some(Rect::new(0, 0, 100, 100)), false),
            c("frame", "B", Some(Rect::new(200, 0, 100, 100)), false),
        ];
        let t = Target {
            client: Rect::new(600, 600, 400, 100),
            wm_frame: None,
            title: "C",
        };
        assert_eq!(match_frame(&cands, &t), None);
        // A single top-level accessible named otherwise, elsewhere: another window.
        assert_eq!(match_frame(&cands[..1], &t), None);
        // Unnamed, it is the application's one window whatever its geometry.
        let unnamed = [c("frame", "", Some(Rect::new(0, 0, 100, 100)), false)];
        assert_eq!(match_frame(&unnamed, &t), Some(0));
        // Non-window roles never match.
        let menus = [c("menu", "C", Some(Rect::new(600, 600, 400, 100)), true)];
        assert_eq!(match_frame(&menus, &t), None);
    }
}
