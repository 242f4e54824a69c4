//! D-Bus helpers for the filter tests: a handed descriptor as a tokio stream, and the error a
//! call is answered with.

use std::time::Duration;

/// A descriptor the broker's opener handed out, as a non-blocking tokio stream.
pub fn stream(fd: std::os::fd::OwnedFd) -> tokio::net::UnixStream {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true).expect("non-blocking");
    tokio::net::UnixStream::from_std(s).expect("a tokio stream")
}

/// The error name a call was answered with, or `None` when it succeeded (5 s at most).
pub async fn error_of(
    c: &zbus::Connection,
    dest: Option<&str>,
    path: &str,
    iface: &str,
    member: &str,
    body: &(impl serde::Serialize + zbus::zvariant::DynamicType),
) -> Option<String> {
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        c.call_method(dest, path, Some(iface), member, body),
    )
    .await
    .expect("an answer in time");
    match r {
        Ok(_) => None,
        Err(zbus::Error::MethodError(name, _, _)) => Some(name.to_string()),
        Err(zbus::Error::FDO(e)) => Some(format!("fdo: {e}")),
        Err(e) => Some(format!("other: {e}")),
    }
}
