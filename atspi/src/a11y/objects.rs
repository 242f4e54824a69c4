//! Reads of one object over an application link: a string property, the basic properties
//! ([`Props`]: role, name, states, interfaces, child count), extents, and the application's
//! toolkit.

use std::collections::HashMap;
use std::time::Duration;

use nish_proto::model::Rect;
use zbus::Connection;
use zbus::zvariant::OwnedValue;

use super::bus::{ROOT_PATH, SETUP_TIMEOUT};
use super::link::AppLink;
use crate::dbus::{CallError, Read, call};

/// Reads a string property.
pub async fn get_string_prop(
    conn: &Connection,
    dest: Option<&str>,
    path: &str,
    iface: &str,
    prop: &str,
    timeout: Duration,
) -> Result<String, CallError> {
    let v: OwnedValue = call(conn, dest, path, Read::GetProperty, &(iface, prop), timeout).await?;
    String::try_from(v).map_err(|_| CallError::BadReply)
}

/// The basic properties of one object.
#[derive(Clone, Debug, PartialEq)]
pub struct Props {
    /// Role number.
    pub role: u32,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Raw AT-SPI state words.
    pub states: Vec<u32>,
    /// Interface names.
    pub ifaces: Vec<String>,
    /// Child count.
    pub child_count: i32,
}

impl Props {
    /// The object `path` of application `bus` with these properties.
    pub fn to_obj(&self, bus: &str, path: &str) -> crate::tree::Obj {
        crate::tree::Obj::from_atspi(
            bus,
            path,
            self.role,
            &self.name,
            &self.states,
            &self.ifaces,
            self.child_count,
        )
        .described(&self.description)
    }
}

/// Reads role, name, description, states, interfaces and child count of one object (six calls
/// in flight).
///
/// The name, description and child count are asked one property at a time ([`named`]): Qt 5's
/// adaptor answers `Properties.GetAll` with a message the bus refuses, and the bus then cuts
/// the application's connection (its accessibility is gone until it restarts; measured with
/// Qt 5.15.8).
pub async fn props(link: &AppLink, path: &str, timeout: Duration) -> Result<Props, CallError> {
    let dest = link.dest();
    let c = &link.conn;
    let (role, named, states, ifaces) = tokio::join!(
        call::<_, u32>(c, dest, path, Read::GetRole, &(), timeout),
        named(c, dest, path, timeout),
        call::<_, Vec<u32>>(c, dest, path, Read::GetState, &(), timeout),
        call::<_, Vec<String>>(c, dest, path, Read::GetInterfaces, &(), timeout),
    );
    props_from(role, named, states, ifaces)
}

/// An object's name, description and child count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Named {
    /// `Accessible.Name`.
    pub name: String,
    /// `Accessible.Description`.
    pub description: String,
    /// `Accessible.ChildCount`.
    pub child_count: i32,
}

/// An object's name, description and child count, one `Properties.Get` each (all three in
/// flight together). A description that cannot be read is empty; the name and child count
/// must be read.
pub async fn named(
    conn: &Connection,
    dest: Option<&str>,
    path: &str,
    timeout: Duration,
) -> Result<Named, CallError> {
    let get = |prop: &'static str| async move {
        call::<_, OwnedValue>(
            conn,
            dest,
            path,
            Read::GetProperty,
            &("org.a11y.atspi.Accessible", prop),
            timeout,
        )
        .await
    };
    let (name, description, count) =
        tokio::join!(get("Name"), get("Description"), get("ChildCount"));
    Named::from_answers(name, description, count)
}

impl Named {
    /// From the answers to `Properties.Get` of `Name`, `Description` and `ChildCount`: a
    /// description that cannot be read is empty; the name and child count must be read.
    pub fn from_answers(
        name: Result<OwnedValue, CallError>,
        description: Result<OwnedValue, CallError>,
        count: Result<OwnedValue, CallError>,
    ) -> Result<Named, CallError> {
        Ok(Named {
            name: String::try_from(name?).unwrap_or_default(),
            description: description
                .ok()
                .and_then(|d| String::try_from(d).ok())
                .unwrap_or_default(),
            child_count: i32::try_from(count?).unwrap_or(0),
        })
    }
}

/// An object's name, description and child count from its `Properties.GetAll` answer
/// (toolkits other than Qt; see [`props`]).
pub fn named_of(all: HashMap<String, OwnedValue>) -> Named {
    let mut all = all;
    let mut text = |k: &str| {
        all.remove(k)
            .and_then(|v| String::try_from(v).ok())
            .unwrap_or_default()
    };
    let (name, description) = (text("Name"), text("Description"));
    let child_count = all
        .remove("ChildCount")
        .and_then(|v| i32::try_from(v).ok())
        .unwrap_or(0);
    Named {
        name,
        description,
        child_count,
    }
}

/// Whether `Properties.GetAll` may be sent to an application of `toolkit` (its
/// `ToolkitName`): not to Qt ([`props`]), nor to one whose toolkit is not known.
pub fn answers_get_all(toolkit: &str) -> bool {
    !toolkit.is_empty() && !toolkit.eq_ignore_ascii_case("qt")
}

/// [`Props`] from the answers of the calls that read them.
pub fn props_from(
    role: Result<u32, CallError>,
    named: Result<Named, CallError>,
    states: Result<Vec<u32>, CallError>,
    ifaces: Result<Vec<String>, CallError>,
) -> Result<Props, CallError> {
    let Named {
        name,
        description,
        child_count,
    } = named?;
    Ok(Props {
        role: role?,
        name,
        description,
        states: states?,
        ifaces: ifaces?,
        child_count,
    })
}

/// Reads an object's extents in screen coordinates.
pub async fn extents(link: &AppLink, path: &str, timeout: Duration) -> Result<Rect, CallError> {
    let (x, y, w, h): (i32, i32, i32, i32) = call(
        &link.conn,
        link.dest(),
        path,
        Read::GetExtents,
        &(0u32,),
        timeout,
    )
    .await?;
    Ok(Rect::new(x, y, w, h))
}

/// The application's toolkit name and version (`Application.ToolkitName`/`Version`), clipped;
/// empty when it does not answer.
pub async fn toolkit(link: &AppLink) -> (String, String) {
    let (n, v) = tokio::join!(
        get_string_prop(
            &link.conn,
            link.dest(),
            ROOT_PATH,
            "org.a11y.atspi.Application",
            "ToolkitName",
            SETUP_TIMEOUT
        ),
        get_string_prop(
            &link.conn,
            link.dest(),
            ROOT_PATH,
            "org.a11y.atspi.Application",
            "Version",
            SETUP_TIMEOUT
        ),
    );
    (
        crate::states::clip_chars(n.unwrap_or_default(), 32),
        crate::states::clip_chars(v.unwrap_or_default(), 32),
    )
}
