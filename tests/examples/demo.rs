//! The README demo: a real nish-driver session on a private headless desktop (Xvfb, D-Bus,
//! AT-SPI, openbox, GTK 3, GTK 4 and Chromium), driven by the official MCP Python client. The
//! person is played with xdotool on the outer X server of the nested desktop. Screenshots go to the folder given as the first argument
//! (default `demo-out/`).

use std::path::PathBuf;

use nish_testdesk::session::{
    run_desktop_session, run_desktop_takeover, session_desktop, takeover_desktop,
};

fn main() -> anyhow::Result<()> {
    let out = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("demo-out"));
    std::fs::create_dir_all(&out)?;
    let out = out.canonicalize()?;
    println!(
        "starting a private headless desktop (Xvfb with Xephyr nested in it, D-Bus, AT-SPI, \
         openbox) and the apps..."
    );
    let sd = session_desktop()?;
    println!(
        "desktop {} up in {} ms; apps: {}",
        sd.desk.display_name(),
        sd.desk.startup_time().as_millis(),
        sd.apps
            .iter()
            .map(|a| format!("{} (pid {})", a.name, a.pid))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "the person is played by xdotool on the outer X server {} (their real mouse inside the \
         nested desktop); other programs' clicks come through XTEST on the desktop itself\n",
        sd.desk.person_display().unwrap_or_default()
    );
    let o = run_desktop_session(&sd, &out, true)?;
    if !o.status.success() {
        anyhow::bail!("the demo session failed");
    }
    drop(sd);
    println!("\n== a visible takeover, on a fresh desktop (gtk3-widget-factory and Chromium)\n");
    let td = takeover_desktop()?;
    let o = run_desktop_takeover(&td, &out, true)?;
    if !o.status.success() {
        anyhow::bail!("the demo takeover failed");
    }
    let d = out.display();
    println!(
        "\nscreenshots: {d}/consent-dialog.png, {d}/chromium-window.png, {d}/takeover-frame.png, \
         {d}/takeover-paused.png"
    );
    Ok(())
}
