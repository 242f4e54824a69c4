//! Element handles as the reader writes them: `<bus name>|<object path>`
//! (`nish_atspi::tree::Obj::handle`).

use zbus::names::UniqueName;
use zbus::zvariant::ObjectPath;

/// Longest handle accepted, in bytes.
pub const HANDLE_MAX_BYTES: usize = 1280;

/// A parsed handle: the application's unique name on the accessibility bus and the object path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handle {
    /// Unique bus name (`:1.42`). Well-known names are refused: a handle names one connection.
    pub bus: String,
    /// Object path.
    pub path: String,
}

impl Handle {
    /// Parses and validates a handle; `None` when it is not one.
    pub fn parse(s: &str) -> Option<Handle> {
        if s.len() > HANDLE_MAX_BYTES {
            return None;
        }
        let (bus, path) = s.split_once('|')?;
        UniqueName::try_from(bus).ok()?;
        // The bus daemon's own name is not an application.
        if bus == "org.freedesktop.DBus" {
            return None;
        }
        ObjectPath::try_from(path).ok()?;
        Some(Handle {
            bus: bus.to_string(),
            path: path.to_string(),
        })
    }

    /// True when `(bus, path)` as an application reports it (an empty bus name means the
    /// application's own connection) is this element.
    pub fn is(&self, bus: &str, path: &str) -> bool {
        (bus.is_empty() || bus == self.bus) && path == self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_handles_parse() {
        let h = Handle::parse(":1.42|/org/a11y/atspi/accessible/17").unwrap();
        assert_eq!(h.bus, ":1.42");
        assert_eq!(h.path, "/org/a11y/atspi/accessible/17");
        assert!(h.is("", "/org/a11y/atspi/accessible/17"));
        assert!(h.is(":1.42", "/org/a11y/atspi/accessible/17"));
        assert!(!h.is(":1.43", "/org/a11y/atspi/accessible/17"));
        assert!(!h.is(":1.42", "/org/a11y/atspi/accessible/18"));
    }

    #[test]
    fn malformed_handles_are_refused() {
        for bad in [
            "",
            ":1.42",
            "|/a",
            ":1.42|",
            ":1.42|relative",
            ":1.42|/a//b",
            ":1.42|/a/",
            "org.a11y.atspi.Registry|/org/a11y/atspi/accessible/root",
            "org.freedesktop.DBus|/",
            ":1.42|/a b",
            ":1.4 2|/a",
        ] {
            assert_eq!(Handle::parse(bad), None, "{bad:?}");
        }
        let long = format!(":1.1|/{}", "a".repeat(HANDLE_MAX_BYTES));
        assert_eq!(Handle::parse(&long), None);
    }
}
